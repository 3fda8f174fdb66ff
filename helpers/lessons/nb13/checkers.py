"""Exercises of notebook 13: the shared rope key, the absorbed query, the latent cache's size.

The checks compare with independent computations: RoPE by complex numbers, scores against keys
rebuilt head by head with a loop, and the bytes counted from a real cache's tensors. A check that
recognises a typical slip (the wrong slice of a layout, a factor 2) says so with a hint of its
own; the general hints point at the idea, not at the code.
"""

from __future__ import annotations

import torch

from helpers.kit.exercises import Slip, assert_shape, exercise


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _same(got, want: torch.Tensor) -> bool:
    """``got`` is a tensor of ``want``'s shape with ``want``'s numbers."""
    return (
        isinstance(got, torch.Tensor)
        and got.shape == want.shape
        and torch.allclose(got.to(want.dtype), want, atol=1e-10)
    )


# --- exercise 1: the shared rope key ---------------------------------------------------------


def _turn_by_complex_numbers(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Half-split RoPE: pair (i, i + d/2) as a complex number times exp(i · position · theta_i)."""
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    phase = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64),
                        positions[:, None].double() * theta)  # fmt: skip
    turned = torch.complex(x[..., : d // 2], x[..., d // 2 :]) * phase
    return torch.cat((turned.real, turned.imag), dim=-1)


def _rope_key_slips(got, kv_a: torch.Tensor, c: int, positions: torch.Tensor) -> None:
    """Raise :class:`Slip` when ``got`` is not the turned rope key but the rope key cut from the
    wrong end of ``kv_a``, turned at the angles of the whole row, or not turned at all."""
    r = kv_a.shape[-1] - c
    if _same(got, _turn_by_complex_numbers(kv_a[..., c:], positions)):
        return  # right (at position 0 some slips give the right numbers too)
    if _same(got, kv_a[..., :r]) or _same(got, _turn_by_complex_numbers(kv_a[..., :r], positions)):
        raise Slip(
            "these are kv_a's first rope_dim features",
            hint="kv_a is laid out [latent | rope key]: which features come after the latent?",
        )
    if _same(got, _turn_by_complex_numbers(kv_a, positions)[..., c:]):
        raise Slip(
            "the right features, turned at the angles of the whole (kv_latent_dim + rope_dim)-wide "
            "row",
            hint="RoPE's angle for pair i is position · base^(-2i/d), where d is the width of what "
            "it is given. The rope key is turned as a rope_dim-wide vector of its own: in what "
            "order must the cut and the turn then come?",
        )
    if _same(got, kv_a[..., c:]):
        raise Slip(
            "the rope key as projected, not turned by its position",
            hint="The cache holds the rope key already turned by its token's position (section 2), "
            "so that a decode step uses it as it is.",
        )


@exercise(
    "shared_rope_key",
    notebook="13",
    hint="Two questions: which of kv_a's features are the rope key, given the layout "
    "[latent | rope key]; and what does the cache keep of it, the key as projected or the key "
    "turned by its token's position? RoPE's angles depend on the width of what it turns.",
)
def _shared_rope_key():
    """Notebook 13, section 2 (decoupled RoPE), exercise 1."""
    B, T, c, r = 2, 5, 6, 4
    kv_a = _randn(B, T, c + r, seed=134)
    positions = torch.arange(T) + 3

    def one_rope_key_per_token(fn):
        assert_shape(fn(kv_a, c, positions), (B, T, r), "(B, T, rope_dim)")

    def takes_the_last_features_untouched_at_position_zero(fn):
        still = fn(kv_a, c, torch.zeros(T, dtype=torch.long))
        _rope_key_slips(still, kv_a, c, torch.zeros(T, dtype=torch.long))
        assert torch.allclose(still, kv_a[..., c:], atol=1e-12), (
            "at position 0 the rope key is kv_a's last rope_dim features, unturned"
        )

    def turns_by_each_tokens_position(fn):
        want = _turn_by_complex_numbers(kv_a[..., c:], positions)
        got = fn(kv_a, c, positions)
        _rope_key_slips(got, kv_a, c, positions)
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


# --- exercise 2: the absorbed query ----------------------------------------------------------


def _keys_head_by_head(latent, weight, num_heads, nope_dim):
    """Each head's nope keys (B, h, T, nope_dim), rebuilt from the latent with a loop over heads."""
    block = weight.shape[0] // num_heads  # nope_dim + v_dim rows per head
    keys = [latent @ weight[j * block : j * block + nope_dim].T for j in range(num_heads)]
    return torch.stack(keys, dim=1)


def _layout_slips(got, q_nope: torch.Tensor, weight: torch.Tensor, nope: int) -> None:
    """Raise :class:`Slip` when ``got`` folds in the rows of another reading of ``kv_b_proj``'s
    layout: all heads' keys first, or each head's last ``nope`` rows."""
    h = q_nope.shape[1]
    all_keys_first = q_nope @ weight[: h * nope].view(h, nope, -1)
    value_rows = q_nope @ weight.view(h, -1, weight.shape[1])[:, -nope:]
    if _same(got, all_keys_first):
        raise Slip(
            "you folded in rows as if the weight were [all heads' keys | all heads' values]",
            hint="kv_b_proj.weight's rows come head by head: head 0's whole block "
            "[key nope | value], then head 1's, and so on. How many rows does one head's block "
            "have, and which of them are its key rows?",
        )
    if _same(got, value_rows):
        raise Slip(
            "you folded in each head's last nope_dim rows, which are value rows",
            hint="Within a head's block the key rows come first: [key nope | value].",
        )


@exercise(
    "absorbed_query",
    notebook="13",
    hint="A head's score is q_nope · k_nope, and its k_nope is the latent through that head's key "
    "rows of kv_b_proj.weight. Move those rows to the query's side of the product, as section 2 "
    "moved W_UK. To find them, split the weight's rows into one block per head first.",
)
def _absorbed_query():
    """Notebook 13, section 3 (absorption), exercise 2."""
    B, h, T, nope, v, c = 2, 3, 4, 5, 6, 7
    q_nope = _randn(B, h, T, nope, seed=131)
    weight = _randn(h * (nope + v), c, seed=132)

    def has_one_latent_query_per_head(fn):
        assert_shape(fn(q_nope, weight, nope), (B, h, T, c), "(B, h, T, kv_latent_dim)")

    def scores_over_the_latent_equal_scores_over_rebuilt_keys(fn):
        latent = _randn(B, 9, c, seed=133)
        q_latent = fn(q_nope, weight, nope)
        _layout_slips(q_latent, q_nope, weight, nope)
        got = q_latent @ latent[:, None].transpose(-2, -1)
        want = q_nope @ _keys_head_by_head(latent, weight, h, nope).transpose(-2, -1)
        assert torch.allclose(got, want, atol=1e-10), (
            "q_latent @ latent^T differs from q_nope @ k_nope^T (keys rebuilt head by head) by "
            f"{(got - want).abs().max().item():.3g}"
        )

    return [
        ("(B, h, T, nope_dim) becomes (B, h, T, kv_latent_dim)", has_one_latent_query_per_head),
        ("the scores equal those over rebuilt keys", scores_over_the_latent_equal_scores_over_rebuilt_keys),
    ]  # fmt: skip


# --- exercise 3: the latent cache's size -----------------------------------------------------


def _size_slips(got, layers: int, seq_len: int, c: int, r: int, nbytes: int) -> None:
    """Raise :class:`Slip` when ``got`` counts keys and values apart, or forgets the rope key."""
    if got == 2 * layers * seq_len * (c + r) * nbytes:
        raise Slip(
            "twice the bytes: a key and a value counted for each token",
            hint="The latent is not a key: it stands for the keys and the values together, "
            "and one rope key serves every head.",
        )
    if got == layers * seq_len * c * nbytes:
        raise Slip(
            "the latent alone",
            hint="A token caches one more thing beside its latent (section 2).",
        )


@exercise(
    "latent_cache_size",
    notebook="13",
    hint="What does one token leave in one layer's cache, and does any head have a part of its "
    "own (section 2)? Count the numbers of one token in one layer, then the bytes, then every "
    "token and every layer.",
)
def _latent_cache_size():
    """Notebook 13, section 3 (absorption), exercise 3."""

    def counts_one_token_of_one_layer(fn):
        got = fn(1, 1, 16, 4, 2)
        _size_slips(got, 1, 1, 16, 4, 2)
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
