"""Exercises of notebook 13: the latent cache's size, the absorbed query, the shared rope key.

The checks compare with independent computations: the bytes counted from a real cache's
tensors, scores against keys rebuilt head by head with a loop, and RoPE by complex numbers.
"""

from __future__ import annotations

import torch

from helpers.exercises import assert_shape, exercise


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@exercise(
    "latent_cache_size",
    notebook="13",
    hint="Each token caches its latent (kv_latent_dim numbers) and one rope key (rope_dim numbers) "
    "in every layer, shared by all heads: layers * seq_len * (kv_latent_dim + rope_dim) * "
    "bytes_per_value. No factor 2 (the latent holds keys and values together) and no head count.",
)
def _latent_cache_size():
    def counts_one_token_of_one_layer(fn):
        got = fn(1, 1, 16, 4, 2)
        assert got == 40, (
            f"one layer, one token, kv_latent_dim = 16, rope_dim = 4, 2 bytes: expected 40, got {got}"
        )

    def matches_a_real_caches_tensors(fn):
        from helpers.mla import MultiHeadLatentAttention

        torch.manual_seed(0)
        layer = MultiHeadLatentAttention(32, 4, 12, 8, 4, 8).double()
        with torch.no_grad():
            _, cache = layer(_randn(1, 7, 32, seed=130))
        got = fn(3, 7, 12, 4, 8)
        assert got == 3 * cache.nbytes, (
            f"3 layers of a cache of 7 tokens, latent 12 + rope key 4, float64: the tensors hold "
            f"{3 * cache.nbytes} bytes, you counted {got}"
        )

    def deepseek_v2s_sizes(fn):
        got = fn(60, 131_072, 512, 64, 2)
        want = 60 * 131_072 * 576 * 2
        assert got == want, f"DeepSeek-V2, 131,072 tokens, bfloat16: expected {want:,}, got {got:,}"

    return [
        ("one token of one layer", counts_one_token_of_one_layer),
        ("the bytes a real cache's tensors hold", matches_a_real_caches_tensors),
        ("DeepSeek-V2's sizes", deepseek_v2s_sizes),
    ]


def _keys_head_by_head(latent, weight, num_heads, nope_dim):
    """Each head's nope keys (B, h, T, nope_dim), rebuilt from the latent with a loop over heads."""
    block = weight.shape[0] // num_heads  # nope_dim + v_dim rows per head
    keys = [latent @ weight[j * block : j * block + nope_dim].T for j in range(num_heads)]
    return torch.stack(keys, dim=1)


@exercise(
    "absorbed_query",
    notebook="13",
    hint="kv_b_proj.weight is (h * (nope_dim + v_dim), kv_latent_dim), each head's rows laid out "
    "[key nope | value]. Take W_UK = weight.view(h, nope_dim + v_dim, -1)[:, :nope_dim], shape "
    "(h, nope_dim, kv_latent_dim), and return q_nope @ W_UK: (B, h, T, nope_dim) @ "
    "(h, nope_dim, kv_latent_dim) -> (B, h, T, kv_latent_dim).",
)
def _absorbed_query():
    B, h, T, nope, v, c = 2, 3, 4, 5, 6, 7
    q_nope = _randn(B, h, T, nope, seed=131)
    weight = _randn(h * (nope + v), c, seed=132)

    def has_one_latent_query_per_head(fn):
        assert_shape(fn(q_nope, weight, nope), (B, h, T, c), "(B, h, T, kv_latent_dim)")

    def scores_over_the_latent_equal_scores_over_rebuilt_keys(fn):
        latent = _randn(B, 9, c, seed=133)
        got = fn(q_nope, weight, nope) @ latent[:, None].transpose(-2, -1)
        want = q_nope @ _keys_head_by_head(latent, weight, h, nope).transpose(-2, -1)
        assert torch.allclose(got, want, atol=1e-10), (
            "q_latent @ latent^T differs from q_nope @ k_nope^T (keys rebuilt head by head) by "
            f"{(got - want).abs().max().item():.3g}"
        )

    return [
        ("(B, h, T, nope_dim) becomes (B, h, T, kv_latent_dim)", has_one_latent_query_per_head),
        ("the scores equal those over rebuilt keys", scores_over_the_latent_equal_scores_over_rebuilt_keys),
    ]  # fmt: skip


def _turn_by_complex_numbers(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Half-split RoPE: pair (i, i + d/2) as a complex number times exp(i · position · theta_i)."""
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    phase = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64),
                        positions[:, None].double() * theta)  # fmt: skip
    turned = torch.complex(x[..., : d // 2], x[..., d // 2 :]) * phase
    return torch.cat((turned.real, turned.imag), dim=-1)


@exercise(
    "shared_rope_key",
    notebook="13",
    hint="kv_a_proj_with_mqa's output is laid out [latent | rope key]: the rope key is the last "
    "rope_dim = width - kv_latent_dim numbers, kv_a[..., kv_latent_dim:]. Turn it alone with "
    "apply_rope(rope_key, positions): its own width sets the angles, so turning all "
    "kv_latent_dim + rope_dim numbers and slicing afterwards gives other angles.",
)
def _shared_rope_key():
    B, T, c, r = 2, 5, 6, 4
    kv_a = _randn(B, T, c + r, seed=134)
    positions = torch.arange(T) + 3

    def one_rope_key_per_token(fn):
        assert_shape(fn(kv_a, c, positions), (B, T, r), "(B, T, rope_dim)")

    def takes_the_last_features_untouched_at_position_zero(fn):
        still = fn(kv_a, c, torch.zeros(T, dtype=torch.long))
        assert torch.allclose(still, kv_a[..., c:], atol=1e-12), (
            "at position 0 the rope key is kv_a's last rope_dim features, unturned"
        )

    def turns_by_each_tokens_position(fn):
        want = _turn_by_complex_numbers(kv_a[..., c:], positions)
        got = fn(kv_a, c, positions)
        assert torch.allclose(got, want, atol=1e-10), (
            "pairs (i, i + rope_dim/2) of the rope key are not turned by position * "
            f"10000 ** (-2 i / rope_dim): off by {(got - want).abs().max().item():.3g}"
        )

    return [
        ("(B, T, kv_latent_dim + rope_dim) gives (B, T, rope_dim)", one_rope_key_per_token),
        ("the last rope_dim features, as they are at position 0",
         takes_the_last_features_untouched_at_position_zero),
        ("turned by position, half-split, at rope_dim's own angles", turns_by_each_tokens_position),
    ]  # fmt: skip
