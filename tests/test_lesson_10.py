"""Notebook 10's helpers: repeating data, head scores, and the shipped trained transformer.

The scores are checked on hand-made attention patterns whose answer is known; the shipped
model is checked for the circuit the lesson teaches (a previous-token head in layer 0 that the
induction heads of layer 1 depend on); and the training command must reproduce such a model.
Then the notebook's exercises (each rejects a stub and plausible wrong answers) and its
explorer (rendered as a function, and driven headless).
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys

import ipywidgets as widgets
import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from notebook_tools import verdict

from helpers.kit import exercises
from helpers.kit.explorer import RENDER_RC, explore, figure_to_png
from helpers.lessons.nb10 import checkers as nb10_checkers
from helpers.lessons.nb10 import data, scores, training
from helpers.lessons.nb10 import explorers as heads_trained
from helpers.lessons.nb10.model import AttentionOnlyTransformer

HALF, VOCAB = 8, 20

# What the shipped model must show (it shows: first half 4.27, repeat 0.10; previous-token
# head 0.67; induction head 0.91; ablations raise the repeat loss 34x and 7x).
MIN_INDUCTION, MIN_PREVIOUS = 0.8, 0.5
MAX_REPEAT_FRACTION = 0.1  # repeat loss at most this fraction of the first half's
MIN_ABLATION_FACTOR = 3.0  # zeroing the top induction or previous-token head


def test_the_second_half_is_the_first_rotated_by_each_sequences_shift():
    tokens, shifts = data.repeated_sequences(50, HALF, VOCAB, seed=0)
    first, second = tokens[:, :HALF], tokens[:, HALF:]
    for row in range(50):
        assert len(set(first[row].tolist())) == HALF  # distinct: each token has one earlier copy
        assert torch.equal(second[row], first[row].roll(-int(shifts[row])))
    assert len(set(shifts.tolist())) > 1


def test_without_a_random_shift_the_repeat_always_sits_half_a_sequence_back():
    tokens, shifts = data.repeated_sequences(10, HALF, VOCAB, seed=0, random_shift=False)
    assert torch.equal(tokens[:, HALF:], tokens[:, :HALF]) and not shifts.any()


def test_predictable_positions_are_the_second_half_but_the_wrap():
    mask = data.predictable(torch.tensor([0, 3]), 4)  # T = 8, 7 predictions
    assert mask.tolist() == [
        [False] * 4 + [True, True, True],  # shift 0: the wrap would come after the end
        [False] * 4 + [False, True, True],  # shift 3: token 4 is first[3], the last one
    ]


def hand_made(kind: str, tokens: torch.Tensor) -> torch.Tensor:
    """Weights (B, 1, T, T) that do exactly one thing."""
    B, T = tokens.shape
    weights = torch.zeros(B, 1, T, T)
    for b in range(B):
        for t in range(T):
            if kind == "previous" and t > 0:
                weights[b, 0, t, t - 1] = 1.0
            elif kind == "induction" and t >= HALF:
                earlier = (tokens[b, :HALF] == tokens[b, t]).nonzero().item()
                weights[b, 0, t, min(earlier + 1, t)] = 1.0
            else:
                weights[b, 0, t, : t + 1] = 1.0 / (t + 1)
    return weights


def test_a_perfect_previous_token_map_scores_one_and_a_uniform_map_scores_little():
    tokens, _ = data.repeated_sequences(4, HALF, VOCAB, seed=1)
    assert scores.previous_token_score(hand_made("previous", tokens), HALF).eq(1).all()
    assert scores.previous_token_score(hand_made("uniform", tokens), HALF).lt(0.15).all()


def test_a_perfect_induction_map_scores_one_and_a_previous_token_map_zero():
    tokens, _ = data.repeated_sequences(4, HALF, VOCAB, seed=2)
    assert scores.induction_score(hand_made("induction", tokens), tokens, HALF).eq(1).all()
    assert scores.induction_score(hand_made("previous", tokens), tokens, HALF).lt(0.2).all()


@pytest.mark.parametrize("missing", [[HALF], [HALF, HALF + 3]], ids=["one", "two"])
def test_a_query_whose_token_has_no_earlier_copy_is_left_out_of_the_induction_score(missing):
    tokens, _ = data.repeated_sequences(3, HALF, VOCAB, seed=3)
    weights = hand_made("induction", tokens)
    tokens[0, missing] = VOCAB  # ids the first half cannot hold: no earlier copy
    for t in missing:  # it looks at key 0: no weight after an imagined copy at position 0
        weights[0, 0, t] = 0.0
        weights[0, 0, t, 0] = 1.0
    got = scores.induction_score(weights, tokens, HALF)  # the rest still score exactly 1
    assert got.eq(1).all(), got.flatten().tolist()


def check_circuit(model: AttentionOnlyTransformer) -> None:
    """The checks the lesson's story rests on, for the shipped model and a retrained one."""
    result = training.evaluate(model)
    assert result["repeat"] <= MAX_REPEAT_FRACTION * result["first_half"]
    induction, previous = result["induction"], result["previous_token"]
    assert induction[1].max() >= MIN_INDUCTION  # an induction head in layer 1
    assert previous[0].max() >= MIN_PREVIOUS  # a previous-token head in layer 0
    for layer, head in ((1, int(induction[1].argmax())), (0, int(previous[0].argmax()))):
        assert result["ablated"][(layer, head)] >= MIN_ABLATION_FACTOR * result["repeat"]


def test_the_shipped_model_has_a_previous_token_head_feeding_induction_heads():
    check_circuit(training.load_trained())


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32])
def test_token_ids_of_any_integer_dtype_give_what_int64_ids_give(dtype):
    model = training.load_trained()
    ids = data.repeated_sequences(2, HALF, model.token_embedding.num_embeddings, seed=3)[0]
    expected, _ = model(ids.long())
    logits, _ = model(ids.to(dtype))
    assert torch.equal(logits, expected)


def test_the_training_command_reproduces_a_model_that_passes_the_same_checks(tmp_path):
    out = tmp_path / "weights.pt"
    subprocess.run([sys.executable, "-m", "tools.train_induction", "--out", str(out)],
                   check=True, capture_output=True, timeout=600)  # fmt: skip
    model = training.make_model()
    model.load_state_dict(torch.load(out, weights_only=True))
    check_circuit(model.eval())


BAD = {
    "more_distinct_tokens_than_the_vocabulary": (
        lambda: data.repeated_sequences(2, 30, 20, seed=0),
        ValueError,
        "half=30 distinct tokens need vocab >= 30, got vocab=20",
    ),
    "a_negative_seed": (
        lambda: data.repeated_sequences(2, 4, 20, seed=-1),
        ValueError,
        "seed must be 0 or more, got -1",
    ),
    "weights_of_the_wrong_length": (
        lambda: scores.previous_token_score(torch.ones(1, 2, 5, 5), HALF),
        ValueError,
        r"weights must be \(..., h, T, T\) with T = 2 \* half = 16, got shape \(1, 2, 5, 5\)",
    ),
    "an_ablated_head_that_does_not_exist": (
        lambda: training.make_model()(torch.zeros(1, 4, dtype=torch.long), ablate={(1, 4)}),
        ValueError,
        r"ablate holds \(layer, head\) pairs with layer in 0..1 and head in 0..3, got \(1, 4\)",
    ),
    "an_ablated_layer_that_does_not_exist": (
        lambda: training.make_model()(torch.zeros(1, 4, dtype=torch.long), ablate={(2, 0)}),
        ValueError,
        r"got \(2, 0\)",
    ),
    "tokens_of_one_dimension": (
        lambda: training.make_model()(torch.zeros(5, dtype=torch.long)),
        ValueError,
        r"tokens must have shape \(B, T\), got shape \(5,\)",
    ),
    "tokens_on_another_device": (
        lambda: training.make_model()(torch.zeros(1, 4, dtype=torch.long, device="meta")),
        ValueError,
        r"tokens are on meta but the model is on cpu, shape \(1, 4\)",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_to_the_induction_helpers_gets_a_clear_error(case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message):
        call()


# --- notebook 10's exercises -----------------------------------------------------------------

EXERCISES = ("previous_token_score", "induction_score", "ablate_head")


def test_notebook_10_registers_its_three_exercises():
    assert {e.name for e in exercises.for_notebook("10")} == set(EXERCISES)


@pytest.mark.parametrize("name", EXERCISES)
def test_every_exercise_of_notebook_10_reports_a_stub_as_not_attempted(name):
    def stub(*args):
        raise NotImplementedError

    assert verdict(name, stub) == "not attempted"


def _previous(weights, half, offset=1, queries=None):
    q = torch.arange(half, 2 * half) if queries is None else queries
    return weights[..., q, q - offset].mean(dim=-1)


def _induction(weights, tokens, half, after=1, keep_wrap=False):
    B, T = tokens.shape
    out = torch.zeros(B, weights.shape[1], dtype=weights.dtype)
    for b in range(B):
        picked = []
        for t in range(half, T):
            j = int((tokens[b, :half] == tokens[b, t]).nonzero())
            if j + 1 < half or keep_wrap:
                picked.append(weights[b, :, t, min(j + after, t)])
        out[b] = torch.stack(picked).mean(dim=0)
    return out


def _ablate(model, layer, head, rows=False, in_place=False):
    ablated = model if in_place else copy.deepcopy(model)
    attention = ablated.attention[layer]
    d_k = attention.d_k
    with torch.no_grad():
        if rows:  # zeroes output features of the layer, not the head's input to out_proj
            attention.out_proj.weight[head * d_k : (head + 1) * d_k] = 0.0
        else:
            attention.out_proj.weight[:, head * d_k : (head + 1) * d_k] = 0.0
    return ablated


def _ablate_value_rows(model, layer, head):
    """Zero the head's value projection instead: its output is zero too, so this is right."""
    ablated = copy.deepcopy(model)
    attention = ablated.attention[layer]
    D, d_k = attention.d_model, attention.d_k
    with torch.no_grad():
        rows = slice(2 * D + head * d_k, 2 * D + (head + 1) * d_k)
        attention.qkv_proj.weight[rows] = 0.0
        attention.qkv_proj.bias[rows] = 0.0
    return ablated


RIGHT = {
    "previous_token_score": [scores.previous_token_score, _previous],
    "induction_score": [scores.induction_score, _induction],
    "ablate_head": [_ablate, _ablate_value_rows],
}
WRONG = {
    "previous_token_score": {
        "every_query": lambda w, half: _previous(w, half, queries=torch.arange(1, 2 * half)),
        "the_diagonal": lambda w, half: _previous(w, half, offset=0),
        "two_back": lambda w, half: _previous(w, half, offset=2),
        "sums_instead_of_averaging": lambda w, half: _previous(w, half) * half,
        "the_notebook_s_half_hard_coded": lambda w, half: _previous(w, 6),
    },
    "induction_score": {
        "the_earlier_copy_itself": lambda w, tok, half: _induction(w, tok, half, after=0),
        "keeps_the_wrap": lambda w, tok, half: _induction(w, tok, half, keep_wrap=True),
        "averages_over_sequences": lambda w, tok, half: scores.induction_score(w, tok, half).mean(
            0
        ),
    },
    "ablate_head": {
        "zeroes_rows_not_columns": lambda m, layer, head: _ablate(m, layer, head, rows=True),
        "edits_the_original": lambda m, layer, head: _ablate(m, layer, head, in_place=True),
        "wrong_layer": lambda m, layer, head: _ablate(m, 1 - layer, head),
        "always_layer_0": lambda m, layer, head: _ablate(m, 0, head),
    },
}


@pytest.mark.parametrize(
    ("name", "answer"), [(n, a) for n, answers in RIGHT.items() for a in answers]
)
def test_notebook_10_exercises_pass_right_answers(name, answer):
    assert verdict(name, answer) == "passed"


@pytest.mark.parametrize(
    ("name", "mistake"), [(n, m) for n, mistakes in WRONG.items() for m in mistakes]
)
def test_notebook_10_exercises_reject_plausible_wrong_answers(name, mistake):
    assert verdict(name, WRONG[name][mistake]) == "failed"


def test_an_ablation_that_edits_the_original_is_caught_and_leaves_the_checkers_model_whole():
    assert verdict("ablate_head", WRONG["ablate_head"]["edits_the_original"]) == "failed"
    model, tokens = nb10_checkers._trained_and_tokens()
    with torch.no_grad():
        assert torch.equal(model(tokens)[0], training.load_trained()(tokens)[0]), (
            "a learner's mistake damaged the checker's model"
        )


CAUGHT_BY = [
    ("previous_token_score", "every_query", 3, "averages over every query"),
    ("previous_token_score", "the_notebook_s_half_hard_coded", 4, "not from the notebook's 6"),
    ("induction_score", "the_earlier_copy_itself", 2, "should score 1"),
    ("induction_score", "keeps_the_wrap", 3, "every second-half query counted"),
    ("induction_score", "averages_over_sequences", 1, "expected (B, h) = (4, 3)"),
    ("ablate_head", "zeroes_rows_not_columns", 2, "zero that head's columns of out_proj.weight"),
]


@pytest.mark.parametrize(
    ("name", "mistake", "check", "message"), CAUGHT_BY, ids=[c[1] for c in CAUGHT_BY]
)
def test_each_check_of_notebook_10s_exercises_says_what_is_wrong(
    name, mistake, check, message, capsys
):
    exercises.check(name, WRONG[name][mistake])
    out = capsys.readouterr().out
    assert f"check {check} (of" in out and message in out, out


# --- notebook 10's explorer ------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained_and_sequences():
    tokens, shifts = data.repeated_sequences(64, training.CONFIG["half"],
                                             training.CONFIG["vocab"], seed=7)  # fmt: skip
    return training.load_trained(), tokens, shifts


def test_ablation_choices_offer_nothing_every_head_and_every_layer():
    choices = heads_trained.ablation_choices(2, 4)
    assert list(choices)[0] == "nothing" and choices["nothing"] == frozenset()
    assert choices["layer 1 head 3"] == frozenset({(1, 3)})
    assert choices["all of layer 0"] == frozenset({(0, 0), (0, 1), (0, 2), (0, 3)})
    assert len(choices) == 1 + 8 + 2


def test_explorer_shows_the_induction_stripe_vanish_without_the_previous_token_head(
    trained_and_sequences,
):
    model, tokens, shifts = trained_and_sequences
    fig, text = heads_trained.render_trained_heads(model, tokens, shifts, 1, 2, 5, "nothing")
    assert "layer 1 head 2 here: previous-token score" in text
    clean = float(text.split("induction score ")[1].split()[0])
    assert clean > 0.8 and fig.axes[0].get_title() == "layer 1, head 2"
    fig, text = heads_trained.render_trained_heads(model, tokens, shifts, 1, 2, 5, "layer 0 head 0")
    assert float(text.split("induction score ")[1].split()[0]) < 0.3
    without, ablated = (float(x) for x in re.findall(r"(\d+\.\d+) with", text))
    assert ablated > 10 * without, text
    assert len(fig.axes[1].get_lines()) >= 2  # the loss with and without the ablation


def test_explorer_says_when_the_head_it_shows_is_itself_switched_off(trained_and_sequences):
    model, tokens, shifts = trained_and_sequences
    fig, _ = heads_trained.render_trained_heads(model, tokens, shifts, 0, 0, 0, "all of layer 0")
    assert "its output is zeroed" in fig.axes[0].get_title()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((2, 0, 0, "nothing"), "layer must be an int in 0..1, got 2"),
        ((0, 4, 0, "nothing"), "head must be an int in 0..3, got 4"),
        ((0, 0, 64, "nothing"), "example must be an int in 0..63, got 64"),
        ((0, 0, 0, "layer 2 head 0"), "ablate must be one of"),
    ],
)
def test_explorer_names_the_bad_argument(trained_and_sequences, args, message):
    model, tokens, shifts = trained_and_sequences
    with pytest.raises(ValueError, match=re.escape(message)):
        heads_trained.render_trained_heads(model, tokens, shifts, *args)


@pytest.mark.parametrize("change", ["shifts_of_another_batch", "shifts_plus_one"])
def test_explorer_refuses_shifts_that_are_not_the_tokens_rotation(trained_and_sequences, change):
    model, tokens, shifts = trained_and_sequences
    other = (shifts.roll(1) if change == "shifts_of_another_batch" else shifts + 1) % (
        tokens.shape[1] // 2
    )
    if torch.equal(other, shifts):
        other = (shifts + 1) % (tokens.shape[1] // 2)
    with pytest.raises(
        ValueError, match=r"tokens and shifts must come from one repeated_sequences"
    ):
        heads_trained.render_trained_heads(model, tokens, other, 0, 0, 0, "nothing")
    plt.close("all")


def test_explorer_takes_numpy_integers_and_refuses_bools_as_a_type_error(trained_and_sequences):
    model, tokens, shifts = trained_and_sequences
    heads_trained.render_trained_heads(
        model, tokens, shifts, np.int64(1), np.int64(0), 0, "nothing"
    )
    with pytest.raises(TypeError, match="layer must be an int, got bool True"):
        heads_trained.render_trained_heads(model, tokens, shifts, True, 0, 0, "nothing")
    plt.close("all")


def test_explorer_rejects_tokens_and_shifts_that_do_not_match(trained_and_sequences):
    model, tokens, shifts = trained_and_sequences
    with pytest.raises(ValueError, match=r"tokens must be \(B, 2 L\) and shifts \(B,\)"):
        heads_trained.render_trained_heads(model, tokens, shifts[:3], 0, 0, 0, "nothing")


def test_the_kept_figure_redrawn_in_place_draws_what_a_new_figure_draws(trained_and_sequences):
    model, tokens, shifts = trained_and_sequences
    kept = heads_trained.TrainedHeadsFigure(model, tokens, shifts)
    moves = [(1, 2, 5, "nothing"), (1, 2, 5, "layer 0 head 0"), (0, 0, 0, "all of layer 0"),
             (0, 3, 61, "layer 0 head 2"), (1, 1, 63, "layer 1 head 2"),
             (1, 2, 5, "nothing")]  # fmt: skip
    figures = set()
    for move in moves:
        with pytest.raises(ValueError):  # a bad value between two moves leaves nothing behind
            kept(*move[:3], "layer 9 head 9")
        with mpl.rc_context(RENDER_RC):
            fresh_fig, fresh_text = heads_trained.render_trained_heads(model, tokens, shifts, *move)
            fresh = figure_to_png(fresh_fig)
            kept_fig, kept_text = kept(*move)
            figures.add(id(kept_fig))
            assert figure_to_png(kept_fig) == fresh and kept_text == fresh_text, move
        layer, head, example, ablate = move
        heatmap, losses = kept_fig.axes[:2]
        _, maps = model(tokens[example : example + 1], ablate=kept.choices[ablate])
        assert (heatmap.collections[0].get_array() == maps[layer][0, head].detach().numpy()).all()
        labels = [str(t) for t in tokens[example].tolist()]
        assert [t.get_text() for t in heatmap.get_yticklabels()] == labels
        assert [t.get_text() for t in heatmap.get_xticklabels()] == labels
        curves = ["nothing ablated"] + ([f"{ablate} ablated"] if ablate != "nothing" else [])
        shown = [line.get_label() for line in losses.get_lines() if line.get_visible()]
        assert [label for label in shown if not label.startswith("_")] == curves + ["log(64)"]
        assert [t.get_text() for t in losses.get_legend().get_texts()] == curves + ["log(64)"]
    assert len(figures) == 1  # one figure, redrawn


def test_trained_heads_explorer_redraws_when_driven_headless(trained_and_sequences):
    model, tokens, shifts = trained_and_sequences
    ablate = widgets.Dropdown(options=list(heads_trained.ablation_choices(2, 4)), value="nothing")
    head = widgets.ToggleButtons(options=[0, 1, 2, 3], value=2)
    box = explore(
        heads_trained.TrainedHeadsFigure(model, tokens, shifts),
        layer=widgets.ToggleButtons(options=[0, 1], value=1),
        head=head,
        example=widgets.IntSlider(value=5, min=0, max=63),
        ablate=ablate,
    )
    first, caption = box.image.value, box.caption.value
    ablate.value = "layer 0 head 0"
    assert box.image.value != first and "with layer 0 head 0 ablated" in box.caption.value
    assert box.caption.value != caption
    head.value = 0
    assert "layer 1 head 0 here" in box.caption.value
