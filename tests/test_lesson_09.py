"""Notebook 09's helpers: the online softmax, tiled attention, its backward, and the Triton kernel;
then the notebook's exercises and its tiling explorer.

The yardsticks are independent: the NumPy reference attention (which forms every weight),
torch's autograd for the gradients, and ``F.scaled_dot_product_attention`` for the kernel.
"""

from __future__ import annotations

import importlib.util
import tracemalloc

import ipywidgets as widgets
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import flash, masks
from helpers import numpy_attention as npa
from helpers.kit import exercises
from helpers.kit.explorer import explore
from helpers.lessons.nb09 import explorers as tiling

HAS_TRITON = importlib.util.find_spec("triton") is not None


def problem(T_q, T_k, d=8, batch=(2,), seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((*batch, n, d)).astype(dtype) for n in (T_q, T_k, T_k))


def top_left_causal(T_q, T_k):
    return np.tril(np.ones((T_q, T_k), dtype=bool))


def test_online_softmax_equals_the_two_pass_softmax():
    x = np.random.default_rng(1).standard_normal((3, 13)) * 20
    x[0, 5:] = -np.inf  # a masked tail
    x[1] = -np.inf  # a row with nothing to attend to
    for block in (1, 4, 13, 50):
        np.testing.assert_allclose(flash.online_softmax(x, block), npa.softmax(x), atol=1e-15)


@pytest.mark.parametrize(("T_q", "T_k"), [(50, 50), (37, 70), (70, 37), (1, 9), (64, 64)])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize(("block_q", "block_k"), [(16, 16), (7, 13), (64, 8)])
def test_tiled_attention_equals_the_reference_for_any_block_and_length(
    T_q, T_k, is_causal, block_q, block_k
):
    q, k, v = problem(T_q, T_k)
    mask = top_left_causal(T_q, T_k) if is_causal else None
    expected, _ = npa.scaled_dot_product_attention(q, k, v, mask)
    out = flash.flash_attention_numpy(q, k, v, block_q, block_k, is_causal)
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)


def test_the_kept_log_sum_exp_rebuilds_any_row_of_the_weights():
    q, k, v = problem(40, 40)
    _, weights = npa.scaled_dot_product_attention(q, k, v, masks.causal_mask(40))
    _, lse = flash.flash_forward(q, k, v, 16, 16, is_causal=True)
    rows = np.array([0, 7, 39])
    rebuilt = flash.weights_from_lse(q, k, lse, rows, is_causal=True)
    np.testing.assert_allclose(rebuilt, weights[..., rows, :], rtol=0, atol=1e-14)


@pytest.mark.parametrize(("T_q", "T_k"), [(30, 30), (20, 45)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_backward_by_recomputation_equals_autograd(T_q, T_k, is_causal):
    q, k, v = problem(T_q, T_k, seed=3)
    grad_out = np.random.default_rng(4).standard_normal((2, T_q, 8))
    out, lse = flash.flash_forward(q, k, v, 16, 16, is_causal)
    grads = flash.flash_backward_numpy(q, k, v, out, lse, grad_out, block=16, is_causal=is_causal)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    mask = torch.from_numpy(top_left_causal(T_q, T_k)) if is_causal else None
    F.scaled_dot_product_attention(tq, tk, tv, attn_mask=mask).backward(torch.from_numpy(grad_out))
    for mine, theirs in zip(grads, (tq.grad, tk.grad, tv.grad), strict=True):
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=0, atol=1e-12)


def peak_bytes(fn, *args):
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_tiled_attention_memory_stays_flat_while_the_explicit_one_grows_as_t_squared():
    def tiled(q, k, v):
        return flash.flash_attention_numpy(q, k, v, 64, 64)

    def explicit(q, k, v):
        return npa.scaled_dot_product_attention(q, k, v)

    small, large = (problem(T, T, d=16, batch=(1,), dtype=np.float32) for T in (256, 1024))
    inputs = sum(a.nbytes for a in large)
    assert peak_bytes(tiled, *large) < inputs  # the output and a few (64, 64) tiles
    assert peak_bytes(tiled, *large) < 2 * peak_bytes(tiled, *small)  # 4x longer, not 16x
    growth = peak_bytes(explicit, *large) / peak_bytes(explicit, *small)
    assert growth > 10  # 4x longer: close to 16x the memory


@pytest.mark.skipif(not HAS_TRITON, reason="Triton is published for Linux only")
@pytest.mark.parametrize("d", [16, 32, 64, 24])
@pytest.mark.parametrize(("T_q", "T_k"), [(40, 40), (33, 70), (70, 33)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_the_triton_kernel_under_the_interpreter_equals_sdpa(d, T_q, T_k, is_causal):
    gen = torch.Generator().manual_seed(d + T_q)
    q, k, v = (torch.randn(1, 2, n, d, generator=gen) for n in (T_q, T_k, T_k))
    mask = torch.from_numpy(top_left_causal(T_q, T_k)) if is_causal else None
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    expected = expected.masked_fill(~mask.any(-1, keepdim=True), 0) if is_causal else expected
    out = flash.flash_attention_triton(q, k, v, is_causal=is_causal)
    torch.testing.assert_close(out, expected, rtol=0, atol=2e-6)


@pytest.mark.skipif(not HAS_TRITON, reason="Triton is published for Linux only")
@pytest.mark.parametrize("is_causal", [False, True])
def test_the_interpreter_is_faithful_in_float16_by_flash_attentions_rule(is_causal):
    # FlashAttention's tests: the kernel's error against a float32 reference is at most twice
    # that of a plain implementation in the same dtype (here SDPA in float16).
    gen = torch.Generator().manual_seed(16)
    q, k, v = (torch.randn(1, 2, 64, 32, generator=gen) for _ in "qkv")
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    half = [t.half() for t in (q, k, v)]
    out = flash.flash_attention_triton(*half, is_causal=is_causal)
    plain = F.scaled_dot_product_attention(*half, is_causal=is_causal)
    assert out.dtype == torch.float16
    err, err_plain = ((x.float() - reference).abs().max().item() for x in (out, plain))
    assert 0 < err <= 2 * err_plain < 1e-2


@pytest.mark.skipif(not HAS_TRITON, reason="Triton is published for Linux only")
@pytest.mark.parametrize("is_causal", [False, True])
def test_the_triton_kernel_scales_q_first_where_q_k_alone_would_overflow_float32(is_causal):
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 40, 16, generator=gen) for _ in range(3))
    q, k = q * 1e18, k * 1e18
    q[..., 0, :] = k[..., 0, :] = 5e18  # q_0 . k_0 = 16 * 2.5e37 = 4e38 > 3.4e38; / 4 = 1e38
    assert (q.double() @ k.double().mT).abs().max() > torch.finfo(torch.float32).max
    expected = F.scaled_dot_product_attention(*(x.double() for x in (q, k, v)), is_causal=is_causal)
    out = flash.flash_attention_triton(q, k, v, is_causal=is_causal)
    torch.testing.assert_close(out.double(), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "batch", [((1, 1), (2, 1), (1, 1)), ((3, 1), (1, 2), (1, 1))], ids=["k-wider", "all-differ"]
)
def test_tiled_attention_broadcasts_batch_dimensions_as_the_reference_does(batch):
    rng = np.random.default_rng(4)
    (bq, bk, bv), T_q, T_k = batch, 5, 7
    q, k = rng.standard_normal((*bq, T_q, 3)), rng.standard_normal((*bk, T_k, 3))
    v = rng.standard_normal((*bv, T_k, 2))  # d_v differs from d
    expected, _ = npa.scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(flash.flash_attention_numpy(q, k, v, 2, 3), expected, atol=1e-12)


BAD = {
    "a_block_of_zero": (
        lambda: flash.flash_attention_numpy(*problem(4, 4), block_q=0),
        ValueError,
        "block_q must be positive, got 0",
    ),
    "q_and_k_of_different_widths": (
        lambda: flash.flash_attention_numpy(np.ones((4, 8)), np.ones((4, 6)), np.ones((4, 6))),
        ValueError,
        r"q and k must share d_k.*q \(4, 8\), k \(4, 6\)",
    ),
    "a_string_as_is_causal": (
        lambda: flash.flash_attention_numpy(*problem(4, 4), is_causal="yes"),
        TypeError,
        "is_causal must be True or False",
    ),
    "bfloat16_under_the_interpreter": (
        lambda: flash.flash_attention_triton(*(torch.ones(1, 1, 4, 16, dtype=torch.bfloat16),) * 3),
        TypeError,
        r"float32 or float16 only, got torch.bfloat16, q shape \(1, 1, 4, 16\): Triton's "
        r"interpreter computes bfloat16 wrongly",
    ),
    "float64_under_the_interpreter_is_not_blamed_on_bfloat16": (
        lambda: flash.flash_attention_triton(*(torch.ones(1, 1, 4, 16, dtype=torch.float64),) * 3),
        TypeError,
        r"float32 or float16 only, got torch.float64, q shape \(1, 1, 4, 16\): the kernel does "
        r"not take it",
    ),
    "a_three_dimensional_k_to_the_kernel": (
        lambda: flash.flash_attention_triton(torch.ones(1, 4, 2, 16), *(torch.ones(1, 4, 16),) * 2),
        ValueError,
        r"k must have shape \(B, h, T_k, d\), got shape \(1, 4, 16\)",
    ),
    "a_q_that_requires_grad_for_a_kernel_without_backward": (
        lambda: flash.flash_attention_triton(
            torch.ones(1, 1, 4, 16, requires_grad=True), *(torch.ones(1, 1, 4, 16),) * 2
        ),
        ValueError,
        r"q require grad, but the Triton kernel has no backward pass.*torch.no_grad\(\)",
    ),
    "three_dimensional_inputs_to_the_kernel": (
        lambda: flash.flash_attention_triton(*(torch.ones(1, 4, 16),) * 3),
        ValueError,
        r"q must have shape \(B, h, T_q, d\), got shape \(1, 4, 16\)",
    ),
}


def test_the_triton_kernel_takes_tensors_that_require_grad_inside_no_grad():
    q = torch.randn(1, 1, 4, 16, generator=torch.Generator().manual_seed(0), requires_grad=True)
    with torch.no_grad():
        out = flash.flash_attention_triton(q, q, q)
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, q, q))


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_to_the_flash_helpers_gets_a_clear_error(case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message):
        call()


# --- notebook 09's exercises -----------------------------------------------------------------


def _results(name, fn, capsys):
    exercises.check(name, fn)
    return exercises.RESULTS[name], capsys.readouterr().out


def test_every_exercise_of_notebook_09_rejects_a_stub(capsys):
    names = [e.name for e in exercises.for_notebook("09")]
    assert sorted(names) == ["online_step", "tile_kind", "tile_step"]
    for name in names:

        def stub(*args):
            raise NotImplementedError

        assert _results(name, stub, capsys)[0] == "not attempted"


def test_online_step_rejects_a_total_that_is_never_rescaled(capsys):
    def forgets_to_rescale(m, total, block):
        m_new = max(m, block.max())
        return m_new, total + np.exp(block - m_new).sum()

    result, out = _results("online_step", forgets_to_rescale, capsys)
    assert result == "failed" and "check 2 (of 4) failed" in out and "exp(2 - 4)" in out


def test_online_step_rejects_sums_against_the_old_max(capsys):
    def uses_the_old_max(m, total, block):
        m_new = max(m, block.max())
        start = m if np.isfinite(m) else m_new
        return m_new, total + np.exp(block - start).sum()

    result, out = _results("online_step", uses_the_old_max, capsys)
    assert result == "failed" and "check 2 (of 4) failed" in out


def test_online_step_rejects_a_step_written_for_blocks_of_two_only(capsys):
    def pairs_only(m, total, block):  # right for section 1's blocks of two, wrong otherwise
        m_new = max(m, block[:2].max())
        return m_new, total * np.exp(m - m_new) + np.exp(block[:2] - m_new).sum()

    result, out = _results("online_step", pairs_only, capsys)
    assert result == "failed" and "check 4 (of 4) failed" in out and "blocks of 3" in out


def test_tile_step_rejects_an_output_that_is_never_rescaled(capsys):
    def forgets_acc(m, total, acc, s, v_tile):
        m_new = np.maximum(m, s.max(axis=-1))
        rescale = np.exp(m - m_new)
        p = np.exp(s - m_new[:, None])
        return m_new, total * rescale + p.sum(axis=-1), acc + p @ v_tile

    result, out = _results("tile_step", forgets_acc, capsys)
    assert result == "failed" and "check 2 (of 4) failed" in out
    assert "m and total are right, acc is off" in out


def test_tile_step_names_a_total_summed_against_the_old_max(capsys):
    def old_max(m, total, acc, s, v_tile):  # p against the old max once there is one
        m_new = np.maximum(m, s.max(axis=-1))
        rescale = np.exp(m - m_new)
        p = np.exp(s - np.where(np.isfinite(m), m, m_new)[:, None])
        return m_new, total * rescale + p.sum(axis=-1), acc * rescale[:, None] + p @ v_tile

    result, out = _results("tile_step", old_max, capsys)
    assert result == "failed" and "check 2 (of 4) failed" in out
    assert "m is right, total is off" in out and "against the new max" in out


def test_tile_step_names_an_output_divided_at_every_tile(capsys):
    def divides_early(m, total, acc, s, v_tile):
        m_new = np.maximum(m, s.max(axis=-1))
        rescale, p = np.exp(m - m_new), np.exp(s - m_new[:, None])
        total = total * rescale + p.sum(axis=-1)
        return m_new, total, (acc * rescale[:, None] + p @ v_tile) / total[:, None]

    result, out = _results("tile_step", divides_early, capsys)
    assert result == "failed" and "acc is off" in out and "nothing is divided" in out


def test_tile_step_asks_for_the_tuple_in_its_first_check(capsys):
    def returns_a_list(m, total, acc, s, v_tile):
        m_new = np.maximum(m, s.max(axis=-1))
        rescale, p = np.exp(m - m_new), np.exp(s - m_new[:, None])
        return [m_new, total * rescale + p.sum(axis=-1), acc * rescale[:, None] + p @ v_tile]

    result, out = _results("tile_step", returns_a_list, capsys)
    assert result == "failed" and "check 1 (of 4) failed" in out and "return the tuple" in out


def test_tile_step_rejects_a_version_that_turns_masked_scores_into_nan(capsys):
    def subtracts_the_tile_max(m, total, acc, s, v_tile):  # -inf - (-inf) for hidden rows
        m_new = np.maximum(m, s.max(axis=-1))
        p = np.exp(s - s.max(axis=-1, keepdims=True)) * np.exp(s.max(axis=-1) - m_new)[:, None]
        rescale = np.exp(m - m_new)
        return m_new, total * rescale + p.sum(axis=-1), acc * rescale[:, None] + p @ v_tile

    with np.errstate(invalid="ignore"):
        result, out = _results("tile_step", subtracts_the_tile_max, capsys)
    assert result == "failed" and "check 4 (of 4) failed" in out and "not NaN" in out


def test_tile_kind_rejects_an_off_by_one_skip_and_a_forgotten_offset(capsys):
    def off_by_one(q_start, q_stop, k_start, k_stop, offset):
        if k_start >= q_stop - 1 + offset:
            return "skipped"
        return "full" if k_stop - 1 <= q_start + offset else "masked"

    def ignores_offset(q_start, q_stop, k_start, k_stop, offset):
        return tiling.tile_kind(q_start, q_stop, k_start, k_stop, 0)

    result, out = _results("tile_kind", off_by_one, capsys)
    assert result == "failed" and "check 2 (of 3) failed" in out
    result, out = _results("tile_kind", ignores_offset, capsys)
    assert result == "failed" and "check 3 (of 3) failed" in out and "offset 32" in out


# --- the tiling explorer ---------------------------------------------------------------------


@pytest.mark.parametrize(("T_q", "T_k"), [(48, 48), (50, 50), (16, 48), (45, 20)])
@pytest.mark.parametrize(("block_q", "block_k"), [(16, 16), (12, 8), (7, 13)])
@pytest.mark.parametrize("bottom_right", [False, True])
def test_tile_kinds_agree_with_the_mask_they_summarise(T_q, T_k, block_q, block_k, bottom_right):
    offset = T_k - T_q if bottom_right else 0
    grid = tiling.tile_grid(T_q, T_k, block_q, block_k, True, offset)
    seen = np.arange(T_k)[None, :] <= np.arange(T_q)[:, None] + offset
    for (a, b), kind in np.ndenumerate(grid):
        tile = seen[a * block_q : (a + 1) * block_q, b * block_k : (b + 1) * block_k]
        assert kind == ("full" if tile.all() else "masked" if tile.any() else "skipped")


def test_the_skipped_tiles_are_the_ones_the_tiled_helper_never_visits():
    """The grid's count of running tiles is the number of tiles flash_forward computes."""
    visited = []
    real_update = flash.online_update

    def counting(m, l, acc, s, v_tile):  # noqa: E741
        visited.append(s.shape)
        return real_update(m, l, acc, s, v_tile)

    q, k, v = problem(48, 48, batch=())
    flash.online_update = counting
    try:
        flash.flash_forward(q, k, v, 16, 8, is_causal=True)
    finally:
        flash.online_update = real_update
    grid = tiling.tile_grid(48, 48, 16, 8, True)
    assert len(visited) == int((grid != "skipped").sum()) == 12


def test_the_row_trace_ends_in_the_rows_max_and_sum_and_rescales_only_when_the_max_grows():
    scores = tiling.demo_scores()
    for row, block_q, block_k, causal in [(40, 32, 8, True), (47, 16, 12, False), (0, 12, 8, True)]:
        steps = tiling.row_trace(scores[row], row, block_q, block_k, causal)
        visible = scores[row, : row + 1] if causal else scores[row]
        assert steps[-1].m == visible.max()
        np.testing.assert_allclose(steps[-1].total, np.exp(visible - visible.max()).sum())
        assert steps[0].rescale == 0.0
        for before, after in zip(steps, steps[1:], strict=False):
            assert (after.rescale < 1.0) == (after.m > before.m)


@pytest.mark.parametrize(
    ("scores_row", "row", "block_q", "block_k", "is_causal"),
    [
        ([-np.inf, -np.inf, 1.0, 2.0], 3, 1, 2, False),  # the first tile sees no key
        ([-np.inf, 0.5, -np.inf, -np.inf, 1.0], 4, 2, 1, True),
    ],
    ids=["first-tile-masked", "masked-tiles-between"],
)
def test_the_row_trace_stays_finite_through_a_tile_with_no_visible_key(
    scores_row, row, block_q, block_k, is_causal
):
    steps = tiling.row_trace(np.array(scores_row), row, block_q, block_k, is_causal)
    visible = np.array(scores_row)[: row + 1]
    assert all(np.isfinite(s.total) for s in steps), steps
    assert steps[-1].m == visible.max()
    np.testing.assert_allclose(steps[-1].total, np.exp(visible - visible.max()).sum())


def test_the_tiling_caption_counts_tiles_and_follows_the_row():
    fig, text = tiling.render_tiling(32, 8, True, 40)
    assert "10 of 12 tiles run (6 masked inside), 2 skipped" in text
    assert "visits 6 key tiles" in text and "keys 40-47" in text
    assert "m = max of the row (True), total = sum of exp(score - m) (True)" in text
    fig, text = tiling.render_tiling(12, 8, True, 0)
    assert "visits 2 key tiles" in text and "tile max  none" in text
    fig, text = tiling.render_tiling(16, 16, False, 5)
    assert "9 of 9 tiles run (0 masked inside), 0 skipped" in text


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((0, 8, True, 3), ValueError, "block_q must be positive, got 0"),
        ((8, 8, "yes", 3), TypeError, "is_causal must be True or False"),
        ((8, 8, True, 48), ValueError, r"row must be a query row in 0\.\.47, got 48"),
    ],
)
def test_the_tiling_explorer_names_the_bad_argument(args, error, message):
    with pytest.raises(error, match=message):
        tiling.render_tiling(*args)


@pytest.mark.parametrize("row", [np.int64(40), np.int32(40)], ids=["int64", "int32"])
def test_the_tiling_explorer_takes_a_numpy_integer_as_its_row(row):
    assert tiling.render_tiling(32, 8, True, row)[1] == tiling.render_tiling(32, 8, True, 40)[1]


def test_the_tiling_explorer_redraws_when_driven_headless():
    block_q = widgets.Dropdown(options=tiling.BLOCK_SIZES, value=32)
    causal = widgets.Checkbox(value=True)
    row = widgets.IntSlider(value=40, min=0, max=tiling.T - 1)
    box = explore(
        tiling.render_tiling,
        block_q=block_q,
        block_k=widgets.Dropdown(options=tiling.BLOCK_SIZES, value=8),
        is_causal=causal,
        row=row,
    )
    assert "10 of 12 tiles run" in box.caption.value
    first = box.image.value
    causal.value = False
    assert box.image.value != first and "12 of 12 tiles run" in box.caption.value
    row.value = 3
    assert "query row 3" in box.caption.value
    block_q.value = 8
    assert "its block holds rows 0-7" in box.caption.value
