"""An int8 KV cache: symmetric 8-bit numbers with one scale per token or per channel (notebook 13).

A cached tensor ``x`` is stored as ``values`` (int8, -127..127) and ``scale`` (floating point),
with ``x ≈ values * scale``. The scale is ``max |x| / 127`` over the axis ``dim``, kept once for
every slice along the other axes:

* per token: keys or values ``(B, h_kv, T, d_k)`` with ``dim=-1``, one scale per token and head;
  a new token brings its own scale, so a cache can grow one token at a time;
* per channel: ``dim=-2``, one scale per feature and head, shared by the tokens; a feature that
  is large in every token (an outlier channel) gets a scale of its own instead of stretching
  every token's.

The codes are the nearest: ``values * scale``, taken exactly, lies within half a step,
``scale / 2``, of ``x``. Codes and products are computed in float64 (float32 on Apple's MPS,
which has no float64) whatever ``x``'s dtype; the scale is rounded up to ``x``'s dtype, so no
code passes 127, and is never below the dtype's smallest number, so a tiny (subnormal) slice
still gets a scale above 0. :meth:`Int8Tensor.dequantize` returns ``x``'s dtype, rounding the
exact product once: that adds at most half a unit in the last place of the result (about
``scale / 4`` in bfloat16, ``scale / 32`` in float16, ``4e-6 · scale`` in float32), and a
product past the dtype's largest number gives that number, never infinity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from helpers.kit import checks

LEVELS = 127  # int8 codes -127..127: symmetric, so 0 is exact and -128 is never used
SCALE_BYTES = 2  # one float16 scale per separately scaled slice of a token


@dataclass(frozen=True)
class Int8Tensor:
    """``values`` int8, shaped like the original; ``scale`` with axis ``dim`` of size 1."""

    values: Tensor
    scale: Tensor

    def __post_init__(self) -> None:
        values, scale = self.values, self.scale
        checks.require_array("values", values, Tensor, "torch.Tensor")
        checks.expect(scale=(scale, "...: float"))
        if values.dtype != torch.int8:
            raise TypeError(f"values must be int8 codes, got dtype {values.dtype}, "
                            f"shape {tuple(values.shape)}")  # fmt: skip
        sizes = zip(scale.shape, values.shape, strict=False)  # read only where the ndims agree
        if scale.ndim != values.ndim or any(s not in (1, v) for s, v in sizes):
            raise ValueError(f"scale {tuple(scale.shape)} does not fit values {tuple(values.shape)}: "
                             "one scale per slice, the same number of axes, each of size 1 or the "
                             "values' size")  # fmt: skip
        checks.require_same_device(values=values, scale=scale)

    def dequantize(self) -> Tensor:
        """``values * scale``, taken exactly and rounded once to the scale's dtype: the numbers
        attention reads. Past the dtype's largest number, that number (not infinity)."""
        wide, biggest = _wide(self.values.device), torch.finfo(self.scale.dtype).max
        exact = self.values.to(wide) * self.scale.to(wide)  # exact for scales up to float32
        return exact.clamp(-biggest, biggest).to(self.scale.dtype)

    @property
    def nbytes(self) -> int:
        """Bytes held: one per number, plus the scales."""
        return self.values.nbytes + self.scale.nbytes


def quantize_int8(x: Tensor, dim: int) -> Int8Tensor:
    """Round x to int8 with one scale per slice along ``dim`` (``-1``: per token of a
    ``(..., T, d_k)`` cache, ``-2``: per channel). An all-zero slice gets scale 1.

    ``x`` must be finite: a NaN or an infinity has no int8 code, and its slice's scale would be
    NaN or infinity. The scale keeps ``x``'s dtype.
    """
    checks.expect(x=(x, "...: float"), dim=(dim, "int"))
    if not -x.ndim <= dim < x.ndim:
        raise ValueError(f"dim must be an axis of x, shape {tuple(x.shape)}, got {dim!r}")
    if x.numel() == 0 or x.is_meta:  # no numbers to round
        raise ValueError(f"x is a meta tensor, shape {tuple(x.shape)}: it has a shape but no numbers "
                         "to round; make it on a real device (cpu or cuda)" if x.is_meta else
                         f"x must hold at least one number, got shape {tuple(x.shape)}")  # fmt: skip
    dim = int(dim)
    biggest = x.abs().amax(dim=dim, keepdim=True)  # NaN and inf reach the maximum: no extra pass
    if not bool(torch.isfinite(biggest).all()):
        raise ValueError(
            f"x must be finite, got NaN or infinity in {int((~torch.isfinite(biggest)).sum())} "
            f"of {biggest.numel()} slices along dim={dim}, shape {tuple(x.shape)}: int8 codes "
            "hold numbers only"
        )
    wide = _wide(x.device)
    exact = biggest.to(torch.promote_types(x.dtype, torch.float32)) / LEVELS  # 1.0 stays 1.0
    scale = exact.to(x.dtype)
    up = torch.nextafter(scale, torch.full_like(scale, float("inf")))
    scale = torch.where(scale.to(wide) < exact, up, scale)  # rounded up: |x| / scale <= 127
    smallest = torch.nextafter(torch.zeros_like(scale), torch.ones_like(scale))  # a subnormal
    scale = torch.where(biggest > 0, scale.maximum(smallest), torch.ones_like(scale))
    values = torch.round(x.to(wide) / scale.to(wide)).clamp(-LEVELS, LEVELS).to(torch.int8)
    return Int8Tensor(values, scale)


def _wide(device: torch.device) -> torch.dtype:
    """float64 for codes and products: every int8 code times a float32 scale is exact in it."""
    return torch.float32 if device.type == "mps" else torch.float64  # MPS has no float64


def quantized_bytes_per_token(
    widths: Sequence[int], bits: int = 8, scale_bytes: int = SCALE_BYTES
) -> float:
    """Bytes one token adds to one layer's cache when each of its slices is stored at ``bits``
    bits with a scale of its own: ``sum(widths) · bits / 8 + scale_bytes · len(widths)``.

    ``widths`` are the slices' numbers: a key and a value of d_k for each KV head, or MLA's
    latent and rope key. 8 bits is this module's int8; 4 bits packs two numbers a byte.
    """
    if checks.require_positive_int("bits", bits) not in (8, 4):  # 8.0 is not a bit width
        raise ValueError(f"bits must be 8 or 4, got {bits!r}")
    if isinstance(widths, (str, bytes)) or not isinstance(widths, Sequence):
        raise TypeError(f"widths must be a list of slice widths, e.g. [64, 64], got {widths!r}")
    if not widths:
        raise ValueError("widths must list at least one slice, got an empty list")
    numbers = sum(checks.require_positive_int("width", w) for w in widths)
    scale_bytes = checks.require_positive_int("scale_bytes", scale_bytes)
    return numbers * bits / 8 + scale_bytes * len(widths)


def int8_kv_bytes_per_token(num_kv_heads: int, d_k: int, scale_bytes: int = SCALE_BYTES) -> int:
    """Bytes one token adds to one layer's int8 cache with per-token scales:
    ``2 · h_kv · (d_k + scale_bytes)`` (keys and values, each head one byte per number and one
    scale)."""
    num_kv_heads = checks.require_positive_int("num_kv_heads", num_kv_heads)
    d_k = checks.require_positive_int("d_k", d_k)
    return int(quantized_bytes_per_token([d_k] * (2 * num_kv_heads), 8, scale_bytes))
