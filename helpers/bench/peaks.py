"""Peak dense matmul rates of common GPUs, and a lookup by the name torch reports.

Figures are **dense** (no 2:4 sparsity) tensor-core TFLOP/s with FP32 accumulation, which is what
PyTorch's bf16/fp16 matmuls use, and the plain FP32 (CUDA-core) rate for float32, since PyTorch
does not use TF32 for float32 matmuls unless ``torch.backends.cuda.matmul.allow_tf32`` (or
``torch.set_float32_matmul_precision("high")``) turns it on. Vendor data sheets often print the
sparse figure, twice these. Sources, by row:

- H100 SXM, H200 SXM: NVIDIA H100 and H200 Tensor Core GPU data sheets (BF16/FP16 1,979 TFLOPS
  "with sparsity", so 989 dense; FP32 67). H100 PCIe: the H100 data sheet, PCIe column (1,513
  with sparsity, so 756 dense; FP32 51).
- A100 (SXM and PCIe): NVIDIA A100 data sheet (BF16/FP16 312 dense, 624 sparse; FP32 19.5).
- RTX 4090: NVIDIA Ada Lovelace architecture whitepaper, appendix table (FP16/BF16 tensor with
  FP32 accumulate 165.2 dense; FP32 82.6).
- RTX 3090: NVIDIA Ampere GA102 architecture whitepaper (FP16/BF16 tensor with FP32 accumulate
  71 dense; FP32 35.6).
- L4: NVIDIA L4 data sheet (BF16/FP16 242 with sparsity, so 121 dense; FP32 30.3).
- A10: NVIDIA A10 data sheet (BF16/FP16 250 with sparsity, so 125 dense; FP32 31.2).
- T4: NVIDIA T4 data sheet (FP16 mixed precision 65; FP32 8.1; Turing has no bf16 tensor
  cores, so bfloat16 has no entry).
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


# Most specific patterns first: "H100 PCIe" before "H100", "A10" must not match "A100".
PEAKS: tuple[DevicePeak, ...] = (
    DevicePeak("H200", r"\bH200\b", {"bfloat16": 989.0, "float16": 989.0, "float32": 67.0}),
    DevicePeak(
        "H100 PCIe", r"\bH100\b.*PCIe", {"bfloat16": 756.0, "float16": 756.0, "float32": 51.0}
    ),
    DevicePeak("H100", r"\bH100\b", {"bfloat16": 989.0, "float16": 989.0, "float32": 67.0}),
    DevicePeak("A100", r"\bA100\b", {"bfloat16": 312.0, "float16": 312.0, "float32": 19.5}),
    DevicePeak("RTX 4090", r"RTX 4090", {"bfloat16": 165.2, "float16": 165.2, "float32": 82.6}),
    DevicePeak("RTX 3090", r"RTX 3090", {"bfloat16": 71.0, "float16": 71.0, "float32": 35.6}),
    DevicePeak("L4", r"\bL4\b", {"bfloat16": 121.0, "float16": 121.0, "float32": 30.3}),
    DevicePeak("A10", r"\bA10\b", {"bfloat16": 125.0, "float16": 125.0, "float32": 31.2}),
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
    dtype = dtype.removeprefix("torch.")
    row = find_peak(device_name)
    return None if row is None else row.tflops.get(dtype)
