"""Measuring attention: FLOP counts, device peaks, timing, memory and the matmul ceiling.

What the lessons measure with (notebooks 06–09 and 11–13):

- :mod:`~helpers.kit.bench.flops`: ``attention_flops`` (``4 B h T^2 d_k`` forward, half when
  causal, backward 2.5 x forward), ``projection_flops``, ``tflops_per_second``.
- :mod:`~helpers.kit.bench.peaks`: the dense peak TFLOP/s of common GPUs, ``peak_tflops(name,
  dtype)``, and their data-sheet memory bandwidths ``BANDWIDTH_GB_S``.
- :mod:`~helpers.kit.bench.timing`: ``median_seconds`` (``torch.utils.benchmark``, synchronised)
  and ``peak_memory_bytes``, the working memory of one call.
- :mod:`~helpers.kit.bench.ceiling`: ``measured_matmul_tflops``, the device's practical ceiling.
- :mod:`~helpers.kit.bench.busy`: ``LoadMeter`` and ``report``, which say when a live timing ran on
  a busy machine and show the quiet machine's figures beside it.
- ``helpers.lessons.nb07.live``: ``time_layers``, notebook 07's live benchmark of five ways to
  compute one layer; :mod:`~helpers.kit.bench.plots`: ``plot_timings``, its picture.
- :mod:`~helpers.kit.bench.results`: ``load_gpu_runs``, the GPU runs committed to the course.

The benchmark command that makes those runs, with its sweep, presets and reports, is not part
of the helpers: it is ``python -m benchmarks`` in the repository (``benchmarks/README.md``).
"""

from helpers.kit.bench.flops import attention_flops, projection_flops, tflops_per_second
from helpers.kit.bench.peaks import BANDWIDTH_GB_S, PEAKS, peak_tflops
from helpers.kit.bench.timing import median_seconds, peak_memory_bytes

__all__ = [
    "BANDWIDTH_GB_S",
    "PEAKS",
    "attention_flops",
    "median_seconds",
    "peak_memory_bytes",
    "peak_tflops",
    "projection_flops",
    "tflops_per_second",
]
