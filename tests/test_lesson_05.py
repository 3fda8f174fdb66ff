"""Notebook 05: its exercises, the reverse task with the attention-only model and its training
loop, and the head browser.

That NumPy (04), the separate-projection module (05), the fused module (06) and
``torch.nn.MultiheadAttention`` agree on the same weights is proved in test_equivalence.py.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from notebook_tools import verdict
from torch import nn

from helpers.kit import exercises
from helpers.kit.explorer import explore
from helpers.lessons.nb05.explorers import render_head_browser, strongest_keys
from helpers.lessons.nb05.task import ReverseTask, attention_maps, evaluate, make_model, train
from helpers.masks import causal_mask, padding_mask, to_block


def test_every_exercise_of_notebook_05_rejects_a_stub(capsys):
    names = [e.name for e in exercises.for_notebook("05")]
    assert 2 <= len(names) <= 4
    for name in names:

        def stub(*args):
            raise NotImplementedError

        exercises.check(name, stub)
        assert exercises.RESULTS[name] == "not attempted"
    assert capsys.readouterr().out.count("not attempted yet") == len(names)


def test_linear_exercise_rejects_the_untransposed_weight(capsys):
    def wrong(w, b):
        layer = nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(w))
        return layer

    exercises.check("linear_from_numpy", wrong)
    assert exercises.RESULTS["linear_from_numpy"] == "failed"
    assert "Hint:" in capsys.readouterr().out


def _right_padding(lengths, T):
    return torch.from_numpy(to_block(padding_mask(lengths, T)))


def _right_causal(T):
    return torch.from_numpy(to_block(causal_mask(T)))


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (
            lambda lengths, T: (_right_padding(lengths, T)[:, None], _right_causal(T)),
            "key_padding_mask: expected (B, T) = (2, 5), got (2, 1, 5)",
        ),
        (
            lambda lengths, T: (torch.from_numpy(padding_mask(lengths, T)), _right_causal(T)),
            "this is the course's padding mask, True at the real tokens",
        ),
        (
            lambda lengths, T: (_right_padding(lengths, T), torch.ones(T, T).triu().bool()),
            "attn_mask is True on the diagonal, so a token may not attend to itself",
        ),
        (
            lambda lengths, T: (_right_padding(lengths, T), _right_causal(T)[None]),
            "attn_mask: expected (T, T) = (5, 5), got (1, 5, 5)",
        ),
    ],
    ids=[
        "padding_with_an_extra_axis",
        "padding_not_flipped",
        "causal_blocks_the_diagonal",
        "causal_with_an_extra_axis",
    ],
)
def test_mask_exercise_names_the_slip_it_sees(capsys, wrong, message):
    exercises.check("torch_mha_masks", wrong)
    out = capsys.readouterr().out
    assert exercises.RESULTS["torch_mha_masks"] == "failed"
    assert message in out
    assert "expected True at the padding" not in out and "expected True above" not in out


def test_mask_exercise_accepts_the_flipped_masks():
    assert verdict("torch_mha_masks", lambda n, T: (_right_padding(n, T), _right_causal(T))) == (
        "passed"
    )


# --- the reverse task, the attention-only model and its training loop ---------------------


def test_targets_are_the_inputs_reversed():
    inputs, targets = ReverseTask(vocab_size=5, length=6).batch(4, seed=3)
    assert inputs.shape == targets.shape == (4, 6)
    for row, target in zip(inputs.tolist(), targets.tolist(), strict=True):
        assert target == row[::-1]


def test_batches_are_seeded_and_seeds_differ():
    task = ReverseTask()
    assert torch.equal(task.batch(8, seed=1)[0], task.batch(8, seed=1)[0])
    assert not torch.equal(task.batch(8, seed=1)[0], task.batch(8, seed=2)[0])


def test_tokens_stay_inside_the_vocabulary_and_read_as_letters():
    task = ReverseTask(vocab_size=3, length=4)
    inputs, _ = task.batch(50, seed=0)
    assert inputs.min() >= 0 and inputs.max() < 3
    assert set(task.letters(inputs[0])) <= {"a", "b", "c"}
    assert task.chance == pytest.approx(1 / 3)


def test_task_rejects_a_vocabulary_larger_than_the_alphabet():
    with pytest.raises(ValueError, match="vocab_size"):
        ReverseTask(vocab_size=27)


def test_model_gives_logits_and_per_head_weights():
    task = ReverseTask(vocab_size=7, length=5)
    model = make_model(task, d_model=16, num_heads=2)
    inputs, _ = task.batch(3, seed=0)
    logits, weights = model(inputs, need_weights=True)
    assert logits.shape == (3, 5, 7) and weights.shape == (3, 2, 5, 5)
    assert torch.allclose(weights.sum(-1), torch.ones(3, 2, 5))
    assert attention_maps(model, inputs).shape == (3, 2, 5, 5)


def test_model_names_the_length_when_a_sequence_is_too_long():
    task = ReverseTask(length=5)
    model = make_model(task)
    with pytest.raises(ValueError, match=r"T=5.*\(2, 6\)"):
        model(torch.zeros(2, 6, dtype=torch.long))


def test_training_beats_chance_on_held_out_data():
    task = ReverseTask()
    model = make_model(task)
    before = evaluate(model, task, seed=0)
    losses = train(model, task, steps=80, progress=False)
    after = evaluate(model, task, seed=0)
    assert before < 3 * task.chance  # untrained: near chance
    assert after > 0.9 and losses[-1] < 0.5 * losses[0]


def test_trained_heads_look_at_the_mirrored_position():
    task = ReverseTask(length=6)
    model = make_model(task)
    train(model, task, steps=120, progress=False)
    weights = attention_maps(model, task.batch(20, seed=5)[0])  # (20, h, 6, 6)
    strongest = weights.mean(axis=(0, 1)).argmax(-1).tolist()
    assert strongest == [5, 4, 3, 2, 1, 0]


def test_training_is_deterministic_and_restores_the_thread_count():
    task = ReverseTask(length=4)
    threads = torch.get_num_threads()
    first = train(make_model(task, seed=3), task, steps=5, progress=False)
    second = train(make_model(task, seed=3), task, steps=5, progress=False)
    assert first == second
    assert torch.get_num_threads() == threads


# --- the head browser ----------------------------------------------------------------------


def _maps():
    gen = np.random.default_rng(0)
    raw = gen.random((3, 2, 4, 4))
    return {
        "untrained": raw / raw.sum(-1, keepdims=True),
        "trained": np.eye(4)[::-1] * np.ones((3, 2, 1, 1)),
    }


def test_head_browser_draws_both_stages_and_names_the_strongest_keys():
    letters = [list("abcd"), list("bcda"), list("cdab")]
    fig, text = render_head_browser(_maps(), letters, head=1, example=2)
    assert len(fig.axes) == 3, "two stages and one shared colour bar"
    assert fig.axes[1].get_title() == "trained, head 1"
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list("cdab")
    assert "trained: query i looks most at key [3, 2, 1, 0]" in text


def test_head_browser_names_an_out_of_range_head():
    with pytest.raises(ValueError, match=r"head must lie in 0\.\.1, got 2"):
        render_head_browser(_maps(), [list("abcd")] * 3, head=2, example=0)


# Each query's strongest keys, compared as the course prints weights (two decimals): a tie
# names every tied key, never the first of them as argmax would.
STRONGEST = [
    pytest.param([[0.1, 0.9], [0.7, 0.3]], [(1,), (0,)], id="a_single_largest_key_is_named_alone"),
    pytest.param([[0.4, 0.4, 0.2]], [(0, 1)], id="two_keys_tied_for_the_largest_are_both_named"),
    pytest.param(
        [[0.2, 0.399, 0.401]], [(1, 2)], id="keys_that_print_alike_to_two_decimals_are_tied"
    ),
    pytest.param([[0.2, 0.394, 0.406]], [(2,)], id="keys_that_print_apart_are_not_tied"),
    pytest.param([[0.25] * 4], [(0, 1, 2, 3)], id="an_even_row_names_every_key"),
]


@pytest.mark.parametrize(("weights", "want"), STRONGEST)
def test_strongest_keys_name_every_key_tied_for_the_largest_weight(weights, want):
    assert strongest_keys(np.array(weights)) == want


def test_head_browser_caption_names_every_tied_key_and_says_what_a_tie_means():
    maps = {"stage": np.array([[[[0.5, 0.5, 0.0], [0.1, 0.8, 0.1], [1 / 3] * 3]]])}  # (1, 1, 3, 3)
    _, text = render_head_browser(maps, [list("abc")], head=0, example=0)
    assert "stage: query i looks most at key [(0, 1), 1, (0, 1, 2)]" in text
    assert "(i, j): keys tied for the largest weight as printed (two decimals)" in text
    _, text = render_head_browser(_maps(), [list("abcd")] * 3, head=0, example=0)
    assert "tied" not in text  # no tie, no note: the caption reads as before


def test_head_browser_explorer_redraws_when_driven_headless():
    letters = [list("abcd"), list("bcda"), list("cdab")]
    maps = _maps()
    head = widgets.IntSlider(value=0, min=0, max=1)
    example = widgets.IntSlider(value=0, min=0, max=2)
    box = explore(
        lambda head, example: render_head_browser(maps, letters, head, example),
        head=head,
        example=example,
    )
    first_image, first_caption = box.image.value, box.caption.value
    example.value = 1
    assert box.image.value != first_image and box.caption.value != first_caption
    head.value = 1
    assert "head 1" not in first_caption
