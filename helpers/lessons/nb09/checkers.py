"""Exercises of notebook 09: the online-softmax update, one tile's accumulation, the skip rule."""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import numpy as np

from helpers.kit.exercises import assert_shape, exercise
from helpers.numpy_attention import scaled_dot_product_attention, softmax


def _fold(step, scores: np.ndarray, block: int) -> tuple[float, float]:
    """Run a learner's ``online_step`` over ``scores`` block by block, from the empty state."""
    m, total = -math.inf, 0.0
    for start in range(0, len(scores), block):
        m, total = step(m, total, scores[start : start + block])
    return float(m), float(total)


@exercise(
    "online_step",
    notebook="09",
    hint="m_new = max(m, block.max()); what was kept was summed against the old max, so "
    "multiply it by exp(m - m_new), then add exp(block - m_new).sum(). Return (m_new, total_new).",
)
def _online_step():
    """Notebook 09, section 5 (Exercises), exercise 1."""

    def shown(x) -> str:  # a number to 4 places, as the expected one is; anything else as it is
        try:
            return f"{float(x):.4f}"
        except (TypeError, ValueError):
            return repr(x)

    row = np.array([2.0, 1.0, 4.0, 3.0, 1.0, 0.0, 5.0, 2.0])
    long_row = np.random.default_rng(90).standard_normal(37) * 6

    def starts_from_nothing(fn):
        m, total = fn(-math.inf, 0.0, row[:2])
        assert np.isclose(m, 2.0), f"after the first block [2, 1], m should be 2.0, got {m}"
        expected = 1 + math.exp(-1)
        assert np.isclose(total, expected), (
            f"after the first block [2, 1], total should be exp(0) + exp(-1) = {expected:.4f}, "
            f"got {shown(total)}"
        )

    def rescales_when_the_max_grows(fn):
        m, total = fn(2.0, 1 + math.exp(-1), row[2:4])  # the max grows from 2 to 4
        expected = (1 + math.exp(-1)) * math.exp(2 - 4) + 1 + math.exp(-1)
        assert np.isclose(m, 4.0), f"the block [4, 3] raises m from 2 to 4, got m = {m}"
        assert np.isclose(total, expected), (
            f"the block [4, 3] after (m = 2, total = 1.3679): expected total {expected:.4f} "
            f"(the old total times exp(2 - 4), plus exp(0) + exp(-1)), got {shown(total)}"
        )

    def keeps_the_total_when_the_max_stays(fn):
        m, total = fn(4.0, 1.5, row[4:6])  # [1, 0]: no new max
        expected = 1.5 + math.exp(-3) + math.exp(-4)
        assert np.isclose(m, 4.0), f"the block [1, 0] leaves m = 4, got {m}"
        assert np.isclose(total, expected), f"expected total {expected:.4f}, got {shown(total)}"

    def folds_to_the_two_pass_softmax(fn):
        for block in (1, 3, 8, 40):
            m, total = _fold(fn, long_row, block)
            got, want = np.exp(long_row - m) / total, softmax(long_row)
            assert np.allclose(got, want, atol=1e-12), (
                f"blocks of {block}: exp(x - m) / total differs from the softmax by "
                f"{np.abs(got - want).max():.2e}"
            )

    return [
        ("the first block sets m and total", starts_from_nothing),
        ("a block with a larger max rescales the old total", rescales_when_the_max_grows),
        ("a block below the max adds to the total unchanged", keeps_the_total_when_the_max_stays),
        ("any block size folds to the two-pass softmax", folds_to_the_two_pass_softmax),
    ]


class _Tiles(NamedTuple):
    """The tile_step exercise's problem: q, k, v ``(T, d)`` and the scores ``(T, T)``."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scores: np.ndarray


TILE_T, TILE_D, TILE_BLOCK = 12, 4, 5  # 12 keys: tiles of 5, 5 and 2


def _tile_problem() -> _Tiles:
    """Seeded q, k, v of 12 tokens of width 4, scaled up so that the maxima move between tiles."""
    rng = np.random.default_rng(91)
    q, k, v = rng.standard_normal((3, TILE_T, TILE_D)) * 1.5
    return _Tiles(q, k, v, q @ k.T / math.sqrt(TILE_D))


def _state(out) -> tuple:
    """The learner's return value, which must be the tuple (m, total, acc)."""
    assert isinstance(out, tuple) and len(out) == 3, "return the tuple (m, total, acc)"
    return out


def _run_tiles(fn, tiles: _Tiles, mask=None) -> tuple:
    """``fn`` over the keys tile by tile, from the empty state; the final (m, total, acc)."""
    T, d = tiles.v.shape
    m, total, acc = np.full(T, -np.inf), np.zeros(T), np.zeros((T, d))
    s_all = tiles.scores if mask is None else np.where(mask, tiles.scores, -np.inf)
    for start in range(0, T, TILE_BLOCK):
        keys = slice(start, start + TILE_BLOCK)
        m, total, acc = _state(fn(m, total, acc, s_all[:, keys], tiles.v[keys]))
    return m, total, acc


def _right_shapes(tiles: _Tiles, fn) -> None:
    T, d = tiles.v.shape
    scores, v = tiles.scores, tiles.v
    m, total, acc = _state(
        fn(np.full(T, -np.inf), np.zeros(T), np.zeros((T, d)), scores[:, :5], v[:5])
    )
    assert_shape(m, (T,), "(b_q,)", name="m")
    assert_shape(total, (T,), "(b_q,)", name="total")
    assert_shape(acc, (T, d), "(b_q, d_v)", name="acc")


def _one_tile_folds(tiles: _Tiles, fn) -> None:
    """A state as if one tile of 4 keys had been folded in, then a tile with a larger max."""
    T, d = tiles.v.shape
    m0, total0, acc0 = np.full(T, 0.5), np.full(T, 2.0), np.tile(np.arange(1.0, d + 1), (T, 1))
    s, v = tiles.scores[:, :5] + 2.0, tiles.v[:5]  # every row's max now lies above 0.5
    m_new = np.maximum(m0, s.max(axis=-1))
    rescale = np.exp(m0 - m_new)
    p = np.exp(s - m_new[:, None])
    want = (m_new, total0 * rescale + p.sum(-1), acc0 * rescale[:, None] + p @ v)
    out = _state(fn(m0.copy(), total0.copy(), acc0.copy(), s, v))
    got = [np.asarray(x, dtype=float) for x in out]
    assert got[0].shape == want[0].shape and np.allclose(got[0], want[0]), (
        "m is off: the new m is the larger of the old m and the tile's own max, per row"
    )
    assert got[1].shape == want[1].shape and np.allclose(got[1], want[1]), (
        "m is right, total is off: the old total times exp(m_old - m_new), plus the sum of "
        "exp(s - m_new) over the tile (p against the new max)"
    )
    assert got[2].shape == want[2].shape and np.allclose(got[2], want[2]), (
        "m and total are right, acc is off: acc is rescaled by the same exp(m_old - m_new) "
        "as the total, then p @ v_tile is added, and nothing is divided by the total yet"
    )


def _all_tiles_give_attention(tiles: _Tiles, fn) -> None:
    m, total, acc = _run_tiles(fn, tiles)
    expected, _ = scaled_dot_product_attention(tiles.q, tiles.k, tiles.v)
    got = acc / total[:, None]
    assert np.allclose(got, expected, atol=1e-12), (
        f"acc / total after the 3 tiles differs from attention by "
        f"{np.abs(got - expected).max():.2e}: is acc rescaled like the total?"
    )
    assert np.allclose(m, tiles.scores.max(axis=-1)), "m should end as each row's largest score"


def _causal_mask_handled(tiles: _Tiles, fn) -> None:
    causal = np.tril(np.ones((TILE_T, TILE_T), dtype=bool))
    m, total, acc = _run_tiles(fn, tiles, causal)
    expected, _ = scaled_dot_product_attention(tiles.q, tiles.k, tiles.v, causal)
    got = acc / total[:, None]
    assert np.all(np.isfinite(got)), "a -inf score must give weight 0, not NaN"
    assert np.allclose(got, expected, atol=1e-12), (
        f"with -inf scores above the diagonal, acc / total differs from causal attention by "
        f"{np.abs(got - expected).max():.2e}"
    )


@exercise(
    "tile_step",
    notebook="09",
    hint="The message above names the first of m, total and acc that is off. Per row: "
    "m_new = maximum(m, s.max(axis=-1)); rescale = exp(m - m_new); p = exp(s - m_new[:, None]) "
    "(against the new max, not the old); total = total * rescale + p.sum(-1); "
    "acc = acc * rescale[:, None] + p @ v_tile; divide by total only at the very end.",
)
def _tile_step():
    """Notebook 09, section 5 (Exercises), exercise 2."""
    tiles = _tile_problem()
    return [
        ("m and total are (b_q,), acc is (b_q, d_v)", partial(_right_shapes, tiles)),
        ("one tile folds into a kept state: m, total, acc", partial(_one_tile_folds, tiles)),
        ("three tiles give exact attention", partial(_all_tiles_give_attention, tiles)),
        ("-inf scores (a causal mask) are handled", partial(_causal_mask_handled, tiles)),
    ]


KINDS = ("full", "masked", "skipped")


def _kind_from_mask(q_start, q_stop, k_start, k_stop, offset):
    """The kind of a tile, read off the mask itself (what the rule must reproduce)."""
    rows = np.arange(q_start, q_stop)[:, None]
    seen = np.arange(k_start, k_stop)[None, :] <= rows + offset
    return "full" if seen.all() else "skipped" if not seen.any() else "masked"


@exercise(
    "tile_kind",
    notebook="09",
    hint="Query i sees keys j <= i + offset. The tile's last query (q_stop - 1) sees the most "
    "keys: if even it cannot see k_start, skip the tile. Its first query (q_start) sees the "
    "fewest: if it sees k_stop - 1, every query sees every key ('full'). Otherwise 'masked'.",
)
def _tile_kind():
    """Notebook 09, section 5 (Exercises), exercise 3."""

    def returns_one_of_three_words(fn):
        got = fn(0, 4, 0, 4, 0)
        assert got in KINDS, f"return one of {KINDS}, got {got!r}"

    def cases(T_q, T_k, block_q, block_k, offset):
        for q0 in range(0, T_q, block_q):
            for k0 in range(0, T_k, block_k):
                yield q0, min(q0 + block_q, T_q), k0, min(k0 + block_k, T_k), offset

    def check_cases(fn, *layout):
        for q0, q1, k0, k1, offset in cases(*layout):
            want, got = _kind_from_mask(q0, q1, k0, k1, offset), fn(q0, q1, k0, k1, offset)
            assert got == want, (
                f"queries {q0}..{q1 - 1}, keys {k0}..{k1 - 1}, offset {offset}: the mask makes "
                f"this tile {want!r}, you said {got!r}"
            )

    def matches_the_top_left_mask(fn):
        check_cases(fn, 48, 48, 16, 16, 0)
        check_cases(fn, 50, 50, 16, 8, 0)  # blocks that do not divide T, unequal blocks
        check_cases(fn, 20, 45, 7, 13, 0)

    def matches_the_bottom_right_mask(fn):
        check_cases(fn, 16, 48, 8, 8, 48 - 16)  # 16 new tokens after 32 cached ones
        check_cases(fn, 5, 40, 4, 6, 40 - 5)

    return [
        ("returns 'full', 'masked' or 'skipped'", returns_one_of_three_words),
        ("agrees with the top-left causal mask, tile by tile", matches_the_top_left_mask),
        ("agrees with a bottom-right mask (offset = T_k - T_q)", matches_the_bottom_right_mask),
    ]
