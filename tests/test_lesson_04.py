"""Notebook 04: the heads model, its shape trace and head grid, the heads explorer driven
headless, and exercise checkers that reject wrong answers."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from notebook_tools import verdict
from plot_tools import grid_tiles

from helpers.kit import exercises
from helpers.kit.data import random_batch
from helpers.kit.explorer import explore
from helpers.lessons.nb04.explorers import D_MODEL, make_model, render_heads, shape_trace
from helpers.numpy_attention import (
    MultiHeadAttention,
    combine_heads,
    scaled_dot_product_attention,
    split_heads,
)


def test_make_model_uses_the_same_weights_for_every_number_of_heads():
    one, eight = make_model(1), make_model(8)
    for name in one.params:
        np.testing.assert_array_equal(one.params[name], eight.params[name])
    assert one.num_parameters() == eight.num_parameters() == 4 * D_MODEL**2 + 4 * D_MODEL


def test_shape_trace_steps_give_the_helper_output_and_print_the_real_shapes(rng):
    mha = make_model(4)
    x = rng.standard_normal((2, 5, D_MODEL))
    weights, lines = shape_trace(mha, x)
    expected_out, expected_weights = mha(x)
    np.testing.assert_allclose(weights, expected_weights)
    trace = "\n".join(lines)
    for shape in [(2, 5, 24), (2, 4, 5, 6), (2, 4, 5, 5)]:
        assert str(shape) in trace
    assert lines[-1].endswith(str(expected_out.shape))


@pytest.mark.parametrize(("heads", "length"), [(1, 2), (3, 7), (8, 12)])
def test_head_grid_shows_every_head_of_the_model(heads, length):
    fig, caption = render_heads(heads, length)
    tiles = grid_tiles(fig)
    plt.close(fig)
    _, expected = make_model(heads)(np.random.default_rng(0).standard_normal((1, length, 24)))
    np.testing.assert_allclose(tiles, expected[0])
    assert f"(1, {heads}, {length}, {24 // heads})" in caption
    assert f"= {4 * 24 * 24 + 4 * 24} (the same for every h)" in caption


def test_default_sizes_all_differ_so_every_number_in_the_trace_reads_one_way():
    _, caption = render_heads()
    parts = [part.split(" = ") for part in caption.splitlines()[0].split(", ")]
    sizes = {part[0]: part[-1] for part in parts}  # "d_k = D / h = 6" -> "d_k": "6"
    assert sizes == {"B": "1", "T": "5", "D": "24", "h": "4", "d_k": "6"}
    assert len(set(sizes.values())) == len(sizes)
    assert "(B, h, T, d_k)    = (1, 4, 5, 6)" in caption


def test_render_heads_rejects_heads_that_do_not_divide_d_model():
    with pytest.raises(ValueError, match="not divisible by num_heads=5"):
        render_heads(5, 4)


def test_heads_explorer_redraws_the_grid_and_trace_when_a_slider_moves():
    heads = widgets.IntSlider(value=2, min=1, max=8)
    length = widgets.IntSlider(value=4, min=2, max=12)
    explorer = explore(render_heads, num_heads=heads, seq_len=length)
    first_image = explorer.image.value
    heads.value = 8
    assert explorer.image.value != first_image and "(1, 8, 4, 3)" in explorer.caption.value
    length.value = 12
    assert "(1, 8, 12, 12)" in explorer.caption.value
    heads.value = 7
    assert "not divisible by num_heads=7" in explorer.caption.value


# --- exercises of 04 reject wrong answers -------------------------------------------------


def _split_with_the_notebooks_sizes(x, num_heads):
    B, T = 2, 5  # the notebook's sizes, not x's
    return x.reshape(B, T, num_heads, -1).transpose(0, 2, 1, 3)


def _split_any(x, num_heads):
    *lead, length, d_model = x.shape
    return np.swapaxes(x.reshape(*lead, length, num_heads, d_model // num_heads), -3, -2)


def _merge_any(x):
    x = np.swapaxes(x, -3, -2)  # (..., T, h, d_k)
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])


def _contributions_from_columns(heads, W_o):  # columns of W_o instead of rows
    d_k = heads.shape[-1]
    return np.stack(
        [heads[:, i] @ W_o[:, i * d_k : (i + 1) * d_k] for i in range(heads.shape[1])], axis=1
    )


@pytest.mark.parametrize(
    ("name", "wrong"),
    [
        ("split_into_heads", lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1)),
        ("split_into_heads", split_heads),  # (B, T, D) only: fails on one sentence
        ("split_into_heads", _split_with_the_notebooks_sizes),
        ("merge_heads", lambda x: x.reshape(x.shape[0], x.shape[2], -1)),
        ("merge_heads", combine_heads),  # (B, h, T, d_k) only
        ("head_contributions", _contributions_from_columns),
        ("head_contributions", lambda heads, W_o: combine_heads(heads) @ W_o),  # the sum only
    ],
    ids=[
        "split_without_transpose",
        "split_of_a_batch_only",
        "split_with_the_notebooks_sizes",
        "merge_without_transpose",
        "merge_of_a_batch_only",
        "contributions_from_columns_of_w_o",
        "contributions_already_summed",
    ],
)
def test_exercise_checker_rejects_a_plausible_wrong_answer(name, wrong):
    with np.errstate(all="ignore"):
        assert verdict(name, wrong) == "failed"


def test_split_with_the_notebooks_sizes_is_told_to_read_them_from_x_shape(capsys):
    exercises.check("split_into_heads", _split_with_the_notebooks_sizes)
    out = capsys.readouterr().out
    assert "check 2 (of 3) failed" in out
    assert "Read the sizes from x.shape, not from the notebook's B, T and D" in out


def _merge_with_the_notebooks_sizes(x):
    B, T, D = 2, 5, 8  # the notebook's sizes, not x's
    return x.transpose(0, 2, 1, 3).reshape(B, T, D)


def test_merge_with_the_notebooks_sizes_is_told_that_x_shape_minus_3_holds_the_leading_axes(
    capsys,
):
    exercises.check("merge_heads", _merge_with_the_notebooks_sizes)
    out = capsys.readouterr().out
    assert "check 1 (of 3) failed" in out
    assert "for heads (..., h, T, d_k) x.shape[:-3] holds however many leading axes" in out
    assert "x.shape[:-2]" not in out


@pytest.mark.parametrize(
    ("name", "no_swap", "told"),
    [
        (
            "split_into_heads",
            lambda x, h: x.reshape(*x.shape[:-2], h, x.shape[-2], -1),
            "x.reshape(B, h, T, d_k) without the swap",
        ),
        (
            "merge_heads",
            lambda x: x.reshape(*x.shape[:-3], x.shape[-2], -1),
            "x.reshape(B, T, h * d_k) without the swap",
        ),
    ],
    ids=["split", "merge"],
)
def test_a_reshape_without_the_swap_is_named_and_the_hint_starts_with_the_swap(
    capsys, name, no_swap, told
):
    exercises.check(name, no_swap)
    out = capsys.readouterr().out
    assert "check 1 (of 3) failed" in out and f"right shape, wrong numbers: {told}" in out
    hint = out.split("Hint: ")[1]
    assert hint.startswith("Reshaping ") and "right shape and the wrong numbers" in hint
    assert hint.index("np.swapaxes") < hint.index("Read the sizes from x.shape")


def test_exercise_checkers_accept_answers_for_any_leading_axes():
    assert verdict("split_into_heads", _split_any) == "passed"
    assert verdict("merge_heads", _merge_any) == "passed"
    assert verdict("head_contributions", lambda h, W: h @ W.reshape(h.shape[1], -1, len(W))) == (
        "passed"
    )


def test_head_contributions_add_up_to_the_helpers_output_projection(rng):
    mha = MultiHeadAttention(8, 4, seed=3)
    x = rng.standard_normal((2, 5, 8))
    q, k, v = (split_heads(mha.project(x, n), 4) for n in "qkv")
    heads, _ = scaled_dot_product_attention(q, k, v)
    parts = heads @ mha.params["W_o"].reshape(4, 2, 8)  # (B, h, T, D): one term per head
    np.testing.assert_allclose(parts.sum(axis=1) + mha.params["b_o"], mha(x)[0], atol=1e-12)


@pytest.mark.parametrize(
    "dtype",
    [np.float64, np.float32, np.float16, np.dtype("float32"), "float32"],
    ids=["float64", "float32", "float16", "a_numpy_dtype_object", "a_dtype_name"],
)
def test_random_batch_gives_the_same_normal_draws_in_every_floating_dtype(dtype):
    x = random_batch(2, 3, 4, seed=5, dtype=dtype)
    want = np.random.default_rng(5).standard_normal((2, 3, 4))
    assert x.shape == (2, 3, 4) and x.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(x, want.astype(dtype))
