"""The benchmark command: ``python -m benchmarks`` (``make bench``), its presets and goal report.

Run from the repository root; ``benchmarks/README.md`` says what to run on which machine. The
measuring itself (timing, FLOP counts, device peaks, the sweep, reading results and judging the
goals) lives in :mod:`helpers.bench`, which notebook 07 imports; this package adds what only
the command needs:

- :mod:`benchmarks.__main__`: the command line and its presets (``tiny``, ``tiny-flash``,
  ``cpu-note``, ``gpu-goals``, ``gpu``, ``gpu-flash``), plots saved as PNGs, the closing-note
  figures and the kernel table;
- :mod:`benchmarks.decode`: ``python -m benchmarks.decode``, decode tokens/s with and without a
  KV cache (presets ``tiny``, ``cpu``, ``gpu``);
- :mod:`benchmarks.cli`: what both commands share: each flag's check (one line of error, exit
  code 2, before anything is written), presets, the device, the default results folder;
- :mod:`benchmarks.record`: writing a run to disk, a CSV row by row and a JSON of metadata;
- :mod:`benchmarks.goals`: the printed verdicts of issue #5's goals
  (``python -m benchmarks.goals RESULTS_DIR``, or ``python -m benchmarks --check-goals``).

Results go under ``benchmarks/results/<gpu>/`` (committed) or ``benchmarks/results/local/``
(git-ignored). This package is not installed with ``helpers``: it runs from a clone.
"""
