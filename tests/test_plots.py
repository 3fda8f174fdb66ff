"""helpers.kit.plots: the one-head heatmap and the head grid keep the course's heatmap conventions
(viridis, fixed 0..1, token labels, values written only when small), show the right numbers, and
look exactly as they did when seaborn drew them."""

from __future__ import annotations

import io

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
import seaborn as sns
import torch
from plot_tools import grid_canvas, grid_tiles

from helpers.kit import plots
from helpers.kit.plots import (
    ANNOTATE_CELLS_UP_TO,
    CMAP,
    GRID_LABELS_UP_TO,
    attention_heatmap,
    head_grid,
)
from helpers.torch_attention import MultiHeadAttention


def softmax_rows(rng, shape) -> np.ndarray:
    scores = rng.standard_normal(shape) * 2
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize(("heads", "t_q", "t_k"), [(1, 2, 2), (2, 3, 5), (3, 4, 4), (8, 12, 12)])
def test_head_grid_shows_each_head_as_a_tile_in_reading_order(rng, heads, t_q, t_k):
    weights = softmax_rows(rng, (heads, t_q, t_k))
    fig = head_grid(weights)
    tiles = grid_tiles(fig)
    plt.close(fig)
    np.testing.assert_allclose(tiles, weights)


def test_head_grid_uses_viridis_on_a_fixed_zero_to_one_range_with_one_colour_bar(rng):
    fig = head_grid(softmax_rows(rng, (4, 3, 3)) * 0.3)  # small weights: range must not shrink
    mesh = fig.axes[0].collections[0]
    assert mesh.get_cmap().name == CMAP and mesh.norm.vmin == 0.0 and mesh.norm.vmax == 1.0
    assert len(fig.axes) == 2  # the heatmap and its one colour bar
    plt.close(fig)


def test_head_grid_names_every_head_and_labels_keys_and_queries_with_tokens(rng):
    queries, keys = ["q0", "q1", "q2"], ["k0", "k1", "k2", "k3", "k4"]
    fig = head_grid(softmax_rows(rng, (2, 3, 5)), queries, keys, title="two heads")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts if t.get_text().startswith("head")] == [
        "head 0",
        "head 1",
    ]
    assert [t.get_text() for t in ax.get_xticklabels()] == keys * 2  # under both tiles
    assert [t.get_text() for t in ax.get_yticklabels()] == queries
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("key", "query", "two heads")
    plt.close(fig)


def test_head_grid_labels_only_the_first_tiles_when_labels_would_crowd(rng):
    tokens = [f"t{i}" for i in range(12)]
    assert 4 * 12 + 2 * 12 > GRID_LABELS_UP_TO
    fig = head_grid(softmax_rows(rng, (8, 12, 12)), tokens, tokens)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens
    assert [t.get_text() for t in ax.get_yticklabels()] == tokens
    plt.close(fig)


def _values_written(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts if not t.get_text().startswith("head")]


def test_head_grid_writes_the_values_only_when_the_grid_is_small(rng):
    small = softmax_rows(rng, (2, 5, 5))
    assert small.size <= ANNOTATE_CELLS_UP_TO
    fig = head_grid(small)
    canvas = grid_canvas(fig)
    assert _values_written(fig) == [f"{v:.2f}" for v in canvas[~np.isnan(canvas)]]
    plt.close(fig)
    big = softmax_rows(rng, (4, 6, 6))
    assert big.size > ANNOTATE_CELLS_UP_TO
    fig = head_grid(big)
    assert _values_written(fig) == []
    plt.close(fig)
    fig = head_grid(big, annotate=True)
    assert len(_values_written(fig)) == big.size
    plt.close(fig)


def test_head_grid_names_the_expected_shape_for_a_single_map():
    with pytest.raises(ValueError, match=r"\(h, T_q, T_k\), got shape \(3, 3\)"):
        head_grid(np.eye(3))


@pytest.mark.parametrize(
    ("draw", "weights"),
    [(head_grid, np.full((1, 3, 3), 1 / 3)), (attention_heatmap, np.full((3, 3), 1 / 3))],
    ids=["head_grid", "attention_heatmap"],
)
def test_plots_name_the_token_argument_whose_length_does_not_fit(draw, weights):
    shape = str(weights.shape).replace("(", r"\(").replace(")", r"\)")
    with pytest.raises(ValueError, match=rf"key_tokens has 2 labels for weights of shape {shape}"):
        draw(weights, ["a", "b", "c"], ["a", "b"])
    with pytest.raises(
        ValueError, match=rf"query_tokens has 4 labels for weights of shape {shape}"
    ):
        draw(weights, ["a", "b", "c", "d"], ["a", "b", "c"])
    plt.close("all")


def test_attention_heatmap_draws_the_weights_on_a_fixed_zero_to_one_range():
    weights = np.array([[0.2, 0.8], [0.5, 0.5], [0.1, 0.9]])
    ax = attention_heatmap(weights, ["a", "b", "c"], ["x", "y"])
    mesh = ax.collections[0]
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(3, 2), weights)
    assert (mesh.norm.vmin, mesh.norm.vmax) == (0.0, 1.0)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    plt.close(ax.figure)


def _module_weights(dtype: torch.dtype) -> torch.Tensor:
    """Weights ``(B, h, T, T) = (1, 2, 3, 3)`` straight from the course's module, in ``dtype``."""
    torch.manual_seed(0)
    module = MultiHeadAttention(8, 2).to(dtype)
    _, weights = module(torch.randn(1, 3, 8, dtype=dtype), need_weights=True)
    return weights


# The weights a learner gets from the course's own module, passed straight to the pictures.
TENSOR_WEIGHTS = [
    pytest.param(lambda: _module_weights(torch.float32), id="weights_that_require_grad"),
    pytest.param(lambda: _module_weights(torch.bfloat16), id="bfloat16_weights"),
    pytest.param(lambda: _module_weights(torch.float16), id="float16_weights"),
    pytest.param(lambda: _module_weights(torch.float64).detach(), id="float64_weights"),
]


@pytest.mark.parametrize("make", TENSOR_WEIGHTS)
def test_plots_draw_the_weights_of_the_course_s_own_module(make):
    weights = make()  # (1, h, T, T)
    requires_grad, dtype = weights.requires_grad, weights.dtype
    want = weights.detach().double().numpy()  # every float dtype is exact in float64
    fig = head_grid(weights[0])
    np.testing.assert_array_equal(grid_tiles(fig), want[0])
    ax = attention_heatmap(weights[0, 1])
    drawn = np.asarray(ax.collections[0].get_array()).reshape(3, 3)
    np.testing.assert_array_equal(drawn, want[0, 1])
    assert (weights.requires_grad, weights.dtype) == (requires_grad, dtype), "left as it was"
    plt.close("all")


def test_a_nan_weight_draws_a_blank_cell_on_purpose():
    weights = np.array([[1.0, np.nan], [0.5, 0.5]])  # e.g. a row not generated yet
    ax = attention_heatmap(weights, annotate=False)
    drawn = np.ma.filled(ax.collections[0].get_array().astype(float), np.nan).reshape(2, 2)
    np.testing.assert_array_equal(drawn, weights)
    plt.close(ax.figure)


def _seaborn_mesh(weights, ax, annotate, fontsize, colorbar=True, cbar_ax=None):
    """What the pictures drew with seaborn, before they drew the mesh themselves (faster)."""
    sns.heatmap(
        weights,
        ax=ax,
        annot=annotate,
        annot_kws={"fontsize": fontsize},
        cbar=colorbar,
        cbar_ax=cbar_ax,
        vmin=0.0,
        vmax=1.0,
        cmap=CMAP,
        fmt=".2f",
        xticklabels=False,
        yticklabels=False,
    )


def _pixels(fig) -> np.ndarray:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="rgba", dpi=72)
    plt.close(fig)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def _one_head(weights, annotate, colorbar):
    fig, ax = plt.subplots(figsize=(5.0, 4.0))
    tokens = list("abcdef")
    attention_heatmap(
        weights, tokens, tokens, ax=ax, title="t", annotate=annotate, colorbar=colorbar
    )
    return fig


# Small and large, written and not, light and dark cells, a blank (NaN) cell, ties.
PICTURES = [
    pytest.param(lambda w: _one_head(w[0], True, True), id="one_head_with_values"),
    pytest.param(lambda w: _one_head(w[1], False, False), id="one_head_plain"),
    pytest.param(lambda w: head_grid(w[:, 1:4, 1:4], list("abc"), list("xyz")), id="small_grid"),
    pytest.param(lambda w: head_grid(w, list("abcdef"), list("uvwxyz")), id="grid_of_two"),
    pytest.param(lambda w: head_grid(np.tile(w, (3, 1, 1))), id="grid_of_six"),
]


@pytest.mark.parametrize("draw", PICTURES)
def test_the_heatmaps_draw_exactly_what_seaborn_s_heatmap_drew(rng, monkeypatch, draw):
    weights = softmax_rows(rng, (2, 6, 6))
    weights[0, 0] = [1.0, 0, 0, 0, 0, 0]  # the lightest and darkest cells
    weights[0, 1] = 1 / 6  # a row of ties
    weights[1, 2, 3] = np.nan  # a blank cell
    ours = _pixels(draw(weights))
    monkeypatch.setattr(plots, "_weights_mesh", _seaborn_mesh)
    np.testing.assert_array_equal(ours, _pixels(draw(weights)))


# --- sharp figures: twice the pixels, the same size on the page --------------------------


@pytest.fixture
def jupyter_setup(monkeypatch):
    """``setup()`` as a notebook runs it: an IPython shell is there, with its display formatters
    (a light stand-in, so this process's own hooks are left alone), and no inline backend yet.
    Returns the shell."""
    import types

    import IPython
    from IPython.core.formatters import DisplayFormatter
    from matplotlib_inline.config import InlineBackend

    from helpers.kit.env import setup

    plt.close(plt.figure())  # pyplot picks its backend before the stand-in is in place
    shell = types.SimpleNamespace(display_formatter=DisplayFormatter())
    InlineBackend.clear_instance()
    with mpl.rc_context():  # setup() sets the theme and the dpi: later tests get them back
        with monkeypatch.context() as patch:
            patch.setattr(IPython, "get_ipython", lambda: shell)
            setup()
        yield shell
    InlineBackend.clear_instance()


def _png_size(png: bytes) -> tuple[int, int]:
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def test_setup_shows_figures_at_twice_their_pixels_with_their_displayed_size(jupyter_setup):
    import base64

    from helpers.kit.env import FIGURE_DPI, PIXEL_RATIO

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [1, 0])
    data, metadata = jupyter_setup.display_formatter.format(fig)
    plt.close(fig)
    wide, high = _png_size(base64.b64decode(data["image/png"]))
    shown = metadata.get("image/png", {})
    assert shown, "no displayed size in the output's metadata: the figure shows at its pixels"
    assert (wide // PIXEL_RATIO, high // PIXEL_RATIO) == (shown["width"], shown["height"])
    assert PIXEL_RATIO == 2
    assert 4 * FIGURE_DPI * 0.8 < shown["width"] <= 4 * FIGURE_DPI, "as large as before"
