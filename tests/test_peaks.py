"""The peak table finds each GPU by the name torch prints, and every figure has a cited source."""

from __future__ import annotations

import re

import pytest

from helpers.kit.bench import peaks
from helpers.kit.bench.peaks import PEAKS, find_peak, peak_tflops

# What torch.cuda.get_device_name prints on each card, and the row it must find (None: no row).
DEVICE_NAMES = [
    ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA H200 NVL", None),
    ("NVIDIA GH200 480GB", None),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", None),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA A100-SXM4-40GB", "A100"),
    ("NVIDIA A100 80GB PCIe", "A100"),
    ("NVIDIA A100-PCIE-40GB", "A100"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("NVIDIA GeForce RTX 4090 D", None),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", None),
    ("NVIDIA GeForce RTX 3090", "RTX 3090"),
    ("NVIDIA GeForce RTX 3090 Ti", None),
    ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", None),
    ("NVIDIA A10", "A10"),
    ("NVIDIA A10G", None),
    ("Tesla T4", "T4"),
]


@pytest.mark.parametrize(("name", "label"), DEVICE_NAMES)
def test_device_name_finds_its_row_or_none(name, label):
    row = find_peak(name)
    assert (row.label if row else None) == label


@pytest.mark.parametrize(("name", "label"), DEVICE_NAMES)
def test_no_device_name_matches_two_rows(name, label):
    matching = [row.label for row in PEAKS if re.search(row.pattern, name, flags=re.IGNORECASE)]
    assert len(matching) <= 1, f"{name!r} matches {matching}: the first row would win silently"


def test_a100_names_never_reach_the_a10_row():
    a10 = next(row for row in PEAKS if row.label == "A10")
    for name in ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "NVIDIA A10G"):
        assert not re.search(a10.pattern, name, flags=re.IGNORECASE)


@pytest.mark.parametrize(
    ("name", "dtype", "peak"),
    [
        ("NVIDIA H200", "bfloat16", 989.0),
        ("NVIDIA H100 80GB HBM3", "bfloat16", 989.0),
        ("NVIDIA H100 PCIe", "float16", 756.0),
        ("NVIDIA A100-SXM4-80GB", "bfloat16", 312.0),
        ("NVIDIA A10", "bfloat16", 125.0),
        # GeForce rows: FP32 accumulate; the whitepapers print FP16 with FP16 accumulate at
        # twice these (330.3 and 142).
        ("NVIDIA GeForce RTX 4090", "torch.bfloat16", 165.2),
        ("NVIDIA GeForce RTX 4090", "float16", 165.2),
        ("NVIDIA GeForce RTX 3090", "float16", 71.0),
        ("NVIDIA GeForce RTX 3090", "bfloat16", 71.0),
        ("NVIDIA L4", "bfloat16", 121.0),
        ("Tesla T4", "float16", 65.0),
        ("NVIDIA H200", "float32", 67.0),
    ],
)
def test_peak_lookup_finds_the_gpu_by_the_name_torch_reports(name, dtype, peak):
    assert peak_tflops(name, dtype) == peak


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("CPU (x86_64)", "float32"),
        ("Apple MPS", "float16"),
        ("NVIDIA L40S", "bfloat16"),
        ("Tesla T4", "bfloat16"),
    ],
)
def test_peak_lookup_gives_none_rather_than_a_guess(name, dtype):
    assert peak_tflops(name, dtype) is None


def _source_line(label: str) -> str:
    """The docstring bullet that cites ``label``'s source, with its continuation lines."""
    bullets = re.split(r"\n- ", peaks.__doc__)
    for bullet in bullets:
        names = bullet.split(":", 1)[0]
        if label in [n.strip() for n in re.split(r",|\(", names)]:
            return bullet
    raise AssertionError(f"no source bullet in helpers.kit.bench.peaks' docstring for {label!r}")


@pytest.mark.parametrize("row", PEAKS, ids=lambda row: row.label)
def test_every_figure_is_printed_in_its_source_bullet(row):
    text = _source_line(row.label).replace(",", "")
    for dtype, figure in row.tflops.items():
        assert re.search(rf"\b{figure:g}\b", text), f"{row.label} {dtype} {figure:g} not cited"
