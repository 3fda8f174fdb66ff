"""Notebook 06: its exercises and the fused-layout explorer: a split is right only when it reads
the layout it was given.

That the fused module agrees with the separate-projection one and with
``torch.nn.MultiheadAttention`` is proved in test_equivalence.py.
"""

from __future__ import annotations

import re

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pytest
from conftest import NOTEBOOKS
from notebook_tools import read, verdict

from helpers.kit import exercises
from helpers.kit.explorer import explore
from helpers.lessons.nb06 import explorers as fused_layout

NOTEBOOK = next(path for path in NOTEBOOKS if path.name.startswith("06_"))


def test_every_exercise_of_notebook_06_rejects_a_stub(capsys):
    names = [e.name for e in exercises.for_notebook("06")]
    assert 2 <= len(names) <= 4
    for name in names:

        def stub(*args):
            raise NotImplementedError

        exercises.check(name, stub)
        assert exercises.RESULTS[name] == "not attempted"
    assert capsys.readouterr().out.count("not attempted yet") == len(names)


def test_split_exercise_rejects_a_reshape_that_ignores_the_layout(capsys):
    def wrong(qkv, h):  # treats the last axis as (h, 3, d_k): the interleaved layout
        b, t, three_d = qkv.shape
        return qkv.view(b, t, h, 3, three_d // (3 * h)).permute(3, 0, 2, 1, 4).unbind(0)

    exercises.check("split_fused", wrong)
    assert exercises.RESULTS["split_fused"] == "failed"
    assert "check 2 (of 4) failed" in capsys.readouterr().out


def _split(qkv, num_heads, interleaved=False):
    b, t, three_d = qkv.shape
    d_k = three_d // (3 * num_heads)
    if interleaved:
        return qkv.view(b, t, num_heads, 3, d_k).permute(3, 0, 2, 1, 4).unbind(0)
    return qkv.view(b, t, 3, num_heads, d_k).permute(2, 0, 3, 1, 4).unbind(0)


def _chunk_then_split(qkv, num_heads, interleaved=False):  # ignores the layout
    b, t, _ = qkv.shape
    return [p.reshape(b, t, num_heads, -1).transpose(1, 2) for p in qkv.chunk(3, dim=-1)]


def test_split_exercise_accepts_view_permute_unbind_for_both_layouts():
    assert verdict("split_fused", _split) == "passed"


def test_split_exercise_rejects_chunk_which_cannot_read_the_interleaved_layout(capsys):
    exercises.check("split_fused", _chunk_then_split)
    out = capsys.readouterr().out
    assert exercises.RESULTS["split_fused"] == "failed"
    assert "check 3 (of 4) failed" in out and "interleaved=True" in out


def test_split_exercise_rejects_a_split_that_copies(capsys):
    exercises.check("split_fused", lambda *a, **k: [p.contiguous() for p in _split(*a, **k)])
    out = capsys.readouterr().out
    assert "check 4 (of 4) failed" in out and "q is a copy" in out


# --- the fused-layout explorer ---------------------------------------------------------------


@pytest.mark.parametrize("num_heads", [2, 3, 4, 6])
def test_fused_split_is_right_only_when_it_reads_the_layout_it_was_given(num_heads):
    blocks, interleaved = fused_layout.LAYOUTS
    by_part, by_head = fused_layout.SPLITS
    assert all(fused_layout.split_matches(num_heads, blocks, by_part).values())
    assert all(fused_layout.split_matches(num_heads, interleaved, by_head).values())
    assert not any(fused_layout.split_matches(num_heads, interleaved, by_part).values())
    assert not any(fused_layout.split_matches(num_heads, blocks, by_head).values())


def test_with_one_head_both_layouts_are_the_same_rows():
    """Why a one-head test cannot catch a layout bug."""
    blocks, interleaved = fused_layout.LAYOUTS
    assert fused_layout.row_labels(1, blocks) == fused_layout.row_labels(1, interleaved)
    assert all(fused_layout.split_matches(1, interleaved, fused_layout.SPLITS[0]).values())


def test_split_rows_hands_each_head_its_columns_under_the_blocked_layout():
    rows = fused_layout.split_rows(3, fused_layout.SPLITS[0])  # D = 12, d_k = 4
    assert rows.shape == (3, 3, 4)
    assert rows[1, 2].tolist() == [20, 21, 22, 23]  # K of head 2: block 1, third slice
    assert fused_layout.read_as(3, fused_layout.SPLITS[1])[4:8] == ["k0"] * 4


def test_fused_split_picture_marks_misread_rows_and_says_so():
    fig, text = fused_layout.render_fused_split(3, "[Q | K | V] blocks", "(3, h, d_k)")
    assert "every row read correctly" in fig.axes[1].get_title(loc="left")
    assert "Q True, K True, V True" in text and "head 2: Q <- rows  8..11 (hold q2)" in text
    fig, text = fused_layout.render_fused_split(3, "per-head interleaved", "(3, h, d_k)")
    assert "24 rows misread" in fig.axes[1].get_title(loc="left")
    assert "Q False, K False, V False" in text and "head 1: Q <- rows  4.. 7 (hold k0)" in text
    plt.close("all")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((5, "per-head interleaved", "(3, h, d_k)"), "num_heads must divide D = 12, got 5"),
        ((2, "rows", "(3, h, d_k)"), "layout must be one of"),
        ((2, "per-head interleaved", "(3, d_k)"), "split must be one of"),
    ],
)
def test_fused_split_names_the_bad_argument(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        fused_layout.render_fused_split(*args)


def test_fused_split_explorer_redraws_when_driven_headless():
    heads = widgets.Dropdown(options=[1, 2, 3, 4, 6], value=1)
    layout = widgets.ToggleButtons(options=fused_layout.LAYOUTS, value=fused_layout.LAYOUTS[1])
    split = widgets.ToggleButtons(options=fused_layout.SPLITS, value=fused_layout.SPLITS[0])
    box = explore(fused_layout.render_fused_split, num_heads=heads, layout=layout, split=split)
    assert "Q True, K True, V True" in box.caption.value  # one head hides the bug
    first_image = box.image.value
    heads.value = 3
    assert box.image.value != first_image and "Q False, K False, V False" in box.caption.value
    split.value = fused_layout.SPLITS[1]
    assert "Q True, K True, V True" in box.caption.value


# --- the committed timings of section 7 are a measurement -----------------------------------

TIMING_LINE = re.compile(r"D =\s*(\d+): separate\s+([\d.]+) µs.*?fused\s+([\d.]+) µs")
SLOWEST_FLOPS = 1e9  # float32 FLOP/s: a CPU core of the last twenty years does several times this
FASTEST_FLOPS = 1e14  # no CPU multiplies this fast
CALL_OVERHEAD_S = 1e-3  # three nn.Linear calls cost tens of µs beyond their arithmetic


def test_committed_projection_timings_are_physically_plausible():
    """A projection of 256 tokens cannot take milliseconds at D = 32: one that does was timed on
    a busy machine (python -m tools.run_notebooks refuses to write it; re-run 06 when quiet)."""
    nb = read(NOTEBOOK)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    batch, length = map(int, re.search(r"B_bench, T_bench = (\d+), (\d+)", source).groups())
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and "speed_up = best" in c.source]
    rows = TIMING_LINE.findall("".join(o.get("text", "") for o in cell.outputs))
    assert len(rows) == 5, "06 printed no timings"
    for d_model, *micros in rows:
        flops = 2 * batch * length * int(d_model) * 3 * int(d_model)  # Q, K and V: 3 D outputs
        slowest = CALL_OVERHEAD_S + flops / SLOWEST_FLOPS
        for name, micro in zip(("separate", "fused"), micros, strict=True):
            seconds = float(micro) * 1e-6
            assert flops / FASTEST_FLOPS < seconds < slowest, (
                f"D = {d_model}: {name} {seconds * 1e6:.1f} µs for {flops / 1e6:.1f} MFLOP is "
                f"not a measurement of the code (at most {slowest * 1e6:.0f} µs): the machine "
                "was busy; re-run notebook 06 on a quiet one"
            )


def test_log_ticks_label_a_span_of_less_than_a_decade():
    from helpers.kit.plots import log_ticks

    fig, ax = plt.subplots()
    ax.plot([1, 2], [30, 400])
    ax.set_yscale("log")
    log_ticks(ax.yaxis)
    fig.canvas.draw()
    lo, hi = ax.get_ylim()
    labels = [t.get_text() for t in ax.get_yticklabels() if lo <= t.get_position()[1] <= hi]
    assert len(labels) >= 3 and all(labels), labels
    assert "50" in labels and "100" in labels and "200" in labels, labels
