"""The reverse task, the attention-only model and its training loop (notebook 05)."""

from __future__ import annotations

import pytest
import torch

from helpers.tasks import ReverseTask, attention_maps, evaluate, make_model, train


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
