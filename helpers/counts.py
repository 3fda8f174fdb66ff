"""Counts, not timings: one decode step's FLOPs and bytes (notebook 08), the cache bytes per
token of MHA, GQA, MQA and MLA and MLA's decode FLOPs (notebook 13).

* :func:`step_flops`, :func:`step_bytes` and :func:`projection_weights`: one decode step of one
  attention layer, with or without the cache; :func:`roofline_seconds` turns them into the
  least time a device needs;

* :func:`gqa_bytes_per_token` and :func:`mla_bytes_per_token`: what one token adds to one
  layer's cache at 16, 8 or 4 bits, from :func:`helpers.inference.kv_cache_bytes` and
  :func:`helpers.mla.latent_cache_bytes` at 16 bits and
  :func:`helpers.kv_quant.quantized_bytes_per_token` below (one float16 scale per slice);
* :func:`mla_step_flops`: one MLA layer's work for ``new_tokens`` tokens read after
  ``cached_tokens``, with per-head keys rebuilt (naive) or with ``kv_b_proj`` absorbed;
* :func:`flops_per_cached_token`: the part of a decode step that each cached token adds;

Everything is counted, nothing is timed: the same numbers on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.inference import kv_cache_bytes
from helpers.kit.checks import (
    require_array,
    require_bool,
    require_choice,
    require_non_negative_int,
    require_positive_int,
    require_real,
)
from helpers.kv_quant import quantized_bytes_per_token
from helpers.mla import latent_cache_bytes

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
    require_array("shape", shape, MLAShape, "helpers.counts.MLAShape")
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
    require_array("shape", shape, MLAShape, "helpers.counts.MLAShape")
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


# --- one decode step of one attention layer (notebook 08) ------------------------------------------------------------


def _sizes(d_model: int, num_heads: int, num_kv_heads: int | None) -> tuple[int, int, int]:
    d_model = require_positive_int("d_model", d_model)
    num_heads = require_positive_int("num_heads", num_heads)
    kv = num_heads if num_kv_heads is None else require_positive_int("num_kv_heads", num_kv_heads)
    if d_model % num_heads or num_heads % kv:
        raise ValueError(
            f"num_heads={num_heads} must divide d_model={d_model}, and num_kv_heads={kv} must "
            f"divide num_heads={num_heads}"
        )
    return num_heads, kv, d_model // num_heads


def projection_weights(d_model: int, num_heads: int, num_kv_heads: int | None = None) -> int:
    """Numbers in the four projection weights: q and out ``D x h d_k``, k and v ``D x h_kv d_k``."""
    h, h_kv, d_k = _sizes(d_model, num_heads, num_kv_heads)
    return 2 * d_model * h * d_k + 2 * d_model * h_kv * d_k


def step_flops(
    seq_len: int, d_model: int, num_heads: int, num_kv_heads: int | None = None, cached=True
) -> int:
    """FLOPs of one attention layer producing the output of token ``seq_len`` (B = 1).

    With the cache: project the one new token (``2 x`` every projection weight) and attend from
    its h queries over ``seq_len`` keys (``4 h T d_k``: q k^T, then weights @ v). Without it:
    project all ``seq_len`` tokens and attend from all of them, the whole ``T x T`` square that a
    masked kernel computes (``4 h T^2 d_k``, notebook 07's count without the causal half).
    """
    seq_len = require_positive_int("seq_len", seq_len)
    require_bool("cached", cached)
    h, _, d_k = _sizes(d_model, num_heads, num_kv_heads)
    per_token = 2 * projection_weights(d_model, num_heads, num_kv_heads)
    if cached:
        return per_token + 4 * h * seq_len * d_k
    return seq_len * per_token + 4 * h * seq_len**2 * d_k


def step_bytes(
    seq_len: int,
    d_model: int,
    num_heads: int,
    num_kv_heads: int | None = None,
    bytes_per_value: int = 2,
    cached=True,
) -> int:
    """The least bytes one decode step of one attention layer moves to and from memory (B = 1).

    Every weight once, every input and output vector once, and the keys and values of all
    ``seq_len`` tokens once. With the cache, one new token comes in and goes out and the cached
    keys and values are read; without it, all ``seq_len`` tokens come in and go out, and their
    keys and values are made and used once. A kernel may move more, never less.
    """
    seq_len = require_positive_int("seq_len", seq_len)
    require_bool("cached", cached)
    _, h_kv, d_k = _sizes(d_model, num_heads, num_kv_heads)
    tokens = 1 if cached else seq_len
    values = projection_weights(d_model, num_heads, num_kv_heads)
    values += 2 * tokens * d_model + 2 * seq_len * h_kv * d_k
    return values * require_positive_int("bytes_per_value", bytes_per_value)


def roofline_seconds(flops: float, nbytes: float, tflops: float, gb_per_s: float) -> float:
    """The least time: the work at the peak rate, or the bytes at the memory bandwidth, if longer.

    ``flops`` and ``nbytes`` are finite numbers, 0 or more; the two rates finite and positive.
    """
    for name, value in (("flops", flops), ("nbytes", nbytes)):
        require_real(name, value, low=0)
    for name, value in (("tflops", tflops), ("gb_per_s", gb_per_s)):
        if not require_real(name, value) > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")
    return max(flops / (tflops * 1e12), nbytes / (gb_per_s * 1e9))
