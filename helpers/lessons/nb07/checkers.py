"""Exercises of notebook 07: pick a dtype tolerance, size the weights, count attention's FLOPs.

The checks count with their own loops (one matmul at a time) or measure errors themselves, so
a learner's formula is compared with an independent computation, not with ``helpers.kit.bench``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from helpers.kit.exercises import Slip, exercise


def _attention_error(dtype: torch.dtype, seed: int) -> float:
    """Max abs error of SDPA in ``dtype`` against float64 on one seeded input (CPU, math)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 4, 32, 16, generator=gen, dtype=torch.float64) for _ in "qkv")
    want = F.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel(SDPBackend.MATH):
        got = F.scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype))
    return float((got.double() - want).abs().max())


@exercise(
    "attention_tolerance",
    notebook="07",
    hint=(
        "Tie the tolerance to the dtype's machine epsilon, torch.finfo(dtype).eps: a few eps "
        "covers rounding the inputs and the output. Measure first, then choose."
    ),
    unseen_inputs=False,  # the answer is chosen from the errors measured on these seeds
)
def _attention_tolerance():
    """Notebook 07, section 2 (Dtypes and the error they bring), exercise 1."""

    dtypes = (torch.float32, torch.bfloat16, torch.float16)

    def covers_the_measured_error(fn):
        for dtype in dtypes:
            worst = max(_attention_error(dtype, seed) for seed in range(3))
            tol = float(fn(dtype))
            assert tol >= worst, (
                f"{dtype}: tolerance {tol:.1e} is below a measured error {worst:.1e}"
            )

    def is_not_so_loose_it_hides_bugs(fn):
        for dtype in dtypes:
            tol, eps = float(fn(dtype)), torch.finfo(dtype).eps
            if tol > 64 * eps:
                raise Slip(
                    f"{dtype}: tolerance {tol:.1e} is over 64 eps ({64 * eps:.1e})",
                    hint="64 eps is the ceiling: a tolerance as loose as 1e-2 for float32 would "
                    "let a real float32 bug through. Scale it with torch.finfo(dtype).eps.",
                )

    return [
        ("is at least the error measured in each dtype", covers_the_measured_error),
        ("is at most 64 eps of the dtype", is_not_so_loose_it_hides_bugs),
    ]


@exercise(
    "weights_bytes",
    notebook="07",
    hint=(
        "The weights are a (B, h, T, T) tensor: B * h * T * T numbers, each "
        "torch.finfo(dtype).bits // 8 bytes (4 for float32, 2 for bfloat16 and float16)."
    ),
)
def _weights_bytes():
    """Notebook 07, section 5 (What is lost: the weights), exercise 2."""

    def counts_float32(fn):
        got = fn(2, 3, 5, torch.float32)
        assert got == 2 * 3 * 5 * 5 * 4, f"(2, 3, 5) float32: expected 600, got {got}"

    def matches_a_real_tensor(fn):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            real = torch.empty(1, 2, 7, 7, dtype=dtype)
            want = real.numel() * real.element_size()
            got = fn(1, 2, 7, dtype)
            assert got == want, f"(1, 2, 7) {dtype}: expected {want}, got {got}"

    return [
        ("counts B * h * T * T float32 numbers", counts_float32),
        ("matches the size of a real tensor in each dtype", matches_a_real_tensor),
    ]


def _matmul_flops(m: int, k: int, n: int) -> int:
    """``(m, k) @ (k, n)``: m * n outputs, each k multiplies and k adds."""
    return 2 * m * k * n


def _attention_flops_by_matmuls(B: int, h: int, T: int, d_k: int) -> int:
    per_head = _matmul_flops(T, d_k, T) + _matmul_flops(T, T, d_k)  # q k^T, then weights @ v
    return sum(per_head for _ in range(B * h))


def _causal_flops_by_pairs(B: int, h: int, T: int, d_k: int) -> int:
    """Only the allowed (query, key) pairs: 2 d_k FLOPs for the score, 2 d_k for its share of
    ``weights @ v``. The pairs are counted on a real causal mask: T (T + 1) / 2 of them."""
    pairs = int(torch.ones(T, T, dtype=torch.bool).tril().sum())
    return B * h * pairs * (2 * d_k + 2 * d_k)


@exercise(
    "attention_flops",
    notebook="07",
    hint=(
        "Two matmuls per head, q @ k^T (T x d_k times d_k x T) and weights @ v (T x T times "
        "T x d_k), each 2 * T * T * d_k FLOPs; times B * h. With causal=True count the allowed "
        "(query, key) pairs only: either half of the T * T (the usual convention) or exactly "
        "the T * (T + 1) / 2 pairs on and below the diagonal; both are accepted."
    ),
)
def _attention_flops():
    """Notebook 07, section 7 (FLOPs, time and TFLOP/s), exercise 3."""

    def counts_one_head(fn):
        got = fn(1, 1, 4, 2, False)
        want = _attention_flops_by_matmuls(1, 1, 4, 2)
        assert got == want, f"B=h=1, T=4, d_k=2: expected {want}, got {got}"

    def scales_with_batch_and_heads(fn):
        for size in [(2, 3, 16, 8), (4, 12, 128, 64)]:
            got, want = fn(*size, False), _attention_flops_by_matmuls(*size)
            assert got == want, f"(B, h, T, d_k)={size}: expected {want}, got {got}"

    def counts_the_allowed_pairs_when_causal(fn):
        size = (2, 4, 64, 16)
        got = fn(*size, True)
        half, exact = _attention_flops_by_matmuls(*size) / 2, _causal_flops_by_pairs(*size)
        assert got in (half, exact), (
            f"causal (2, 4, 64, 16): expected {half:.0f} (half the full count) or {exact} "
            f"(exactly the T(T+1)/2 allowed pairs), got {got}"
        )

    return [
        ("counts the two matmuls of one head", counts_one_head),
        ("multiplies by batch and heads", scales_with_batch_and_heads),
        ("counts the allowed pairs for a causal mask", counts_the_allowed_pairs_when_causal),
    ]
