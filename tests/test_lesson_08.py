"""Notebook 08's helpers: the KV cache, grouped-query attention, RoPE and the lower-right mask.

Every proof compares with an independent computation: full recomputation for the cache,
``F.scaled_dot_product_attention(enable_gqa=True)`` and an explicit ``repeat_interleave`` for GQA,
``FusedMultiHeadAttention`` for h_kv = h, complex numbers for RoPE, and PyTorch's own
``causal_lower_right`` for the mask.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from notebook_tools import verdict

from helpers import counts, masks
from helpers import torch_attention as ta
from helpers.inference import GroupedQueryAttention, KVCache, kv_cache_bytes
from helpers.kit import exercises
from helpers.kit.bench.flops import attention_flops, projection_flops
from helpers.kit.bench.peaks import BANDWIDTH_GB_S, find_peak
from helpers.kit.explorer import explore
from helpers.lessons.nb08 import explorers as decoding
from helpers.rope import apply_rope

D_MODEL, HEADS, B, T = 16, 4, 2, 9
TOL = {torch.float64: 1e-10, torch.float32: 1e-5}


def gqa(kv_heads: int, dtype=torch.float64, rope: bool = False, window=None, bias=False):
    torch.manual_seed(0)
    return GroupedQueryAttention(D_MODEL, HEADS, kv_heads, bias=bias, rope=rope, window=window).to(
        dtype
    )


def tokens(dtype=torch.float64, T=T):
    return torch.randn(B, T, D_MODEL, generator=torch.Generator().manual_seed(1), dtype=dtype)


def decode(module, x, chunks):
    """Feed x in chunks of the given sizes, carrying the cache; return the outputs joined."""
    outputs, cache, start = [], None, 0
    for size in chunks:
        out, cache = module(x[:, start : start + size], cache)
        outputs.append(out)
        start += size
    assert start == x.shape[1]
    return torch.cat(outputs, dim=1), cache


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize("rope", [False, True], ids=["no_rope", "rope"])
@pytest.mark.parametrize("chunks", [[1] * T, [5, 1, 3], [T]], ids=["tokens", "prefill", "all"])
def test_cached_decoding_equals_full_causal_recomputation(dtype, kv_heads, rope, chunks):
    module, x = gqa(kv_heads, dtype, rope), tokens(dtype)
    with torch.no_grad():
        full = torch.cat([module(x[:, : t + 1])[0][:, -1:] for t in range(T)], dim=1)
        cached, cache = decode(module, x, chunks)
    torch.testing.assert_close(cached, full, rtol=0, atol=TOL[dtype])
    assert cache.length == T and cache.keys.shape == (B, kv_heads, T, D_MODEL // HEADS)


def reference_gqa(module, x):
    """The module's maths by hand: projections, RoPE-free causal attention, shared KV heads."""
    h, h_kv, d_k = module.num_heads, module.num_kv_heads, module.d_k
    q = module.q_proj(x).view(B, -1, h, d_k).transpose(1, 2)
    k = module.k_proj(x).view(B, -1, h_kv, d_k).transpose(1, 2)
    v = module.v_proj(x).view(B, -1, h_kv, d_k).transpose(1, 2)
    return q, k, v


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_gqa_equals_sdpa_with_enable_gqa_and_an_explicit_repeat(kv_heads):
    module, x = gqa(kv_heads), tokens()
    with torch.no_grad():
        out, _ = module(x)
        q, k, v = reference_gqa(module, x)
        group = HEADS // kv_heads
        library = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        causal = torch.from_numpy(masks.causal_mask(T))
        explicit, _ = ta.scaled_dot_product_attention(
            q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), causal
        )
        for heads in (library, explicit):
            expected = module.out_proj(heads.transpose(1, 2).reshape(B, T, D_MODEL))
            torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


def test_gqa_with_as_many_kv_heads_as_query_heads_is_the_fused_module():
    module, x = gqa(HEADS, bias=True), tokens()
    fused = ta.FusedMultiHeadAttention(D_MODEL, HEADS, bias=True).double()
    with torch.no_grad():
        for name in ("weight", "bias"):
            stacked = [getattr(getattr(module, p), name) for p in ("q_proj", "k_proj", "v_proj")]
            getattr(fused.qkv_proj, name).copy_(torch.cat(stacked))
        fused.out_proj.load_state_dict(module.out_proj.state_dict())
        expected, _ = fused(x, is_causal=True)
        torch.testing.assert_close(module(x)[0], expected, rtol=0, atol=1e-12)


def test_multi_query_attention_has_one_kv_head_and_a_cache_h_times_smaller():
    x = tokens()
    with torch.no_grad():
        _, mha_cache = gqa(HEADS)(x)
        _, mqa_cache = gqa(1)(x)
    assert mqa_cache.keys.shape[1] == 1
    assert mha_cache.nbytes == HEADS * mqa_cache.nbytes
    assert mha_cache.nbytes == kv_cache_bytes(1, B, T, HEADS, D_MODEL // HEADS, 8)


@pytest.mark.parametrize("window", [1, 3, 4])
@pytest.mark.parametrize("chunks", [[1] * T, [5, 1, 3]], ids=["tokens", "prefill"])
def test_a_windowed_cache_equals_the_band_mask_and_stays_within_the_window(window, chunks):
    module, x = gqa(2, window=window), tokens()
    with torch.no_grad():
        cached, cache = decode(module, x, chunks)
        q, k, v = reference_gqa(module, x)
        band = np.tril(np.ones((T, T), dtype=bool)) & ~np.tril(np.ones((T, T), dtype=bool), -window)
        heads, _ = ta.scaled_dot_product_attention(
            q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), torch.from_numpy(band)
        )
        expected = module.out_proj(heads.transpose(1, 2).reshape(B, T, D_MODEL))
    torch.testing.assert_close(cached, expected, rtol=0, atol=1e-12)
    assert cache.keys.shape[-2] == window and cache.length == T and cache.start == T - window


@pytest.mark.parametrize(("T_q", "T_k"), [(1, 1), (1, 7), (3, 7), (7, 7)])
def test_lower_right_causal_mask_matches_pytorchs(T_q, T_k):
    from torch.nn.attention.bias import causal_lower_right

    theirs = causal_lower_right(T_q, T_k)._materialize().numpy()
    np.testing.assert_array_equal(masks.causal_mask_lower_right(T_q, T_k), theirs)


def test_is_causal_over_a_longer_cache_gives_a_different_answer_than_the_lower_right_mask():
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 1, n, 4, generator=gen, dtype=torch.float64) for n in (3, 7, 7))
    right = torch.from_numpy(masks.causal_mask_lower_right(3, 7))
    wrong = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # top-left: sees 1..3 keys
    assert not torch.allclose(wrong, F.scaled_dot_product_attention(q, k, v, attn_mask=right))


# --- RoPE ---------------------------------------------------------------------------------

vectors = st.integers(0, 2**31 - 1).map(
    lambda seed: torch.randn(
        2, 5, 8, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )
)


@settings(max_examples=40, deadline=None)
@given(x=vectors, y=vectors, shift=st.integers(-50, 500), interleaved=st.booleans())
def test_rope_scores_depend_only_on_the_distance_between_positions(x, y, shift, interleaved):
    positions = torch.arange(5) * 3 + 60
    scores = apply_rope(x, positions, interleaved=interleaved) @ apply_rope(
        y, positions, interleaved=interleaved
    ).transpose(-2, -1)
    moved = positions + shift
    shifted = apply_rope(x, moved, interleaved=interleaved) @ apply_rope(
        y, moved, interleaved=interleaved
    ).transpose(-2, -1)
    torch.testing.assert_close(scores, shifted, rtol=0, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(x=vectors, interleaved=st.booleans())
def test_rope_keeps_every_vectors_length(x, interleaved):
    rotated = apply_rope(x, torch.arange(5) * 1000, interleaved=interleaved)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_equals_multiplying_complex_pairs_by_a_unit_phase(interleaved):
    x = tokens(T=6)[..., :8]
    positions, d = torch.arange(6), 8
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    phase = torch.polar(torch.ones(6, d // 2, dtype=torch.float64), positions[:, None] * theta)
    if interleaved:
        pairs = torch.view_as_complex(x.reshape(B, 6, d // 2, 2).contiguous())
        expected = torch.view_as_real(pairs * phase).flatten(-2)
    else:
        pairs = torch.complex(x[..., : d // 2], x[..., d // 2 :])
        turned = pairs * phase
        expected = torch.cat((turned.real, turned.imag), dim=-1)
    torch.testing.assert_close(apply_rope(x, positions, interleaved=interleaved), expected)


def test_the_two_rope_layouts_are_not_interchangeable():
    x = tokens(T=6)[..., :8]
    half, interleaved = (apply_rope(x, torch.arange(6), interleaved=i) for i in (False, True))
    assert (half - interleaved).abs().max() > 0.1
    torch.testing.assert_close(apply_rope(x, torch.zeros(6, dtype=torch.long)), x)  # angle 0


@pytest.mark.parametrize(
    "base", [np.float32(500.0), np.float64(500.0), np.int64(500)], ids=lambda b: type(b).__name__
)
def test_rope_takes_a_numpy_number_as_its_base(base):
    x = tokens(T=5)
    torch.testing.assert_close(apply_rope(x, torch.arange(5), base=base),
                               apply_rope(x, torch.arange(5), base=500.0))  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_rope_keeps_the_dtype(dtype):
    x = tokens(T=4).to(dtype)
    assert apply_rope(x, torch.arange(4)).dtype == dtype


BAD = {
    "kv_heads_that_do_not_divide_heads": (
        lambda: GroupedQueryAttention(16, 4, 3),
        ValueError,
        "num_kv_heads=3 must divide num_heads=4",
    ),
    "positions_of_the_wrong_length": (
        lambda: apply_rope(torch.ones(1, 5, 8), torch.arange(4)),
        ValueError,
        r"x and positions must share T: x \(1, 5, 8\), positions \(4,\)",
    ),
    "float_positions": (
        lambda: apply_rope(torch.ones(1, 5, 8), torch.arange(5.0)),
        TypeError,
        r"positions must hold integers.*torch.float32",
    ),
    "an_odd_feature_width": (
        lambda: apply_rope(torch.ones(1, 5, 7), torch.arange(5)),
        ValueError,
        r"x must have shape \(..., T, d\) with d even, got shape \(1, 5, 7\)",
    ),
    "a_cache_from_another_batch_size": (
        lambda: gqa(2)(tokens()[:1, :1], gqa(2)(tokens()[:, :3])[1]),
        ValueError,
        r"cache keys \(2, 2, 3, 4\) torch.float64 do not fit x \(1, 1, 16\).*\(1, 2, 3, 4\)",
    ),
    "a_cache_of_another_dtype": (
        lambda: gqa(2, torch.float32)(tokens(torch.float32)[:, :1], gqa(2)(tokens()[:, :3])[1]),
        ValueError,
        r"cache keys \(2, 2, 3, 4\) torch.float64 do not fit x \(2, 1, 16\) torch.float32",
    ),
    "a_cache_that_is_not_a_kv_cache": (
        lambda: gqa(2)(tokens(), (torch.ones(1), torch.ones(1))),
        TypeError,
        "cache must be a helpers.inference.KVCache, got tuple",
    ),
    "more_new_tokens_than_tokens": (
        lambda: masks.causal_mask_lower_right(4, 3),
        ValueError,
        "T_q=4 new tokens cannot follow T_k=3 tokens",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_to_the_inference_helpers_gets_a_clear_error(case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message):
        call()


def test_kv_cache_counts_every_token_seen():
    cache = KVCache(torch.ones(1, 2, 3, 4), torch.ones(1, 2, 3, 4), start=5)
    assert cache.length == 8 and cache.nbytes == 2 * 24 * 4


# --- notebook 08's exercises ---------------------------------------------------------------

EXERCISES = ("cache_step", "share_kv_heads", "apply_rotary", "lower_right_mask")


def test_notebook_08_registers_its_four_exercises():
    assert {e.name for e in exercises.for_notebook("08")} == set(EXERCISES)


@pytest.mark.parametrize("name", EXERCISES)
def test_every_exercise_of_notebook_08_reports_a_stub_as_not_attempted(name):
    def stub(*args):
        raise NotImplementedError

    assert verdict(name, stub) == "not attempted"


def _append(keys, values, k, v, dim=-2):
    return torch.cat([keys, k], dim=dim), torch.cat([values, v], dim=dim)


def _step_right(q, k, v, keys, values):
    keys, values = _append(keys, values, k, v)
    return F.scaled_dot_product_attention(q, keys, values), keys, values


def _step_before_appending(q, k, v, keys, values):  # the new query misses its own key
    out = F.scaled_dot_product_attention(q, keys, values) if keys.shape[-2] else v
    return (out, *_append(keys, values, k, v))


def _step_is_causal(q, k, v, keys, values):  # top-left: the new query sees key 0 only
    keys, values = _append(keys, values, k, v)
    return F.scaled_dot_product_attention(q, keys, values, is_causal=True), keys, values


def _step_prepending(q, k, v, keys, values):  # same output (no positions), cache out of order
    keys, values = torch.cat([k, keys], dim=-2), torch.cat([v, values], dim=-2)
    return F.scaled_dot_product_attention(q, keys, values), keys, values


def _step_appends_the_query(q, k, v, keys, values):
    keys, values = _append(keys, values, q, v)
    return F.scaled_dot_product_attention(q, keys, values), keys, values


def _step_along_heads(q, k, v, keys, values):
    return q, *_append(keys, values, k, v, dim=1)


def _share_by_expand(kv, h):
    B, h_kv, T, d_k = kv.shape
    return kv[:, :, None].expand(B, h_kv, h // h_kv, T, d_k).reshape(B, h, T, d_k)


def _share_after_t(kv, h):  # the group axis after T: right heads on constant data, T mixed
    B, h_kv, T, d_k = kv.shape
    return kv[:, :, :, None].expand(B, h_kv, T, h // h_kv, d_k).reshape(B, h, T, d_k)


def _rope(x, positions, interleaved=False, exponent=2, sign=1):
    d = x.shape[-1]
    theta = 10000.0 ** (-exponent * torch.arange(d // 2, dtype=torch.float64) / d)
    angles = sign * positions[:, None].double() * theta
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., : d // 2], x[..., d // 2 :])
    r1, r2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos
    return torch.stack((r1, r2), -1).flatten(-2) if interleaved else torch.cat((r1, r2), -1)


RIGHT = {
    "cache_step": [_step_right],
    "share_kv_heads": [lambda kv, h: kv.repeat_interleave(h // kv.shape[1], 1), _share_by_expand],
    "apply_rotary": [_rope, apply_rope],
    "lower_right_mask": [
        lambda T_q, T_k: np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q),
        masks.causal_mask_lower_right,
        lambda T_q, T_k: torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q),
    ],
}


def _step_with_the_courses_attention(q, k, v, keys, values):
    """The course's attention returns (out, weights): a learner who forgets the [0]."""
    keys, values = torch.cat([keys, k], -2), torch.cat([values, v], -2)
    return ta.scaled_dot_product_attention(q, keys, values), keys, values


WRONG = {
    "cache_step": {
        "returns_the_courses_out_and_weights": _step_with_the_courses_attention,
        "attends_before_appending": _step_before_appending,
        "uses_is_causal": _step_is_causal,
        "prepends_the_new_token": _step_prepending,
        "appends_the_query_as_key": _step_appends_the_query,
        "appends_along_the_head_axis": _step_along_heads,
    },
    "share_kv_heads": {
        "tiles_with_repeat": lambda kv, h: kv.repeat(1, h // kv.shape[1], 1, 1),
        "leaves_kv_heads_alone": lambda kv, h: kv,
        "repeats_h_times": lambda kv, h: kv.repeat_interleave(h, 1),
        "expands_after_the_t_axis": _share_after_t,
    },
    "apply_rotary": {
        "interleaved_layout": lambda x, p: _rope(x, p, interleaved=True),
        "theta_without_the_2": lambda x, p: _rope(x, p, exponent=1),
        "turns_backwards": lambda x, p: _rope(x, p, sign=-1),
        "positions_from_one": lambda x, p: _rope(x, p + 1),
        "scales_instead_of_turning": lambda x, p: x * (1 + 0.01 * p[:, None]),
    },
    "lower_right_mask": {
        "top_left_like_is_causal": lambda T_q, T_k: np.tril(np.ones((T_q, T_k), dtype=bool)),
        "misses_the_diagonal": lambda T_q, T_k: np.tril(np.ones((T_q, T_k), bool), k=T_k - T_q - 1),
        "floats_not_booleans": lambda T_q, T_k: np.tril(np.ones((T_q, T_k)), k=T_k - T_q),
        "special_cases_one_token": lambda T_q, T_k: (
            np.ones((1, T_k), bool) if T_q == 1 else np.tril(np.ones((T_q, T_k), bool))
        ),
    },
}


@pytest.mark.parametrize(
    ("name", "answer"), [(n, a) for n, answers in RIGHT.items() for a in answers]
)
def test_notebook_08_exercises_pass_right_answers(name, answer):
    assert verdict(name, answer) == "passed"


@pytest.mark.parametrize(
    ("name", "mistake"), [(n, m) for n, mistakes in WRONG.items() for m in mistakes]
)
def test_notebook_08_exercises_reject_plausible_wrong_answers(name, mistake):
    assert verdict(name, WRONG[name][mistake]) == "failed"


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        (_step_before_appending, "append before attending"),
        (_step_prepending, "keys: the cached tokens must come first"),
        (_step_appends_the_query, "keys: the new token must come last"),
        (_step_with_the_courses_attention, "take its [0], or call F.scaled_dot_product_attention"),
    ],
)
def test_the_cache_exercise_says_what_is_wrong(mistake, message, capsys):
    exercises.check("cache_step", mistake)
    assert message in capsys.readouterr().out


# Which check of an exercise catches which mistake, and what it says: each check earns its place.
CAUGHT_BY = [
    ("share_kv_heads", "repeats_h_times", 1, "expected (B, h, T, d_k) = (2, 8, 3, 4), got (2, 16"),
    ("share_kv_heads", "tiles_with_repeat", 2, "read KV heads [0, 1, 0, 1, 0, 1, 0, 1]"),
    ("share_kv_heads", "expands_after_the_t_axis", 3, "query head 0 is not KV head 0"),
    ("apply_rotary", "positions_from_one", 1, "position 0 must leave x as it is"),
    ("apply_rotary", "scales_instead_of_turning", 2, "shifting every position changed q · k"),
    ("apply_rotary", "interleaved_layout", 3, "pairs (i, i + d/2) are not turned"),
    ("lower_right_mask", "floats_not_booleans", 1, "expected a boolean mask"),
    ("lower_right_mask", "misses_the_diagonal", 2, "T_q = T_k: plain causal"),
    ("lower_right_mask", "top_left_like_is_causal", 3, "may see all 6 keys, got [[1 0 0 0 0 0]]"),
    ("lower_right_mask", "special_cases_one_token", 4, "T_q = 3, T_k = 7: expected"),
]


@pytest.mark.parametrize(
    ("name", "mistake", "check", "message"), CAUGHT_BY, ids=[c[1] for c in CAUGHT_BY]
)
def test_each_check_of_notebook_08s_exercises_catches_its_own_mistake(
    name, mistake, check, message, capsys
):
    exercises.check(name, WRONG[name][mistake])
    out = capsys.readouterr().out
    count = len(exercises.get(name).checks)
    assert f"check {check} (of {count}) failed" in out and message in out, out


# --- notebook 08's counts and explorers ----------------------------------------------------


@pytest.mark.parametrize("T", [1, 7, 256, 4096])
@pytest.mark.parametrize(("d_model", "heads"), [(64, 4), (4096, 32)])
def test_uncached_step_flops_are_notebook_07s_projections_and_full_square(T, d_model, heads):
    count = counts.step_flops(T, d_model, heads, cached=False)
    assert count == projection_flops(1, T, d_model) + attention_flops(1, heads, T, d_model // heads)


@pytest.mark.parametrize("kv_heads", [8, 2, 1])
def test_recomputing_does_exactly_t_times_the_cached_steps_flops(kv_heads):
    for T in (1, 5, 512):
        cached = counts.step_flops(T, 64, 8, kv_heads, cached=True)
        assert counts.step_flops(T, 64, 8, kv_heads, cached=False) == T * cached
    # one token: its four projections (q, out: D x D; k, v: D x h_kv d_k), then 4 h T d_k
    assert (
        counts.step_flops(3, 64, 8, kv_heads)
        == 2 * (2 * 64 * 64 + 2 * 64 * kv_heads * 8) + 4 * 8 * 3 * 8
    )


def test_step_bytes_counts_weights_tokens_and_the_cache_once():
    D, h, h_kv, T = 64, 8, 2, 100
    weights = 2 * D * D + 2 * D * h_kv * 8
    kv = 2 * T * h_kv * 8
    assert counts.step_bytes(T, D, h, h_kv, 2, cached=True) == 2 * (weights + 2 * D + kv)
    assert counts.step_bytes(T, D, h, h_kv, 4, cached=False) == 4 * (weights + 2 * T * D + kv)


def test_roofline_takes_the_slower_of_arithmetic_and_memory():
    assert counts.roofline_seconds(2e12, 1e9, tflops=1.0, gb_per_s=1.0) == 2.0  # FLOPs win
    assert counts.roofline_seconds(1e12, 3e9, tflops=1.0, gb_per_s=1.0) == 3.0  # bytes win
    with pytest.raises(ValueError, match="must be positive"):
        counts.roofline_seconds(1.0, 1.0, tflops=0.0, gb_per_s=1.0)


def test_every_bandwidth_belongs_to_a_gpu_with_a_peak_in_notebook_07s_table():
    for label, (device_name, gb_per_s) in BANDWIDTH_GB_S.items():
        assert find_peak(device_name) is not None, label
        assert 100 < gb_per_s < 10_000, label


def test_on_a_gpu_the_cached_step_is_bandwidth_bound_and_recomputing_compute_bound():
    """What notebook 08's section 7 says, for the Llama 3 8B attention shape in bfloat16."""
    shape = (4096, 32, 8)
    device_name, gb_per_s = BANDWIDTH_GB_S["H100 SXM"]
    balance = find_peak(device_name).tflops["bfloat16"] * 1e12 / (gb_per_s * 1e9)
    for T in (512, 2048, 8192):
        cached = counts.step_flops(T, *shape) / counts.step_bytes(T, *shape, 2)
        full = counts.step_flops(T, *shape, cached=False) / counts.step_bytes(
            T, *shape, 2, cached=False
        )
        assert cached < 2 < balance < full


def test_decoding_weights_are_causal_rows_that_sum_to_one():
    weights = decoding.decoding_weights()
    assert weights.shape == (decoding.STEPS, decoding.STEPS)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-12)
    assert not np.triu(weights, k=1).any()


def test_decoding_picture_outlines_the_new_row_and_counts_this_step():
    fig, text = decoding.render_decoding(1)
    assert "1 query over 1 key: " in text and "(1.0x)" in text
    fig, text = decoding.render_decoding(8)
    outline = [p for p in fig.axes[0].patches if p.get_edgecolor()[:3] != (0, 0, 0)]
    assert [(p.get_x(), p.get_y(), p.get_width()) for p in outline] == [(0, 7, 8)]
    assert "(8.0x)" in text and "14,592 FLOPs with the cache, 68,352 without" in text
    assert fig.axes[1].get_title().endswith("(1, 2, 8, 4)")
    assert len(fig.axes[1].collections[0].get_paths()) == 2 * decoding.KV_HEADS * 8
    plt.close("all")


@pytest.mark.parametrize(
    ("step", "error", "message"),
    [(0, ValueError, "step must lie in 1..8, got 0"), (9, ValueError, "got 9"),
     (2.0, TypeError, "step must be an int")],
)  # fmt: skip
def test_decoding_picture_names_a_bad_step(step, error, message):
    with pytest.raises(error, match=message):
        decoding.render_decoding(step)


def test_kv_heads_snap_to_a_divisor_and_map_neighbouring_query_heads():
    assert [decoding.snap_kv_heads(8, n) for n in (1, 2, 3, 5, 8, 64)] == [1, 2, 2, 4, 8, 8]
    assert decoding.kv_head_of(8, 2) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert decoding.kv_head_of(4, 4) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="num_kv_heads=3 must divide num_heads=8"):
        decoding.kv_head_of(8, 3)


def test_kv_sharing_picture_links_each_query_head_to_its_kv_head():
    model = list(decoding.MODELS)[1]  # 32 layers, d_k = 128
    fig, text = decoding.render_kv_sharing(8, 2, model, 13)
    boxes, links = fig.axes[0].collections
    assert len(boxes.get_paths()) == 8 + 2
    ends = [segment[:, 0] for segment in links.get_segments()]  # x of query head, of KV head
    kv_centres = sorted({round(float(x[1]), 6) for x in ends})
    assert [kv_centres.index(round(float(x[1]), 6)) for x in ends] == [0] * 4 + [1] * 4
    cache = kv_cache_bytes(32, 1, 8192, 2, 128, 2)
    assert f"= {cache:,} bytes" in text and "4x smaller than multi-head" in text
    bars = [p.get_height() for p in fig.axes[1].patches]
    assert bars == [kv_cache_bytes(32, 1, 8192, n, 128, 2) / 2**30 for n in (8, 2, 1)]
    plt.close("all")


def test_kv_sharing_snaps_a_non_divisor_and_says_so_and_knows_multi_head():
    model = list(decoding.MODELS)[0]
    _, text = decoding.render_kv_sharing(8, 64, model, 10)
    assert "h_kv = 64 does not divide h = 8: using h_kv = 8" in text
    assert "this is multi-head attention" in text
    _, text = decoding.render_kv_sharing(4, 1, model, 10)
    assert "j // 4: [0, 0, 0, 0]" in text and "4x smaller" in text
    plt.close("all")


@pytest.mark.parametrize(
    ("args", "message"),
    [((3, 1, list(decoding.MODELS)[0], 10), "num_heads must be one of"),
     ((8, 2, "GPT-5", 10), "model must be one of"),
     ((8, 2, list(decoding.MODELS)[0], 20), "log2_t must be an int in 10..17, got 20")],
)  # fmt: skip
def test_kv_sharing_names_the_bad_argument(args, message):
    with pytest.raises(ValueError, match=message):
        decoding.render_kv_sharing(*args)


def test_decoding_explorers_redraw_when_driven_headless():
    step = widgets.IntSlider(value=1, min=1, max=decoding.STEPS)
    box = explore(decoding.render_decoding, step=step)
    first = box.image.value
    step.value = 6
    assert box.image.value != first and "step 6 of 8" in box.caption.value

    kv = widgets.Dropdown(options=decoding.HEAD_COUNTS, value=8)
    box = explore(
        decoding.render_kv_sharing,
        num_heads=widgets.Dropdown(options=decoding.HEAD_COUNTS, value=32),
        num_kv_heads=kv,
        model=widgets.Dropdown(options=list(decoding.MODELS), value=list(decoding.MODELS)[1]),
        log2_t=widgets.IntSlider(value=13, min=10, max=17),
    )
    first = box.image.value
    kv.value = 1
    assert box.image.value != first and "32x smaller than multi-head" in box.caption.value


# Code a hint must not hand over: each first-failure hint names the idea, the learner writes it.
ANSWER_CODE = ("torch.cat(", "F.scaled_dot_product_attention(", "np.tril(np.ones", ".expand(",
               "repeat_interleave(", "x1 * cos", "10000 ** (-torch.arange")  # fmt: skip


@pytest.mark.parametrize("name", EXERCISES)
def test_notebook_08_hints_point_at_the_idea_not_the_answer_code(name):
    hint = exercises.get(name).hint
    assert not [code for code in ANSWER_CODE if code in hint], hint
