"""The course's layers against Hugging Face transformers' own code, executed (not re-typed).

* ``helpers.linear_attention.gated_delta_rule`` (16) against Qwen3-Next's
  ``torch_recurrent_gated_delta_rule`` and ``torch_chunk_gated_delta_rule``;
* ``helpers.sparse.sink_attention`` (15) against gpt-oss's ``eager_attention_forward``, its masks
  made by transformers' ``masking_utils``;
* ``helpers.mla.MultiHeadLatentAttention`` (13) against ``DeepseekV3Attention``, same weights.

Conventions bridged here, not inside the course: transformers lays q, k, v out ``(B, T, h, d)``
(ours ``(B, h, T, d)``); its delta rule scales q by ``d_k^-½`` (ours by default) and can
L2-normalise q and k inside (``use_qk_l2norm_in_kernel``, left False: ours takes them as given);
its chunk size defaults to 64; its state is ``(B, h, d_k, d_v)`` as ours.

transformers computes some steps in float32 whatever the input (the delta rule, RMSNorm, the
rotary table). For the float64 proofs to 1e-10, :func:`in_float64` runs the library's own
function object with ``torch.float32`` read as ``torch.float64`` and nothing else changed; the
float32 proofs run the library untouched. The pinned version is in requirements-test.txt (``make
test`` installs it, and without it every test here fails; transformers 5 needs Python 3.11,
so on 3.10 this file is skipped).
"""

from __future__ import annotations

import inspect
import sys
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers.linear_attention import gated_delta_rule
from helpers.mla import MultiHeadLatentAttention
from helpers.rope import rope_angles
from helpers.sparse import sink_attention

if sys.version_info < (3, 11):
    pytest.skip("transformers 5 needs Python 3.11 (requirements-test.txt)", allow_module_level=True)
try:
    from transformers import DeepseekV3Config
    from transformers import masking_utils as hf_masks
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_dsv3
    from transformers.models.gpt_oss import modeling_gpt_oss as hf_oss
    from transformers.models.qwen3_next import modeling_qwen3_next as hf_qwen
except ImportError as error:  # every test fails, saying so: a skip would hide these proofs
    MISSING = error
else:
    MISSING = None


@pytest.fixture(autouse=True)
def transformers_installed():
    if MISSING is not None:
        pytest.fail(
            f"{MISSING}: python -m pip install -c requirements.txt -r requirements-test.txt "
            "(make test does)"
        )


TOL = {torch.float64: 1e-10, torch.float32: 2e-6}  # measured: 1e-15 and 4e-7


class _TorchReadingFloat32As64:
    """``torch``, except that ``torch.float32`` and ``torch.float`` are float64."""

    float32 = float = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


def in_float64(fn):
    """The library's function (its kernel-hub wrapper removed), its globals' torch swapped."""
    fn = inspect.unwrap(fn)
    scope = dict(fn.__globals__, torch=_TorchReadingFloat32As64())
    wide = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    wide.__kwdefaults__ = fn.__kwdefaults__
    return wide


def rand(*shape, gen, dtype):
    return torch.randn(*shape, generator=gen, dtype=dtype)


def bthd(x):
    """Ours ``(B, h, T, d)`` <-> transformers' ``(B, T, h, d)`` (and ``(B, h, T)`` <-> ``(B, T, h)``)."""
    return x.transpose(1, 2)


# --- Qwen3-Next's gated delta rule ---------------------------------------------------------


def delta_inputs(dtype, B=2, h=3, T=37, d_k=8, d_v=5, seed=0, heads_k=None):
    gen = torch.Generator().manual_seed(seed)
    hk = h if heads_k is None else heads_k
    q, k = rand(B, hk, T, d_k, gen=gen, dtype=dtype), rand(B, hk, T, d_k, gen=gen, dtype=dtype)
    q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)  # what Qwen3-Next's layer feeds in
    v = rand(B, h, T, d_v, gen=gen, dtype=dtype)
    g = F.logsigmoid(rand(B, h, T, gen=gen, dtype=dtype) + 2)  # log decays, all < 0
    beta = torch.sigmoid(rand(B, h, T, gen=gen, dtype=dtype))
    state = 0.3 * rand(B, h, d_k, d_v, gen=gen, dtype=dtype)
    return q, k, v, g, beta, state


def hf_delta(q, k, v, g, beta, state, chunk_size):
    """transformers' function on our tensors: recurrent if chunk_size is None."""
    if chunk_size is None:
        fn, extra = hf_qwen.torch_recurrent_gated_delta_rule, {}
    else:
        fn, extra = hf_qwen.torch_chunk_gated_delta_rule, {"chunk_size": chunk_size}
    fn = in_float64(fn) if q.dtype == torch.float64 else fn
    out, final = fn(
        *(bthd(x) for x in (q, k, v, g, beta)),
        initial_state=state,
        output_final_state=True,
        use_qk_l2norm_in_kernel=False,
        **extra,
    )
    return bthd(out), final


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("chunk_size", [None, 1, 4, 16, 64])  # T = 37: 64 pads one chunk
@pytest.mark.parametrize("with_state", [False, True])
def test_gated_delta_rule_is_qwen3_next(dtype, chunk_size, with_state):
    q, k, v, g, beta, state = delta_inputs(dtype)
    state = state if with_state else None
    want, want_state = hf_delta(q, k, v, g, beta, state, chunk_size)
    got, got_state = gated_delta_rule(q, k, v, g, beta, state, chunk_size=chunk_size)
    assert got.shape == want.shape == (2, 3, 37, 5) and got.dtype == want.dtype == dtype
    assert got_state.shape == want_state.shape == (2, 3, 8, 5)
    torch.testing.assert_close(got, want, rtol=0, atol=TOL[dtype])
    torch.testing.assert_close(got_state, want_state, rtol=0, atol=TOL[dtype])


def test_chunked_default_is_64_and_value_heads_share_key_heads():
    """transformers' chunk size defaults to 64; with more value heads than key heads, each key
    head serves consecutive value heads (ours: q and k repeated with repeat_interleave)."""
    q, k, v, g, beta, state = delta_inputs(torch.float64, h=4, heads_k=2, T=70)
    fn = in_float64(hf_qwen.torch_chunk_gated_delta_rule)
    assert inspect.signature(fn).parameters["chunk_size"].default == 64
    want, want_state = fn(
        *(bthd(x) for x in (q, k, v, g, beta)), initial_state=state, output_final_state=True
    )
    q, k = q.repeat_interleave(2, dim=1), k.repeat_interleave(2, dim=1)
    got, got_state = gated_delta_rule(q, k, v, g, beta, state, chunk_size=64)
    torch.testing.assert_close(got, bthd(want), rtol=0, atol=1e-10)
    torch.testing.assert_close(got_state, want_state, rtol=0, atol=1e-10)


def test_normalising_in_the_kernel_is_l2norm_first():
    """Qwen3-Next's layer passes ``use_qk_l2norm_in_kernel=True``: the same as normalising q and k
    with its ``l2norm`` and giving them to ours."""
    q, k, v, g, beta, state = delta_inputs(torch.float64)
    q, k = 3 * q, 0.5 * k  # no longer unit length
    fn = in_float64(hf_qwen.torch_chunk_gated_delta_rule)
    args = [bthd(x) for x in (q, k, v, g, beta)]
    want, _ = fn(*args, chunk_size=8, initial_state=state, use_qk_l2norm_in_kernel=True)
    q, k = in_float64(hf_qwen.l2norm)(q), in_float64(hf_qwen.l2norm)(k)
    got, _ = gated_delta_rule(q, k, v, g, beta, state, chunk_size=8)
    torch.testing.assert_close(got, bthd(want), rtol=0, atol=1e-10)


def test_float64_needs_the_swap():
    """The library untouched computes in float32: off by far more than 1e-10, so the swap in
    :func:`in_float64` is what the float64 proofs measure, and they could fail without it."""
    q, k, v, g, beta, state = delta_inputs(torch.float64)
    raw, _ = hf_qwen.torch_recurrent_gated_delta_rule(
        *(bthd(x) for x in (q, k, v, g, beta)), initial_state=state, output_final_state=True
    )
    got, _ = gated_delta_rule(q, k, v, g, beta, state)
    assert (got - bthd(raw)).abs().max() > 1e-9


# --- gpt-oss's attention with sinks --------------------------------------------------------


def hf_additive_mask(T_q, T_k, window, dtype):
    """transformers' mask functions, queries at the last T_q positions; 0 or the dtype's min."""
    fn = hf_masks.causal_mask_function
    if window is not None:
        fn = hf_masks.sliding_window_causal_mask_function(window)
    q_idx = torch.arange(T_k - T_q, T_k).view(T_q, 1)
    allowed = fn(0, 0, q_idx, torch.arange(T_k).view(1, T_k))
    mask = torch.zeros(T_q, T_k, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    return mask[None, None]  # (1, 1, T_q, T_k), added to the scores


class SinkModule(nn.Module):
    """What ``eager_attention_forward`` reads from gpt-oss's attention module."""

    def __init__(self, sinks, groups):
        super().__init__()
        self.sinks, self.num_key_value_groups = nn.Parameter(sinks), groups


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("T_q, T_k", [(9, 9), (3, 11)])
@pytest.mark.parametrize("window", [None, 1, 4])
@pytest.mark.parametrize("groups", [1, 2])  # 2: two query heads per key head (GQA)
def test_sink_attention_is_gpt_oss(dtype, T_q, T_k, window, groups):
    B, h, d = 2, 4, 6
    gen = torch.Generator().manual_seed(T_q + 10 * T_k + 100 * groups)
    q = rand(B, h, T_q, d, gen=gen, dtype=dtype)
    k, v = (rand(B, h // groups, T_k, d, gen=gen, dtype=dtype) for _ in range(2))
    sinks = 2 * rand(h, gen=gen, dtype=dtype)
    module = SinkModule(sinks, groups).eval()
    mask = hf_additive_mask(T_q, T_k, window, dtype)
    with torch.no_grad():
        want, _ = hf_oss.eager_attention_forward(module, q, k, v, mask, scaling=d**-0.5)
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    got = sink_attention(q, k, v, sinks, window=window)
    assert got.shape == (B, h, T_q, d) and want.shape == (B, T_q, h, d)
    torch.testing.assert_close(got, bthd(want), rtol=0, atol=TOL[dtype])


# --- DeepSeek-V3's multi-head latent attention ----------------------------------------------

MLA_SIZES = dict(d_model=32, num_heads=4, kv_latent_dim=12, nope_dim=6, rope_dim=4, v_dim=5)


def deepseek_pair(dtype, seed=0):
    """Ours with random weights, and transformers' DeepseekV3Attention holding the same ones."""
    torch.manual_seed(seed)
    ours = MultiHeadLatentAttention(**MLA_SIZES).to(dtype).eval()
    with torch.no_grad():
        ours.kv_a_layernorm.weight.uniform_(0.5, 1.5)  # not ones: the norm's weight is checked
    s = MLA_SIZES
    config = DeepseekV3Config(
        hidden_size=s["d_model"], num_attention_heads=s["num_heads"],
        num_key_value_heads=s["num_heads"], q_lora_rank=None, kv_lora_rank=s["kv_latent_dim"],
        qk_nope_head_dim=s["nope_dim"], qk_rope_head_dim=s["rope_dim"], v_head_dim=s["v_dim"],
        rope_interleave=False, rms_norm_eps=1e-6, attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )  # fmt: skip
    config._attn_implementation = "sdpa"
    theirs = hf_dsv3.DeepseekV3Attention(config, layer_idx=0).to(dtype).eval()
    theirs.load_state_dict(ours.state_dict())  # the same names: q_proj, kv_a_proj_with_mqa, ...
    if dtype == torch.float64:  # its RMSNorm computes in float32 whatever the input
        norm = theirs.kv_a_layernorm
        norm.forward = types.MethodType(in_float64(type(norm).forward), norm)
    return ours, theirs, config


def hf_rope_table(config, T, dtype):
    """(cos, sin) for transformers' attention: its own rotary module in float32; in float64 the
    course's angles (its module computes them in float32), checked against it below."""
    if dtype == torch.float32:
        x = torch.zeros(1, dtype=dtype)
        return hf_dsv3.DeepseekV3RotaryEmbedding(config)(x, torch.arange(T)[None])
    angles = rope_angles(torch.arange(T), config.qk_rope_head_dim).to(dtype)
    emb = torch.cat((angles, angles), dim=-1)[None]  # half-split layout: (1, T, rope_dim)
    return emb.cos(), emb.sin()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("absorb", [False, True])
@pytest.mark.parametrize("cached", [False, True])  # True: 6 tokens, then 3 one at a time
def test_mla_is_deepseek_v3_attention(dtype, absorb, cached):
    ours, theirs, config = deepseek_pair(dtype)
    x = rand(2, 9, MLA_SIZES["d_model"], gen=torch.Generator().manual_seed(1), dtype=dtype)
    with torch.no_grad():
        want, _ = theirs(x, hf_rope_table(config, 9, dtype), attention_mask=None)
        if cached:
            first, cache = ours(x[:, :6], absorb=absorb)
            steps = [first]
            for t in range(6, 9):
                step, cache = ours(x[:, t : t + 1], cache, absorb=absorb)
                steps.append(step)
            got = torch.cat(steps, dim=1)
        else:
            got, cache = ours(x, absorb=absorb)
    assert got.shape == want.shape == (2, 9, MLA_SIZES["d_model"]) and cache.length == 9
    torch.testing.assert_close(got, want, rtol=0, atol=TOL[dtype])


def test_rope_table_is_deepseek_v3s():
    """The float64 proof's angle table is transformers' own, to float32's rounding."""
    _, _, config = deepseek_pair(torch.float32)
    cos, sin = hf_rope_table(config, 50, torch.float32)
    ours_cos, ours_sin = hf_rope_table(config, 50, torch.float64)
    torch.testing.assert_close(cos.double(), ours_cos, rtol=0, atol=1e-6)
    torch.testing.assert_close(sin.double(), ours_sin, rtol=0, atol=1e-6)
