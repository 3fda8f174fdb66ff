"""helpers.sparse (notebook 15): sinks, StreamingLLM's mask, the lightning indexer, top-k attention.

Every proof compares with an independent dense computation: torch's softmax over the scores with
the sink as one more column, dropped afterwards (gpt-oss's eager attention in Hugging Face
transformers), the identity ``sink output = (1 - sink weight) · plain output``, SDPA with a
boolean mask, and Python loops for the masks and the indexer. Sizes, windows, k and T_q < T_k
are drawn by hypothesis, in float64 to 1e-10 and in float32.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from helpers import sparse

TOL = {torch.float64: 1e-10, torch.float32: 2e-5}
FAST = settings(max_examples=30, deadline=None, derandomize=True)
DTYPES = st.sampled_from([torch.float64, torch.float32])


@st.composite
def problems(draw):
    B, h, d = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 8))
    T_k = draw(st.integers(1, 24))
    T_q = draw(st.integers(1, T_k))
    return B, h, T_q, T_k, d, draw(st.integers(0, 2**16)), draw(DTYPES)


def qkv(B, h, T_q, T_k, d, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, h, T, d, generator=g, dtype=dtype) for T in (T_q, T_k, T_k))
    return q, k, v, g


def loop_keep(T_q, T_k, num_sink, window):
    keep = torch.zeros(T_q, T_k, dtype=torch.bool)
    for t in range(T_q):
        p = T_k - T_q + t
        for s in range(p + 1):
            keep[t, s] = s < num_sink or p - s < window
    return keep


def dense(q, k, v, keep):
    """SDPA over the keys ``keep`` allows; rows with no key give zeros."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    return out.masked_fill(~keep.any(-1, keepdim=True), 0.0)


@FAST
@given(problem=problems(), window=st.none() | st.integers(1, 30), sink_scale=st.floats(-4, 4))
def test_sink_attention_is_gpt_oss_eager_attention(problem, window, sink_scale):
    *sizes, seed, dtype = problem
    q, k, v, g = qkv(*sizes, seed, dtype)
    B, h, T_q, T_k, d = sizes
    sinks = torch.randn(h, generator=g, dtype=dtype) * sink_scale
    keep = loop_keep(T_q, T_k, 0, T_k if window is None else window)
    # Hugging Face's gpt-oss: scores, mask, one more column holding the head's sink, softmax, drop it
    scores = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(~keep, -math.inf)
    column = sinks.view(1, h, 1, 1).expand(B, h, T_q, 1)
    probs = torch.softmax(torch.cat((scores, column), -1), dim=-1)
    want = probs[..., :-1] @ v
    got = sparse.sink_attention(q, k, v, sinks, window=window)
    assert got.shape == (B, h, T_q, d) and got.dtype == dtype
    torch.testing.assert_close(got, want, rtol=0, atol=TOL[dtype])
    # the sink only scales the plain output down: by 1 - its weight, and the row sums below one
    plain = dense(q, k, v, keep)
    sink_weight = probs[..., -1:]
    torch.testing.assert_close(got, (1 - sink_weight) * plain, rtol=0, atol=TOL[dtype])
    assert bool((probs[..., :-1].sum(-1) < 1).all())


@FAST
@given(problem=problems(), window=st.none() | st.integers(1, 30))
def test_sinks_at_minus_infinity_give_plain_causal_attention(problem, window):
    *sizes, seed, dtype = problem
    q, k, v, _ = qkv(*sizes, seed, dtype)
    sinks = torch.full((sizes[1],), -math.inf, dtype=dtype)
    keep = loop_keep(sizes[2], sizes[3], 0, sizes[3] if window is None else window)
    got = sparse.sink_attention(q, k, v, sinks, window=window)
    torch.testing.assert_close(got, dense(q, k, v, keep), rtol=0, atol=TOL[dtype])


def test_sinks_may_be_a_parameter_and_learn():
    q, k, v, _ = qkv(1, 2, 3, 5, 4, 0, torch.float64)
    sinks = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    sparse.sink_attention(q, k, v, sinks).square().sum().backward()
    assert sinks.grad is not None and bool((sinks.grad != 0).all())


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    T_k=st.integers(1, 20), data=st.data(), num_sink=st.integers(0, 25), window=st.integers(1, 25)
)
def test_streaming_keep_is_the_loop(T_k, data, num_sink, window):
    T_q = data.draw(st.integers(1, T_k))
    got = sparse.streaming_keep(T_q, T_k, num_sink, window)
    assert got.dtype == torch.bool and got.shape == (T_q, T_k)
    assert torch.equal(got, loop_keep(T_q, T_k, num_sink, window))


@FAST
@given(B=st.integers(1, 2), T_k=st.integers(1, 12), data=st.data(), H_I=st.integers(1, 4),
       d_I=st.integers(1, 6), seed=st.integers(0, 999), dtype=DTYPES)  # fmt: skip
def test_lightning_index_scores_is_the_sum_written_out(B, T_k, data, H_I, d_I, seed, dtype):
    T_q = data.draw(st.integers(1, T_k))
    g = torch.Generator().manual_seed(seed)
    qi = torch.randn(B, T_q, H_I, d_I, generator=g, dtype=dtype)
    ki = torch.randn(B, T_k, d_I, generator=g, dtype=dtype)
    w = torch.randn(B, T_q, H_I, generator=g, dtype=dtype)
    got = sparse.lightning_index_scores(qi, ki, w)
    assert got.shape == (B, T_q, T_k) and got.dtype == dtype
    for b in range(B):
        for t in range(T_q):
            for s in range(T_k):
                want = sum(w[b, t, j] * max(float(qi[b, t, j] @ ki[b, s]), 0.0) for j in range(H_I))
                assert abs(float(got[b, t, s]) - float(want)) <= 1e3 * TOL[dtype]


def topk_keep(index_scores, top_k, T_q, T_k):
    """The selection written densely: causal keys, the top_k highest scores of each row."""
    causal = loop_keep(T_q, T_k, 0, T_k)
    masked = index_scores.masked_fill(~causal, -math.inf)
    kk = min(top_k, T_k)
    picked, idx = masked.topk(kk, dim=-1)
    keep = torch.zeros_like(masked, dtype=torch.bool).scatter(-1, idx, picked > -math.inf)
    return keep.unsqueeze(1)  # (B, 1, T_q, T_k), shared by the heads


@FAST
@given(problem=problems(), top_k=st.integers(1, 30))
def test_topk_sparse_attention_is_dense_attention_masked_to_the_same_keys(problem, top_k):
    *sizes, seed, dtype = problem
    q, k, v, g = qkv(*sizes, seed, dtype)
    B, h, T_q, T_k, d = sizes
    scores = torch.randn(B, T_q, T_k, generator=g, dtype=dtype)  # distinct: no ties
    got = sparse.topk_sparse_attention(q, k, v, scores, top_k)
    assert got.shape == (B, h, T_q, d) and got.dtype == dtype
    want = dense(q, k, v, topk_keep(scores, top_k, T_q, T_k))
    torch.testing.assert_close(got, want, rtol=0, atol=TOL[dtype])
    if top_k >= T_k:
        causal = dense(q, k, v, loop_keep(T_q, T_k, 0, T_k))
        torch.testing.assert_close(got, causal, rtol=0, atol=TOL[dtype])


def test_topk_over_many_query_chunks():
    q, k, v, g = qkv(1, 2, 150, 200, 4, 1, torch.float64)
    scores = torch.randn(1, 150, 200, generator=g, dtype=torch.float64)
    got = sparse.topk_sparse_attention(q, k, v, scores, 7)
    torch.testing.assert_close(
        got, dense(q, k, v, topk_keep(scores, 7, 150, 200)), rtol=0, atol=1e-10
    )


class LargestNewStorage(TorchDispatchMode):
    """Records the largest new storage (bytes) that any torch operation's output holds."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {storage(t) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and storage(t) not in inputs:  # a view holds nothing new
                self.largest = max(self.largest, t.untyped_storage().nbytes())
        return out


def storage(t):
    return t.untyped_storage().data_ptr()


def test_topk_sparse_attention_never_forms_a_tq_by_tk_matrix():
    """At T = 2048 one head's (T_q, T_k) float32 matrix is 16 MiB; top-k's largest tensor is far
    below it, while dense attention (sink_attention) trips the same detector."""
    B, h, T, d, top_k = 1, 2, 2048, 8, 16
    q, k, v, g = qkv(B, h, T, T, d, 0, torch.float32)
    scores = torch.randn(B, T, T, generator=g)
    one_matrix = T * T * 4
    with LargestNewStorage() as seen:
        sparse.topk_sparse_attention(q, k, v, scores, top_k)
    assert seen.largest < one_matrix / 16, (seen.largest, one_matrix)
    with LargestNewStorage() as dense_seen:  # the detector can fail: dense attention trips it
        sparse.sink_attention(q[:, :, -256:], k, v, torch.zeros(h))
    assert dense_seen.largest >= 256 * T * 4


def good():
    q, k, v, _ = qkv(1, 2, 3, 5, 4, 0, torch.float32)
    return q, k, v


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda q, k, v: sparse.sink_attention(q, k, v, torch.zeros(3)), ValueError, "sinks"),
        (lambda q, k, v: sparse.sink_attention(q, k, v, torch.zeros(1, 2)), ValueError, "sinks"),
        (lambda q, k, v: sparse.sink_attention(q, k, v, [0.0, 0.0]), TypeError, "sinks"),
        (lambda q, k, v: sparse.sink_attention(q, k, v, torch.zeros(2), window=0), ValueError, "window"),
        (lambda q, k, v: sparse.sink_attention(q, k, v, torch.zeros(2), window=2.0), TypeError, "window"),
        (lambda q, k, v: sparse.sink_attention(k, q, q, torch.zeros(2)), ValueError, "q must"),
        (lambda q, k, v: sparse.sink_attention(q, k, v[..., :3], torch.zeros(2)), ValueError, "v must"),
        (lambda q, k, v: sparse.streaming_keep(3, 5, -1, 2), ValueError, "num_sink"),
        (lambda q, k, v: sparse.streaming_keep(3, 5, 1, 0), ValueError, "window"),
        (lambda q, k, v: sparse.streaming_keep(6, 5, 1, 2), ValueError, "T_q"),
        (lambda q, k, v: sparse.topk_sparse_attention(q, k, v, torch.zeros(1, 3, 4), 2), ValueError, "index_scores"),
        (lambda q, k, v: sparse.topk_sparse_attention(q, k, v, torch.zeros(1, 3, 5), 0), ValueError, "top_k"),
        (lambda q, k, v: sparse.topk_sparse_attention(q, k, v, torch.zeros(1, 3, 5), True), TypeError, "top_k"),
        (lambda q, k, v: sparse.topk_sparse_attention(q, k, v, torch.full((1, 3, 5), math.nan), 2), ValueError, "index_scores"),
        (lambda q, k, v: sparse.lightning_index_scores(torch.zeros(1, 3, 2, 4), torch.zeros(1, 5, 3), torch.zeros(1, 3, 2)), ValueError, "k_index"),
        (lambda q, k, v: sparse.lightning_index_scores(torch.zeros(1, 3, 2, 4), torch.zeros(1, 5, 4), torch.zeros(1, 3, 3)), ValueError, "weights"),
    ],
)  # fmt: skip
def test_bad_input_names_the_argument(call, error, words):
    with pytest.raises(error, match=words):
        call(*good())


def test_a_query_with_no_allowed_key_gives_zeros():
    q, k, v = good()
    out = sparse.sink_attention(q, k, v, torch.full((2,), -math.inf), window=1)
    assert bool(out.isfinite().all())
    # top-k: index scores that pick a key, and a first query at position 2 still has keys; no NaN
    out = sparse.topk_sparse_attention(q, k, v, torch.zeros(1, 3, 5), 1)
    assert bool(out.isfinite().all())
    assert torch.equal(sparse._softmax(torch.full((2, 3), -math.inf)), torch.zeros(2, 3))
