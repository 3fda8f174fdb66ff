"""Notebook 10's helpers: repeating data, head scores, and the shipped trained transformer.

The scores are checked on hand-made attention patterns whose answer is known; the shipped
model is checked for the circuit the lesson teaches (a previous-token head in layer 0 that the
induction heads of layer 1 depend on); and the training command must reproduce such a model.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from helpers.induction import data, scores, training
from helpers.induction.model import AttentionOnlyTransformer

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
        "seed must be an int >= 0, got -1",
    ),
    "weights_of_the_wrong_length": (
        lambda: scores.previous_token_score(torch.ones(1, 2, 5, 5), HALF),
        ValueError,
        r"weights must be \(..., h, T, T\) with T = 2 \* half = 16, got shape \(1, 2, 5, 5\)",
    ),
    "tokens_of_one_dimension": (
        lambda: training.make_model()(torch.zeros(5, dtype=torch.long)),
        ValueError,
        r"tokens must have shape \(B, T\), got shape \(5,\)",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_to_the_induction_helpers_gets_a_clear_error(case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message):
        call()
