"""Notebook 02: softmax_entropy, the scaling explorer and its helpers, the exercise checkers."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest
from conftest import NOTEBOOKS
from matplotlib.figure import Figure
from notebook_tools import code_cells, read, verdict

from helpers.kit import exercises
from helpers.kit.explorer import explore
from helpers.kit.plots import tied_for_largest
from helpers.lessons.nb02.explorers import (
    LENGTH,
    MAX_D_K,
    random_queries_and_keys,
    render_scaling,
    scaling_weights,
)
from helpers.numpy_attention import scaled_dot_product_attention, softmax, softmax_entropy

# --- softmax_entropy -------------------------------------------------------------------------


def test_entropy_of_a_uniform_row_is_log_of_the_number_of_keys():
    np.testing.assert_allclose(softmax_entropy(np.full((2, 5), 0.2)), [math.log(5)] * 2)


def test_entropy_of_a_one_hot_row_is_exactly_zero_not_nan_or_negative_zero():
    got = softmax_entropy(np.eye(3))
    assert np.all(np.isfinite(got))
    assert [str(x) for x in got] == ["0.0", "0.0", "0.0"]


def test_entropy_matches_minus_sum_p_log_p_computed_one_weight_at_a_time(rng):
    weights = softmax(rng.standard_normal((2, 3, 6)))
    want = [[-sum(p * math.log(p) for p in row) for row in matrix] for matrix in weights]
    np.testing.assert_allclose(softmax_entropy(weights), want, rtol=1e-12)


def test_entropy_rejects_an_empty_row_naming_the_shape():
    with pytest.raises(ValueError, match=r"\(3, 0\)"):
        softmax_entropy(np.zeros((3, 0)))


# --- random queries and keys, weights ---------------------------------------------------------


def test_a_wider_d_k_keeps_the_same_numbers_and_adds_columns():
    q4, k4 = random_queries_and_keys(4)
    q9, k9 = random_queries_and_keys(9)
    assert q4.shape == k4.shape == (LENGTH, 4) and q9.shape == (LENGTH, 9)
    np.testing.assert_array_equal(q9[:, :4], q4)
    np.testing.assert_array_equal(k9[:, :4], k4)


@pytest.mark.parametrize("d_k", [0, MAX_D_K + 1, -3])
def test_d_k_out_of_range_is_a_value_error_naming_d_k(d_k):
    with pytest.raises(ValueError, match="d_k"):
        random_queries_and_keys(d_k)


@pytest.mark.parametrize("d_k", [2.5, True, "8"])
def test_d_k_that_is_not_an_int_is_a_type_error_naming_d_k(d_k):
    with pytest.raises(TypeError, match="d_k"):
        random_queries_and_keys(d_k)


def test_scaled_must_be_a_bool():
    with pytest.raises(TypeError, match="scaled"):
        scaling_weights(8, "yes")


def test_scaled_weights_are_the_reference_attention_weights():
    q, k = random_queries_and_keys(32)
    _, weights = scaling_weights(32, scaled=True)
    _, reference = scaled_dot_product_attention(q, k, np.zeros((LENGTH, 1)))
    np.testing.assert_allclose(weights, reference, rtol=1e-12)


def test_unscaled_scores_spread_like_sqrt_d_k_and_scaled_ones_do_not():
    raw_wide = scaling_weights(MAX_D_K, scaled=False)[0].std()
    scaled_wide = scaling_weights(MAX_D_K, scaled=True)[0].std()
    assert raw_wide == pytest.approx(scaled_wide * math.sqrt(MAX_D_K))
    assert 0.7 < scaled_wide < 1.4 < 10 < raw_wide


def test_without_scaling_wide_vectors_collapse_the_softmax_and_scaling_prevents_it():
    collapsed = softmax_entropy(scaling_weights(MAX_D_K, scaled=False)[1]).mean()
    spread = softmax_entropy(scaling_weights(MAX_D_K, scaled=True)[1]).mean()
    assert collapsed < 0.5 < 1.0 < spread < math.log(LENGTH)


# --- render function and explorer ------------------------------------------------------------


def test_render_returns_a_heatmap_and_a_caption_with_d_k_and_entropy():
    fig, text = render_scaling(16, True)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query"
    assert "d_k = 16" in ax.get_title() and "sqrt(d_k)" in ax.get_title()
    entropy = softmax_entropy(scaling_weights(16, True)[1]).mean()
    assert f"mean entropy of a row: {entropy:.2f} nats" in text
    assert f"uniform over {LENGTH} keys: {math.log(LENGTH):.2f}" in text


@pytest.mark.parametrize(("d_k", "scaled"), [(64, False), (68, True)])
def test_render_writes_each_rows_largest_weight_in_every_cell_tied_for_it_and_nothing_else(
    d_k, scaled
):
    fig, _ = render_scaling(d_k, scaled)
    weights = scaling_weights(d_k, scaled)[1]
    written = sorted((t.get_position(), t.get_text()) for t in fig.axes[0].texts)
    want = sorted(
        ((column + 0.5, row + 0.5), f"{weights[row, column]:.2f}")
        for row in range(LENGTH)
        for column in np.flatnonzero(np.round(weights[row], 2) == np.round(weights[row].max(), 2))
    )
    assert written == want


def test_a_row_tied_for_its_largest_weight_gets_the_number_in_every_tied_cell():
    weights = scaling_weights(68, True)[1]  # row 2 has two weights that both print as 0.22
    assert list(np.round(weights[2], 2)).count(0.22) == 2 == len(tied_for_largest(weights[2]))
    texts = render_scaling(68, True)[0].axes[0].texts
    in_row_2 = [t.get_text() for t in texts if t.get_position()[1] == 2.5]
    assert in_row_2 == ["0.22", "0.22"]


def test_tied_for_largest_compares_weights_as_they_are_printed():
    assert list(tied_for_largest(np.array([0.1792, 0.1790, 0.1556]))) == [0, 1]
    assert list(tied_for_largest(np.array([0.30, 0.25]))) == [0]
    assert list(tied_for_largest(np.full(4, 0.25))) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="T_k"):
        tied_for_largest(np.zeros((2, 3)))


def test_render_writes_dark_numbers_on_bright_cells_and_light_numbers_on_dark_ones():
    texts = [*render_scaling(MAX_D_K, False)[0].axes[0].texts]  # mostly near 1
    texts += render_scaling(4, True)[0].axes[0].texts  # mostly far below 1
    bright = {t.get_color() for t in texts if float(t.get_text()) > 0.9}
    dark = {t.get_color() for t in texts if float(t.get_text()) < 0.4}
    assert bright == {"black"} and dark == {"white"}


def test_render_says_when_the_scores_are_not_scaled():
    fig, text = render_scaling(16, False)
    assert "not scaled" in text and "not scaled" in fig.axes[0].get_title()


def _scaling_explorer():
    d_k = widgets.IntSlider(value=64, min=1, max=MAX_D_K, description="d_k")
    scaled = widgets.Checkbox(value=False, description="divide by sqrt(d_k)")
    return explore(render_scaling, d_k=d_k, scaled=scaled), d_k, scaled


def test_explorer_redraws_when_the_d_k_slider_moves():
    box, d_k, _ = _scaling_explorer()
    image, caption = box.image.value, box.caption.value
    assert image[:4] == b"\x89PNG" and "d_k = 64" in caption
    d_k.value = 4
    assert box.image.value != image and "d_k = 4," in box.caption.value


def test_explorer_switches_the_scaling_and_the_printed_entropy_rises():
    box, _, scaled = _scaling_explorer()
    before = box.caption.value
    scaled.value = True
    after = box.caption.value
    assert "not scaled" in before and "not scaled" not in after

    def entropy_in(caption: str) -> float:
        return float(caption.split("mean entropy of a row: ")[1].split(" ")[0])

    assert entropy_in(after) > entropy_in(before) + 0.5


# --- exercise checkers: they pass the right answer and reject typical mistakes ---------------


def test_notebook_02_registers_its_exercises():
    assert {e.name for e in exercises.for_notebook("02")} == {
        "scaled_attention",
        "softmax_entropy",
        "self_attention",
    }


def test_scaled_attention_checker_rejects_unscaled_and_transpose_everything_versions():
    def unscaled(q, k, v):
        w = softmax(q @ np.swapaxes(k, -1, -2), axis=-1)
        return w @ v, w

    def with_dot_t(q, k, v):
        w = softmax(q @ k.T / np.sqrt(q.shape[-1]), axis=-1)
        return w @ v, w

    assert verdict("scaled_attention", scaled_dot_product_attention) == "passed"
    assert verdict("scaled_attention", unscaled) == "failed"
    assert verdict("scaled_attention", with_dot_t) == "failed"


def test_softmax_entropy_checker_rejects_the_version_that_gives_nan():
    assert verdict("softmax_entropy", softmax_entropy) == "passed"
    assert verdict("softmax_entropy", lambda p: -np.sum(p * np.log(p), axis=-1)) == "failed"


def test_self_attention_checker_rejects_values_that_skip_w_v():
    def right(x, w_q, w_k, w_v):
        return scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)

    def skips_w_v(x, w_q, w_k, w_v):
        return scaled_dot_product_attention(x @ w_q, x @ w_k, x)

    assert verdict("self_attention", right) == "passed"
    assert verdict("self_attention", skips_w_v) == "failed"


@pytest.mark.parametrize(
    ("divisor", "what"),
    [
        (lambda d_model, d_k: 1.0, "not divided by √d_k (d_k = 8 here)"),
        (lambda d_model, d_k: d_model, "divided by √D (D = 4, the width of x) instead of √d_k"),
    ],
    ids=["not_scaled", "divided_by_sqrt_d_model"],
)
def test_self_attention_scaled_by_anything_but_sqrt_d_k_is_told_to_check_the_scaling(
    capsys, divisor, what
):
    def wrongly_scaled(x, w_q, w_k, w_v):
        q, k = x @ w_q, x @ w_k
        w = softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(divisor(*w_q.shape)), axis=-1)
        return w @ (x @ w_v), w

    exercises.check("self_attention", wrongly_scaled)
    out = capsys.readouterr().out
    assert exercises.RESULTS["self_attention"] == "failed"
    assert what in out and "check the scaling" in out and "d_k = W_q.shape[1]" in out
    assert "x @ W_q, k = x @ W_k" not in out  # the general recipe would send them to projecting


def test_a_right_self_attention_is_not_mistaken_for_a_scaling_slip(capsys):
    exercises.check(
        "self_attention", lambda x, a, b, c: scaled_dot_product_attention(x @ a, x @ b, x @ c)
    )
    assert capsys.readouterr().out == "✅ self_attention: all 3 checks passed.\n"


def _check_yourself_after_exercise_1() -> str:
    """The source of 02's cell that compares the learner's scaled_attention on a batch of heads."""
    (path,) = [p for p in NOTEBOOKS if p.name.startswith("02_")]
    (cell,) = [c for c in code_cells(read(path)) if "matches the reference:" in c.source]
    return cell.source


def _returns_only_the_output(q, k, v):
    return scaled_dot_product_attention(q, k, v)[0]


def _transposes_every_axis(q, k, v):
    w = softmax(q @ k.T / np.sqrt(q.shape[-1]), axis=-1)
    return w @ v, w


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (scaled_dot_product_attention, "matches the reference: ✅"),
        (_returns_only_the_output, "matches the reference: ❌"),
        (_transposes_every_axis, "❌ scaled_attention failed on the heads: ValueError: matmul"),
        (lambda q, k, v: None, "❌ scaled_attention failed on the heads: TypeError"),
    ],
    ids=["right", "only_the_output", "k_dot_t", "returns_none"],
)
def test_the_check_yourself_cell_after_exercise_1_reports_any_answer_without_a_traceback(
    capsys, answer, says
):
    names = {"np": np, "scaled_dot_product_attention": scaled_dot_product_attention}
    exec(_check_yourself_after_exercise_1(), {**names, "scaled_attention": answer})
    out = capsys.readouterr().out
    assert says in out
    assert ("says what to fix" in out) == ("✅" not in out)
