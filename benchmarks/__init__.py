"""The benchmark commands: ``python -m benchmarks`` (``make bench``), its presets and reports.

Run from the repository root; ``benchmarks/README.md`` says what to run on which machine. What
the lessons measure with (FLOP counts, device peaks, timing and memory, the matmul ceiling)
lives in :mod:`helpers.kit.bench`; this package is the command and everything only it needs:

- :mod:`benchmarks.__main__`: the command line and its presets (``tiny``, ``tiny-flash``,
  ``cpu-note``, ``gpu-quick``, ``gpu``, ``gpu-flash``), the closing-note figures and the
  kernel table;
- :mod:`benchmarks.contenders`: the implementations compared, and ``make_step``;
- :mod:`benchmarks.runner`: ``BenchConfig`` and ``run``, the sweep with its out-of-memory and
  unavailable-backend handling;
- :mod:`benchmarks.results`, :mod:`benchmarks.record`, :mod:`benchmarks.report`: the CSV
  columns, reading a results table, writing a run (CSV row by row, JSON of the environment);
- :mod:`benchmarks.summary`, :mod:`benchmarks.plots`: headline figures, the kernel table, and
  the PNGs saved after a run;
- :mod:`benchmarks.goals`: what a GPU run should show, judged and printed
  (``python -m benchmarks.goals RESULTS_DIR``, or ``python -m benchmarks --check-goals``);
- :mod:`benchmarks.decode` (the command) and :mod:`benchmarks.decoding` (the measurement):
  decode tokens/s with and without a KV cache (presets ``tiny``, ``cpu``, ``gpu``);
- :mod:`benchmarks.cli`: what the commands share: each flag's check (one line of error, exit
  code 2, before anything is written), presets, the device, the default results folder;
- :mod:`benchmarks.redraw`: how fast each notebook's explorer redraws.

Results go under ``benchmarks/results/<gpu>/`` (committed) or ``benchmarks/results/local/``
(git-ignored). This package is not installed with ``helpers``: it runs from a clone.
"""
