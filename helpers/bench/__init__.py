"""Benchmarking attention: timing, FLOP counts, device peaks, memory and the sweep.

What notebooks 06 and 07 import. The command that runs the sweep and writes its files is not
here: it is ``python -m benchmarks`` in the repository (see ``benchmarks/README.md``). The
modules:

- :mod:`~helpers.bench.flops`: ``attention_flops`` (``4 B h T^2 d_k`` forward, half when
  causal, backward 2.5 x forward), ``projection_flops``, ``tflops_per_second``.
- :mod:`~helpers.bench.peaks`: the dense peak TFLOP/s table, ``peak_tflops(name, dtype)``, and
  the data-sheet memory bandwidths ``BANDWIDTH_GB_S``.
- :mod:`~helpers.bench.ceiling`: ``measured_matmul_tflops``, the device's practical ceiling.
- :mod:`~helpers.bench.timing`: ``median_seconds`` (``torch.utils.benchmark``), and
  ``peak_memory_bytes``, the working memory of one call (CUDA and CPU).
- :mod:`~helpers.bench.report`: ``environment_report`` (device, driver, versions, date).
- :mod:`~helpers.bench.contenders`: the implementations compared, and ``make_step``.
- :mod:`~helpers.bench.runner`: ``BenchConfig`` and ``run``, the sweep with OOM handling.
- :mod:`~helpers.bench.decode`: ``DecodeConfig`` and ``run_decode``, decode steps with and
  without a KV cache (notebook 08; ``python -m benchmarks.decode``), with their own columns.
- :mod:`~helpers.bench.results`, :mod:`~helpers.bench.summary`, :mod:`~helpers.bench.plots`:
  reading CSV/JSON results, headline figures, and ``plot_results``.
- :mod:`~helpers.bench.goals`: ``check_goals``, the verdicts on the GPU goals of issue #5.

CSV columns (one row per measurement):

==================  ===========================================================================
``device_name``     ``torch.cuda.get_device_name`` (e.g. ``NVIDIA H200``), ``Apple MPS`` or ``CPU (...)``
``device_type``     ``cuda``, ``mps`` or ``cpu``
``contender``       ``naive``, ``fused_explicit``, ``fused_sdpa``, ``torch_mha``,
                    ``sdpa_functional``, ``sdpa_direct``, ``triton_direct``, ``explicit_direct``
                    (or ``all`` for a device that is missing)
``backend``         SDPA backend forced with ``sdpa_kernel``: ``flash``, ``efficient``, ``cudnn``,
                    ``math``; ``default`` = PyTorch chooses; ``-`` = the contender does not call SDPA
``compiled``        True when wrapped in ``torch.compile``
``dtype``           ``float32``, ``bfloat16`` or ``float16``
``causal``          True for a causal mask
``mode``            ``forward`` (under ``no_grad``) or ``forward_backward``
``batch``, ``seq_len``, ``d_model``, ``heads``, ``d_k``   the sizes B, T, D, h, D / h
``status``          ``ok``, ``oom`` (out of memory: longer T not tried) or ``unavailable``
``reason``          why a row is not ``ok`` (the error's first line, trimmed); empty when ok
``time_ms``         median milliseconds per call (``torch.utils.benchmark``, synchronised)
``peak_mem_mib``    working memory of one call, MiB: the most it holds at once above what was
                    allocated before it (inputs and weights not counted). CUDA: allocator
                    statistics; CPU: the profiler's allocation events; empty on MPS ("not measured")
``attn_flops``      FLOPs of the attention core (``helpers.bench.flops.attention_flops``)
``total_flops``     attention core plus the four projections (equal to ``attn_flops`` for the
                    ``*_direct`` contenders); causal rows count only the unmasked half
``tflops``          ``total_flops / time``, in TFLOP/s
``attn_tflops``     ``attn_flops / time``, in TFLOP/s
``peak_tflops``     the device's dense peak for the dtype (``helpers.bench.peaks``); empty if unknown
``peak_fraction``   ``tflops / peak_tflops``; empty if the peak is unknown
==================  ===========================================================================
"""

from helpers.bench.flops import attention_flops, projection_flops, tflops_per_second
from helpers.bench.peaks import PEAKS, peak_tflops
from helpers.bench.plots import plot_results
from helpers.bench.report import environment_report
from helpers.bench.results import COLUMNS, committed_results, load_metadata, load_results
from helpers.bench.runner import BenchConfig, run
from helpers.bench.summary import best_peak_fraction, speedup
from helpers.bench.timing import median_seconds, peak_memory_bytes

__all__ = [
    "COLUMNS",
    "PEAKS",
    "BenchConfig",
    "attention_flops",
    "best_peak_fraction",
    "committed_results",
    "environment_report",
    "load_metadata",
    "load_results",
    "median_seconds",
    "peak_memory_bytes",
    "peak_tflops",
    "plot_results",
    "projection_flops",
    "run",
    "speedup",
    "tflops_per_second",
]
