"""Exercises of notebook 06: fusing weights, splitting the fused output, fixing a layout."""

from __future__ import annotations

import torch

from helpers.kit.exercises import assert_shape, exercise


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
    hint="Read the sizes from qkv.shape. [Q | K | V]: qkv.view(B, T, 3, h, d_k), then "
    ".permute(2, 0, 3, 1, 4) puts the Q/K/V axis first and the heads before T. Interleaved: "
    "view(B, T, h, 3, d_k), and the Q/K/V axis is the fourth one, so .permute(3, 0, 2, 1, 4). "
    ".unbind(0) hands out the three pieces.",
    shares_inputs=True,
)
def _split_fused():
    """Notebook 06, section 9 (Exercises), exercise 2 (split either layout)."""

    gen = torch.Generator().manual_seed(60)
    B, T, D, h = 2, 5, 12, 3
    d_k = D // h
    qkv = torch.randn(B, T, 3 * D, generator=gen)
    blocks = [block.reshape(B, T, h, d_k).transpose(1, 2) for block in qkv.chunk(3, dim=-1)]
    per_head = qkv.reshape(B, T, h, 3 * d_k)  # head i's [q_i k_i v_i] columns, one head each
    interleaved = [
        per_head[..., j * d_k : (j + 1) * d_k].transpose(1, 2) for j in range(3)
    ]  # 3 x (B, h, T, d_k)

    def returns_three_b_h_t_dk(fn):
        parts = fn(qkv, h)
        assert len(parts) == 3, f"expected 3 tensors (q, k, v), got {len(parts)}"
        for name, p in zip("qkv", parts, strict=True):
            assert_shape(p, (B, h, T, d_k), "(B, h, T, d_k)", name=name)

    def splits_the_blocked_layout(fn):
        for name, p, want in zip("qkv", fn(qkv, h), blocks, strict=True):
            assert torch.equal(p, want), f"{name} is not block {name.upper()} split into heads"

    def splits_the_interleaved_layout(fn):
        parts = fn(qkv, h, interleaved=True)
        for name, p, want in zip("qkv", parts, interleaved, strict=True):
            assert_shape(p, (B, h, T, d_k), "(B, h, T, d_k)", name=name)
            assert torch.equal(p, want), (
                f"interleaved=True: {name} is not read from each head's own group of 3 d_k "
                "columns, [q k v]"
            )

    def copies_nothing(fn):
        for layout in (False, True):
            for name, p in zip("qkv", fn(qkv, h, interleaved=layout), strict=True):
                assert p.untyped_storage().data_ptr() == qkv.untyped_storage().data_ptr(), (
                    f"interleaved={layout}: {name} is a copy; view, permute and unbind share "
                    "qkv's memory (section 6)"
                )

    return [
        ("returns q, k, v each (B, h, T, d_k)", returns_three_b_h_t_dk),
        ("[Q | K | V]: the same numbers as chunk(3), then split heads", splits_the_blocked_layout),
        ("interleaved=True: each head's q, k, v from its own group", splits_the_interleaved_layout),
        ("both splits are views of qkv, not copies", copies_nothing),
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
