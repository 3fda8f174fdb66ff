"""``python -m benchmarks.redraw``: how fast every notebook's explorer redraws, and where the time goes.

Each explorer is built as its notebook builds it (the same render function, controls and data,
headless: matplotlib's Agg backend and no browser), then the control a learner moves most (the
first, unless that one mostly leads to a fallback picture or to cached work) is moved through 20
new values, one at a time, the way a learner's drag does: each assignment to ``control.value``
runs the explorer's update (render, PNG, caption), timed with ``time.perf_counter`` around the
assignment. It prints, per explorer, the median and the min-max of the 20 redraws.

A second pass of 20 redraws splits each one into stages, timed by wrapping the functions the
stages run (exclusive times: a stage started inside another is not counted twice):

- ``compute``: the render function's own work: checks, NumPy/torch, captions;
- ``figure``: ``plt.subplots`` / ``plt.figure`` / ``add_axes``: creating the figure and its axes;
- ``seaborn``: ``sns.heatmap`` and ``sns.color_palette``;
- ``artists``: every other matplotlib call of the render function (text, bars, ticks, ...);
- ``layout``: ``Figure.tight_layout``;
- ``draw``: ``Figure.draw`` (Agg's rasterisation, including the layout pass of a tight bbox);
- ``savefig``: the rest of ``Figure.savefig``;
- ``png``: PIL's PNG encoder; ``gc``: the garbage collections the toolkit runs after a redraw;
- ``widget``: the rest of the toolkit's update (cropping the picture, setting the widgets).

The wrappers cost a few microseconds per call, so the stages add up to a little more than the
first pass's time. ``--profile NAME`` also prints the 25 most expensive functions (cumulative,
cProfile) of one explorer's 20 redraws. The goal is a median of at most about 100 ms
on a 2-core laptop CPU; the numbers are this machine's, under the load printed with them.

Examples::

    python -m benchmarks.redraw                    # every explorer
    python -m benchmarks.redraw --only 05 10       # explorers whose name starts with 05 or 10
    python -m benchmarks.redraw --profile 10_trained_heads
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import gc
import inspect
import io
import os
import platform
import pstats
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial, wraps

import ipywidgets as widgets
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import PIL.Image
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from helpers.kit.env import setup
from helpers.kit.explorer import Explorer, explore

REDRAWS = 20
GOAL_MS = 100.0


@dataclass(frozen=True)
class Case:
    """One explorer: how its notebook builds it, the control a learner moves most, and the values
    it moves through."""

    name: str
    build: Callable[[], Explorer]
    control: str
    values: Sequence[object]


def moves(options: Sequence[object], start: object, count: int = REDRAWS) -> list[object]:
    """``count`` values from ``options``, cycling on from ``start``: each differs from the last."""
    options = list(options)
    if len(options) < 2:
        raise ValueError(f"a control needs two values to move between, got {options}")
    first = options.index(start) if start in options else -1
    return [options[(first + 1 + i) % len(options)] for i in range(count)]


# --- each notebook's explorer, built as the notebook builds it ------------------------------


def _nb00() -> Explorer:
    from helpers.lessons.nb00.explorers import render_sharpness

    return explore(
        render_sharpness,
        sharpness=widgets.FloatSlider(value=1.0, min=0.0, max=6.0, step=0.5),
    )


def _nb01() -> Explorer:
    from helpers.kit.data import toy_sentence
    from helpers.lessons.nb01.explorers import MAX_SCALE, render_one_query

    return explore(
        render_one_query,
        query=widgets.Dropdown(options=toy_sentence()[0], value="kite"),
        scale=widgets.FloatSlider(value=1.0, min=0.0, max=MAX_SCALE, step=0.5),
    )


def _nb02() -> Explorer:
    from helpers.lessons.nb02.explorers import MAX_D_K, render_scaling

    return explore(
        render_scaling,
        d_k=widgets.IntSlider(value=64, min=1, max=MAX_D_K),
        scaled=widgets.Checkbox(value=False),
    )


def _nb03() -> Explorer:
    from helpers.lessons.nb03.explorers import MASK_TYPES, SENTENCES, render_masked_heatmap

    return explore(
        render_masked_heatmap,
        mask_type=widgets.Dropdown(options=MASK_TYPES, value="padding+causal"),
        sentence=widgets.Dropdown(options=[(s, i) for i, s in enumerate(SENTENCES)], value=2),
    )


def _nb04() -> Explorer:
    from helpers.lessons.nb04.explorers import render_heads

    return explore(
        render_heads,
        num_heads=widgets.IntSlider(value=4, min=1, max=8),
        seq_len=widgets.IntSlider(value=5, min=2, max=12),
    )


def _nb05() -> Explorer:
    """The reverse task's model, untrained and after notebook 05's 150 training steps."""
    from helpers.lessons.nb05.explorers import render_head_browser
    from helpers.lessons.nb05.task import ReverseTask, attention_maps, make_model, train

    task = ReverseTask(vocab_size=10, length=8)
    model = make_model(task, d_model=32, num_heads=2, seed=0)
    held_out, _ = task.batch(6, seed=123)
    letters = [task.letters(row) for row in held_out]
    untrained_maps = attention_maps(model, held_out)
    train(model, task, steps=150, batch_size=64, lr=3e-3, seed=1, progress=False)
    maps = {"untrained": untrained_maps, "trained": attention_maps(model, held_out)}
    return explore(
        partial(render_head_browser, maps, letters),
        head=widgets.IntSlider(value=0, min=0, max=1),
        example=widgets.IntSlider(value=0, min=0, max=len(letters) - 1),
    )


def _nb06() -> Explorer:
    from helpers.lessons.nb06.explorers import D_MODEL, LAYOUTS, SPLITS, render_fused_split

    return explore(
        render_fused_split,
        num_heads=widgets.Dropdown(
            options=[n for n in range(1, D_MODEL) if D_MODEL % n == 0], value=3
        ),
        layout=widgets.ToggleButtons(options=LAYOUTS, value=LAYOUTS[1]),
        split=widgets.ToggleButtons(options=SPLITS, value=SPLITS[0]),
    )


def _nb07() -> Explorer:
    from helpers.lessons.nb07.explorers import DEVICES, DTYPES, render_kernel_memory

    return explore(
        render_kernel_memory,
        log2_t=widgets.IntSlider(value=14, min=9, max=17),
        d_k=widgets.Dropdown(options=[32, 64, 128], value=64),
        dtype=widgets.Dropdown(options=DTYPES, value="bfloat16"),
        device=widgets.Dropdown(options=list(DEVICES), value="H200 (141 GB)"),
    )


def _nb08_decoding() -> Explorer:
    from helpers.lessons.nb08.explorers import STEPS, render_decoding

    return explore(render_decoding, step=widgets.IntSlider(value=5, min=1, max=STEPS))


def _nb08_kv_sharing() -> Explorer:
    from helpers.lessons.nb08.explorers import HEAD_COUNTS, LOG2_T, MODELS, render_kv_sharing

    return explore(
        render_kv_sharing,
        num_heads=widgets.Dropdown(options=HEAD_COUNTS, value=32),
        num_kv_heads=widgets.Dropdown(options=HEAD_COUNTS, value=8),
        model=widgets.Dropdown(options=list(MODELS), value=list(MODELS)[1]),
        log2_t=widgets.IntSlider(value=13, min=LOG2_T[0], max=LOG2_T[1]),
    )


def _nb09() -> Explorer:
    from helpers.lessons.nb09 import explorers as tiling

    return explore(
        tiling.render_tiling,
        block_q=widgets.Dropdown(options=tiling.BLOCK_SIZES, value=12),
        block_k=widgets.Dropdown(options=tiling.BLOCK_SIZES, value=8),
        is_causal=widgets.Checkbox(value=True),
        row=widgets.IntSlider(value=0, min=0, max=tiling.T - 1),
    )


def _nb10() -> Explorer:
    """The shipped trained model on the first 64 of notebook 10's 256 held-out sequences."""
    from helpers.lessons.nb10 import training
    from helpers.lessons.nb10.data import repeated_sequences
    from helpers.lessons.nb10.explorers import TrainedHeadsFigure, ablation_choices

    half, vocab = training.CONFIG["half"], training.CONFIG["vocab"]
    held_out, held_shifts = repeated_sequences(256, half, vocab, seed=7)
    model = training.load_trained()
    layers, heads = len(model.attention), model.attention[0].num_heads
    return explore(
        TrainedHeadsFigure(model, held_out[:64], held_shifts[:64]),
        layer=widgets.ToggleButtons(options=list(range(layers)), value=1),  # the induction head
        head=widgets.ToggleButtons(options=list(range(heads)), value=2),
        example=widgets.IntSlider(value=5, min=0, max=63),
        ablate=widgets.Dropdown(options=list(ablation_choices(layers, heads)), value="nothing"),
    )


def _nb11_heads_split() -> Explorer:
    from helpers.lessons.nb11.explorers import HEAD_COUNTS, WORLD_SIZES, render_heads_split

    return explore(
        render_heads_split,
        num_heads=widgets.Dropdown(options=HEAD_COUNTS, value=8),
        world_size=widgets.Dropdown(options=WORLD_SIZES, value=4),
    )


def _nb11_ring() -> Explorer:
    from helpers.lessons.nb11.explorers import LAYOUTS, render_ring

    ranks = widgets.Dropdown(options=[2, 3, 4, 8], value=4)
    step = widgets.IntSlider(value=2, min=1, max=4)
    widgets.dlink((ranks, "value"), (step, "max"))  # n ranks, n steps
    return explore(
        render_ring,
        world_size=ranks,
        step=step,
        layout=widgets.ToggleButtons(options=LAYOUTS, value="contiguous"),
        is_causal=widgets.Checkbox(value=True),
    )


def _nb12_pool() -> Explorer:
    from helpers.lessons.nb12.explorers import BLOCK_SIZES, MAX_STEP, render_pool

    return explore(
        render_pool,
        step=widgets.IntSlider(value=12, min=0, max=MAX_STEP),
        block_size=widgets.Dropdown(options=BLOCK_SIZES, value=4),
    )


def _nb12_speculation() -> Explorer:
    from helpers.lessons.nb12.explorers import DRAFT_LENGTHS, DRAFTS, render_speculation

    return explore(
        render_speculation,
        num_draft=widgets.IntSlider(value=4, min=min(DRAFT_LENGTHS), max=max(DRAFT_LENGTHS)),
        draft=widgets.ToggleButtons(options=DRAFTS, value="good draft"),
    )


def _nb13() -> Explorer:
    from helpers.lessons.nb13.explorers import BITS, KV_HEADS, LATENT_SIZES, render_cache_frontier

    return explore(
        render_cache_frontier,
        kv_latent_dim=widgets.Dropdown(options=LATENT_SIZES, value=512),
        num_kv_heads=widgets.Dropdown(options=KV_HEADS, value=8),
        bits=widgets.ToggleButtons(options=BITS, value=16),
    )


def _nb14_pool() -> Explorer:
    from helpers.lessons.nb14.explorers import MAX_STEP, POOL_SIZES, render_prefix_pool

    return explore(
        render_prefix_pool,
        step=widgets.IntSlider(value=9, min=0, max=MAX_STEP),
        num_blocks=widgets.Dropdown(options=POOL_SIZES, value=40),
    )


def _nb14_budget() -> Explorer:
    from helpers.lessons.nb14.explorers import BUDGETS, render_budget

    return explore(render_budget, budget=widgets.SelectionSlider(options=BUDGETS, value=16))


def _nb15_keep() -> Explorer:
    from helpers.lessons.nb15.explorers import LENGTHS, SINKS, TOP_KS, WINDOWS, render_keep

    return explore(
        render_keep,
        T=widgets.SelectionSlider(options=LENGTHS, value=16),
        window=widgets.SelectionSlider(options=WINDOWS, value=4),
        num_sink=widgets.SelectionSlider(options=SINKS, value=2),
        top_k=widgets.SelectionSlider(options=TOP_KS, value=4),
    )


def _nb15_cost() -> Explorer:
    from helpers.lessons.nb15.explorers import COST_TOP_KS, COST_WINDOWS, QUANTITIES, render_cost

    return explore(
        render_cost,
        quantity=widgets.ToggleButtons(options=QUANTITIES, value="bytes"),
        window=widgets.Dropdown(options=COST_WINDOWS, value=4_096),
        top_k=widgets.Dropdown(options=COST_TOP_KS, value=2_048),
    )


def _nb16_recall() -> Explorer:
    from helpers.lessons.nb16.explorers import KEY_WIDTHS, WHICH, render_recall

    return explore(
        render_recall,
        d_k=widgets.Dropdown(options=KEY_WIDTHS, value=16),
        which=widgets.ToggleButtons(options=WHICH, value=WHICH[1]),
    )


def _nb16_memory() -> Explorer:
    from helpers.lessons.nb16.explorers import CONTEXTS, LINEAR_SHARES, render_memory

    return explore(
        render_memory,
        T=widgets.Dropdown(options=CONTEXTS, value=262_144),
        linear_per_full=widgets.Dropdown(options=LINEAR_SHARES, value=3),
    )


def cases() -> list[Case]:
    """Every notebook's explorer(s), in reading order, with their first control's moves."""
    from helpers.lessons.nb02.explorers import MAX_D_K
    from helpers.lessons.nb03.explorers import MASK_TYPES
    from helpers.lessons.nb08 import explorers as decoding
    from helpers.lessons.nb09 import explorers as tiling
    from helpers.lessons.nb10.explorers import ablation_choices
    from helpers.lessons.nb11 import explorers as parallel_layout
    from helpers.lessons.nb13 import explorers as latent_cache

    d_ks = [int(d) for d in np.linspace(1, MAX_D_K, REDRAWS + 1)[1:]]  # 20 widths, none twice
    return [
        Case("00_sharpness", _nb00, "sharpness", moves(np.arange(0.0, 6.5, 0.5).tolist(), 1.0)),
        Case(
            "01_one_query",
            _nb01,
            "query",
            moves(["the", "fox", "chased", "a", "red", "kite"], "kite"),
        ),
        Case("02_scaling", _nb02, "d_k", d_ks),
        Case("03_masks", _nb03, "mask_type", moves(MASK_TYPES, "padding+causal")),
        Case("04_heads", _nb04, "num_heads", moves([1, 2, 3, 4, 6, 8], 4)),
        Case("05_head_browser", _nb05, "head", moves([0, 1], 0)),
        Case("06_fused_split", _nb06, "num_heads", moves([1, 2, 3, 4, 6], 3)),
        Case("07_kernel_memory", _nb07, "log2_t", moves(range(9, 18), 14)),
        Case("08_decoding", _nb08_decoding, "step", moves(range(1, decoding.STEPS + 1), 5)),
        Case(  # h_kv, the point of the explorer, among the values that divide h = 32
            "08_kv_sharing",
            _nb08_kv_sharing,
            "num_kv_heads",
            moves([n for n in decoding.HEAD_COUNTS if 32 % n == 0], 8),
        ),
        Case("09_tiling", _nb09, "block_q", moves(tiling.BLOCK_SIZES, 12)),
        Case(  # each ablation's loss is computed at its first visit: 11 of the 20 moves
            "10_trained_heads",
            _nb10,
            "ablate",
            moves(list(ablation_choices(2, 4)), "nothing"),
        ),
        Case(  # with 4 ranks (the default) only 4 and 8 heads split evenly
            "11_heads_split",
            _nb11_heads_split,
            "num_heads",
            moves([h for h in parallel_layout.HEAD_COUNTS if h % 4 == 0], 8),
        ),
        Case("11_ring", _nb11_ring, "world_size", moves([2, 3, 4, 8], 4)),
        Case("12_pool", _nb12_pool, "step", moves(range(0, 71, 3), 12)),
        Case(  # every k of both drafts is computed once, when the explorer is built
            "12_speculation", _nb12_speculation, "num_draft", moves(range(1, 9), 4)
        ),
        Case("13_latent_cache", _nb13, "kv_latent_dim", moves(latent_cache.LATENT_SIZES, 512)),
        Case("14_prefix_pool", _nb14_pool, "step", moves(range(0, 46, 3), 9)),
        Case("14_budget", _nb14_budget, "budget", moves([8, 16, 32, 64, 128], 16)),
        Case("15_keep", _nb15_keep, "T", moves([8, 12, 16, 24, 32, 48], 16)),
        Case("15_cost", _nb15_cost, "top_k", moves([256, 512, 1_024, 2_048, 4_096], 2_048)),
        Case("16_recall", _nb16_recall, "d_k", moves([8, 16, 32], 16)),
        Case(
            "16_memory",
            _nb16_memory,
            "T",
            moves([4_096, 32_768, 131_072, 262_144, 1_048_576], 262_144),
        ),
    ]


# --- timing ----------------------------------------------------------------------------------


def redraw_seconds(box: Explorer, control: str, values: Sequence[object]) -> list[float]:
    """Wall-clock seconds of each move of ``box.controls[control]`` through ``values``."""
    widget, seconds = box.controls[control], []
    for value in values:
        box.last_render_seconds = None
        start = time.perf_counter()
        widget.value = value
        seconds.append(time.perf_counter() - start)
        if box.last_render_seconds is None:
            raise RuntimeError(f"{control}={value!r} did not redraw: {box.caption.value}")
        if not box.image.value:
            raise RuntimeError(f"{control}={value!r} drew no picture: {box.caption.value}")
    return seconds


STAGES = (
    "compute",
    "figure",
    "seaborn",
    "artists",
    "layout",
    "draw",
    "savefig",
    "png",
    "gc",
    "widget",
)


class StageClock:
    """Exclusive perf_counter times per stage, summed over the redraws since the last reset."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self._stack: list[list] = []  # [stage, start, time spent in child stages]

    @property
    def current(self) -> str | None:
        return self._stack[-1][0] if self._stack else None

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self._stack.append([name, time.perf_counter(), 0.0])
        try:
            yield
        finally:
            stage, start, inner = self._stack.pop()
            elapsed = time.perf_counter() - start
            self.totals[stage] += elapsed - inner
            if self._stack:
                self._stack[-1][2] += elapsed


def _timed(clock: StageClock, function: Callable, stage: str, inside: frozenset[str]) -> Callable:
    """``function``, timed as ``stage`` when called directly from one of the ``inside`` stages."""

    @wraps(function)
    def wrapper(*args, **kwargs):
        if clock.current not in inside:
            return function(*args, **kwargs)
        with clock.stage(stage):
            return function(*args, **kwargs)

    return wrapper


@contextmanager
def stage_wrappers(clock: StageClock) -> Iterator[None]:
    """Wrap the functions that make up each stage for as long as the context lasts."""
    in_render, in_savefig = frozenset({"compute"}), frozenset({"savefig"})
    in_update = frozenset({"widget", "savefig"})
    patches: list[tuple[object, str, Callable, str, frozenset[str]]] = [
        (plt, "subplots", plt.subplots, "figure", in_render),
        (plt, "figure", plt.figure, "figure", in_render),
        (sns, "heatmap", sns.heatmap, "seaborn", in_render),
        (sns, "color_palette", sns.color_palette, "seaborn", in_render),
        (Figure, "tight_layout", Figure.tight_layout, "layout", in_render),
        (Figure, "savefig", Figure.savefig, "savefig", frozenset({"widget"})),
        (Figure, "draw", Figure.draw, "draw", in_savefig),
        (PIL.Image.Image, "save", PIL.Image.Image.save, "png", in_update),
        (gc, "collect", gc.collect, "gc", in_update),
    ]
    for name in ("add_axes", "add_subplot", "subplots"):
        patches.append((Figure, name, getattr(Figure, name), "figure", in_render))
    for name in ("colorbar", "legend", "text", "suptitle", "subplots_adjust", "add_artist"):
        patches.append((Figure, name, getattr(Figure, name), "artists", in_render))
    for name, member in inspect.getmembers(Axes, inspect.isfunction):
        if not name.startswith(("_", "get_")):  # matplotlib compares some getters by identity
            patches.append((Axes, name, member, "artists", in_render))
    originals = [(owner, name, owner.__dict__.get(name)) for owner, name, *_ in patches]
    try:
        for owner, name, function, stage, inside in patches:
            setattr(owner, name, _timed(clock, function, stage, inside))
        yield
    finally:
        for owner, name, original in reversed(originals):
            if original is None:
                delattr(owner, name)  # it was inherited: let the base class's show again
            else:
                setattr(owner, name, original)


def stage_seconds(box: Explorer, control: str, values: Sequence[object]) -> dict[str, float]:
    """Mean seconds per redraw spent in each of :data:`STAGES`."""
    clock = StageClock()
    render, update = box.render, box.update

    def timed_update() -> None:
        with clock.stage("widget"):
            update()

    box.render = _timed(clock, render, "compute", frozenset({"widget"}))
    box.update = timed_update  # the observer calls self.update: the instance's comes first
    try:
        with stage_wrappers(clock):
            redraw_seconds(box, control, values)
    finally:
        box.render = render
        del box.update  # back to the class's method
    return {stage: clock.totals[stage] / len(values) for stage in STAGES}


def profile(box: Explorer, control: str, values: Sequence[object], top: int = 25) -> str:
    """cProfile of the redraws, the ``top`` functions by cumulative time."""
    profiler = cProfile.Profile()
    profiler.enable()
    redraw_seconds(box, control, values)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


# --- the command -----------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:6.0f}"


def machine_line() -> str:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{datetime.date.today().isoformat()}, {platform.machine()} {os.cpu_count()} cores, "
        f"load average {load} (1, 5, 15 min); Python {platform.python_version()}, matplotlib "
        f"{matplotlib.__version__} ({matplotlib.get_backend()}), seaborn {sns.__version__}, "
        f"ipywidgets {widgets.__version__}, Pillow {PIL.__version__}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.redraw", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--only", nargs="+", metavar="PREFIX", help="explorers whose name starts so"
    )
    parser.add_argument("--profile", metavar="NAME", help="also print cProfile's top functions")
    parser.add_argument("--no-stages", action="store_true", help="skip the pass split into stages")
    args = parser.parse_args(argv)

    matplotlib.use("Agg")  # headless; set here, not on import, so importers keep their backend
    setup(seed=0)  # what every notebook's setup cell does: seaborn theme, dpi, gc.freeze()
    chosen = [c for c in cases() if not args.only or c.name.startswith(tuple(args.only))]
    if args.profile and args.profile not in {c.name for c in chosen}:
        parser.error(f"--profile must name one of {[c.name for c in chosen]}")
    print(f"redraws of each explorer, {REDRAWS} moves of one control; {machine_line()}")
    header = f"{'explorer':<18} {'control':<12} {'median':>6} {'min':>6} {'max':>6}  ms"
    if not args.no_stages:
        header += "  |" + "".join(f"{s:>8}" for s in STAGES) + "  (ms per redraw)"
    print(header)
    medians = {}
    for case in chosen:
        try:
            box = case.build()
            if not box.image.value:
                raise RuntimeError(f"drew no picture: {box.caption.value}")
            seconds = redraw_seconds(box, case.control, case.values)
        except Exception as error:  # a notebook still being written: say so, measure the rest
            print(f"{case.name:<18} {case.control:<12} failed: {type(error).__name__}: {error}")
            continue
        medians[case.name] = statistics.median(seconds)
        line = (
            f"{case.name:<18} {case.control:<12} {_ms(medians[case.name])} {_ms(min(seconds))} "
            f"{_ms(max(seconds))}"
        )
        if not args.no_stages:
            stages = stage_seconds(box, case.control, case.values)
            line += "    |" + "".join(f"{stages[s] * 1e3:8.1f}" for s in STAGES)
        print(line, flush=True)
        if case.name == args.profile:
            print(profile(box, case.control, case.values))
        plt.close("all")
    slow = [name for name, m in medians.items() if m * 1e3 > GOAL_MS]
    print(
        f"goal: median <= {GOAL_MS:.0f} ms; "
        + (f"over it: {', '.join(slow)}" if slow else f"all {len(medians)} measured meet it")
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
