"""Exercises of notebook 08: a cache step, the lower-right causal mask, shared KV heads, RoPE.

The checks compare with independent computations: attention written out with a softmax, a loop
over query heads, complex numbers for RoPE, and PyTorch's own ``causal_lower_right`` bias.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from helpers.kit.exercises import Slip, assert_shape, exercise


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Every query over every key, no mask: softmax(q k^T / sqrt(d_k)) v, written out."""
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v


@exercise(
    "cache_step",
    notebook="08",
    hint="Two steps, in this order. First grow the cache: the new key and value go after the "
    "cached ones, along the T axis. Then attend from the one new query over every key so far. "
    "It is the last token, so it may see every key, its own included: no mask is needed, and "
    "is_causal=True would align its mask top-left and show it key 0 only (section 2's trap).",
)
def _cache_step():
    B, h, T, d_k = 2, 3, 5, 4
    q, k, v = (_randn(B, h, 1, d_k, seed=80 + i) for i in range(3))
    keys, values = _randn(B, h, T, d_k, seed=83), _randn(B, h, T, d_k, seed=84)

    def grows_the_cache_by_the_new_token(fn):
        result = fn(q, k, v, keys, values)
        assert isinstance(result, tuple) and len(result) == 3, (
            f"return the tuple (out, keys, values), got {type(result).__name__}"
            + (f" of {len(result)}" if isinstance(result, tuple) else "")
        )
        out, new_keys, new_values = result
        if isinstance(out, tuple):
            raise Slip(
                f"out is a tuple of {len(out)}, not a tensor",
                hint="helpers.torch_attention.scaled_dot_product_attention returns "
                "(out, weights): take its [0], or call F.scaled_dot_product_attention, which "
                "returns the output alone.",
            )
        assert_shape(out, (B, h, 1, d_k), "(B, h, 1, d_k)", name="out")
        for name, got, old, new in (("keys", new_keys, keys, k), ("values", new_values, values, v)):
            assert_shape(got, (B, h, T + 1, d_k), "(B, h, T + 1, d_k)", name=name)
            assert torch.equal(got[..., :T, :], old), f"{name}: the cached tokens must come first"
            assert torch.equal(got[..., T:, :], new), f"{name}: the new token must come last"

    def attends_over_every_token_so_far(fn):
        out, _, _ = fn(q, k, v, keys, values)
        want = _attend(q, torch.cat([keys, k], -2), torch.cat([values, v], -2))
        without_new = _attend(q, keys, values)
        if torch.allclose(out, without_new, atol=1e-10):
            raise AssertionError("the new query did not see its own key: append before attending")
        assert torch.allclose(out, want, atol=1e-10), (
            f"out differs from attention over all {T + 1} tokens by "
            f"{(out - want).abs().max().item():.2g}"
        )

    return [
        ("the cache grows by one token, the new one last", grows_the_cache_by_the_new_token),
        ("the new query attends over all T + 1 keys", attends_over_every_token_so_far),
    ]


@exercise(
    "lower_right_mask",
    notebook="08",
    hint="The new queries are the last T_q tokens: query i is token T_k - T_q + i, and it may "
    "see every key up to its own position, itself included. Compare each key's position with "
    "each query's. A triangle that starts in the top-left corner (np.tril with no offset, or "
    "is_causal) treats the new queries as the first tokens of the text instead.",
)
def _lower_right_mask():
    from torch.nn.attention.bias import causal_lower_right

    def returns_a_boolean_mask(fn):
        got = np.asarray(fn(3, 7))
        assert_shape(got, (3, 7), "(T_q, T_k)")
        assert got.dtype == bool, (
            f"expected a boolean mask (True = may attend), got dtype {got.dtype}"
        )

    def square_is_the_causal_mask(fn):
        got = np.asarray(fn(4, 4))
        assert np.array_equal(got, np.tril(np.ones((4, 4), dtype=bool))), "T_q = T_k: plain causal"

    def one_new_token_sees_everything(fn):
        got = np.asarray(fn(1, 6))
        assert_shape(got, (1, 6), "(T_q, T_k)")
        assert got.all(), (
            f"one new token after 5 cached ones may see all 6 keys, got {got.astype(int)}"
        )

    def matches_pytorchs_lower_right_bias(fn):
        for T_q, T_k in ((3, 7), (2, 5), (5, 6)):
            got = np.asarray(fn(T_q, T_k))
            want = causal_lower_right(T_q, T_k)._materialize().numpy()
            assert np.array_equal(got, want), (
                f"T_q = {T_q}, T_k = {T_k}: expected\n{want.astype(int)}\ngot\n{got.astype(int)}"
            )

    return [
        ("returns a boolean (T_q, T_k) mask", returns_a_boolean_mask),
        ("T_q = T_k gives the ordinary causal mask", square_is_the_causal_mask),
        ("one new token may see every key", one_new_token_sees_everything),
        ("3 queries over 7 keys, aligned bottom-right", matches_pytorchs_lower_right_bias),
    ]


@exercise(
    "share_kv_heads",
    notebook="08",
    hint="Query head j reads KV head j // (h // h_kv): neighbouring query heads share one, so "
    "each KV head must appear h // h_kv times in a row along the head axis (0, 0, 1, 1), not "
    "tiled (0, 1, 0, 1). Section 4 printed which of PyTorch's two repeating functions gives "
    "which order, and how a group axis added with expand becomes the head axis.",
)
def _share_kv_heads():
    B, T, d_k = 2, 3, 4

    def labelled(h_kv):  # KV head g holds the number g everywhere
        return torch.arange(h_kv, dtype=torch.float64).view(1, h_kv, 1, 1).expand(B, h_kv, T, d_k)

    def gives_every_query_head_a_kv_head(fn):
        assert_shape(fn(labelled(2), 8), (B, 8, T, d_k), "(B, h, T, d_k)")

    def neighbouring_query_heads_share(fn):
        for h, h_kv in ((8, 2), (6, 3), (4, 1), (4, 4)):
            got = fn(labelled(h_kv), h)[0, :, 0, 0].long().tolist()
            want = [j // (h // h_kv) for j in range(h)]
            assert got == want, (
                f"h = {h}, h_kv = {h_kv}: query heads read KV heads {got}, not {want}"
            )

    def keeps_the_numbers(fn):
        kv = _randn(B, 2, T, d_k, seed=85)
        got = fn(kv, 6)
        for j in range(6):
            assert torch.equal(got[:, j], kv[:, j // 3]), f"query head {j} is not KV head {j // 3}"

    return [
        ("(B, h_kv, T, d_k) becomes (B, h, T, d_k)", gives_every_query_head_a_kv_head),
        ("query head j reads KV head j // (h / h_kv)", neighbouring_query_heads_share),
        ("each head is an exact copy of its KV head", keeps_the_numbers),
    ]


def _rope_by_complex_numbers(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Half-split RoPE: pair (i, i + d/2) as a complex number times exp(i · position · theta_i)."""
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    phase = torch.polar(
        torch.ones(len(positions), d // 2, dtype=torch.float64), positions[:, None] * theta
    )
    turned = torch.complex(x[..., : d // 2], x[..., d // 2 :]) * phase
    return torch.cat((turned.real, turned.imag), dim=-1)


@exercise(
    "apply_rotary",
    notebook="08",
    hint="Each pair i (features i and i + d/2, the half-split layout) turns by its own angle, "
    "position * 10000 ** (-2 i / d): one angle per position and pair, a (T, d/2) table. Turn "
    "the first half of x against the second half, as a 2-D rotation by angle a turns (x, y) "
    "into (x cos a - y sin a, x sin a + y cos a).",
)
def _apply_rotary():
    B, h, T, d = 2, 3, 6, 8
    x = _randn(B, h, T, d, seed=86)
    positions = torch.arange(T) * 7 + 3

    def keeps_shape_and_position_zero(fn):
        assert_shape(fn(x, positions), (B, h, T, d), "(B, h, T, d)")
        still = fn(x, torch.zeros(T, dtype=torch.long))
        assert torch.allclose(still, x, atol=1e-12), "position 0 must leave x as it is (angle 0)"

    def rotates_each_half_split_pair(fn):
        got, want = fn(x, positions), _rope_by_complex_numbers(x, positions)
        assert torch.allclose(got.norm(dim=-1), x.norm(dim=-1), atol=1e-10), "lengths changed"
        assert torch.allclose(got, want, atol=1e-10), (
            "pairs (i, i + d/2) are not turned by position * 10000 ** (-2 i / d): off by "
            f"{(got - want).abs().max().item():.2g}"
        )

    def scores_depend_on_distance_only(fn):
        q, k = _randn(1, 1, T, d, seed=87), _randn(1, 1, T, d, seed=88)
        scores = fn(q, positions) @ fn(k, positions).transpose(-2, -1)
        moved = fn(q, positions + 50) @ fn(k, positions + 50).transpose(-2, -1)
        assert torch.allclose(scores, moved, atol=1e-9), "shifting every position changed q · k"

    return [
        ("same shape; position 0 changes nothing", keeps_shape_and_position_zero),
        ("q · k depends only on the distance", scores_depend_on_distance_only),
        ("pair (i, i + d/2) turns by position * theta_i", rotates_each_half_split_pair),
    ]
