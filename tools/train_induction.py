"""``python -m tools.train_induction``: train notebook 10's model and write its shipped weights.

Seeded and single-threaded, so the same machine gives the same weights. Prints how long it took
and the checks the tests apply to the shipped model. ``--out`` writes elsewhere (tests use it).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from helpers.lessons.nb10 import training
from helpers.lessons.nb10.training import report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=training.WEIGHTS, help="where to write")
    parser.add_argument("--steps", type=int, default=training.STEPS, help="AdamW steps")
    args = parser.parse_args(argv)
    if args.steps <= 0:
        parser.error(f"--steps must be positive, got {args.steps}")
    model = training.make_model()
    start = time.perf_counter()
    training.train(model, args.steps)
    seconds = time.perf_counter() - start
    torch.save(model.state_dict(), args.out)
    print(f"trained {args.steps} steps in {seconds:.0f} s; wrote {args.out}")
    print(report(model.eval()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
