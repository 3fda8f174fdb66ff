"""Exercises with automatic feedback.

Each exercise has a name, reference checks and a hint. ``check(name, fn)`` runs the checks on a
learner's function and prints a verdict. A check that recognises a typical slip raises
:class:`Slip`, whose own hint then replaces the exercise's general one. A function that still
raises ``NotImplementedError`` (the stub the notebook hands out) is reported as *not attempted
yet*, without raising, so a notebook always runs top to bottom.

The exercises live in each lesson's ``checkers`` module (``helpers.lessons.nb00.checkers``, ...) and register
themselves with :func:`exercise`. A module is imported only when one of its exercises is asked
for, so the checks of the NumPy notebooks (00-04) work without PyTorch, which the checkers of
notebooks 05 on import.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

Check = tuple[str, Callable[[Callable], None]]  # (what it proves, raises AssertionError if not)


class Slip(AssertionError):
    """A failed check that recognised a typical slip: its ``hint`` replaces the exercise's.

    Raised by a check whose wrong answer has one likely cause, e.g. scores not divided by
    sqrt(d_k) in notebook 02's exercise 3, so that the learner reads advice about that cause
    and not the general recipe.
    """

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass
class Exercise:
    """One exercise: its name, the notebook it belongs to, its checks and a hint.

    The first is met in notebook 00, section 6 (Your first exercise); each notebook registers its
    own in ``nbNN.py``.
    """

    name: str
    notebook: str
    checks: list[Check] = field(default_factory=list)
    hint: str = ""
    shares_inputs: bool = False  # its checks ask for views of the inputs: pass them uncopied
    # A graded class checks the answer again on inputs of its own seeds (helpers.kit.grading);
    # False for an answer fitted to the checks' own inputs (a tolerance measured on them).
    unseen_inputs: bool = True


REGISTRY: dict[str, Exercise] = {}
RESULTS: dict[str, str] = {}  # name -> "passed" | "failed" | "not attempted"


def exercise(
    name: str, notebook: str, hint: str, shares_inputs: bool = False, unseen_inputs: bool = True
) -> Callable[[Callable], Callable]:
    """Register a function that returns the exercise's checks as a list of (text, fn).

    Each ``nbNN.py`` module uses it; its docstrings name the notebook section. The answer gets
    copies of the checks' arrays and tensors, so that editing them in place is no mistake;
    ``shares_inputs=True`` passes the inputs themselves, for checks that want views of them.
    ``unseen_inputs=False`` keeps a graded class's second run of the checks on their own seeds.
    """

    def register(make_checks: Callable[[], list[Check]]) -> Callable:
        if name in REGISTRY and REGISTRY[name].notebook != notebook:
            raise ValueError(
                f"exercise {name!r} of notebook {notebook} is already registered by notebook "
                f"{REGISTRY[name].notebook}: give it another name"
            )
        REGISTRY[name] = Exercise(name, notebook, make_checks(), hint, shares_inputs, unseen_inputs)
        return make_checks

    return register


def assert_shape(got, want: tuple[int, ...], layout: str = "", name: str = "") -> None:
    """Raise AssertionError unless ``got`` (array, tensor or nested list) has shape ``want``.

    The message names the result and its layout, e.g.
    ``weights: expected (T_q, T_k) = (2, 5), got (5, 2)``. What a learner reads when an
    exercise's result has the wrong shape, from notebook 00, section 6 (Your first exercise) on.
    """
    shape = tuple(np.shape(got))
    if shape != tuple(want):
        expected = f"{layout} = {tuple(want)}" if layout else f"shape {tuple(want)}"
        raise AssertionError(f"{name + ': ' if name else ''}expected {expected}, got {shape}")


def output_and_weights(result) -> tuple:
    """``result`` as its two parts, or an AssertionError that says ``return (output, weights)``.

    Every exercise whose function returns attention's output and weights unpacks the result
    with it, from notebook 01, exercise 2 (attend with one query) on. Without it, a function
    that returns only the output has its first axis unpacked instead, and the learner reads a
    wrong shape or "too many values to unpack" where the slip is the missing pair.
    """
    if isinstance(result, tuple | list) and len(result) == 2:
        return tuple(result)
    if isinstance(result, tuple | list):
        got = f"{len(result)} values"
    elif result is None:
        got = "None"
    else:
        got = f"one {type(result).__name__} of shape {tuple(np.shape(result))}"
    raise AssertionError(
        f"expected the pair (output, weights), got {got}: end with `return (output, weights)`"
    )


LESSONS = "helpers.lessons"  # found by name: the kit imports no lesson, it loads their checkers


def _checker_modules() -> list[str]:
    """The lessons with checkers, in notebook order: ``["nb00", "nb01", ...]``."""
    lessons = importlib.util.find_spec(LESSONS)
    folders = lessons.submodule_search_locations if lessons else []
    return sorted(info.name for info in pkgutil.iter_modules(folders) if info.name[:2] == "nb")


def get(name: str) -> Exercise:
    """The registered exercise called ``name`` (any notebook's, from notebook 00 on).

    The checker modules are imported in notebook order until one of them registers ``name``.
    """
    not_loaded = []
    for module in _checker_modules():
        if name in REGISTRY:
            break
        try:
            importlib.import_module(f"{LESSONS}.{module}.checkers")
        except ModuleNotFoundError as error:  # e.g. no PyTorch, which nb05 on import
            not_loaded.append(f"{module} (needs {error.name})")
    if name not in REGISTRY:
        known = ", ".join(sorted(REGISTRY))
        unread = f"; not loaded: {', '.join(not_loaded)}" if not_loaded else ""
        raise ValueError(f"no exercise called {name!r}; known exercises: {known}{unread}")
    return REGISTRY[name]


def for_notebook(notebook: str) -> list[Exercise]:
    """Every exercise of one notebook, e.g. ``for_notebook("01")`` (notebooks 00 on)."""
    if f"nb{notebook}" in _checker_modules():
        importlib.import_module(f"{LESSONS}.nb{notebook}.checkers")
    return [e for e in REGISTRY.values() if e.notebook == notebook]


def _copied(value):
    """``value`` with every NumPy array and torch tensor in it copied (also inside tuples and
    lists), so that an answer that edits its inputs in place leaves the checker's own untouched."""
    if isinstance(value, np.ndarray):
        return value.copy()
    torch = sys.modules.get("torch")  # no tensor exists unless torch was imported
    if torch is not None and isinstance(value, torch.Tensor):
        return value.clone()  # grads still flow back to the checker's tensor
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
        return type(value)(_copied(v) for v in value)
    return value


def check(name: str, fn: Callable, width: int | None = None) -> None:
    """Run exercise ``name``'s checks on ``fn`` and print a verdict (also kept in RESULTS).

    First used in notebook 00, section 6 (Your first exercise); every exercise cell ends with it.
    Two slips get a sentence of their own: a function that returns ``None`` (a forgotten
    ``return``), and a function that calls another exercise's stub still unwritten. A check
    that raises :class:`Slip` prints the slip's hint instead of the exercise's. A failure's hint
    comes right after the verdict, then what the check found, cut short (:func:`_shortened`).
    ``width`` wraps the hint and that text to lines of at most ``width`` characters: the graded
    cells of ``make nbgrader`` ask for it, as nbgrader's feedback page does not wrap lines.
    """
    ex = get(name)
    returned_none = False

    def say(text: str, first: str = "") -> None:  # first: the indent of its first line
        print("\n".join(_wrapped(text, width, first)))

    def watched(*args, **kwargs):
        nonlocal returned_none
        if not ex.shares_inputs:
            args, kwargs = _copied(args), {key: _copied(v) for key, v in kwargs.items()}
        out = fn(*args, **kwargs)
        returned_none = returned_none or out is None
        return out

    for i, (what, run) in enumerate(ex.checks, start=1):
        try:
            run(watched)
        except NotImplementedError as error:
            RESULTS[name] = "not attempted"
            stub = _raised_in(error)
            if stub in (None, getattr(fn, "__name__", None)):
                say(
                    f"⏳ {name}: not attempted yet. "
                    "Replace `raise NotImplementedError` with your code."
                )
            else:
                say(
                    f"⏳ {name}: your function calls `{stub}`, which still raises "
                    "NotImplementedError: write that one first (an earlier exercise), then run "
                    "this cell again."
                )
            return
        except Exception as error:  # the learner's code may fail in any way; report it
            RESULTS[name] = "failed"
            detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            detail = str(error) if isinstance(error, Slip) else detail  # a sentence, no type
            lines = _wrapped(
                f"❌ {name}: {_which_check(i, len(ex.checks))} failed: {what}.", width, ""
            )
            if returned_none:
                lines += _wrapped("Your function returned None: did you forget `return`?", width)
            lines += _wrapped(f"Hint: {error.hint if isinstance(error, Slip) else ex.hint}", width)
            print("\n".join([*lines, _shortened(detail, width)]))  # one output: one box
            return
    RESULTS[name] = "passed"
    print(f"✅ {name}: {_all_passed(len(ex.checks))}")


DETAIL_LINES = 8  # what the check found (e.g. NumPy's comparison of two arrays), cut after this


def _wrapped(text: str, width: int | None, first: str = "   ") -> list[str]:
    """``text`` after ``first``, in lines of at most ``width`` (None: one line), the lines
    after the first indented under the verdict."""
    if width is None:
        return [first + text]
    return textwrap.wrap(
        text, width, initial_indent=first, subsequent_indent="   ", break_on_hyphens=False
    )


def _shortened(detail: str, width: int | None) -> str:
    """What the check found, after the hint: at most ``DETAIL_LINES`` lines (a long array's
    dump is cut, saying how many lines were left out), wrapped to ``width`` if given."""
    lines = [
        piece for line in detail.splitlines() if line.strip() for piece in _wrapped(line, width)
    ]
    if len(lines) > DETAIL_LINES:
        lines = [*lines[: DETAIL_LINES - 1], f"   … ({len(lines) - DETAIL_LINES + 1} more lines)"]
    return "\n".join(lines)


def _which_check(i: int, count: int) -> str:
    """``check 3 (of 4)``: the number of the check, the count in brackets so that it does not
    read as "three of the four checks"; ``the check`` when there is only one."""
    return "the check" if count == 1 else f"check {i} (of {count})"


def _all_passed(count: int) -> str:
    """``the check passed.``, ``both checks passed.`` or ``all 3 checks passed.``"""
    if count == 1:
        return "the check passed."
    return "both checks passed." if count == 2 else f"all {count} checks passed."


def _raised_in(error: BaseException) -> str | None:
    """The name of the function whose own line raised ``error`` (the innermost frame)."""
    tb = error.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_name
