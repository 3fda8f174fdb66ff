"""Notebook 15's lesson code: the trained model under a window and sinks, the exercises, the
cost counts and the explorers.

The library's own proofs (sinks, StreamingLLM's mask, the indexer, top-k against masked dense
attention) are in ``tests/test_sparse.py``. Here each lesson module is checked against an
independent computation: the masked forward against notebook 10's own forward and against SDPA
run layer by layer, the cost counts against the published sizes multiplied out by hand.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F
from notebook_tools import verdict

from helpers.kit import exercises
from helpers.kit.env import single_thread
from helpers.kit.explorer import explore
from helpers.lessons.nb10 import training
from helpers.lessons.nb10.data import predictable, repeated_sequences
from helpers.lessons.nb15 import explorers as ex
from helpers.lessons.nb15.cost import DSA, per_token_cost
from helpers.lessons.nb15.streaming import logits_with_keep, next_token_loss_with_keep
from helpers.rope import apply_rope
from helpers.sparse import streaming_keep


@pytest.fixture(scope="module")
def model():
    return training.load_trained()


@pytest.fixture(scope="module")
def held_out():
    return repeated_sequences(64, training.CONFIG["half"], training.CONFIG["vocab"], seed=7)


# --- the trained model under a mask ---------------------------------------------------------


def test_the_causal_mask_gives_the_model_s_own_logits(model, held_out):
    tokens, _ = held_out
    T = tokens.shape[1]
    with torch.no_grad(), single_thread():
        mine = logits_with_keep(model, tokens, torch.ones(T, T, dtype=torch.bool).tril())
        theirs, _ = model(tokens)
    assert torch.equal(mine, theirs)


def _sdpa_forward(model, tokens, keep):
    """The same model written with PyTorch's SDPA and a boolean mask, layer by layer."""
    positions = torch.arange(tokens.shape[1])
    x = model.token_embedding(tokens)
    for attention in model.attention:
        q, k, v = attention.project_qkv(x, x, x)
        q, k = apply_rope(q, positions), apply_rope(k, positions)
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        B, h, T, d = heads.shape
        x = x + attention.out_proj(heads.transpose(1, 2).reshape(B, T, h * d))
    return model.readout(x)


@pytest.mark.parametrize(("num_sink", "window"), [(0, 8), (4, 12), (1, 1), (2, 40)])
def test_a_window_and_sinks_run_as_sdpa_with_the_same_mask(model, held_out, num_sink, window):
    tokens, _ = held_out
    T = tokens.shape[1]
    keep = streaming_keep(T, T, num_sink, window)
    with torch.no_grad(), single_thread():
        got = logits_with_keep(model, tokens, keep)
        want = _sdpa_forward(model, tokens, keep)
    assert (got - want).abs().max() < 1e-4


def test_a_plain_window_beats_four_sinks_with_the_same_keys_on_this_model(model, held_out):
    """What the notebook says plainly: notebook 10's model has no sinks to keep."""
    tokens, shifts = held_out
    T, repeat = tokens.shape[1], predictable(shifts, training.CONFIG["half"])
    with torch.no_grad(), single_thread():
        for K in (12, 20, 28):
            plain = next_token_loss_with_keep(model, tokens, streaming_keep(T, T, 0, K))
            sinks = next_token_loss_with_keep(model, tokens, streaming_keep(T, T, 4, K - 4))
            assert plain[repeat].mean() < sinks[repeat].mean()


def test_no_head_of_notebook_10_s_model_is_a_sink(model, held_out):
    tokens, _ = held_out
    with torch.no_grad(), single_thread():
        _, maps = model(tokens)
    for weights in maps:
        assert weights[:, :, 1:, 0].mean(dim=(0, 2)).max() < 0.2  # an even spread: 0.099


def test_a_mask_of_the_wrong_shape_is_refused_naming_keep(model, held_out):
    tokens, _ = held_out
    with pytest.raises(ValueError, match="keep"):
        logits_with_keep(model, tokens, torch.ones(5, 5, dtype=torch.bool))


# --- exercises -----------------------------------------------------------------------------------

EXERCISES = ("streaming_mask", "sink_weights", "topk_attend")


def test_notebook_15_registers_its_three_exercises_in_the_notebook_s_order():
    assert [e.name for e in exercises.for_notebook("15")] == list(EXERCISES)


def _mask(T, num_sink, window):
    t, s = torch.arange(T).view(T, 1), torch.arange(T).view(1, T)
    return (s <= t) & ((s < num_sink) | (t - s < window))


def _sink(scores, sink):
    top = max(scores.max().item(), sink)
    e = (scores - top).exp()
    return e / (e.sum() + math.exp(sink - top))


def _topk(q, k, v, index_scores, top_k):
    idx = index_scores.topk(top_k).indices
    return torch.softmax(k[idx] @ q / math.sqrt(q.shape[0]), dim=0) @ v[idx]


def _dense_masked(q, k, v, index_scores, top_k):
    scores = k @ q / math.sqrt(q.shape[0])
    drop = torch.ones_like(scores, dtype=torch.bool)
    drop[index_scores.topk(top_k).indices] = False
    return torch.softmax(scores.masked_fill(drop, -math.inf), dim=0) @ v


RIGHT = {
    "streaming_mask": [_mask, lambda T, n, w: streaming_keep(T, T, n, w)],
    "sink_weights": [_sink, lambda s, sink: torch.softmax(torch.cat([s, s.new_tensor([sink])]), 0)[:-1]],
    "topk_attend": [_topk],
}  # fmt: skip
WRONG = {
    "streaming_mask": {
        "window_one_too_wide": lambda T, n, w: _mask(T, n, w + 1),
        "sinks_not_causal": lambda T, n, w: _mask(T, 0, w) | (torch.arange(T) < n),
        "no_sinks": lambda T, n, w: _mask(T, 0, w),
    },
    "sink_weights": {
        "no_sink": lambda s, sink: torch.softmax(s, 0),
        "unstable": lambda s, sink: s.exp() / (s.exp().sum() + math.exp(sink)),
        "sink_column_kept": lambda s, sink: torch.softmax(torch.cat([s, s.new_tensor([sink])]), 0),
    },
    "topk_attend": {
        "chosen_by_q_dot_k": lambda q, k, v, ix, top_k: _topk(q, k, v, k @ q, top_k),
        "unscaled": lambda q, k, v, ix, top_k: _topk(q * math.sqrt(q.shape[0]), k, v, ix, top_k),
        "dense_then_masked": _dense_masked,
    },
}  # fmt: skip


@pytest.mark.parametrize("name", EXERCISES)
def test_every_exercise_of_notebook_15_reports_a_stub_as_not_attempted(name):
    def stub(*args):
        raise NotImplementedError

    assert verdict(name, stub) == "not attempted"


@pytest.mark.parametrize(
    ("name", "answer"), [(n, a) for n, answers in RIGHT.items() for a in answers]
)
def test_notebook_15_exercises_pass_right_answers(name, answer):
    assert verdict(name, answer) == "passed"


@pytest.mark.parametrize(("name", "mistake"), [(n, m) for n, ms in WRONG.items() for m in ms])
def test_notebook_15_exercises_reject_typical_wrong_answers(name, mistake):
    assert verdict(name, WRONG[name][mistake]) == "failed"


CAUGHT_BY = [  # (exercise, mistake, what the learner reads)
    ("streaming_mask", "window_one_too_wide", "counts the query's own position"),
    ("streaming_mask", "sinks_not_causal", "only where they are causal"),
    ("sink_weights", "no_sink", "Add exp(sink)"),
    ("topk_attend", "chosen_by_q_dot_k", "The indexer decides"),
    ("topk_attend", "unscaled", "1 / √d"),
    ("topk_attend", "dense_then_masked", "Gather first"),
]


@pytest.mark.parametrize(("name", "mistake", "says"), CAUGHT_BY, ids=[c[1] for c in CAUGHT_BY])
def test_each_typical_slip_gets_its_own_hint(name, mistake, says, capsys):
    exercises.check(name, WRONG[name][mistake])
    assert says in capsys.readouterr().out


# --- cost counts -------------------------------------------------------------------------------


def test_per_token_costs_are_deepseek_v3_2_s_sizes_multiplied_out():
    T = 1_048_576
    c = per_token_cost(T, window=4_096, top_k=2_048)
    per_key_bytes, per_key_flops = (512 + 64) * 2, 2 * 128 * (2 * 512 + 64)
    assert c["dense"] == {"keys": T, "bytes": T * per_key_bytes, "flops": T * per_key_flops}
    assert c["window"]["keys"] == 4_096 and c["window"]["bytes"] == 4_096 * per_key_bytes
    top = c["top-k"]
    assert top["indexer_bytes"] == T * (128 + 4)
    assert top["indexer_flops"] == T * (2 * 64 * 128 + 2 * 64)
    assert top["bytes"] == 2_048 * per_key_bytes + T * 132
    assert round(c["dense"]["bytes"] / top["bytes"], 1) == 8.6  # the notebook's figure
    assert DSA.top_k == 2_048 and DSA.index_heads == 64 and DSA.index_dim == 128


def test_below_k_and_w_every_way_reads_every_key():
    c = per_token_cost(100, window=4_096, top_k=2_048)
    assert c["dense"]["keys"] == c["window"]["keys"] == c["top-k"]["keys"] == 100
    assert c["top-k"]["bytes"] > c["dense"]["bytes"]  # the indexer comes on top


# --- explorers ---------------------------------------------------------------------------------


def test_the_keep_picture_counts_what_the_masks_keep():
    fig, text = ex.render_keep(16, 4, 2, 4)
    plt.close(fig)
    stream = int(streaming_keep(16, 16, 2, 4).sum())
    assert f"StreamingLLM {stream}" in text and "causal attention reads 136" in text
    assert "the last query reads 6 keys (StreamingLLM) and 4 (top-k) of its 16" in text


def test_topk_keep_takes_the_best_causal_keys_of_each_row():
    scores = torch.rand(9, 9, generator=torch.Generator().manual_seed(3))
    keep = ex.topk_keep(scores, 3)
    assert keep.sum(-1).tolist() == [1, 2, 3, 3, 3, 3, 3, 3, 3]
    assert not keep.triu(1).any()
    for t in range(9):
        allowed = scores[t, : t + 1]
        assert set(keep[t].nonzero().flatten().tolist()) == set(
            allowed.topk(min(3, t + 1)).indices.tolist()
        )


def test_keep_explorer_redraws_when_driven_headless():
    controls = dict(
        T=widgets.SelectionSlider(options=ex.LENGTHS, value=16),
        window=widgets.SelectionSlider(options=ex.WINDOWS, value=4),
        num_sink=widgets.SelectionSlider(options=ex.SINKS, value=2),
        top_k=widgets.SelectionSlider(options=ex.TOP_KS, value=4),
    )
    box = explore(ex.render_keep, **controls)
    controls["T"].value = 32
    assert "T = 32" in box.caption.value and box.image.value


def test_cost_explorer_redraws_when_driven_headless():
    quantity = widgets.ToggleButtons(options=ex.QUANTITIES, value="bytes")
    box = explore(ex.render_cost, quantity=quantity,
                  window=widgets.Dropdown(options=ex.COST_WINDOWS, value=4_096),
                  top_k=widgets.Dropdown(options=ex.COST_TOP_KS, value=2_048))  # fmt: skip
    assert "dense / top-k: 8.6x" in box.caption.value
    quantity.value = "keys"
    assert "dense / top-k: 512.0x" in box.caption.value


@pytest.mark.parametrize(
    ("render", "args", "name"),
    [
        (ex.render_keep, (17, 4, 2, 4), "T"),
        (ex.render_keep, (16, 3, 2, 4), "window"),
        (ex.render_keep, (16, 4, -1, 4), "num_sink"),
        (ex.render_cost, ("time", 4_096, 2_048), "quantity"),
        (ex.render_cost, ("bytes", 4_096, 3), "top_k"),
    ],
)
def test_explorers_reject_values_off_their_controls_naming_them(render, args, name):
    with pytest.raises(ValueError, match=name):
        render(*args)
