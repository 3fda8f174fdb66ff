"""The contenders of the benchmark: the same attention layer computed different ways.

Each *layer* contender maps ``x (B, T, D)`` to ``(B, T, D)`` through four projections and
attention; the three ``*_direct`` contenders are the bare attention core on ``q, k, v
(B, h, T, d_k)``, with no projections.

=================  ====================================================================
``naive``          the course's ``MultiHeadAttention``: separate projections, explicit softmax
``fused_explicit`` ``FusedMultiHeadAttention(need_weights=True)``: one QKV matmul, explicit
                   attention (the weights are formed and returned)
``fused_sdpa``     ``FusedMultiHeadAttention`` with SDPA as the core (``need_weights=False``)
``torch_mha``      ``torch.nn.MultiheadAttention(batch_first=True)``, ``need_weights=False``,
                   eval mode; two algorithms (below)
``sdpa_functional`` the fused layer written as bare functions (``F.linear``, view, SDPA,
                   ``F.linear``): what the module costs without its checks
``sdpa_direct``    ``F.scaled_dot_product_attention(q, k, v)`` alone: the attention core
``triton_direct``  ``helpers.flash.flash_attention_triton(q, k, v)``: notebook 09's Triton
                   FlashAttention kernel (forward only; compiled on CUDA, interpreted on a CPU)
``explicit_direct`` ``helpers.torch_attention.scaled_dot_product_attention``: the core written
                   out, ``(B, h, T, T)`` weights formed (a boolean causal mask materialised)
=================  ====================================================================

Contenders that call SDPA can be pinned to one backend with ``torch.nn.attention.sdpa_kernel``.

``torch_mha`` does not run one algorithm in both modes. In ``forward`` (eval mode, under
``no_grad``) ``nn.MultiheadAttention`` takes its fast path, ``torch._native_multi_head_attention``;
on the CPU (torch 2.13, read from the profiler) that is explicit attention, ``bmm``, softmax and
``bmm``, and with the causal mask it is handed a materialised ``(T, T)`` mask
(``_masked_softmax``). In ``forward_backward`` (gradients on) it runs
``F.multi_head_attention_forward``, which drops that mask because ``is_causal=True`` is also
passed, and calls SDPA with ``is_causal``: a fused kernel. Which kernels the fast path reaches on
CUDA has not been measured yet.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from helpers.kit.bench.ceiling import DTYPES
from helpers.masks import causal_mask
from helpers.torch_attention import (
    FusedMultiHeadAttention,
    MultiHeadAttention,
    scaled_dot_product_attention,
)

CONTENDERS = (
    "naive",
    "fused_explicit",
    "fused_sdpa",
    "torch_mha",
    "sdpa_functional",
    "sdpa_direct",
    "triton_direct",
    "explicit_direct",
)
# The five layers and sdpa_direct, their core: the default sweep (and the tiny and gpu presets).
LAYER_SWEEP = CONTENDERS[:6]
DIRECT = CONTENDERS[5:]  # the attention core alone, no projections: SDPA, Triton, explicit
PINNABLE = frozenset({"fused_sdpa", "sdpa_functional", "sdpa_direct"})  # take a forced backend
NO_SDPA = frozenset({"naive", "fused_explicit", "triton_direct", "explicit_direct"})  # backend "-"
FORWARD_ONLY = frozenset({"triton_direct"})  # the Triton kernel has no backward pass
BACKENDS = ("default", "flash", "efficient", "cudnn", "math")


@dataclass(frozen=True)
class Case:
    """One measurement: which contender, how, and at what size."""

    contender: str
    backend: str  # "default" (PyTorch picks), a forced backend, or "-" (no SDPA)
    compiled: bool
    dtype: str
    causal: bool
    mode: str  # "forward" or "forward_backward"
    batch: int
    seq_len: int
    d_model: int
    heads: int

    @property
    def d_k(self) -> int:
        return self.d_model // self.heads


def backend_context(backend: str) -> contextlib.AbstractContextManager:
    """``sdpa_kernel(...)`` forcing ``backend``, or a null context for "default" and "-"."""
    if backend in ("default", "-"):
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    names = {
        "flash": "FLASH_ATTENTION",
        "efficient": "EFFICIENT_ATTENTION",
        "cudnn": "CUDNN_ATTENTION",
        "math": "MATH",
    }
    if backend not in names:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if not hasattr(SDPBackend, names[backend]):
        raise NotImplementedError(f"torch {torch.__version__} has no SDPBackend.{names[backend]}")
    return sdpa_kernel(getattr(SDPBackend, names[backend]))


def _randn(shape: tuple[int, ...], gen: torch.Generator, device: torch.device, dtype) -> Tensor:
    """Seeded normal values of ``shape`` on ``device``: drawn on a GPU directly (a CPU draw of
    ``(4, 32768, 1024)`` takes seconds), on the CPU and moved anywhere else."""
    if device.type == "cuda":
        return torch.randn(shape, generator=gen, device=device, dtype=dtype)
    return torch.randn(shape, generator=gen).to(device, dtype)


def _layer(case: Case, device: torch.device, dtype: torch.dtype):
    """The model function, its tensor inputs and its parameters for ``case``."""
    B, T, D, h = case.batch, case.seq_len, case.d_model, case.heads
    gen = torch.Generator(device=device if device.type == "cuda" else "cpu").manual_seed(0)
    if case.contender in DIRECT:
        q, k, v = (_randn((B, h, T, D // h), gen, device, dtype) for _ in "qkv")
        return _core(case, device, T), (q, k, v), []
    x = _randn((B, T, D), gen, device, dtype)
    # Only the explicit contenders take a mask tensor (T x T booleans: 1 GiB at T = 32768);
    # the SDPA contenders pass is_causal and never build one.
    causal = None
    if case.causal and case.contender in ("naive", "torch_mha"):
        causal = torch.from_numpy(causal_mask(T)).to(device)
    if case.contender == "torch_mha":
        module = nn.MultiheadAttention(D, h, batch_first=True).to(device, dtype).eval()
        mask = None if causal is None else ~causal  # torch's convention: True = masked out

        def fn(x: Tensor) -> Tensor:
            return module(x, x, x, need_weights=False, attn_mask=mask, is_causal=case.causal)[0]

        return fn, (x,), list(module.parameters())
    if case.contender == "naive":
        module = MultiHeadAttention(D, h).to(device, dtype).eval()
        return (lambda x: module(x, mask=causal)[0]), (x,), list(module.parameters())
    module = FusedMultiHeadAttention(D, h).to(device, dtype).eval()
    if case.contender == "fused_explicit":
        fn = lambda x: module(x, need_weights=True, is_causal=case.causal)[0]  # noqa: E731
    elif case.contender == "fused_sdpa":
        fn = lambda x: module(x, is_causal=case.causal)[0]  # noqa: E731
    elif case.contender == "sdpa_functional":
        fn = _functional(module, case.causal)
    else:
        raise ValueError(f"contender must be one of {CONTENDERS}, got {case.contender!r}")
    return fn, (x,), list(module.parameters())


def _core(case: Case, device: torch.device, T: int) -> Callable[..., Tensor]:
    """The attention core of a ``*_direct`` contender, a function of ``q, k, v (B, h, T, d_k)``."""
    if case.contender == "sdpa_direct":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=case.causal)
    if case.contender == "triton_direct":
        from helpers.flash import flash_attention_triton

        return lambda q, k, v: flash_attention_triton(q, k, v, is_causal=case.causal)
    mask = torch.from_numpy(causal_mask(T)).to(device) if case.causal else None
    return lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0]


def _functional(module: FusedMultiHeadAttention, causal: bool) -> Callable[[Tensor], Tensor]:
    w, b, h = module.qkv_proj.weight, module.qkv_proj.bias, module.num_heads
    w_o, b_o = module.out_proj.weight, module.out_proj.bias

    def fn(x: Tensor) -> Tensor:
        B, T, D = x.shape
        qkv = F.linear(x, w, b).view(B, T, 3, h, D // h).permute(2, 0, 3, 1, 4)
        heads = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=causal)
        return F.linear(heads.transpose(1, 2).reshape(B, T, D), w_o, b_o)

    return fn


def make_step(case: Case, device: torch.device) -> Callable[[], object]:
    """A no-argument callable doing one forward (or forward and backward) pass of ``case``.

    Forward runs under ``torch.no_grad()``; forward_backward computes the gradients of the
    inputs and the parameters with ``torch.autograd.grad`` (nothing accumulates in ``.grad``).
    """
    if case.dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {case.dtype!r}")
    if case.mode != "forward" and case.contender in FORWARD_ONLY:
        raise NotImplementedError(f"{case.contender} has a forward pass only, no {case.mode}")
    fn, inputs, params = _layer(case, device, DTYPES[case.dtype])
    if case.compiled:
        torch._dynamo.reset()  # a fresh cache per size: no recompile limit, no stale graphs
        fn = torch.compile(fn, dynamic=False)
    if case.mode == "forward":

        def step() -> object:
            with torch.no_grad(), backend_context(case.backend):
                return fn(*inputs)

        return step
    if case.mode != "forward_backward":
        raise ValueError(f"mode must be 'forward' or 'forward_backward', got {case.mode!r}")
    for t in inputs:
        t.requires_grad_(True)
    wrt = [*inputs, *params]

    def step_backward() -> object:
        with backend_context(case.backend):
            out = fn(*inputs)
            return torch.autograd.grad(out, wrt, torch.ones_like(out))

    return step_backward
