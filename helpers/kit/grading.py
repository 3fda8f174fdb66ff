"""The hidden half of every graded test cell: the course's checks run again, loaded afresh.

An answer cell runs in the same kernel as the test cell that grades it, so it can replace what
the test cell's visible half uses: put a fake ``helpers.kit.exercises`` in ``sys.modules``,
patch ``check`` or the lesson's checkers, or hook ``import``. ``make nbgrader``
(``tools/nbgrader_course.py``) therefore ends each test cell with a hidden part (between
nbgrader's ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``: left out of what students
fetch, put back by ``nbgrader autograde``) that reads this file by its path, compares its SHA-256
with the one recorded when the course was built, and calls :func:`grade`, which

- loads the course files that the lesson's checkers need (:func:`files_needed`) from disk, in
  a module table of its own, after comparing one SHA-256 over all of them with the one recorded
  at build time: none of the kernel's ``helpers`` modules is used, and none is left changed
  (the student's function still imports the kernel's own);
- runs the exercise's checks on the student's function with every seed they use
  (``np.random.default_rng``, ``torch.manual_seed``, ``torch.Generator().manual_seed``) mixed
  with a number that only the hidden part holds: inputs the student has not seen (a seed the
  student's own code gives is left alone, so it cannot make the same inputs), unless the
  exercise was registered with ``unseen_inputs=False`` (an answer fitted to the checks' own
  inputs, such as notebook 07's tolerance measured on them);
- raises AssertionError naming the check that failed, so that nbgrader gives the cell no point.

What it cannot stop: the answer cell runs as the user who grades, in the same Python, so code
written to defeat it can still change NumPy or torch themselves, Python's import machinery or
the files on disk. TEACHING.md, "Running a graded class", says what a teacher does about that.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import hashlib
import importlib
import importlib.abc
import importlib.util
import numbers
import sys
from pathlib import Path

PACKAGE = "helpers"


def digest(root: Path, files: list[str]) -> str:
    """One SHA-256 over ``files`` (paths relative to ``root``, in this order), names included."""
    total = hashlib.sha256()
    for name in files:
        total.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return total.hexdigest()


def _file_of(root: Path, module: str) -> str | None:
    """``helpers/kit/exercises.py`` for ``helpers.kit.exercises``; a package's ``__init__.py``."""
    base = Path(*module.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if (root / path).is_file():
            return path.as_posix()
    return None


def files_needed(root: Path, module: str) -> list[str]:
    """The course files that importing ``module`` (a lesson's checkers) and running its checks
    can load: every ``helpers`` module it imports anywhere, at any depth, with the packages that
    hold them. Read from the source, so an import inside a function is found too."""
    found: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for end in range(1, len(parts) + 1):  # the module and every package above it
            file = _file_of(root, ".".join(parts[:end]))
            if file is None or file in found:
                continue
            found.add(file)
            tree = ast.parse((root / file).read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    todo += [a.name for a in node.names if a.name.split(".")[0] == PACKAGE]
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                    todo += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return sorted(found)


class _FromCourseFiles(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``helpers`` modules from the bytes read and verified up front, nothing else.

    Once loaded (``table`` filled), the modules' own import statements, also those inside their
    functions, get ``helpers`` modules from ``table``, never from the kernel's ``sys.modules``,
    and go through ``importlib``, not a ``builtins.__import__`` that an answer cell hooked.
    """

    def __init__(self, root: Path, sources: dict[str, bytes]):
        self.root, self.sources = root, sources
        self.table: dict[str, object] = {}
        self.builtins = {**vars(builtins), "__import__": self._import}

    def _import(self, name, globals=None, locals=None, fromlist=(), level=0):
        if self.table and level == 0 and name.split(".")[0] == PACKAGE:
            if name not in self.table:
                raise ImportError(f"{name} is not among the files `make nbgrader` recorded")
            return self.table[name] if fromlist else self.table[PACKAGE]
        return importlib.__import__(name, globals, locals, fromlist, level)

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] != PACKAGE:
            return None
        file = _file_of(self.root, name)
        if file not in self.sources:
            raise ImportError(f"{name} is not among the files `make nbgrader` recorded")
        folder = [str(self.root / Path(file).parent)] if file.endswith("__init__.py") else None
        return importlib.util.spec_from_file_location(
            name, self.root / file, loader=self, submodule_search_locations=folder
        )

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        file = Path(module.__spec__.origin).relative_to(self.root).as_posix()
        module.__dict__["__builtins__"] = self.builtins
        exec(compile(self.sources[file], module.__spec__.origin, "exec"), module.__dict__)


def _ours(name: str) -> bool:
    return name.split(".")[0] == PACKAGE


def _module_of(file: str) -> str:
    """``helpers.kit.exercises`` for ``helpers/kit/exercises.py``; a package for its
    ``__init__.py``."""
    return file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _course_modules(root: Path, files: list[str], want: str) -> dict[str, object]:
    """The course's own ``helpers`` modules of ``files``, by name, loaded in a module table of
    their own; the kernel's ``sys.modules`` is as it was when this returns."""
    sources = {name: (root / name).read_bytes() for name in files}
    check = hashlib.sha256()
    for name in files:
        check.update(name.encode() + b"\0" + sources[name] + b"\0")
    if check.hexdigest() != want:
        raise AssertionError(
            f"the course's files under {root}/{PACKAGE} changed since `make nbgrader` recorded "
            "them: grade with the files the assignment was released with"
        )
    kept = {name: module for name, module in sys.modules.items() if _ours(name)}
    for name in kept:
        del sys.modules[name]
    finder = _FromCourseFiles(root, sources)
    sys.meta_path.insert(0, finder)
    try:
        for file in files:  # also the modules that a check imports only when it runs
            with contextlib.suppress(ImportError):  # e.g. one that needs a GPU's package
                importlib.import_module(_module_of(file))
        finder.table.update((name, m) for name, m in sys.modules.items() if _ours(name))
    finally:
        sys.meta_path.remove(finder)
        for name in [name for name in sys.modules if _ours(name)]:
            del sys.modules[name]
        sys.modules.update(kept)
    return finder.table


@contextlib.contextmanager
def _unseen_seeds(salt: int, course: set[int]):
    """Every integer seed that the course's modules (``course``: the ids of their globals) give
    NumPy or torch is mixed with ``salt``; a seed the student's own code gives is left as is."""

    def mixed(seed):
        if id(sys._getframe(2).f_globals) not in course or not isinstance(seed, numbers.Integral):
            return seed  # frame 2: the caller of the patched function below
        return (salt * 1_000_003 + int(seed)) % 2**63

    undo = []
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        rng = numpy.random.default_rng

        def default_rng(seed=None):
            return rng(mixed(seed))

        numpy.random.default_rng = default_rng
        undo.append((numpy.random, "default_rng", rng))
    torch = sys.modules.get("torch")
    if torch is not None:
        manual_seed, generator = torch.manual_seed, torch.Generator

        class Generator(generator):
            def manual_seed(self, seed):
                return super().manual_seed(mixed(seed))

        def seeded(seed):
            return manual_seed(mixed(seed))

        torch.manual_seed, torch.Generator = seeded, Generator
        undo += [(torch, "manual_seed", manual_seed), (torch, "Generator", generator)]
    try:
        yield
    finally:
        for owner, name, value in undo:
            setattr(owner, name, value)


def grade(name: str, fn, checkers: str, root: str, files: list[str], want: str, salt: int):
    """Run exercise ``name``'s checks, from the course's files, on ``fn`` with unseen inputs.

    ``checkers`` is the module that registers the exercise; ``files`` and ``want`` are what
    :func:`files_needed` and :func:`digest` gave when the course was built. Raises
    AssertionError, naming the check, unless every check passes.
    """
    if salt < 1:  # 0 would leave every seed as the visible checks use it
        raise AssertionError("the hidden part's salt must be a positive number")
    modules = _course_modules(Path(root), files, want)
    exercises = modules[f"{PACKAGE}.kit.exercises"]
    if checkers not in modules:
        raise AssertionError(f"{checkers} could not be loaded from the course's files")
    exercise = exercises.REGISTRY[name]

    def given(*args, **kwargs):
        if not exercise.shares_inputs:
            args = exercises._copied(args)
            kwargs = {key: exercises._copied(value) for key, value in kwargs.items()}
        return fn(*args, **kwargs)

    count = len(exercise.checks)
    course = {id(vars(module)) for module in modules.values()}
    unseen = _unseen_seeds(salt, course) if exercise.unseen_inputs else contextlib.nullcontext()
    with unseen:
        for i, (what, run) in enumerate(exercise.checks, start=1):
            try:
                run(given)
            except Exception:  # the answer may fail in any way; the message says which check
                raise AssertionError(
                    f"{name}: graded again by the course's own checks, on inputs you have "
                    f"not seen: check {i} (of {count}) failed: {what}."
                ) from None
