"""Exercises of notebook 16: the recurrent step, the delta-rule step, one chunk of linear attention.

The checks compare with independent computations: the output of a whole sequence written as the
masked quadratic form ``(causal mask ∘ q kᵀ) v``, and the delta rule as one step of gradient
descent on ``½ ‖Sᵀ k − v‖²``. A check that recognises a typical slip (reading the state before the
write, decaying after the correction, dropping the diagonal) says so with a hint of its own.
"""

from __future__ import annotations

import torch

from helpers.kit.exercises import Slip, assert_shape, exercise


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _same(got, want: torch.Tensor) -> bool:
    return (
        isinstance(got, torch.Tensor)
        and got.shape == want.shape
        and torch.allclose(got.to(want.dtype), want, atol=1e-10)
    )


def _pair(result, names: str) -> tuple:
    if isinstance(result, tuple | list) and len(result) == 2:
        return tuple(result)
    raise AssertionError(f"expected the pair ({names}), got {type(result).__name__}")


# --- exercise 1: one step of linear attention ------------------------------------------------


@exercise(
    "linear_attention_step",
    notebook="16",
    hint="The state is the sum of k_s v_sᵀ over every token so far, this one included: add this "
    "token's outer product first, then read the state with the query.",
)
def _linear_attention_step():
    """Notebook 16, section 1 (drop the softmax), exercise 1."""
    d_k, d_v, T = 3, 5, 6
    q, k, v = _randn(T, d_k, seed=161), _randn(T, d_k, seed=162), _randn(T, d_v, seed=163)

    def returns_an_output_and_a_state(fn):
        o, S = _pair(fn(torch.zeros(d_k, d_v, dtype=torch.float64), q[0], k[0], v[0]), "o_t, S")
        assert_shape(o, (d_v,), "(d_v,)", "o_t")
        assert_shape(S, (d_k, d_v), "(d_k, d_v)", "S")

    def step_by_step_equals_the_masked_quadratic_form(fn):
        want = torch.tril(q @ k.T) @ v  # (T, d_v): Σ_{s ≤ t} (q_t · k_s) v_s
        S, outs = torch.zeros(d_k, d_v, dtype=torch.float64), []
        for t in range(T):
            before = S
            o, S = _pair(fn(S, q[t], k[t], v[t]), "o_t, S")
            if t == 2 and _same(o, q[t] @ before):
                raise Slip(
                    "o_t read the state before token t was written into it",
                    hint="o_t = Σ_{s ≤ t} (q_t · k_s) v_s includes s = t: write, then read.",
                )
            outs.append(o)
        got = torch.stack(outs)
        assert torch.allclose(got, want, atol=1e-10), (
            "stepping through 6 tokens does not give (causal mask ∘ q kᵀ) v: off by "
            f"{(got - want).abs().max().item():.3g}"
        )

    return [
        ("returns (o_t (d_v,), S (d_k, d_v))", returns_an_output_and_a_state),
        ("six steps equal (causal mask ∘ q kᵀ) v", step_by_step_equals_the_masked_quadratic_form),
    ]


# --- exercise 2: one step of the gated delta rule --------------------------------------------


def _step(S, q, k, v, g, beta, decay_first=True):
    S = S * torch.exp(torch.tensor(g)) if decay_first else S
    S = S + beta * torch.outer(k, v - S.T @ k)
    S = S if decay_first else S * torch.exp(torch.tensor(g))
    return S.T @ q, S


@exercise(
    "delta_rule_step",
    notebook="16",
    hint="Three moves in order: decay the whole state by exp(g_t); ask it what it holds for k_t "
    "(Sᵀ k_t) and write β_t times the difference from v_t along k_t; then read with q_t.",
)
def _delta_rule_step():
    """Notebook 16, section 3 (decay and the delta rule), exercise 2."""
    d_k, d_v = 4, 3
    S0 = _randn(d_k, d_v, seed=164)
    q, v = _randn(d_k, seed=165), _randn(d_v, seed=166)
    k = torch.nn.functional.normalize(_randn(d_k, seed=167), dim=0)

    def returns_an_output_and_a_state(fn):
        o, S = _pair(fn(S0, q, k, v, -0.5, 0.7), "o_t, S")
        assert_shape(o, (d_v,), "(d_v,)", "o_t")
        assert_shape(S, (d_k, d_v), "(d_k, d_v)", "S")

    def one_gradient_step_on_the_recall_error(fn):
        _, S = _pair(fn(S0, q, k, v, 0.0, 0.7), "o_t, S")
        grad = torch.outer(k, S0.T @ k - v)  # ∂/∂S of ½ ‖Sᵀ k − v‖²
        want = S0 - 0.7 * grad
        if _same(S, S0 + 0.7 * torch.outer(k, v)):
            raise Slip(
                "this adds β k vᵀ: the plain linear write, with nothing taken away",
                hint="The delta rule writes the *difference* between v_t and what the state "
                "already recalls for k_t, Sᵀ k_t.",
            )
        assert _same(S, want), "with g = 0 the new state is not S − β ∇(½ ‖Sᵀk − v‖²)"

    def decays_before_it_corrects(fn):
        o, S = _pair(fn(S0, q, k, v, -0.5, 0.7), "o_t, S")
        want_o, want_S = _step(S0, q, k, v, -0.5, 0.7)
        if _same(S, _step(S0, q, k, v, -0.5, 0.7, decay_first=False)[1]):
            raise Slip(
                "you decayed the state after writing into it",
                hint="Decay first: the correction must compare v_t with what the *decayed* state "
                "recalls, or this token's own write fades at once.",
            )
        assert _same(S, want_S), "with g = -0.5 the new state is not the decayed, corrected one"
        assert _same(o, want_o), "o_t is not the new state read by q_t: Sᵀ q_t"

    return [
        ("returns (o_t (d_v,), S (d_k, d_v))", returns_an_output_and_a_state),
        ("with no decay, one gradient step on the recall error", one_gradient_step_on_the_recall_error),
        ("decay first, then correct, then read", decays_before_it_corrects),
    ]  # fmt: skip


# --- exercise 3: one chunk of linear attention -----------------------------------------------


@exercise(
    "linear_attention_chunk",
    notebook="16",
    hint="Two parts: what the earlier chunks left in S (read it with the queries) and what this "
    "chunk's own keys give (the masked scores times the values, diagonal included). Then add "
    "this chunk's outer products to S.",
)
def _linear_attention_chunk():
    """Notebook 16, section 4 (the chunked algorithm), exercise 3."""
    C, d_k, d_v = 4, 3, 5
    q, k, v = (
        _randn(2 * C, d_k, seed=168),
        _randn(2 * C, d_k, seed=169),
        _randn(2 * C, d_v, seed=170),
    )

    def returns_the_chunks_output_and_the_state(fn):
        o, S = _pair(fn(q[:C], k[:C], v[:C], torch.zeros(d_k, d_v, dtype=torch.float64)), "out, S")
        assert_shape(o, (C, d_v), "(C, d_v)", "out")
        assert_shape(S, (d_k, d_v), "(d_k, d_v)", "S")

    def two_chunks_equal_the_quadratic_form(fn):
        want = torch.tril(q @ k.T) @ v
        S0 = torch.zeros(d_k, d_v, dtype=torch.float64)
        first, S1 = _pair(fn(q[:C], k[:C], v[:C], S0), "out, S")
        second, _ = _pair(fn(q[C:], k[C:], v[C:], S1), "out, S")
        if _same(first, torch.tril(q[:C] @ k[:C].T, -1) @ v[:C]):
            raise Slip(
                "the diagonal is missing: token t does not see itself",
                hint="The causal mask keeps s ≤ t, the diagonal included (torch.tril, not tril(-1)).",
            )
        if _same(second, torch.tril(q[C:] @ k[C:].T) @ v[C:]):
            raise Slip(
                "the second chunk ignores the first: the state's term is missing",
                hint="Earlier chunks reach this one only through S: add q @ S.",
            )
        got = torch.cat([first, second])
        assert torch.allclose(got, want, atol=1e-10), (
            "two chunks of 4 do not give (causal mask ∘ q kᵀ) v over 8 tokens: off by "
            f"{(got - want).abs().max().item():.3g}"
        )

    return [
        ("returns (out (C, d_v), S (d_k, d_v))", returns_the_chunks_output_and_the_state),
        ("two chunks equal (causal mask ∘ q kᵀ) v", two_chunks_equal_the_quadratic_form),
    ]
