"""Notebook 16's helpers: linear attention and the gated delta rule, recurrent and chunked.

Every proof compares with an independent computation: linear attention as the masked quadratic
form ``(causal mask ∘ q kᵀ) v`` (one matrix product, no state), and the gated delta rule as the
closed form of its state, ``S_t = Σ_s (Π decays) (I − β k kᵀ) …`` unrolled here as a product of
(d_k × d_k) transition matrices, written without the library's loop or its chunks.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from notebook_tools import verdict

from helpers.kit import exercises
from helpers.kit.explorer import explore
from helpers.lessons.nb16 import explorers as ex
from helpers.lessons.nb16.recall import load_recall_table, recall, recall_table
from helpers.linear_attention import causal_linear_attention, gated_delta_rule, state_bytes

TOL = {torch.float64: 1e-10, torch.float32: 1e-4}


def rand(*shape, seed, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def inputs(B, h, T, d_k, d_v, seed, dtype=torch.float64, decay=3.0):
    q, k, v = (
        rand(B, h, T, d_k, seed=seed),
        rand(B, h, T, d_k, seed=seed + 1),
        rand(B, h, T, d_v, seed=seed + 2),
    )
    k = F.normalize(k, dim=-1)  # as Qwen3-Next gives its kernel: a bounded state
    gen = torch.Generator().manual_seed(seed + 3)
    g = -decay * torch.rand(B, h, T, generator=gen, dtype=torch.float64)
    beta = torch.rand(B, h, T, generator=gen, dtype=torch.float64)
    return [x.to(dtype) for x in (q, k, v, g, beta)]


def quadratic(q, k, v):
    """Linear attention as one masked matrix product: the parallel form."""
    T = q.shape[-2]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    return ((q @ k.transpose(-2, -1)) * mask) @ v


def delta_by_transitions(q, k, v, g, beta, S0, scale):
    """The gated delta rule's state written as S_t = M_t S_{t-1} + β_t k_t v_tᵀ with the transition
    M_t = exp(g_t) (I − β_t k_t k_tᵀ), for one (batch, head) at a time, in float64."""
    B, h, T, d_k = q.shape
    out = torch.zeros(B, h, T, v.shape[-1], dtype=torch.float64)
    final = torch.zeros(B, h, d_k, v.shape[-1], dtype=torch.float64)
    eye = torch.eye(d_k, dtype=torch.float64)
    for b in range(B):
        for j in range(h):
            S = S0[b, j].double().clone()
            for t in range(T):
                kt, bt = k[b, j, t].double(), float(beta[b, j, t])
                M = math.exp(float(g[b, j, t])) * (eye - bt * torch.outer(kt, kt))
                S = M @ S + bt * torch.outer(kt, v[b, j, t].double())
                out[b, j, t] = S.T @ (scale * q[b, j, t].double())
            final[b, j] = S
    return out, final


# --- linear attention: recurrent = chunked = parallel ---------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("chunk_size", [None, 1, 3, 8, 50])
def test_linear_attention_equals_the_masked_quadratic_form(dtype, chunk_size):
    q, k, v = (rand(2, 3, 13, d, seed=s).to(dtype) for s, d in ((1, 4), (2, 4), (3, 5)))
    got = causal_linear_attention(q, k, v, chunk_size)
    want = quadratic(q.double(), k.double(), v.double())
    assert got.dtype == dtype and got.shape == (2, 3, 13, 5)
    assert (got.double() - want).abs().max() < TOL[dtype] * max(1.0, want.abs().max().item())


@settings(max_examples=30, deadline=None)
@given(B=st.integers(1, 2), h=st.integers(1, 3), T=st.integers(1, 20), d_k=st.integers(1, 6),
       d_v=st.integers(1, 6), chunk=st.one_of(st.none(), st.integers(1, 25)), seed=st.integers(0, 999))  # fmt: skip
def test_linear_attention_forms_agree_for_any_sizes(B, h, T, d_k, d_v, chunk, seed):
    q, k, v, _, _ = inputs(B, h, T, d_k, d_v, seed)
    assert (causal_linear_attention(q, k, v, chunk) - quadratic(q, k, v)).abs().max() < 1e-10
    q32, k32, v32 = q.float(), k.float(), v.float()
    got32 = causal_linear_attention(q32, k32, v32, chunk)
    assert (got32.double() - quadratic(q, k, v)).abs().max() < 1e-4


# --- the gated delta rule: recurrent = chunked = transitions ---------------------------------


@settings(max_examples=40, deadline=None)
@given(B=st.integers(1, 2), h=st.integers(1, 2), T=st.integers(1, 19), d_k=st.integers(1, 5),
       d_v=st.integers(1, 5), chunk=st.one_of(st.none(), st.integers(1, 24)),
       with_state=st.booleans(), seed=st.integers(0, 999))  # fmt: skip
def test_gated_delta_rule_equals_its_transitions_for_any_sizes_and_chunks(
    B, h, T, d_k, d_v, chunk, with_state, seed
):
    q, k, v, g, beta = inputs(B, h, T, d_k, d_v, seed)
    S0 = rand(B, h, d_k, d_v, seed=seed + 9) if with_state else None
    scale = 1 / math.sqrt(d_k)
    want_o, want_S = delta_by_transitions(
        q, k, v, g, beta, S0 if with_state else torch.zeros(B, h, d_k, d_v), scale
    )
    o, S = gated_delta_rule(q, k, v, g, beta, S0, chunk_size=chunk)
    assert (o - want_o).abs().max() < 1e-10 and (S - want_S).abs().max() < 1e-10
    o32, S32 = gated_delta_rule(*(x.float() for x in (q, k, v, g, beta)),
                                None if S0 is None else S0.float(), chunk_size=chunk)  # fmt: skip
    assert o32.dtype == S32.dtype == torch.float32
    assert (o32.double() - want_o).abs().max() < 1e-4 and (S32.double() - want_S).abs().max() < 1e-4


@pytest.mark.parametrize("chunk_size", [None, 4, 64])
def test_running_on_from_the_returned_state_equals_one_run(chunk_size):
    q, k, v, g, beta = inputs(2, 2, 23, 4, 3, seed=5)
    S0 = rand(2, 2, 4, 3, seed=6)
    whole, S_whole = gated_delta_rule(q, k, v, g, beta, S0, chunk_size=chunk_size)
    first, S_mid = gated_delta_rule(*(x[:, :, :9] for x in (q, k, v, g, beta)), S0, chunk_size=7)
    rest, S_end = gated_delta_rule(*(x[:, :, 9:] for x in (q, k, v, g, beta)), S_mid, chunk_size=chunk_size)  # fmt: skip
    assert (torch.cat([first, rest], 2) - whole).abs().max() < 1e-10
    assert (S_end - S_whole).abs().max() < 1e-10


@pytest.mark.parametrize("strength", [50.0, 1e4, 1e30])
def test_chunked_form_survives_any_decay_without_overflow(strength):
    q, k, v, g, beta = inputs(1, 2, 17, 4, 3, seed=8, decay=strength)
    o, S = gated_delta_rule(q, k, v, g, beta, chunk_size=None)
    o_c, S_c = gated_delta_rule(q, k, v, g, beta, chunk_size=16)
    assert torch.isfinite(o_c).all() and torch.isfinite(S_c).all()
    assert (o - o_c).abs().max() < 1e-10 and (S - S_c).abs().max() < 1e-10


def test_with_no_decay_and_beta_zero_nothing_is_written():
    q, k, v, g, beta = inputs(1, 1, 6, 3, 2, seed=9)
    S0 = rand(1, 1, 3, 2, seed=10)
    o, S = gated_delta_rule(q, k, v, torch.zeros_like(g), torch.zeros_like(beta), S0, chunk_size=4)
    assert torch.equal(S, S0) or (S - S0).abs().max() < 1e-14
    assert (o - (q / math.sqrt(3)) @ S0).abs().max() < 1e-12


def test_inputs_are_not_modified_and_the_final_state_is_new():
    q, k, v, g, beta = inputs(1, 2, 5, 3, 2, seed=11)
    S0 = rand(1, 2, 3, 2, seed=12)
    copies = [x.clone() for x in (q, k, v, g, beta, S0)]
    for chunk in (None, 2):
        _, S = gated_delta_rule(q, k, v, g, beta, S0, chunk_size=chunk)
        assert S.data_ptr() != S0.data_ptr()
    assert all(torch.equal(a, b) for a, b in zip(copies, (q, k, v, g, beta, S0), strict=True))


def test_half_inputs_come_back_in_their_dtype():
    q, k, v, g, beta = inputs(1, 1, 6, 4, 4, seed=13)
    o, S = gated_delta_rule(*(x.to(torch.bfloat16) for x in (q, k, v, g, beta)), chunk_size=4)
    assert o.dtype == S.dtype == torch.bfloat16
    assert causal_linear_attention(q.half(), k.half(), v.half()).dtype == torch.float16


def test_state_bytes_do_not_grow_with_T_and_equal_the_states_tensor():
    q, k, v, g, beta = inputs(1, 4, 30, 8, 6, seed=14)
    for T in (1, 30):
        _, S = gated_delta_rule(*(x[:, :, :T] for x in (q, k, v, g, beta)))
        assert S.numel() * S.element_size() == state_bytes(4, 8, 6, 8)


# --- bad input -------------------------------------------------------------------------------


def _good():
    q, k, v, g, beta = inputs(1, 2, 5, 3, 4, seed=15)
    return dict(q=q, k=k, v=v, g=g, beta=beta)


BAD = [
    ("k", dict(k=torch.zeros(1, 2, 5, 4, dtype=torch.float64)), "q and k must share d_k"),
    ("v", dict(v=torch.zeros(1, 2, 6, 4, dtype=torch.float64)), "q and v must share T"),
    ("q", dict(q=torch.zeros(2, 5, 3, dtype=torch.float64)), "q must have shape"),
    ("q", {n: torch.zeros(1, 2, 0, *s, dtype=torch.float64) for n, s in
           (("q", (3,)), ("k", (3,)), ("v", (4,)), ("g", ()), ("beta", ()))}, "T >= 1"),
    ("g", dict(g=torch.zeros(1, 2, 4, dtype=torch.float64)), "q and g must share T"),
    ("beta", dict(beta=torch.zeros(1, 5, dtype=torch.float64)), "beta must have shape"),
    ("g", dict(g=torch.full((1, 2, 5), 0.1, dtype=torch.float64)), "g must be finite and <= 0"),
    ("g", dict(g=torch.full((1, 2, 5), math.nan, dtype=torch.float64)), "g must be finite"),
    ("beta", dict(beta=torch.full((1, 2, 5), 1.5, dtype=torch.float64)), "beta must lie in [0, 1]"),
    ("beta", dict(beta=torch.full((1, 2, 5), -0.1, dtype=torch.float64)), "beta must lie in [0, 1]"),
    ("initial_state", dict(initial_state=torch.zeros(1, 2, 4, 3, dtype=torch.float64)), "q and initial_state must share d_k"),
    ("chunk_size", dict(chunk_size=0), "chunk_size"),
    ("chunk_size", dict(chunk_size=2.0), "chunk_size"),
    ("chunk_size", dict(chunk_size=True), "chunk_size"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "change", "message"), BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)]
)
def test_bad_input_to_the_gated_delta_rule_gets_a_clear_error(name, change, message):
    pattern = message.replace("[", r"\[").replace("]", r"\]")
    with pytest.raises((ValueError, TypeError), match=pattern) as info:
        gated_delta_rule(**{**_good(), **change})
    assert name in str(info.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [(dict(k=torch.zeros(1, 2, 5, 2)), "q and k must share d_k"),
     (dict(v=torch.zeros(1, 3, 5, 4)), "q and v must share h"),
     (dict(chunk_size=-3), "chunk_size must be positive")],
)  # fmt: skip
def test_bad_input_to_linear_attention_names_the_argument(change, message):
    args = {n: x.float() for n, x in _good().items() if n in "qkv"}
    with pytest.raises(ValueError) as info:
        causal_linear_attention(**{**args, **change})
    assert message in str(info.value)


# --- the recall test, as the notebook says it -------------------------------------------------


@pytest.mark.parametrize("d_k", [8, 16])
def test_past_d_k_pairs_the_delta_rule_keeps_the_recent_pairs_that_linear_attention_blurs(d_k):
    for pairs in (2 * d_k, 4 * d_k):
        delta = recall("delta rule", pairs, d_k, last=d_k // 4)
        linear = recall("linear", pairs, d_k, last=d_k // 4)
        assert delta >= 0.9 and delta > linear + 0.15, (pairs, delta, linear)
        assert recall("softmax", pairs, d_k) >= 0.95


def test_the_delta_rule_overwrites_old_pairs_so_it_recalls_fewer_in_all():
    for pairs in (16, 32, 64):
        assert recall("delta rule", pairs, 16) < recall("linear", pairs, 16)


def test_below_d_k_linear_attention_recalls_nearly_everything():
    assert recall("linear", 4, 16) == 1.0 and recall("linear", 64, 16) < 0.6


def test_the_shipped_recall_table_is_what_the_recall_test_gives():
    shipped = load_recall_table()
    fresh = recall_table(key_widths=(8,))  # the whole table takes seconds; d_k = 8 proves the path
    assert fresh and all(shipped[key] == curve for key, curve in fresh.items())


# --- exercises ---------------------------------------------------------------------------------

EXERCISES = ("linear_attention_step", "delta_rule_step", "linear_attention_chunk")


def test_notebook_16_registers_its_three_exercises():
    assert {e.name for e in exercises.for_notebook("16")} == set(EXERCISES)


def _linear_step(S, q, k, v):
    S = S + torch.outer(k, v)
    return S.T @ q, S


def _delta_step(S, q, k, v, g, beta):
    S = math.exp(g) * S
    S = S + beta * torch.outer(k, v - S.T @ k)
    return S.T @ q, S


def _chunk(q, k, v, S):
    return q @ S + torch.tril(q @ k.T) @ v, S + k.T @ v


RIGHT = {
    "linear_attention_step": [_linear_step, lambda S, q, k, v: (q @ (S + k[:, None] * v), S + k[:, None] * v)],
    "delta_rule_step": [_delta_step],
    "linear_attention_chunk": [_chunk],
}  # fmt: skip
WRONG = {
    "linear_attention_step": {
        "reads_before_writing": lambda S, q, k, v: (S.T @ q, S + torch.outer(k, v)),
        "transposed_outer_product": lambda S, q, k, v: (q @ S, S + torch.outer(v, k)),
    },
    "delta_rule_step": {
        "plain_linear_write": lambda S, q, k, v, g, b: (
            (math.exp(g) * S + b * torch.outer(k, v)).T @ q, math.exp(g) * S + b * torch.outer(k, v)),
        "decays_after": lambda S, q, k, v, g, b: (
            (math.exp(g) * (S + b * torch.outer(k, v - S.T @ k))).T @ q,
            math.exp(g) * (S + b * torch.outer(k, v - S.T @ k))),
        "forgets_beta": lambda S, q, k, v, g, b: _delta_step(S, q, k, v, g, 1.0),
    },
    "linear_attention_chunk": {
        "no_diagonal": lambda q, k, v, S: (q @ S + torch.tril(q @ k.T, -1) @ v, S + k.T @ v),
        "no_state_term": lambda q, k, v, S: (torch.tril(q @ k.T) @ v, S + k.T @ v),
        "no_mask": lambda q, k, v, S: (q @ S + (q @ k.T) @ v, S + k.T @ v),
    },
}  # fmt: skip


@pytest.mark.parametrize("name", EXERCISES)
def test_every_exercise_of_notebook_16_reports_a_stub_as_not_attempted(name):
    def stub(*args):
        raise NotImplementedError

    assert verdict(name, stub) == "not attempted"


@pytest.mark.parametrize(
    ("name", "answer"), [(n, a) for n, answers in RIGHT.items() for a in answers]
)
def test_notebook_16_exercises_pass_right_answers(name, answer):
    assert verdict(name, answer) == "passed"


@pytest.mark.parametrize(("name", "mistake"), [(n, m) for n, ms in WRONG.items() for m in ms])
def test_notebook_16_exercises_reject_typical_wrong_answers(name, mistake):
    assert verdict(name, WRONG[name][mistake]) == "failed"


CAUGHT_BY = [  # (exercise, mistake, what the learner reads)
    ("linear_attention_step", "reads_before_writing", "write, then read"),
    ("delta_rule_step", "plain_linear_write", "the plain linear write"),
    ("delta_rule_step", "decays_after", "Decay first"),
    ("linear_attention_chunk", "no_diagonal", "the diagonal included"),
    ("linear_attention_chunk", "no_state_term", "only through S"),
]


@pytest.mark.parametrize(("name", "mistake", "says"), CAUGHT_BY, ids=[c[1] for c in CAUGHT_BY])
def test_each_typical_slip_gets_its_own_hint(name, mistake, says, capsys):
    exercises.check(name, WRONG[name][mistake])
    assert says in capsys.readouterr().out


# --- explorers -----------------------------------------------------------------------------------


def test_memory_counts_follow_qwen3_next_sizes():
    assert ex.kv_bytes_per_token() == 2 * 2 * 256 * 2  # a key and a value, 2 KV heads of 256
    assert ex.delta_state_bytes() == 32 * 128 * 128 * 2
    sizes = ex.stack_bytes(262_144, 3)
    assert sizes["hybrid"] == 12 * 2048 * 262_144 + 36 * 2**20
    assert sizes["full attention (GQA)"] == 4 * sizes["hybrid"] - 4 * 36 * 2**20 - 0
    assert ex.stack_bytes(1_048_576, 1_000)["hybrid"] == 48 * 2**20  # all linear: T-independent
    assert ex.stack_bytes(4_096, 0)["hybrid"] == ex.stack_bytes(4_096, 0)["full attention (GQA)"]


def test_memory_explorer_redraws_when_driven_headless():
    T = widgets.Dropdown(options=ex.CONTEXTS, value=262_144)
    share = widgets.Dropdown(options=ex.LINEAR_SHARES, value=3)
    box = explore(ex.render_memory, T=T, linear_per_full=share)
    first = box.image.value
    share.value = 1_000
    assert box.image.value != first and "all Gated DeltaNet" in box.caption.value


def test_recall_explorer_redraws_when_driven_headless():
    d_k = widgets.Dropdown(options=ex.KEY_WIDTHS, value=16)
    which = widgets.ToggleButtons(options=ex.WHICH, value=ex.WHICH[0])
    box = explore(ex.render_recall, d_k=d_k, which=which)
    first = box.image.value
    which.value = ex.WHICH[1]
    assert box.image.value != first and "most recent" in box.caption.value


@pytest.mark.parametrize("bad", [dict(T=1000, linear_per_full=3), dict(T=4096, linear_per_full=4)])
def test_memory_explorer_rejects_values_off_its_controls(bad):
    with pytest.raises(ValueError):
        ex.render_memory(**bad)


def test_a_numpy_integer_is_a_chunk_size_too():
    import numpy as np

    q, k, v, g, beta = inputs(1, 1, 9, 3, 2, seed=16)
    want, _ = gated_delta_rule(q, k, v, g, beta)
    got, _ = gated_delta_rule(q, k, v, g, beta, chunk_size=np.int64(4))
    assert (got - want).abs().max() < 1e-10
