"""FlashAttention from scratch: the online softmax and tiled attention (notebook 09).

Attention never needs the whole ``(T_q, T_k)`` score matrix at once. Walk over the keys in
blocks, keep for every query row a running maximum ``m``, a running sum ``l`` of
``exp(score - m)`` and a running output ``acc``; when a new block raises the maximum, rescale
what was kept by ``exp(m_old - m_new)``. At the end ``acc / l`` is the exact attention output,
and ``lse = m + log(l)`` (the log-sum-exp of each row) is enough to rebuild any weight later:
``weight[i, j] = exp(score[i, j] - lse[i])``.

Shapes: q ``(..., T_q, d)``, k ``(..., T_k, d)``, v ``(..., T_k, d_v)``; ``lse`` ``(..., T_q)``.
Causal masks are aligned top-left, like SDPA's ``is_causal``: query i sees keys 0..i. A query
with no key to see (T_q > T_k) gets a zero output and ``lse = -inf``.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

import numpy as np

from helpers.kit import checks


def online_softmax(x: np.ndarray, block: int = 4) -> np.ndarray:
    """Softmax along the last axis in one pass over blocks of ``block`` entries (notebook 09, §1).

    Keeps a running max and a running sum, rescaling the sum when the max grows; equals the
    two-pass stable softmax exactly (up to rounding). Same shape as ``x``.
    """
    x = np.asarray(x)
    checks.require_floating("x", x)
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension (..., n), got a 0-d array")
    checks.require_finite("x", x, allow_neg_inf=True)
    block = checks.require_positive_int("block", block)
    m = np.full(x.shape[:-1], -np.inf, dtype=x.dtype)  # running max
    total = np.zeros(x.shape[:-1], dtype=x.dtype)  # running sum of exp(x - m)
    for start in range(0, x.shape[-1], block):
        chunk = x[..., start : start + block]
        m_new = np.maximum(m, chunk.max(axis=-1))
        safe = np.where(np.isfinite(m_new), m_new, 0.0)  # rows still all -inf stay at 0
        total = total * np.exp(np.where(np.isfinite(m), m - safe, -np.inf)) + np.exp(
            chunk - safe[..., None]
        ).sum(axis=-1)
        m = m_new
    safe = np.where(np.isfinite(m), m, 0.0)
    return np.exp(x - safe[..., None]) / np.where(total == 0, 1.0, total)[..., None]


def flash_attention_numpy(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    block_q: int = 64,
    block_k: int = 64,
    is_causal: bool = False,
) -> np.ndarray:
    """Exact attention by tiles and the online softmax, never holding a ``(T_q, T_k)`` array.

    The output ``(..., T_q, d_v)`` of :func:`flash_forward`. Notebook 09, section 2.
    """
    return flash_forward(q, k, v, block_q, block_k, is_causal)[0]


@np.errstate(over="ignore", invalid="ignore")  # scores that overflow are refused at the end
def flash_forward(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    block_q: int = 64,
    block_k: int = 64,
    is_causal: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The tiled forward pass: ``(output (..., T_q, d_v), lse (..., T_q))`` (notebook 09).

    Batch dimensions broadcast as in the reference; scores ``q k^T / sqrt(d)`` that overflow
    q's dtype are refused, as the reference refuses them.
    """
    checks.check_attention(q, k, v, None, np.ndarray, "NumPy array")
    checks.expect(
        block_q=(block_q, "int > 0"), block_k=(block_k, "int > 0"), is_causal=(is_causal, "bool")
    )
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (np.broadcast_to(x, (*batch, *x.shape[-2:])) for x in (q, k, v))  # views
    T_q, T_k, scale = q.shape[-2], k.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    out = np.zeros((*batch, T_q, v.shape[-1]), q.dtype)
    lse = np.full((*batch, T_q), -np.inf, dtype=q.dtype)
    for i0 in range(0, T_q, block_q):
        q_tile = q[..., i0 : i0 + block_q, :] * q.dtype.type(scale)  # (..., b_q, d)
        rows = np.arange(i0, min(i0 + block_q, T_q))
        m = np.full((*batch, len(rows)), -np.inf, dtype=q.dtype)  # running max
        l = np.zeros_like(m)  # running sum
        acc = np.zeros((*m.shape, v.shape[-1]), dtype=q.dtype)  # running output
        for j0 in range(0, T_k, block_k):
            if is_causal and j0 > rows[-1]:  # the tile lies wholly above the diagonal: skip
                break
            s = q_tile @ np.swapaxes(k[..., j0 : j0 + block_k, :], -1, -2)  # (..., b_q, b_k)
            if is_causal:
                s = np.where(np.arange(j0, j0 + s.shape[-1]) <= rows[:, None], s, -np.inf)
            m, l, acc = online_update(m, l, acc, s, v[..., j0 : j0 + block_k, :])
        seen = l > 0  # a row with no key keeps l = 0: zeros out, lse = -inf
        out[..., i0 : i0 + block_q, :] = acc / np.where(seen, l, 1.0)[..., None]
        lse[..., i0 : i0 + block_q] = np.where(seen, m + np.log(np.where(seen, l, 1.0)), -np.inf)
    if not np.isfinite(lse).all():  # every row sees key 0, so only an overflow gets here
        checks.raise_scores_overflow(f"{(~np.isfinite(lse)).sum()} of {lse.size} query rows", q, k)
    return out, lse


def online_update(m, l, acc, s, v_tile):
    """Fold one tile of scores ``s (..., b_q, b_k)`` into the running max, sum and output."""
    m_new = np.maximum(m, s.max(axis=-1))
    m_safe = np.where(m_new == -np.inf, 0.0, m_new)  # a row with no key yet
    rescale = np.exp(m - m_safe)  # exp(m_old - m_new): shrink what was kept
    p = np.exp(s - m_safe[..., None])  # this tile's unnormalised weights
    return m_new, l * rescale + p.sum(axis=-1), acc * rescale[..., None] + p @ v_tile


def weights_from_lse(
    q: np.ndarray, k: np.ndarray, lse: np.ndarray, rows: slice | np.ndarray, is_causal: bool = False
) -> np.ndarray:
    """Rows of the attention weights rebuilt from the kept log-sum-exp: ``exp(s - lse)``.

    ``rows`` picks query rows; only those rows' scores are formed, ``(..., len(rows), T_k)``.
    """
    checks.check_attention(q, k, k, None, np.ndarray, "NumPy array")
    checks.expect(np.ndarray, q=(q, "... T_q d: float"), lse=(lse, "... T_q: float"),
                  is_causal=(is_causal, "bool"))  # fmt: skip
    want = (*np.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2])
    if lse.shape != want:
        raise ValueError(f"lse must have shape {want} for q {q.shape}, k {k.shape}, got {lse.shape}")  # fmt: skip
    checks.require_finite("lse", lse, allow_neg_inf=True)
    try:
        index = np.arange(q.shape[-2])[rows]
    except (IndexError, TypeError, ValueError):
        index = None
    if getattr(index, "ndim", 0) != 1:
        raise ValueError(f"rows must pick query rows of 0..{q.shape[-2] - 1} (a slice or a 1-D "
                         f"array of indices), got {rows!r}")  # fmt: skip
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
        s = q[..., index, :] @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    allowed = np.arange(k.shape[-2]) <= index[:, None] if is_causal else None
    checks.require_finite_scores(s, allowed, q, k)
    if is_causal:
        s = np.where(allowed, s, -np.inf)
    finite = np.isfinite(lse[..., index])[..., None]
    return np.where(finite, np.exp(s - np.where(finite, lse[..., index, None], 0.0)), 0.0)


def flash_backward_numpy(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    out: np.ndarray,
    lse: np.ndarray,
    grad_out: np.ndarray,
    block: int = 64,
    is_causal: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients ``(dq, dk, dv)`` by recomputing each tile's weights from ``lse`` (nb 09, Going further B).

    Only the output and one number per row were kept from the forward pass; each
    ``(block, block)`` tile of weights is rebuilt, used and dropped. q, k, v ``(T, d)``-style
    arrays with the same leading dimensions.
    """
    checks.check_flash_backward(q, k, v, out, lse, grad_out, block, is_causal)
    scale = 1.0 / math.sqrt(q.shape[-1])
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    delta = (grad_out * out).sum(axis=-1)  # (..., T_q): the row sums of dP * P
    for i0 in range(0, q.shape[-2], block):
        rows = np.arange(i0, min(i0 + block, q.shape[-2]))
        lse_rows = lse[..., rows, None]
        for j0 in range(0, k.shape[-2], block):
            if is_causal and j0 > rows[-1]:
                break
            with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
                s = q[..., rows, :] @ np.swapaxes(k[..., j0 : j0 + block, :], -1, -2) * scale
            allowed = np.arange(j0, j0 + s.shape[-1]) <= rows[:, None] if is_causal else None
            checks.require_finite_scores(s, allowed, q, k)
            if is_causal:
                s = np.where(allowed, s, -np.inf)
            p = np.where(
                np.isfinite(lse_rows), np.exp(s - np.where(np.isfinite(lse_rows), lse_rows, 0)), 0
            )
            dv[..., j0 : j0 + block, :] += np.swapaxes(p, -1, -2) @ grad_out[..., rows, :]
            dp = grad_out[..., rows, :] @ np.swapaxes(v[..., j0 : j0 + block, :], -1, -2)
            ds = p * (dp - delta[..., rows, None]) * scale
            dq[..., rows, :] += ds @ k[..., j0 : j0 + block, :]
            dk[..., j0 : j0 + block, :] += np.swapaxes(ds, -1, -2) @ q[..., rows, :]
    return dq, dk, dv


def flash_attention_triton(q: Any, k: Any, v: Any, is_causal: bool = False) -> Any:
    """The tiled forward pass as a Triton kernel: q, k, v torch tensors ``(B, h, T, d)``.

    Compiled on a CUDA GPU (float32 there goes through TF32 tensor cores); on a CPU tensor it
    runs under Triton's interpreter, slowly, with NumPy. The interpreter is faithful in float32
    (a few float32 epsilons from SDPA) and in float16 (the same error as SDPA's float16 against
    float64); it computes bfloat16 wrongly, since NumPy has no bfloat16, so bfloat16 needs a GPU.
    Notebook 09, section 4; the kernel is in :mod:`helpers.flash_triton`.

    The kernel has no backward pass: while autograd records, q, k or v that require grad are
    refused (the output would silently carry no gradient; use :func:`flash_attention_numpy`'s
    backward of Going further B, or SDPA, to train). Inside ``torch.no_grad()`` they are welcome.
    NaN, infinity and scores that overflow are not looked for: such a row comes out NaN, the
    policy :mod:`helpers.torch_attention` explains for every torch path.
    """
    import torch

    checks.expect(q=(q, "B h T_q d: float"), k=(k, "B h T_k d: float"), v=(v, "B h T_k d: float"),
                  is_causal=(is_causal, "bool"))  # fmt: skip
    if not (q.is_cuda or q.dtype in (torch.float32, torch.float16)):
        why = ("Triton's interpreter computes bfloat16 wrongly (NumPy has none); use a GPU for "
               "bfloat16" if q.dtype == torch.bfloat16 else "the kernel does not take it")  # fmt: skip
        raise TypeError(f"on a CPU the kernel runs in float32 or float16 only, got {q.dtype}, q "
                        f"shape {tuple(q.shape)}: {why}; convert with .float() or .half()")  # fmt: skip
    grads = [n for n, x in zip("qkv", (q, k, v), strict=True) if x.requires_grad]
    if grads and torch.is_grad_enabled():
        raise ValueError(f"{', '.join(grads)} require grad, but the Triton kernel has no backward "
                         f"pass: its output would carry no gradient, q shape {tuple(q.shape)}; "
                         "call it inside torch.no_grad() or pass .detach()")  # fmt: skip
    if 0 in q.shape or 0 in k.shape or q.shape[-1] > 256:  # the kernel keeps a (32, d) tile
        raise ValueError(f"q and k must hold tokens and 1 <= d <= 256, got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}")  # fmt: skip
    kernel = _triton_kernel(interpret=not q.is_cuda)
    return kernel.forward(q, k, v, is_causal)


def _triton_kernel(interpret: bool) -> Any:
    """Import :mod:`helpers.flash_triton`, in Triton's interpreter mode for CPU tensors.

    Triton decides at import time whether kernels are compiled or interpreted, so a CPU run
    sets ``TRITON_INTERPRET=1`` before the first import of Triton, and says so if too late.
    """
    if interpret and "triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        from helpers import flash_triton
    except ImportError as error:  # Triton ships for Linux only
        raise RuntimeError(
            "Triton is not installed here (it is published for Linux; on macOS and Windows "
            "read the notebook's committed outputs instead)"
        ) from error
    interpreted = type(flash_triton._forward_kernel).__name__ == "InterpretedFunction"
    if interpret and not interpreted:
        raise RuntimeError(
            "CPU tensors need Triton's interpreter, but Triton was imported without "
            "TRITON_INTERPRET=1: set it before anything imports triton (or restart the kernel)"
        )
    return flash_triton
