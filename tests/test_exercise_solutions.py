"""Every exercise has a hidden solution in its notebook, and every solution passes its checker."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from conftest import NOTEBOOKS
from notebook_tools import number, read, solutions

from helpers.kit import exercises
from helpers.numpy_attention import scaled_dot_product_attention, softmax


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_solution_in_the_notebook_passes_its_checker(path):
    names = [e.name for e in exercises.for_notebook(number(path))]
    blocks = solutions(read(path))
    assert len(blocks) >= len(names), f"{len(names)} exercises but {len(blocks)} solutions"
    exercises.RESULTS.clear()
    for block in blocks:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(block, f"{path.name}:solution", "exec"), {})
    assert {n: exercises.RESULTS.get(n) for n in names} == {n: "passed" for n in names}


def test_checker_reports_a_stub_as_not_attempted_without_raising(capsys):
    def stub(x):
        raise NotImplementedError

    exercises.check("row_sums", stub)
    assert "not attempted yet" in capsys.readouterr().out
    assert exercises.RESULTS["row_sums"] == "not attempted"


def test_checker_names_an_earlier_exercise_s_stub_that_the_answer_calls(capsys):
    def stable_softmax(x):
        raise NotImplementedError

    def attend_all(q, k, v):
        return stable_softmax(q @ k.T) @ v

    exercises.check("attend_all_queries", attend_all)
    out = capsys.readouterr().out
    assert "calls `stable_softmax`, which still raises NotImplementedError" in out
    assert "not attempted yet" not in out


def test_checker_asks_about_a_forgotten_return(capsys):
    def row_sums(w):
        w.sum(axis=-1)

    exercises.check("row_sums", row_sums)
    assert "returned None: did you forget `return`?" in capsys.readouterr().out
    exercises.check("row_sums", lambda x: x.sum(axis=0))
    assert "returned None" not in capsys.readouterr().out


def test_checker_reports_a_wrong_answer_with_a_hint(capsys):
    exercises.check("row_sums", lambda x: x.sum(axis=0))
    assert exercises.RESULTS["row_sums"] == "failed"
    out = capsys.readouterr().out
    assert "failed" in out and "Hint:" in out


def test_checker_passes_a_right_answer(capsys):
    exercises.check("row_sums", lambda x: x.sum(axis=-1))
    assert exercises.RESULTS["row_sums"] == "passed"
    assert "passed" in capsys.readouterr().out


def test_checker_names_the_known_exercises_for_an_unknown_name():
    with pytest.raises(ValueError, match="row_sums"):
        exercises.check("no_such_exercise", lambda x: x)


def test_a_wrong_shape_is_reported_with_its_name_and_layout(capsys):
    def transposed(queries, keys, values):
        weights = np.ones((len(keys), len(queries))) / len(queries)  # (T_k, T_q): wrong way round
        return weights.T @ values, weights

    exercises.check("attend_all_queries", transposed)
    assert exercises.RESULTS["attend_all_queries"] == "failed"
    assert "weights: expected (T_q, T_k) = (2, 5), got (5, 2)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("attend_one_query", lambda q, k, v: softmax(k @ q) @ v),
        ("attend_all_queries", lambda q, k, v: softmax(q @ k.T) @ v),
        ("scaled_attention", lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]),
        ("self_attention", lambda x, a, b, c: scaled_dot_product_attention(x @ a, x @ b, x @ c)[0]),
    ],
)
def test_returning_only_the_output_is_told_to_return_the_pair(capsys, name, answer):
    exercises.check(name, answer)
    out = capsys.readouterr().out
    assert exercises.RESULTS[name] == "failed"
    assert "expected the pair (output, weights), got one ndarray of shape" in out
    assert "end with `return (output, weights)`" in out
    assert "too many values to unpack" not in out and "expected (" not in out


def _register(monkeypatch, count: int, failing: int | None = None, slip: bool = False) -> str:
    """A made-up exercise with ``count`` checks; check number ``failing`` (1-based) fails."""

    def make(i):
        def run(fn):
            if i == failing:
                if slip:
                    raise exercises.Slip("a recognised slip", hint="the slip's own hint")
                raise AssertionError("plain failure")

        return (f"proof {i}", run)

    ex = exercises.Exercise("made_up", "00", [make(i) for i in range(1, count + 1)], "general")
    monkeypatch.setitem(exercises.REGISTRY, "made_up", ex)
    return "made_up"


@pytest.mark.parametrize(
    ("count", "verdict"),
    [(1, "the check passed."), (2, "both checks passed."), (3, "all 3 checks passed.")],
)
def test_a_pass_says_the_check_both_checks_or_all_n_checks(monkeypatch, capsys, count, verdict):
    exercises.check(_register(monkeypatch, count), lambda: None)
    assert capsys.readouterr().out == f"✅ made_up: {verdict}\n"


def test_a_failure_names_which_check_with_the_count_in_brackets(monkeypatch, capsys):
    exercises.check(_register(monkeypatch, 4, failing=3), lambda: None)
    out = capsys.readouterr().out
    assert "❌ made_up: check 3 (of 4) failed: proof 3." in out
    assert "3 of 4" not in out and "Hint: general" in out
    exercises.check(_register(monkeypatch, 1, failing=1), lambda: None)
    assert "❌ made_up: the check failed: proof 1." in capsys.readouterr().out


def test_a_recognised_slip_gives_its_own_hint_instead_of_the_general_one(monkeypatch, capsys):
    exercises.check(_register(monkeypatch, 2, failing=2, slip=True), lambda: None)
    out = capsys.readouterr().out
    assert "a recognised slip" in out and "Hint: the slip's own hint" in out
    assert "general" not in out


def rotary_in_place(x, positions):
    import torch

    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions[:, None].to(torch.float64) * theta
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2].clone(), x[..., d // 2 :].clone()
    x[..., : d // 2] = x1 * cos - x2 * sin
    x[..., d // 2 :] = x1 * sin + x2 * cos
    return x


def tile_step_in_place(m, total, acc, s, v_tile):
    m_new = np.maximum(m, s.max(axis=-1))
    rescale = np.exp(m - m_new)
    s -= m_new[:, None]
    np.exp(s, out=s)
    total *= rescale
    total += s.sum(axis=-1)
    acc *= rescale[:, None]
    acc += s @ v_tile
    m[:] = m_new
    return m, total, acc


def merge_partials_in_place(out_a, m_a, l_a, out_b, m_b, l_b):
    import torch

    m = torch.maximum(m_a, m_b)
    l_a *= torch.exp(m_a - m)
    l_b *= torch.exp(m_b - m)
    out_a *= l_a[..., None]
    out_a += out_b * l_b[..., None]
    l_a += l_b
    out_a /= l_a[..., None]
    return out_a, m, l_a


def merge_two_in_place(out_a, lse_a, out_b, lse_b):
    import torch

    lse = torch.logaddexp(lse_a, lse_b)
    out_a *= torch.exp(lse_a - lse)[..., None]
    out_a += torch.exp(lse_b - lse)[..., None] * out_b
    return out_a, lse


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("apply_rotary", rotary_in_place),
        ("tile_step", tile_step_in_place),
        ("merge_partials", merge_partials_in_place),
        ("merge_two", merge_two_in_place),
    ],
)
def test_a_right_answer_that_edits_its_inputs_in_place_passes(name, answer, capsys):
    exercises.check(name, answer)
    assert exercises.RESULTS[name] == "passed", capsys.readouterr().out
