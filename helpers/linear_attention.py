"""Linear attention and the gated delta rule: a fixed-size state instead of a growing cache (16).

Drop the softmax and attention becomes a running sum: ``o_t = Σ_{s ≤ t} (q_t · k_s) v_s =
S_tᵀ q_t`` with ``S_t = S_{t-1} + k_t v_tᵀ``, a state ``(d_k, d_v)`` per head whatever T is.
:func:`causal_linear_attention` runs that; :func:`gated_delta_rule` adds Gated DeltaNet's decay
``exp(g_t)`` and delta-rule write ``S ← S + β_t k_t (v_t − Sᵀ k_t)ᵀ``, the layer that Qwen3-Next
and Qwen3.5 use in three layers of four.

Each function has two forms that give the same numbers: ``chunk_size=None`` steps through the
tokens one by one (how a decode step runs); an int splits them into chunks, computes inside a
chunk with matrix products and carries only the state from chunk to chunk (how a prompt or a
training batch runs). The chunked delta rule is the WY (or UT) form of Yang et al., "Parallelizing
Linear Transformers with the Delta Rule over Sequence Length" (2024) and "Gated Delta Networks"
(2025); Hugging Face's ``modeling_qwen3_next.py`` (``torch_recurrent_gated_delta_rule``,
``torch_chunk_gated_delta_rule``) computes the same rule in the same layout.

Shapes: q, k ``(B, h, T, d_k)``; v ``(B, h, T, d_v)``; g, beta ``(B, h, T)``; state
``(B, h, d_k, d_v)``; output ``(B, h, T, d_v)``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from helpers.kit import checks

# --- argument checks, once, at the entry ---------------------------------------------------


def _check_qkv(q, k, v, chunk_size) -> None:
    n = checks.expect(
        q=(q, "B h T d_k: float"), k=(k, "B h T d_k: float"), v=(v, "B h T d_v: float")
    )
    if n["T"] < 1:
        raise ValueError(f"q must have shape (B, h, T, d_k) with T >= 1, got {tuple(q.shape)}")
    _ = chunk_size is None or checks.require_positive_int("chunk_size", chunk_size)  # or None


def _check_gates(q, v, g, beta, initial_state) -> None:
    checks.expect(q=(q, "B h T d_k"), g=(g, "B h T: float"), beta=(beta, "B h T: float"))
    if not bool(torch.isfinite(g).all()) or bool((g > 0).any()):
        raise ValueError(f"g must be finite and <= 0 (the log of a decay), got max {g.max()}")
    if not bool(((beta >= 0) & (beta <= 1)).all()):
        raise ValueError(f"beta must lie in [0, 1], got min {beta.min()}, max {beta.max()}")
    if initial_state is not None:
        layout = (initial_state, "B h d_k d_v: float")
        checks.expect(q=(q, "B h T d_k"), v=(v, "B h T d_v"), initial_state=layout)


def _compute_dtype(q: Tensor) -> torch.dtype:
    return torch.promote_types(q.dtype, torch.float32)  # half inputs are computed in float32


# --- linear attention: no softmax, no decay ------------------------------------------------


def causal_linear_attention(q: Tensor, k: Tensor, v: Tensor, chunk_size: int | None = None):
    """``o_t = Σ_{s ≤ t} (q_t · k_s) v_s``: ``(causal mask ∘ q kᵀ) v`` without forming ``q kᵀ``.

    No feature map, no normalisation, no scale. ``chunk_size=None`` runs the recurrence over a
    state ``(d_k, d_v)`` per head; an int the chunked form. Returns ``(B, h, T, d_v)`` in q's dtype.
    """
    _check_qkv(q, k, v, chunk_size)
    in_dtype, dtype = q.dtype, _compute_dtype(q)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    B, h, T, d_k = q.shape
    S = q.new_zeros(B, h, d_k, v.shape[-1])  # (B, h, d_k, d_v): all the memory there is
    out = []
    if chunk_size is None:
        for t in range(T):
            S = S + k[:, :, t, :, None] * v[:, :, t, None, :]  # add k_t v_tᵀ
            out.append(q[:, :, t, None] @ S)  # (B, h, 1, d_v) = q_tᵀ S
    else:
        for start in range(0, T, chunk_size):
            qc, kc, vc = (x[:, :, start : start + chunk_size] for x in (q, k, v))
            C = qc.shape[2]  # chunk_size, or fewer in the last chunk
            causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
            scores = (qc @ kc.transpose(-2, -1)).masked_fill(~causal, 0)  # (B, h, C, C)
            out.append(qc @ S + scores @ vc)  # earlier chunks through S, this one in parallel
            S = S + kc.transpose(-2, -1) @ vc
    return torch.cat(out, dim=2).to(in_dtype)


# --- the gated delta rule (Gated DeltaNet) -------------------------------------------------


def gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    initial_state: Tensor | None = None,
    chunk_size: int | None = None,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Gated DeltaNet's memory: returns ``(output (B, h, T, d_v), final_state (B, h, d_k, d_v))``.

    At each step t: ``S ← exp(g_t) S``; ``S ← S + k_t ⊗ β_t (v_t − Sᵀ k_t)``; ``o_t = Sᵀ (scale ·
    q_t)``, scale ``1 / sqrt(d_k)`` by default. ``chunk_size=None`` runs the recurrence, an int the
    chunked (WY) form, equal for any chunk size and any decay. q and k are used as given (Qwen3-Next
    L2-normalises them before). The state starts at ``initial_state`` (zeros if None).
    """
    _check_qkv(q, k, v, chunk_size)
    _check_gates(q, v, g, beta, initial_state)
    in_dtype, dtype = q.dtype, _compute_dtype(q)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    q, k, v, g, beta = (x.to(dtype) for x in (q, k, v, g, beta))
    q = q * scale
    B, h, T, d_k = q.shape
    if initial_state is None:
        S = q.new_zeros(B, h, d_k, v.shape[-1])
    else:
        S = initial_state.to(dtype).clone()  # never written into: the caller's state stays
    if chunk_size is None:
        out, S = delta_rule_steps(q, k, v, g, beta, S)
    else:
        out, S = delta_rule_chunks(q, k, v, g, beta, S, chunk_size)
    return out.to(in_dtype), S.to(in_dtype)


def delta_rule_steps(q, k, v, g, beta, S):
    """The recurrence, token by token (what a decode step runs), on what :func:`gated_delta_rule`
    prepared: checked inputs in the compute dtype, q already scaled, S ``(B, h, d_k, d_v)``."""
    out = []
    for t in range(q.shape[2]):
        S = S * g[:, :, t, None, None].exp()  # decay: S ← exp(g_t) S
        k_t = k[:, :, t]  # (B, h, d_k)
        predicted = (k_t[..., None, :] @ S)[..., 0, :]  # Sᵀ k_t, what S recalls: (B, h, d_v)
        correction = beta[:, :, t, None] * (v[:, :, t] - predicted)  # β_t (v_t − Sᵀ k_t)
        S = S + k_t[..., :, None] * correction[..., None, :]  # S ← S + k_t ⊗ correction
        out.append(q[:, :, t, None] @ S)  # o_t = Sᵀ q_t, (B, h, 1, d_v)
    return torch.cat(out, dim=2), S


def delta_rule_chunks(q, k, v, g, beta, S, chunk_size):
    """The chunked (WY / UT) form: inside a chunk by matrix products, across chunks by the state;
    on what :func:`gated_delta_rule` prepared, as :func:`delta_rule_steps`.

    Within a chunk, with ``G_t = Σ_{s ≤ t} g_s`` (cumulative, from the chunk's start), the writes
    ``u_t = β_t (v_t − exp(g_t) S_{t−1}ᵀ k_t)`` solve ``(I + A) U = β V − (β exp(G) K) S_0`` with
    ``A[t, s] = β_t (k_t · k_s) exp(G_t − G_s)`` for s < t: one triangular solve. Only differences
    ``G_t − G_s ≤ 0`` (t ≥ s) and ``G_t ≤ 0`` are ever exponentiated, so nothing overflows.
    """
    out = []
    for start in range(0, q.shape[2], chunk_size):
        qc, kc, vc = (x[:, :, start : start + chunk_size] for x in (q, k, v))
        bc = beta[:, :, start : start + chunk_size, None]  # (B, h, C, 1)
        G = g[:, :, start : start + chunk_size].cumsum(-1)  # (B, h, C), decreasing
        C = qc.shape[2]
        lower = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()  # s ≤ t
        decay = (G[..., :, None] - G[..., None, :]).masked_fill(~lower, -math.inf).exp()  # (C, C)
        A = ((bc * kc) @ kc.transpose(-2, -1) * decay).tril(-1)  # s < t only
        eye = torch.eye(C, dtype=q.dtype, device=q.device)
        rhs = bc * vc - (bc * G[..., None].exp() * kc) @ S  # β V − (β exp(G) K) S_0, (B, h, C, d_v)
        U = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
        intra = (qc @ kc.transpose(-2, -1) * decay) @ U  # this chunk's writes, in parallel
        inter = (qc * G[..., None].exp()) @ S  # the state from earlier chunks, decayed
        out.append(inter + intra)
        to_end = (G[..., -1:] - G).exp()[..., None]  # exp(G_C − G_s): decay to the chunk's end
        S = G[..., -1, None, None].exp() * S + (to_end * kc).transpose(-2, -1) @ U
    return torch.cat(out, dim=2), S


# --- memory, counted -----------------------------------------------------------------------


def state_bytes(num_heads: int, d_k: int, d_v: int, bytes_per_value: int) -> int:
    """Bytes of one layer's state for one sequence: ``h · d_k · d_v · bytes``, whatever T is."""
    sizes = dict(num_heads=num_heads, d_k=d_k, d_v=d_v, bytes_per_value=bytes_per_value)
    return math.prod(checks.require_positive_int(n, x) for n, x in sizes.items())
