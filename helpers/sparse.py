"""Sparse attention and sinks: notebook 15.

Four ways a query reads fewer keys, or parks its weight somewhere harmless:

* :func:`sink_attention`: gpt-oss's learned sink, one logit per head that joins each row's
  softmax and brings no value, so a row's weights sum to less than one (optionally windowed);
* :func:`streaming_keep`: StreamingLLM's mask, the first ``num_sink`` keys beside a window;
* :func:`lightning_index_scores`: DeepSeek-V3.2's cheap indexer that scores every key;
* :func:`topk_sparse_attention`: each query attends only to its ``top_k`` best-scored keys,
  gathered, so q·k is computed for k keys, never for all T_k.

Causal masks are aligned bottom-right: the T_q queries are the last T_q of the T_k positions,
query t sits at position ``T_k - T_q + t``. Scores scale by ``1 / sqrt(d)``. Shapes: q
``(B, h, T_q, d)``, k and v ``(B, h, T_k, d)``, outputs ``(B, h, T_q, d)`` in q's dtype. A query
row with no key to attend to gives zeros.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from helpers.kit import checks

ROWS_PER_CHUNK = 64  # topk_sparse_attention selects for this many queries at a time


def sink_attention(
    q: Tensor, k: Tensor, v: Tensor, sinks: Tensor, window: int | None = None
) -> Tensor:
    """Causal attention whose softmax also runs over one learned sink logit per head.

    ``sinks`` is exactly ``(h,)``. Row t's weights are ``exp(s_ts) / (Σ_allowed exp(s_ts') +
    exp(sink_h))``: the sink takes its share of the denominator and adds no value, so the
    weights sum to less than one. ``sinks = -inf`` gives plain causal attention. ``window`` W
    lets a query see only its own and the W - 1 positions before it (None: no window).
    """
    B, h, T_q, T_k, d = _check_qkv(q, k, v)
    checks.expect(q=(q, "B h T_q d"), sinks=(sinks, "h: float"))  # one logit per head of q
    if bool((sinks.isnan() | (sinks == math.inf)).any()):
        raise ValueError(f"sinks must be finite or -inf, got {sinks.tolist()}")
    window = None if window is None else checks.require_positive_int("window", window)
    keep = streaming_keep(T_q, T_k, 0, T_k if window is None else window).to(q.device)
    first = 0 if window is None else max(0, T_k - T_q - window + 1)  # no query sees before it
    k, v, keep = k[:, :, first:], v[:, :, first:], keep[:, first:]  # a window reads W keys
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)  # (B, h, T_q, T_k - first)
    scores = scores.masked_fill(~keep, -math.inf)
    sink = sinks.to(device=q.device, dtype=q.dtype).view(1, h, 1, 1).expand(B, h, T_q, 1)
    weights = _softmax(torch.cat((scores, sink), dim=-1))[..., :-1]  # drop the sink's column
    return weights @ v


def streaming_keep(T_q: int, T_k: int, num_sink: int, window: int) -> Tensor:
    """StreamingLLM's mask, ``torch.bool (T_q, T_k)``, True = may attend.

    A key is kept when it is causal for the query and is one of the first ``num_sink``
    positions or among the last ``window`` positions up to the query's own.
    """
    T_q, T_k = checks.require_positive_int("T_q", T_q), checks.require_positive_int("T_k", T_k)
    if T_q > T_k:
        raise ValueError(f"T_q must be at most T_k (the last T_q positions), got {T_q}, {T_k}")
    num_sink = checks.require_non_negative_int("num_sink", num_sink)
    window = checks.require_positive_int("window", window)
    pos = torch.arange(T_k - T_q, T_k).view(T_q, 1)  # each query's own position
    key = torch.arange(T_k).view(1, T_k)
    return (key <= pos) & ((key < num_sink) | (key > pos - window))


def lightning_index_scores(q_index: Tensor, k_index: Tensor, weights: Tensor) -> Tensor:
    """DeepSeek-V3.2's lightning indexer: ``(B, T_q, T_k)`` scores, future positions included.

    ``scores[b, t, s] = Σ_j weights[b, t, j] · relu(q_index[b, t, j] · k_index[b, s])`` with
    q_index ``(B, T_q, H_I, d_I)``, k_index ``(B, T_k, d_I)``, weights ``(B, T_q, H_I)``. No
    scale here: DeepSeek's ``d_I^-½`` and ``H_I^-½`` belong in ``weights``.
    """
    checks.expect(q_index=(q_index, "B T_q H_I d_I: float"))  # k_index, weights: any float dtype
    checks.expect(q_index=(q_index, "B T_q H_I d_I"), k_index=(k_index, "B T_k d_I: float"))
    checks.expect(q_index=(q_index, "B T_q H_I d_I"), weights=(weights, "B T_q H_I: float"))
    k_index, weights = k_index.to(q_index.dtype), weights.to(q_index.dtype)
    per_head = torch.einsum("btjd,bsd->btjs", q_index, k_index).relu()  # (B, T_q, H_I, T_k)
    return torch.einsum("btj,btjs->bts", weights, per_head)


def topk_sparse_attention(
    q: Tensor, k: Tensor, v: Tensor, index_scores: Tensor, top_k: int
) -> Tensor:
    """Each query attends only to its ``top_k`` causally allowed keys of highest index score.

    index_scores ``(B, T_q, T_k)`` (finite) pick the keys, shared by the heads; those keys are
    gathered and q·k computed only for them: ``(B, h, T_q, top_k)`` scores, never ``(T_q, T_k)``.
    Queries are taken ``ROWS_PER_CHUNK`` at a time so that even the selection never copies the
    whole index scores. With ``top_k >= T_k`` this is causal attention.
    """
    B, h, T_q, T_k, d = _check_qkv(q, k, v)
    checks.expect(
        q=(q, "B h T_q d"), k=(k, "B h T_k d"), index_scores=(index_scores, "B T_q T_k: float")
    )
    kk = min(checks.require_positive_int("top_k", top_k), T_k)
    out = torch.empty_like(q)
    batch = torch.arange(B, device=q.device).view(B, 1, 1, 1)
    heads = torch.arange(h, device=q.device).view(1, h, 1, 1)
    for start in range(0, T_q, ROWS_PER_CHUNK):
        rows = slice(start, min(start + ROWS_PER_CHUNK, T_q))
        C = rows.stop - start
        pos = torch.arange(T_k - T_q + start, T_k - T_q + rows.stop, device=q.device)
        future = torch.arange(T_k, device=q.device).view(1, T_k) > pos.view(C, 1)  # (C, T_k)
        chunk = index_scores[:, rows]  # (B, C, T_k): a view, read row block by row block
        if not bool(chunk.isfinite().all()):
            raise ValueError(f"index_scores must be finite, shape {checks.shape_of(index_scores)}")
        picked, idx = chunk.masked_fill(future, -math.inf).topk(kk, dim=-1)
        at = (batch, heads, idx.view(B, 1, C, kk))  # which key each slot of each head reads
        k_sel, v_sel = k[at], v[at]  # (B, h, C, kk, d): only the chosen keys and values
        scores = torch.einsum("bhcd,bhckd->bhck", q[:, :, rows], k_sel) / math.sqrt(d)
        scores = scores.masked_fill((picked == -math.inf).unsqueeze(1), -math.inf)
        out[:, :, rows] = torch.einsum("bhck,bhckd->bhcd", _softmax(scores), v_sel)
    return out


def _softmax(logits: Tensor) -> Tensor:
    """Softmax over the last axis; a row of only ``-inf`` gives zeros, never NaN."""
    top = logits.amax(dim=-1, keepdim=True)
    top = torch.where(top.isfinite(), top, torch.zeros_like(top))
    e = (logits - top).exp()
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> tuple[int, int, int, int, int]:
    """Check q ``(B, h, T_q, d)``, k and v ``(B, h, T_k, d)`` with T_q ≤ T_k; return sizes."""
    n = checks.expect(
        q=(q, "B h T_q d: float"), k=(k, "B h T_k d: float"), v=(v, "B h T_k d: float")
    )
    if not 0 < n["T_q"] <= n["T_k"]:
        raise ValueError(f"q must have 1 <= T_q <= T_k: q {tuple(q.shape)}, k {tuple(k.shape)}")
    return n["B"], n["h"], n["T_q"], n["T_k"], n["d"]
