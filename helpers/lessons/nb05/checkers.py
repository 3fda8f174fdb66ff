"""Exercises of notebook 05: weight layouts, torch head splitting and mask conversion."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from helpers.kit.exercises import Slip, assert_shape, exercise
from helpers.masks import causal_mask, padding_mask


@exercise(
    "masked_softmax_torch",
    notebook="05",
    hint="Give the blocked scores -inf before the softmax; a row that is -inf everywhere comes "
    "out NaN, so afterwards set the rows whose mask has no True to zero.",
)
def _masked_softmax_torch():
    """Notebook 05, section 3 (Check yourself): notebook 03's zeros-not-NaN fix, in PyTorch."""

    gen = torch.Generator().manual_seed(5)
    scores = torch.randn(2, 3, 4, 5, generator=gen, dtype=torch.float64)  # (B, h, T_q, T_k)
    mask = torch.rand(2, 1, 4, 5, generator=gen) > 0.4  # (B, 1, T_q, T_k), True = may attend
    mask[:, :, :, 0] = True  # every query may attend to key 0 ...
    mask[1, 0, 2] = False  # ... except query 2 of sequence 1, which may attend to nothing

    def blocks_and_normalises(fn):
        got = fn(scores, mask)
        assert_shape(got, tuple(scores.shape), "(B, h, T_q, T_k)", name="weights")
        expected = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        rows = mask.any(dim=-1).expand(2, 3, 4)  # the queries that may attend to something
        gap = (got[rows] - expected[rows]).abs().max().item()
        assert gap < 1e-12, f"weights differ from the masked softmax by up to {gap:.3g}"

    def gives_zeros_to_a_query_with_no_key(fn):
        row = fn(scores, mask)[1, :, 2]  # (h, T_k): every head of the blocked query
        if torch.isnan(row).any():
            raise Slip(
                f"the query with no allowed key came out NaN: {row[0].tolist()}",
                "softmax of a row that is -inf everywhere is NaN; after the softmax, set the "
                "rows whose mask has no True to 0 (mask.any(dim=-1, keepdim=True)).",
            )
        assert torch.equal(row, torch.zeros_like(row)), f"expected zeros, got {row[0].tolist()}"

    return [
        ("blocked keys get weight 0 and every other row sums to 1", blocks_and_normalises),
        (
            "a query that may attend to nothing gets zeros, not NaN",
            gives_zeros_to_a_query_with_no_key,
        ),
    ]


@exercise(
    "linear_from_numpy",
    notebook="05",
    hint="nn.Linear computes x @ weight.T + bias, so weight must be W.T (shape (d_out, d_in)); "
    "copy inside torch.no_grad().",
)
def _linear_from_numpy():
    """Notebook 05, section 7 (Exercises), exercise 1."""

    rng = np.random.default_rng(5)
    w, b = rng.standard_normal((4, 3)), rng.standard_normal(3)  # x @ W with W (d_in, d_out)
    x = rng.standard_normal((2, 4))

    def returns_a_linear_of_the_right_shape(fn):
        layer = fn(w, b)
        assert isinstance(layer, nn.Linear), f"expected an nn.Linear, got {type(layer).__name__}"
        assert_shape(layer.weight, (3, 4), "(d_out, d_in)", name="weight")

    def computes_x_at_w_plus_b(fn):
        layer = fn(w, b)
        with torch.no_grad():  # float32 layers are fine: compare to float32 precision
            got = layer(torch.from_numpy(x).to(layer.weight.dtype)).double().numpy()
        np.testing.assert_allclose(got, x @ w + b, rtol=1e-5, atol=1e-5)

    return [
        ("returns nn.Linear(4, 3) for W of shape (4, 3)", returns_a_linear_of_the_right_shape),
        ("layer(x) equals x @ W + b", computes_x_at_w_plus_b),
    ]


@exercise(
    "split_heads_torch",
    notebook="05",
    hint="x.view(B, T, h, d_k) gives each head its own axis; then .transpose(1, 2) moves the "
    "head axis in front of T.",
)
def _split_heads_torch():
    """Notebook 05, section 7 (Exercises), exercise 2."""

    x = torch.arange(2 * 3 * 8, dtype=torch.float64).reshape(2, 3, 8)

    def gives_b_h_t_dk(fn):
        got = fn(x, 4)
        assert_shape(got, (2, 4, 3, 2), "(B, h, T, d_k)")

    def head_i_takes_columns_i_dk_onwards(fn):
        got = fn(x, 4)
        for i in range(4):
            assert torch.equal(got[:, i], x[..., 2 * i : 2 * i + 2]), f"head {i} has wrong columns"

    return [
        ("(2, 3, 8) with 4 heads gives (2, 4, 3, 2)", gives_b_h_t_dk),
        ("head i holds columns i*d_k to (i+1)*d_k", head_i_takes_columns_i_dk_onwards),
    ]


@exercise(
    "torch_mha_masks",
    notebook="05",
    hint="nn.MultiheadAttention wants True = ignore: flip the course's masks with ~ (or "
    "helpers.masks.to_block) and hand them over as torch tensors: key_padding_mask (B, T) and "
    "attn_mask (T, T), no extra axes, and False on attn_mask's diagonal (a token sees itself).",
)
def _torch_mha_masks():
    """Notebook 05, section 7 (Exercises), exercise 3."""

    lengths, T = [3, 5], 5

    def _tensor(mask, name):
        assert isinstance(mask, torch.Tensor), f"{name} must be a torch tensor, got {type(mask)}"
        assert mask.dtype == torch.bool, f"{name} must be boolean, got {mask.dtype}"

    def flips_the_padding_mask(fn):
        key_padding_mask, _ = fn(lengths, T)
        _tensor(key_padding_mask, "key_padding_mask")
        assert_shape(key_padding_mask, (2, T), "(B, T)", name="key_padding_mask")
        ours = torch.from_numpy(padding_mask(lengths, T))
        assert not torch.equal(key_padding_mask, ours), (
            "this is the course's padding mask, True at the real tokens; nn.MultiheadAttention "
            "ignores where it is True, so flip it with ~"
        )
        assert torch.equal(key_padding_mask, ~ours), (
            f"expected True at the padding only, got {key_padding_mask.int().tolist()}"
        )

    def flips_the_causal_mask(fn):
        _, attn_mask = fn(lengths, T)
        _tensor(attn_mask, "attn_mask")
        assert_shape(attn_mask, (T, T), "(T, T)", name="attn_mask")
        assert not attn_mask.diagonal().any(), (
            "attn_mask is True on the diagonal, so a token may not attend to itself: only the "
            "future, above the diagonal, should be True"
        )
        assert torch.equal(attn_mask, torch.from_numpy(~causal_mask(T))), (
            f"expected True above the diagonal (the future) only, got {attn_mask.int().tolist()}"
        )

    return [
        ("key_padding_mask is True at padded keys, shape (B, T)", flips_the_padding_mask),
        ("attn_mask is True above the diagonal, shape (T, T)", flips_the_causal_mask),
    ]
