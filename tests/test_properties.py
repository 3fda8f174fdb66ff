"""Properties of attention that hold for every input, checked with hypothesis.

Shapes and seeds are drawn by hypothesis; the numbers come from a seeded NumPy generator, so
every example is reproducible. Each property runs on the NumPy reference and the torch one.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import convert
from helpers import numpy_attention as npa
from helpers import torch_attention as core

FAST = settings(max_examples=50, deadline=None, derandomize=True)


def torch_attention(q, k, v, mask):
    tensors = [None if a is None else torch.from_numpy(a) for a in (q, k, v, mask)]
    out, weights = core.scaled_dot_product_attention(*tensors)
    return out.numpy(), weights.numpy()


IMPLEMENTATIONS = {"numpy": npa.scaled_dot_product_attention, "torch": torch_attention}


@st.composite
def problems(draw):
    """q (B, T_q, d_k), k (B, T_k, d_k), v (B, T_k, d_v) and a random boolean mask (B, T_q, T_k).

    About one mask entry in three is False, so some query rows end up with no allowed key.
    """
    batch = draw(st.integers(1, 2))
    t_q, t_k = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([0.1, 1.0, 5.0]))
    q = scale * rng.standard_normal((batch, t_q, d_k))
    k = scale * rng.standard_normal((batch, t_k, d_k))
    v = rng.standard_normal((batch, t_k, d_v))
    mask = rng.random((batch, t_q, t_k)) > 1 / 3
    return q, k, v, mask, rng


@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
@FAST
@given(problem=problems())
def test_weights_over_allowed_keys_sum_to_one_and_masked_keys_get_exactly_zero(impl, problem):
    q, k, v, mask, _ = problem
    out, weights = IMPLEMENTATIONS[impl](q, k, v, mask)
    assert np.all(weights[~mask] == 0.0)
    assert np.all(weights >= 0.0)
    has_key = mask.any(axis=-1)
    np.testing.assert_allclose(weights.sum(axis=-1)[has_key], 1.0, atol=1e-12)
    assert np.all(weights[~has_key] == 0.0) and np.all(out[~has_key] == 0.0)


@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
@FAST
@given(problem=problems())
def test_output_is_a_convex_combination_of_allowed_values(impl, problem):
    q, k, v, mask, _ = problem
    out, weights = IMPLEMENTATIONS[impl](q, k, v, mask)
    np.testing.assert_allclose(out, weights @ v, atol=1e-12)
    for b, i in zip(*np.nonzero(mask.any(axis=-1)), strict=True):
        allowed = v[b][mask[b, i]]  # (n_allowed, d_v)
        assert np.all(out[b, i] >= allowed.min(axis=0) - 1e-12)
        assert np.all(out[b, i] <= allowed.max(axis=0) + 1e-12)


@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
@FAST
@given(problem=problems())
def test_permuting_keys_and_values_together_leaves_the_output_unchanged(impl, problem):
    q, k, v, mask, rng = problem
    order = rng.permutation(k.shape[-2])
    out, weights = IMPLEMENTATIONS[impl](q, k, v, mask)
    out_p, weights_p = IMPLEMENTATIONS[impl](q, k[:, order], v[:, order], mask[..., order])
    np.testing.assert_allclose(out_p, out, atol=1e-12)
    np.testing.assert_allclose(weights_p, weights[..., order], atol=1e-12)


@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
@FAST
@given(problem=problems())
def test_permuting_queries_permutes_the_output_rows(impl, problem):
    q, k, v, mask, rng = problem
    order = rng.permutation(q.shape[-2])
    out, weights = IMPLEMENTATIONS[impl](q, k, v, mask)
    out_p, weights_p = IMPLEMENTATIONS[impl](q[:, order], k, v, mask[:, order])
    np.testing.assert_allclose(out_p, out[:, order], atol=1e-12)
    np.testing.assert_allclose(weights_p, weights[:, order], atol=1e-12)


@FAST
@given(
    d_model=st.integers(1, 6),
    t_q=st.integers(1, 4),
    t_k=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_one_head_of_size_d_model_is_plain_scaled_dot_product_attention(d_model, t_q, t_k, seed):
    rng = np.random.default_rng(seed)
    module = npa.MultiHeadAttention(d_model, 1, seed=seed)
    query = rng.standard_normal((2, t_q, d_model))
    key, value = rng.standard_normal((2, 2, t_k, d_model))
    mask = rng.random((2, t_q, t_k)) > 0.3
    out, weights = module(query, key, value, mask=mask)

    p = module.params
    heads, expected_weights = npa.scaled_dot_product_attention(
        query @ p["W_q"] + p["b_q"], key @ p["W_k"] + p["b_k"], value @ p["W_v"] + p["b_v"], mask
    )
    assert weights.shape == (2, 1, t_q, t_k)
    np.testing.assert_allclose(weights[:, 0], expected_weights, atol=1e-12)
    np.testing.assert_allclose(out, heads @ p["W_o"] + p["b_o"], atol=1e-12)

    torch_out, _ = convert.torch_from_numpy(module)(
        *(torch.from_numpy(a) for a in (query, key, value)), mask=torch.from_numpy(mask)
    )
    np.testing.assert_allclose(torch_out.detach().numpy(), out, atol=1e-12)
