"""Exercises of notebook 06: fusing weights, splitting the fused output, fixing a layout."""

from __future__ import annotations

import torch

from helpers.exercises import assert_shape, exercise


@exercise(
    "fuse_weights",
    notebook="06",
    hint="nn.Linear stores one output per row, so stack the three (D, D) weights along dim=0 "
    "with torch.cat, in the order Q, K, V.",
)
def _fuse_weights():
    """Notebook 06, section 9 (Exercises), exercise 1."""

    gen = torch.Generator().manual_seed(6)
    w_q, w_k, w_v = (torch.randn(4, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    x = torch.randn(3, 4, generator=gen, dtype=torch.float64)

    def has_shape_3d_by_d(fn):
        fused = fn(w_q, w_k, w_v)
        assert_shape(fused, (12, 4), "(3 D, D)")

    def gives_q_then_k_then_v(fn):
        qkv = x @ fn(w_q, w_k, w_v).T  # (3, 12)
        for name, w, part in zip("QKV", (w_q, w_k, w_v), qkv.chunk(3, dim=-1), strict=True):
            assert torch.allclose(part, x @ w.T), (
                f"block {name} of x @ fused.T is not x @ W_{name}.T"
            )

    return [
        ("three (4, 4) weights give one (12, 4) weight", has_shape_3d_by_d),
        ("x @ fused.T holds [Q | K | V] in that order", gives_q_then_k_then_v),
    ]


@exercise(
    "split_fused",
    notebook="06",
    hint="qkv.view(B, T, 3, h, d_k) then .permute(2, 0, 3, 1, 4) puts the Q/K/V axis first and "
    "heads before T; .unbind(0) hands out the three pieces.",
)
def _split_fused():
    """Notebook 06, section 9 (Exercises), exercise 2."""

    gen = torch.Generator().manual_seed(60)
    B, T, D, h = 2, 5, 12, 3
    qkv = torch.randn(B, T, 3 * D, generator=gen)

    def returns_three_b_h_t_dk(fn):
        parts = fn(qkv, h)
        assert len(parts) == 3, f"expected 3 tensors (q, k, v), got {len(parts)}"
        for name, p in zip("qkv", parts, strict=True):
            assert_shape(p, (2, 3, 5, 4), "(B, h, T, d_k)", name=name)

    def matches_chunk_then_split(fn):
        parts = fn(qkv, h)
        for name, p, block in zip("qkv", parts, qkv.chunk(3, dim=-1), strict=True):
            expected = block.reshape(B, T, h, 4).transpose(1, 2)
            assert torch.equal(p, expected), f"{name} is not block {name.upper()} split into heads"

    return [
        ("returns q, k, v each (B, h, T, d_k)", returns_three_b_h_t_dk),
        ("the same numbers as chunk(3) then split heads", matches_chunk_then_split),
    ]


@exercise(
    "interleaved_to_blocked",
    notebook="06",
    hint="Rows of an interleaved weight are ordered (head, q/k/v, d_k): view it as "
    "(h, 3, d_k, D), swap the first two axes so it is (3, h, d_k, D), and reshape to (3 D, D).",
)
def _interleaved_to_blocked():
    """Notebook 06, section 9 (Exercises), exercise 3."""

    gen = torch.Generator().manual_seed(66)
    D, h = 6, 2
    d_k = D // h
    w_q, w_k, w_v = (torch.randn(D, D, generator=gen) for _ in range(3))
    per_head = [torch.cat([w[i * d_k : (i + 1) * d_k] for w in (w_q, w_k, w_v)]) for i in range(h)]
    interleaved = torch.cat(per_head)  # rows: q0 k0 v0 q1 k1 v1

    def keeps_the_shape(fn):
        got = fn(interleaved, h)
        assert_shape(got, (18, 6), "(3 D, D)")

    def gives_the_blocked_layout(fn):
        got = fn(interleaved, h)
        assert torch.equal(got, torch.cat([w_q, w_k, w_v])), "rows are not [all Q | all K | all V]"

    return [
        ("an (18, 6) weight stays (18, 6)", keeps_the_shape),
        ("the rows come out as [Q | K | V]", gives_the_blocked_layout),
    ]
