"""FlashAttention's forward pass as a Triton kernel (notebook 09, section 4).

The kernel is :func:`helpers.flash.flash_forward` line for line: one program handles one block
of ``BLOCK_Q`` queries of one (batch, head), walks over the keys ``BLOCK_K`` at a time, and
keeps the running max ``m``, running sum ``l`` and running output ``acc`` in registers. Only the
final ``(BLOCK_Q, d)`` output block is written back to memory.

On a GPU the kernel is compiled. With ``TRITON_INTERPRET=1`` set before Triton is first
imported, Triton's interpreter runs the same code on CPU tensors with NumPy: slow, but faithful
in float32 and float16 (not in bfloat16, which NumPy lacks). Triton must be installed
(``pip install triton``, Linux); import this module only then.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _forward_kernel(
    Q, K, V, O,  # pointers to (B*h, T, d) tensors, contiguous in d
    T_q, T_k, d, scale,
    stride_q, stride_k, stride_v, stride_o,  # elements between one (batch, head) and the next
    stride_qt, stride_kt, stride_vt, stride_ot,  # elements between one token and the next
    IS_CAUSAL: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    block, head = tl.program_id(0), tl.program_id(1)  # which queries, which (batch, head)
    rows = block * BLOCK_Q + tl.arange(0, BLOCK_Q)  # (BLOCK_Q,) query positions
    cols = tl.arange(0, D)  # (D,) features, padded up to a power of two
    q = tl.load(Q + head * stride_q + rows[:, None] * stride_qt + cols[None, :],
                mask=(rows[:, None] < T_q) & (cols[None, :] < d), other=0.0)  # fmt: skip
    q = (q * scale).to(q.dtype)  # scaled once, as flash_forward does: q k^T may overflow alone
    m = tl.full([BLOCK_Q], float("-inf"), tl.float32)  # running max
    l = tl.zeros([BLOCK_Q], tl.float32)  # running sum
    acc = tl.zeros([BLOCK_Q, D], tl.float32)  # running output
    if IS_CAUSAL:  # key blocks wholly above the diagonal are never visited
        hi = tl.minimum(T_k, (block + 1) * BLOCK_Q)
    else:
        hi = T_k
    for start in range(0, hi, BLOCK_K):
        keys = start + tl.arange(0, BLOCK_K)  # (BLOCK_K,) key positions
        kv_mask = (keys[:, None] < T_k) & (cols[None, :] < d)
        k = tl.load(
            K + head * stride_k + keys[:, None] * stride_kt + cols[None, :], mask=kv_mask, other=0.0
        )
        v = tl.load(
            V + head * stride_v + keys[:, None] * stride_vt + cols[None, :], mask=kv_mask, other=0.0
        )
        s = tl.dot(q, tl.trans(k))  # (BLOCK_Q, BLOCK_K) scores of this tile, already scaled
        valid = keys[None, :] < T_k
        if IS_CAUSAL:
            valid = valid & (keys[None, :] <= rows[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet
        rescale = tl.exp(m - m_safe)  # exp(m_old - m_new): shrink what was kept
        p = tl.exp(s - m_safe[:, None])  # this tile's unnormalised weights
        l = l * rescale + tl.sum(p, 1)
        acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    out = acc / tl.where(l == 0.0, 1.0, l)[:, None]  # a row with no key stays 0
    tl.store(O + head * stride_o + rows[:, None] * stride_ot + cols[None, :],
             out.to(O.dtype.element_ty), mask=(rows[:, None] < T_q) & (cols[None, :] < d))  # fmt: skip


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool,
            block_q: int = 32, block_k: int = 32) -> torch.Tensor:  # fmt: skip
    """Launch the kernel on q, k, v ``(B, h, T, d)``; unchecked (see flash_attention_triton)."""
    B, h, T_q, d = q.shape
    T_k = k.shape[-2]
    q3, k3, v3 = (x.reshape(B * h, x.shape[-2], d).contiguous() for x in (q, k, v))
    out = torch.empty_like(q3)
    grid = (triton.cdiv(T_q, block_q), B * h)  # one program per block of queries per head
    _forward_kernel[grid](
        q3, k3, v3, out, T_q, T_k, d, 1.0 / d**0.5,
        q3.stride(0), k3.stride(0), v3.stride(0), out.stride(0),
        q3.stride(1), k3.stride(1), v3.stride(1), out.stride(1),
        IS_CAUSAL=is_causal, BLOCK_Q=block_q, BLOCK_K=block_k, D=max(16, triton.next_power_of_2(d)),
    )  # fmt: skip
    return out.view(B, h, T_q, d)
