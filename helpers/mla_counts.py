"""Notebook 13's counts: cache bytes per token of MHA, GQA, MQA and MLA, and decode FLOPs.

* :func:`gqa_bytes_per_token` and :func:`mla_bytes_per_token`: what one token adds to one
  layer's cache at 16, 8 or 4 bits, from :func:`helpers.inference.kv_cache_bytes` and
  :func:`helpers.mla.latent_cache_bytes` at 16 bits and
  :func:`helpers.kv_quant.quantized_bytes_per_token` below (one float16 scale per slice);
* :func:`mla_step_flops`: one MLA layer's work for ``new_tokens`` tokens read after
  ``cached_tokens``, with per-head keys rebuilt (naive) or with ``kv_b_proj`` absorbed;
* :func:`flops_per_cached_token`: the part of a decode step that each cached token adds;
* :func:`gpu_balances`: the FLOPs per byte at which a GPU's arithmetic and memory take as long.

Everything is counted, nothing is timed: the same numbers on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.bench.peaks import BANDWIDTH_GB_S, peak_tflops
from helpers.inference import kv_cache_bytes
from helpers.kv_quant import quantized_bytes_per_token
from helpers.mla import latent_cache_bytes
from helpers.validation import (
    require_array,
    require_bool,
    require_choice,
    require_non_negative_int,
    require_positive_int,
)

BITS = (16, 8, 4)  # 16: bfloat16, no scales; 8 and 4: a scale per slice


@dataclass(frozen=True)
class MLAShape:
    """The sizes of one MLA layer, and the number of layers."""

    d_model: int
    num_heads: int
    kv_latent_dim: int
    nope_dim: int
    rope_dim: int
    v_dim: int
    layers: int

    def __post_init__(self) -> None:
        for name, value in vars(self).items():  # every size a positive int (a NumPy one too)
            require_positive_int(name, value)


# DeepSeek-V2 (236B), as published in its paper and in the configuration of DeepSeek's inference
# code (deepseek-ai/DeepSeek-V3, inference/configs/config_236B.json): dim 5120, n_heads 128,
# kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, n_layers 60.
DEEPSEEK_V2 = MLAShape(5120, 128, 512, 128, 64, 128, 60)


def _require_bits(bits: int) -> None:
    require_choice("bits", bits, BITS)  # 8.0 and True are not bit widths


def gqa_bytes_per_token(num_kv_heads: int, d_k: int, bits: int = 16) -> float:
    """Bytes one token adds to one layer's GQA cache: a key and a value of d_k numbers for each
    of ``num_kv_heads`` heads, each with its own scale below 16 bits."""
    _require_bits(bits)
    if bits == 16:
        return float(kv_cache_bytes(1, 1, 1, num_kv_heads, d_k, 2))
    slices = 2 * require_positive_int("num_kv_heads", num_kv_heads)  # a key and a value a head
    return quantized_bytes_per_token([require_positive_int("d_k", d_k)] * slices, bits)


def mla_bytes_per_token(kv_latent_dim: int, rope_dim: int, bits: int = 16) -> float:
    """Bytes one token adds to one layer's MLA cache: the latent and the shared rope key, each
    with its own scale below 16 bits."""
    _require_bits(bits)
    if bits == 16:
        return float(latent_cache_bytes(1, 1, 1, kv_latent_dim, rope_dim, 2))
    sizes = dict(kv_latent_dim=kv_latent_dim, rope_dim=rope_dim)
    return quantized_bytes_per_token([require_positive_int(n, v) for n, v in sizes.items()], bits)


def mla_step_flops(shape: MLAShape, cached_tokens: int, absorb: bool, new_tokens: int = 1) -> int:
    """FLOPs of one MLA layer reading ``new_tokens`` tokens over a cache that already holds
    ``cached_tokens`` (B = 1). Their attention covers ``T = cached_tokens + new_tokens`` tokens:
    a decode step is ``new_tokens = 1``, reading a prompt from an empty cache ``cached_tokens = 0``.

    Both forms project the new tokens: ``q_proj``, ``kv_a_proj_with_mqa`` and ``o_proj``. The
    naive form then rebuilds the keys and values of all ``T`` tokens (``2 T c h (nope + v)``) and
    attends with them (``2 h T_new T (nope + rope)`` for the scores, ``2 h T_new T v`` for the
    values). The absorbed form folds W_UK into each new query (``2 h T_new nope c``), scores
    over the latent and the rope key (``2 h T_new T (c + rope)``), sums latents
    (``2 h T_new T c``) and unfolds W_UV (``2 h T_new c v``). The whole ``T_new x T`` rectangle
    is counted, as a masked kernel computes it.
    """
    require_array("shape", shape, MLAShape, "helpers.mla_counts.MLAShape")
    require_bool("absorb", absorb)
    past = require_non_negative_int("cached_tokens", cached_tokens)
    n = require_positive_int("new_tokens", new_tokens)
    T = past + n
    D, h, c = shape.d_model, shape.num_heads, shape.kv_latent_dim
    nope, rope, v = shape.nope_dim, shape.rope_dim, shape.v_dim
    projections = 2 * n * D * (h * (nope + rope) + c + rope + h * v)
    if absorb:
        return projections + 2 * h * n * (nope * c + T * (2 * c + rope) + c * v)
    return projections + 2 * T * c * h * (nope + v) + 2 * h * n * T * (nope + rope + v)


def flops_per_cached_token(shape: MLAShape, variant: str) -> int:
    """Attention FLOPs one decode step spends per cached token, by ``variant``:

    ``"gqa"`` (any h_kv: each query head reads a key and a value of width ``v_dim``), ``"mla
    absorbed"`` and ``"mla naive"`` (which rebuilds the token's keys and values first).
    """
    require_array("shape", shape, MLAShape, "helpers.mla_counts.MLAShape")
    h, c, nope, rope, v = (shape.num_heads, shape.kv_latent_dim, shape.nope_dim,
                           shape.rope_dim, shape.v_dim)  # fmt: skip
    counts = {
        "gqa": 4 * h * v,
        "mla absorbed": 2 * h * (2 * c + rope),
        "mla naive": 2 * c * h * (nope + v) + 2 * h * (nope + rope + v),
    }
    if not isinstance(variant, str) or variant not in counts:  # a list is not a variant
        raise ValueError(f"variant must be one of {tuple(counts)}, got {variant!r}")
    return counts[variant]


def gpu_balances() -> dict[str, float]:
    """FLOPs per byte each GPU of notebook 08's table can do: dense 16-bit peak / bandwidth."""
    out = {}
    for label, (device, gb_per_s) in BANDWIDTH_GB_S.items():
        peak = peak_tflops(device, "bfloat16") or peak_tflops(device, "float16")
        out[label] = peak * 1e12 / (gb_per_s * 1e9)
    return out
