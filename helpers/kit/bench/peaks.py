"""Peak dense matmul rates and memory bandwidths of common GPUs, and a lookup by name.

Figures are **dense** (no 2:4 sparsity) tensor-core TFLOP/s with FP32 accumulation, which is what
PyTorch's bf16/fp16 matmuls use, and the plain FP32 (CUDA-core) rate for float32, since PyTorch
does not use TF32 for float32 matmuls unless ``torch.backends.cuda.matmul.allow_tf32`` (or
``torch.set_float32_matmul_precision("high")``) turns it on. That bound is for float32 *matmuls*,
not float32 SDPA: flash and cuDNN reject float32, and the memory-efficient kernel that runs
instead multiplies, on compute capability 8.0 or newer, with CUTLASS's 3xTF32 (three TF32
tensor-core products per float32 one: about float32's accuracy, roughly a third of the TF32
rate, whatever ``allow_tf32`` says), so its share of the FP32 peak can exceed 1 without any
measurement error (notebook 07, *Going further*). Data sheets print the sparse figure
(marked "with sparsity"), twice the dense one. GeForce cards run FP16 with FP32 accumulation at
half the rate of FP16 with FP16 accumulation; their whitepapers print both and we take the
first. Sources, by row, with each figure as printed there:

- H100 SXM, H100 PCIe: NVIDIA H100 Tensor Core GPU data sheet. SXM: FP32 67 teraFLOPS,
  BF16 and FP16 Tensor Core 1,979 teraFLOPS "with sparsity", so 989 dense (the H100
  architecture whitepaper gives 989.4 dense, 1978.9 sparse). PCIe: FP32 51, BF16 and FP16
  1,513 with sparsity, so 756 dense.
- H200 SXM: NVIDIA H200 Tensor Core GPU data sheet, H200 SXM column: FP32 67 TFLOPS, BF16 and
  FP16 Tensor Core 1,979 TFLOPS with sparsity, so 989 dense: the H100 SXM's figures, since the
  H200 has the same GH100 compute die and changes only the memory (141 GB of HBM3e).
- A100 (SXM and PCIe, 40 and 80 GB): NVIDIA A100 Tensor Core GPU data sheet: FP32 19.5 TFLOPS;
  BFLOAT16 and FP16 Tensor Core 312 TFLOPS, 624 with sparsity.
- RTX 4090: NVIDIA Ada GPU Architecture whitepaper, appendix table for the GeForce RTX 4090:
  Peak FP16 Tensor TFLOPS with FP16 Accumulate 330.3/660.6, with FP32 Accumulate 165.2/330.4;
  Peak BF16 Tensor TFLOPS with FP32 Accumulate 165.2/330.4; Peak FP32 TFLOPS 82.6.
- RTX 3090: NVIDIA Ampere GA102 GPU Architecture whitepaper, appendix A (GeForce RTX 3090):
  Peak FP16 Tensor TFLOPS with FP16 Accumulate 142/284, with FP32 Accumulate 71/142; Peak BF16
  Tensor TFLOPS with FP32 Accumulate 71/142; Peak FP32 TFLOPS 35.6.
- L4: NVIDIA L4 Tensor Core GPU data sheet: FP32 30.3 teraFLOPS; BF16 and FP16 Tensor Core
  242 teraFLOPS with sparsity, so 121 dense.
- A10: NVIDIA A10 Tensor Core GPU data sheet: FP32 31.2 teraFLOPS; BF16 and FP16 Tensor Core
  125 teraFLOPS, 250 with sparsity. Data-centre GA102 parts are not halved like the 3090.
- T4: NVIDIA T4 Tensor Core GPU data sheet: Single-Precision 8.1 TFLOPS; Mixed-Precision
  (FP16/FP32) 65 TFLOPS (Turing has no sparsity and no bf16 tensor cores, so no bfloat16 entry).

Each dense figure also follows from SMs x clock x per-SM rate: 82 x 1.695 GHz x 512 FP16
FMA/clock x 2 = 142 TFLOP/s for the 3090 (71 with FP32 accumulate); 72 x 1.695 GHz x 1024
FLOP/clock = 125 for the A10; 58 x 2.04 GHz x 1024 = 121 for the L4; 128 x 2.52 GHz x 1024
= 330 for the 4090 (165 with FP32 accumulate); 40 x 1.59 GHz x 1024 = 65 for the T4.

What was checked, and against what: NVIDIA's PDFs themselves were not at hand. The H100 table
was read in a reseller's copy of the data sheet ("Shown with sparsity. Specifications 1/2 lower
without sparsity"); 989.4 and the A100's 312/624 and 19.5 in pages quoting the whitepaper and
data sheet; the A100 column of NVIDIA's Hopper blog table on NVIDIA's developer forum. The
H200, L4, A10, T4, RTX 4090 and RTX 3090 figures were confirmed only by secondary pages that
agree with them and by the arithmetic above.

No row, so a lookup gives None rather than another card's figure:

- H100 NVL, H200 NVL: PCIe boards with their own, lower-power data-sheet columns (the first
  H100 NVL sheet printed figures for a two-GPU pair); we could not check a copy, and the SXM
  figure would overstate them.
- A10G (AWS): a variant with no NVIDIA data sheet whose tensor rate differs from the A10's.
- GH200, L40S, RTX 4090 D, RTX 4090 Laptop GPU, RTX 3090 Ti: other chips, clocks or SM counts.

Patterns match the names ``torch.cuda.get_device_name`` prints ("NVIDIA H100 80GB HBM3",
"NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090", "Tesla T4", ...) and
are mutually exclusive, so the order of the rows does not matter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePeak:
    """Peak TFLOP/s of one device per dtype name (``"bfloat16"``, ``"float16"``, ``"float32"``)."""

    label: str
    pattern: str  # regular expression matched, case-insensitively, against the device name
    tflops: dict[str, float]


def _tensor(bf16_fp16: float, fp32: float) -> dict[str, float]:
    return {"bfloat16": bf16_fp16, "float16": bf16_fp16, "float32": fp32}


# "\bA10\b" cannot match "A100" or "A10G"; "\bL4\b" cannot match "L40S"; "$" keeps the
# RTX rows off "RTX 4090 D", "... Laptop GPU" and "RTX 3090 Ti".
PEAKS: tuple[DevicePeak, ...] = (
    DevicePeak("H200 SXM", r"\bH200\b(?!.*\bNVL\b)", _tensor(989.0, 67.0)),
    DevicePeak("H100 PCIe", r"\bH100\b.*\bPCIe\b", _tensor(756.0, 51.0)),
    DevicePeak("H100 SXM", r"\bH100\b(?!.*\b(?:PCIe|NVL)\b)", _tensor(989.0, 67.0)),
    DevicePeak("A100", r"\bA100\b", _tensor(312.0, 19.5)),
    DevicePeak("RTX 4090", r"\bRTX 4090\s*$", _tensor(165.2, 82.6)),
    DevicePeak("RTX 3090", r"\bRTX 3090\s*$", _tensor(71.0, 35.6)),
    DevicePeak("L4", r"\bL4\b", _tensor(121.0, 30.3)),
    DevicePeak("A10", r"\bA10\b", _tensor(125.0, 31.2)),
    DevicePeak("T4", r"\bT4\b", {"float16": 65.0, "float32": 8.1}),
)


def find_peak(device_name: str) -> DevicePeak | None:
    """The table row whose pattern matches ``device_name`` (e.g. ``"NVIDIA H200"``), or None."""
    for row in PEAKS:
        if re.search(row.pattern, device_name, flags=re.IGNORECASE):
            return row
    return None


def peak_tflops(device_name: str, dtype: str) -> float | None:
    """Dense peak TFLOP/s of ``device_name`` in ``dtype`` (``"bfloat16"`` ...), None if unknown.

    A CPU, an unknown GPU or a dtype without a figure gives None, never a guess.
    """
    for name, value in (("device_name", device_name), ("dtype", dtype)):
        if not isinstance(value, str):  # "NVIDIA H200", "bfloat16"
            raise TypeError(f"{name} must be a str, got {type(value).__name__} {value!r}")
    dtype = dtype.removeprefix("torch.")
    row = find_peak(device_name)
    return None if row is None else row.tflops.get(dtype)


# Memory bandwidth from the data sheets, in GB/s (1e9 bytes per second), for GPUs that have a
# peak above (the name finds it there with find_peak). NVIDIA H100 Tensor Core GPU data sheet,
# H100 SXM column: GPU memory bandwidth 3.35 TB/s. NVIDIA A100 Tensor Core GPU data sheet,
# A100 80GB SXM column: 2,039 GB/s. NVIDIA T4 product brief, memory specifications: peak
# memory bandwidth up to 320 GB/s. Like the peaks, these are maxima no kernel reaches.
BANDWIDTH_GB_S = {
    "H100 SXM": ("NVIDIA H100 80GB HBM3", 3350.0),
    "A100 SXM 80GB": ("NVIDIA A100-SXM4-80GB", 2039.0),
    "T4": ("Tesla T4", 320.0),
}


def gpu_balances() -> dict[str, float]:
    """FLOPs per byte each GPU of the table above can do: dense 16-bit peak / bandwidth."""
    out = {}
    for label, (device, gb_per_s) in BANDWIDTH_GB_S.items():
        peak = peak_tflops(device, "bfloat16") or peak_tflops(device, "float16")
        out[label] = peak * 1e12 / (gb_per_s * 1e9)
    return out
