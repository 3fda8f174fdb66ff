"""The checks of the library's public entries that one line of :func:`helpers.kit.checks.expect`
cannot state: values read from the arguments (block tables inside the pool, lengths, token ids),
model callables and their outputs, and the finer points each lesson's bad-input table asks for.
Each runs once, at the entry a learner calls; messages name the argument and show its shape."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from helpers.kit import checks

# --- helpers.flash -----------------------------------------------------------------------


def check_rebuild(q, k, lse, rows, is_causal) -> np.ndarray:
    """q and k as for attention, lse ``(..., T_q)`` of their batch, rows a slice or index array
    of query rows; returns the rows picked, ``(n,)``."""
    checks.check_attention(q, k, k, None, np.ndarray, "NumPy array")
    checks.require_bool("is_causal", is_causal)
    checks.require_array("lse", lse, np.ndarray, "NumPy array")
    checks.require_floating("lse", lse)
    checks.require_same_dtype(q=q, lse=lse)
    want = (*np.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2])
    if lse.shape != want:
        raise ValueError(
            f"lse must have shape {want} for q {q.shape}, k {k.shape}, got {lse.shape}"
        )
    checks.require_finite("lse", lse, allow_neg_inf=True)
    try:
        index = np.arange(q.shape[-2])[rows]
    except (IndexError, TypeError, ValueError):
        index = None
    if index is None or index.ndim != 1:
        raise ValueError(
            f"rows must pick query rows of 0..{q.shape[-2] - 1} (a slice or a 1-D array of "
            f"indices), got {rows!r}"
        )
    return index


def check_triton_dtype_and_grad(q: Any, k: Any, v: Any) -> None:
    """A dtype the kernel computes rightly where it runs; no tensor autograd would lose."""
    import torch

    if not (q.is_cuda or q.dtype in (torch.float32, torch.float16)):
        why = ("Triton's interpreter computes bfloat16 wrongly (NumPy has none); use a GPU for "
               "bfloat16" if q.dtype == torch.bfloat16 else "the kernel does not take it")  # fmt: skip
        raise TypeError(
            f"on a CPU the kernel runs in float32 or float16 only, got {q.dtype}, q shape "
            f"{tuple(q.shape)}: {why}; convert with .float() or .half()"
        )
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v)):
        names = [n for n, x in (("q", q), ("k", k), ("v", v)) if x.requires_grad]
        raise ValueError(
            f"{', '.join(names)} require grad, but the Triton kernel has no backward pass: its "
            f"output would carry no gradient, q shape {tuple(q.shape)}; call it inside "
            "torch.no_grad() or pass .detach()"
        )


# --- helpers.serving.speculative ---------------------------------------------------------


def check_distributions(p: Tensor, q: Tensor) -> None:
    """p and q: floating tensors ``(V,)`` of one shape, each >= 0 and summing to 1."""
    for name, x in (("p", p), ("q", q)):
        checks.require_array(name, x, Tensor, "torch.Tensor")
        checks.require_floating(name, x)
        checks.require_ndim(name, x, (1,), "(V,)")
        total = float(x.sum())
        if x.numel() == 0 or not bool((x >= 0).all()) or abs(total - 1) > 1e-6:
            raise ValueError(
                f"{name} must be a distribution (V,): numbers >= 0 summing to 1, got shape "
                f"{tuple(x.shape)}, smallest {float(x.min()) if x.numel() else 'none'}, sum {total:.6g}"
            )
    if p.shape != q.shape:
        raise ValueError(
            f"p and q must share one vocabulary: p {tuple(p.shape)}, q {tuple(q.shape)}"
        )


def check_speculative(
    target, draft, prompt, max_new_tokens, num_draft, temperature, generator
) -> None:
    for name, model in (("target", target), ("draft", draft)):
        if not callable(model):
            raise TypeError(f"{name} must be callable: token ids (1, T) -> logits (1, T, V)")
    checks.require_array("prompt", prompt, Tensor, "torch.Tensor")
    if (
        prompt.dtype != torch.int64
        or prompt.ndim != 2
        or prompt.shape[0] != 1
        or not prompt.numel()
    ):
        raise ValueError(
            f"prompt must be int64 token ids (1, T_0) with T_0 >= 1, got {prompt.dtype} "
            f"{tuple(prompt.shape)}"
        )
    if int(prompt.min()) < 0:
        raise ValueError(f"prompt must hold token ids >= 0, got {prompt.tolist()}")
    checks.require_non_negative_int("max_new_tokens", max_new_tokens)
    checks.require_positive_int("num_draft", num_draft)
    checks.require_real("temperature", temperature, low=0.0)
    if generator is not None and not isinstance(generator, torch.Generator):
        kind = type(generator)
        raise TypeError(
            f"generator must be a torch.Generator or None, got {kind.__module__}.{kind.__qualname__}"
        )
    if generator is not None and generator.device.type != "cpu":
        raise ValueError(
            f"generator must be a CPU torch.Generator (every draw is made on the CPU), got one "
            f"on {generator.device}"
        )


# --- helpers.kv_quant --------------------------------------------------------------------


def check_int8(values: Any, scale: Any) -> None:
    """values an int8 tensor, scale a floating tensor that broadcasts to it, on one device."""
    checks.require_array("values", values, Tensor, "torch.Tensor")
    checks.require_array("scale", scale, Tensor, "torch.Tensor")
    if values.dtype != torch.int8:
        raise TypeError(f"values must be int8 codes, got dtype {values.dtype}, "
                        f"shape {tuple(values.shape)}")  # fmt: skip
    checks.require_floating("scale", scale)
    sizes = zip(scale.shape, values.shape, strict=False)  # read only where the ndims agree
    if scale.ndim != values.ndim or any(s not in (1, v) for s, v in sizes):
        raise ValueError(
            f"scale {tuple(scale.shape)} does not fit values {tuple(values.shape)}: one scale per "
            "slice, the same number of axes, each of size 1 or the values' size"
        )
    checks.require_same_device(values=values, scale=scale)


def check_quantize(x: Any, dim: Any) -> int:
    """x a non-empty floating tensor, dim one of its axes (an int, a NumPy integer too)."""
    checks.require_array("x", x, Tensor, "torch.Tensor")
    checks.require_floating("x", x)
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, numbers.Integral):
        raise TypeError(f"dim must be an int, got {type(dim).__name__} {dim!r}")
    if not -x.ndim <= dim < x.ndim:
        raise ValueError(f"dim must be an axis of x, shape {tuple(x.shape)}, got {dim!r}")
    if x.numel() == 0:
        raise ValueError(f"x must hold at least one number, got shape {tuple(x.shape)}")
    if x.is_meta:
        raise ValueError(
            f"x is a meta tensor, shape {tuple(x.shape)}: it has a shape but no numbers to round; "
            "make it on a real device (cpu or cuda)"
        )
    return int(dim)


# --- helpers.serving.paged ---------------------------------------------------------------


def check_paged(q, k_cache, v_cache, block_tables, seq_lens) -> None:
    """The shapes, dtypes and values :func:`paged_attention` needs; a clear error otherwise."""
    pool = "num_blocks h_kv block_size d: float"
    size = checks.expect(q=(q, "B h d: float"), k_cache=(k_cache, pool), v_cache=(v_cache, pool),
                         block_tables=(block_tables, "B max_blocks: int"), seq_lens=(seq_lens, "B: int"))  # fmt: skip
    if empty := [
        f"{n} has an axis of size 0, shape {tuple(x.shape)}"
        for n, x in (("q", q), ("k_cache", k_cache))
        if 0 in x.shape
    ]:
        raise ValueError(empty[0])
    if size["h"] % size["h_kv"]:
        raise ValueError(
            f"q's h = {size['h']} heads must be divisible by the cache's h_kv = {size['h_kv']}: q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}"
        )
    check_tables(q, block_tables, seq_lens, k_cache.shape[0], k_cache.shape[2])


def check_gather(cache, block_tables, seq_lens) -> None:
    """What :func:`gather_blocks` needs: the checks of :func:`check_paged` on one pool."""
    checks.expect(cache=(cache, "num_blocks h_kv block_size d"), seq_lens=(seq_lens, "B: int"),
                  block_tables=(block_tables, "B max_blocks: int"))  # fmt: skip
    check_tables(cache, block_tables, seq_lens, cache.shape[0], cache.shape[2])


def check_tables(first, block_tables, seq_lens, num_blocks: int, size: int,
                 names: tuple[str, str] = ("block_tables", "seq_lens")) -> None:  # fmt: skip
    """Lengths in ``1..max_blocks * block_size``; each block in use inside the pool."""
    if first.device.type == "meta":
        raise ValueError(f"the inputs are meta tensors (shapes only, no numbers), shape "
                         f"{tuple(first.shape)}: give tensors on the CPU or a GPU")  # fmt: skip
    m = block_tables.shape[1]
    checks.require_range(
        names[1], seq_lens, 1, m * size, f"max_blocks * block_size = {m} * {size} = {m * size}"
    )
    used = torch.arange(m) * size < seq_lens.cpu()[:, None]
    bad = (used & ((block_tables.cpu() < 0) | (block_tables.cpu() >= num_blocks))).nonzero()
    if len(bad):
        (row, col), tables = bad[0].tolist(), block_tables
        raise ValueError(f"{names[0]}[{row}, {col}] = {int(tables[row, col])} is past the pool of num_blocks = "
                         f"{num_blocks}; {names[0]} {tuple(tables.shape)}, {names[1]}[{row}] = {int(seq_lens[row])}")  # fmt: skip


# --- helpers.rope ------------------------------------------------------------------------


def check_positions(positions: Tensor, T: int | None = None, what: str = "") -> None:
    """Integer positions ``(T,)``, of the given T if there is one."""
    layout = "(T,)" if T is None else f"(T,) = ({T},)"
    checks.require_array("positions", positions, Tensor, "torch.Tensor")
    checks.require_integer_tensor("positions", positions, layout)
    if positions.ndim != 1 or (T is not None and positions.shape[0] != T):
        raise ValueError(
            f"positions must be integers of shape {layout}{what}; got {positions.dtype} of "
            f"shape {tuple(positions.shape)}"
        )


def check_base(base: float) -> float:
    if checks.require_real("base", base) <= 1:
        raise ValueError(f"base must be a number greater than 1, got {base!r}")
    return float(base)


# --- helpers.inference and helpers.mla -----------------------------------------------


def explain_kv_cache(cache: Any) -> None:
    """Raise the error that says what is wrong with a :class:`helpers.inference.KVCache` (a NumPy
    integer start is fine)."""
    for name, x in (("keys", cache.keys), ("values", cache.values)):
        checks.require_array(name, x, Tensor, "torch.Tensor")
        checks.require_ndim(name, x, (4,), "(B, h_kv, T, d_k)")
    if cache.keys.shape != cache.values.shape:
        raise ValueError(
            "keys and values must have one shape (B, h_kv, T, d_k): keys "
            f"{tuple(cache.keys.shape)}, values {tuple(cache.values.shape)}"
        )
    checks.require_same_dtype(keys=cache.keys, values=cache.values)
    checks.require_same_device(keys=cache.keys, values=cache.values)
    checks.require_non_negative_int("start", cache.start)


def check_gqa_input(module: Any, x: Tensor, cache: Any, KVCache: type) -> None:
    """x is ``(B, T_new, D)`` in the module's dtype; a cache matches it in B, dtype, h_kv,
    device (a :class:`KVCache` checked its values against its keys when it was made)."""
    checks.check_module_inputs(x, x, x, None, module.q_proj.in_features, module.num_heads,
                                   module.q_proj.weight, names=("x",))  # fmt: skip
    if cache is None:
        return
    checks.require_array("cache", cache, KVCache, "helpers.inference.KVCache")
    want = (x.shape[0], module.num_kv_heads, cache.keys.shape[-2], module.d_k)
    if tuple(cache.keys.shape) != want or cache.keys.dtype != x.dtype:
        raise ValueError(
            f"cache keys {tuple(cache.keys.shape)} {cache.keys.dtype} do not fit x "
            f"{tuple(x.shape)} {x.dtype}: expected (B, h_kv, T, d_k) = {want} in {x.dtype}"
        )
    if cache.keys.device != x.device:
        raise ValueError(
            f"cache is on {cache.keys.device} but x is on {x.device}, x shape "
            f"{tuple(x.shape)}; move the cache's keys and values with .to(...)"
        )


def check_mla_input(module: Any, x: Tensor, cache: Any, absorb: Any, LatentCache: type) -> None:
    """x is ``(B, T_new, D)`` in the module's dtype and device; a cache fits x and the sizes."""
    checks.check_module_inputs(x, x, x, None, module.q_proj.in_features, module.num_heads,
                                   module.q_proj.weight, names=("x",))  # fmt: skip
    checks.require_bool("absorb", absorb)
    if cache is None:
        return
    checks.require_array("cache", cache, LatentCache, "helpers.mla.LatentCache")
    for name, part, width, layout in (
        ("latent", cache.latent, module.kv_latent_dim, "kv_latent_dim"),
        ("rope_key", cache.rope_key, module.rope_dim, "rope_dim"),
    ):
        checks.require_array(f"cache.{name}", part, Tensor, "torch.Tensor")
        want = (x.shape[0], cache.latent.shape[-2], width)
        if tuple(part.shape) != want or part.dtype != x.dtype or part.device != x.device:
            raise ValueError(
                f"cache.{name} {tuple(part.shape)} {part.dtype} on {part.device} does not fit "
                f"x {tuple(x.shape)} {x.dtype} on {x.device} and this layer: expected "
                f"(B, T, {layout}) = {want} in {x.dtype}; a cache from another layer's sizes?"
            )


# --- helpers.serving ------------------------------------------------------------------


def check_tokens(tokens: Any, vocab: int) -> None:
    """A non-empty list of token ids in 0..vocab-1 (NumPy integers too; not bools)."""
    ok = (
        isinstance(tokens, list)
        and tokens
        and all(
            isinstance(t, numbers.Integral)
            and not isinstance(t, (bool, np.bool_))
            and 0 <= t < vocab
            for t in tokens
        )
    )
    if not ok:
        raise ValueError(
            f"tokens must be a non-empty list of token ids in 0..{vocab - 1}, got {tokens!r}"
        )


def check_request(request: Any) -> None:
    checks.require_named("request", request, "helpers.serving.Request")
    ids = isinstance(request.prompt, list) and all(
        isinstance(t, numbers.Integral) and not isinstance(t, (bool, np.bool_)) and t >= 0
        for t in request.prompt
    )  # NumPy integers are token ids too; True is not
    if not request.prompt or not ids:
        raise ValueError(
            f"request {request.rid}: prompt must be a non-empty list of token ids (ints >= 0), "
            f"got {request.prompt!r}"
        )
    checks.require_positive_int("max_new_tokens", request.max_new_tokens)
    checks.require_non_negative_int("arrival", request.arrival)
    if request.output:
        raise ValueError(f"request {request.rid} has output already: {request.output}")


def check_cache(model: Any, cache: Any) -> None:
    """A :class:`TinyLM` and a :class:`PagedKVCache` with a pool for each of its layers, its
    h_kv and d_k, in its dtype."""
    checks.require_named("model", model, "helpers.serving.model.TinyLM")
    checks.require_named("cache", cache, "helpers.serving.PagedKVCache")
    first = model.layers[0]
    want = (len(model.layers), first.num_kv_heads, first.d_k, model.unembed.weight.dtype)
    layers, _, h_kv, _, d_k = cache.keys.shape
    if (layers, h_kv, d_k, cache.keys.dtype) != want:
        raise ValueError(
            f"cache must have the model's (layers, h_kv, d_k, dtype) = {want}, got "
            f"{(layers, h_kv, d_k, cache.keys.dtype)}: keys {tuple(cache.keys.shape)}"
        )


def check_packed(model, tokens, positions, slots, tables, cache) -> None:
    """What :func:`packed_forward` needs: tokens in the vocabulary, positions within each
    token's table, slots in the pool, a cache that fits the model."""
    check_cache(model, cache)
    checks.expect(tokens=(tokens, "N: int"), positions=(positions, "N: int"), slots=(slots, "N: int"),
                  tables=(tables, "N max_blocks: int"))  # fmt: skip
    checks.require_range("tokens", tokens, 0, model.vocab - 1)
    num_blocks, size, m = cache.keys.shape[1], cache.block_size, tables.shape[1]
    checks.require_range(
        "positions", positions, 0, m * size - 1, f"max_blocks * block_size - 1 = {m * size - 1}"
    )
    check_tables(tokens, tables, positions + 1, num_blocks, size, ("tables", "positions + 1"))
    checks.require_range(
        "slots",
        slots,
        0,
        num_blocks * size - 1,
        f"num_blocks * block_size - 1 = {num_blocks * size - 1}",
    )


def check_requests(model: Any, requests: Any, progress: Any) -> None:
    """A :class:`TinyLM`, a list of :class:`Request` with distinct rids and prompts of token ids
    in its vocabulary, and a True/False ``progress``."""
    checks.require_named("model", model, "helpers.serving.model.TinyLM")
    if not isinstance(requests, (list, tuple)):
        raise TypeError(f"requests must be a list of Request, got {type(requests).__name__}")
    for i, request in enumerate(requests):
        checks.require_named(f"requests[{i}]", request, "helpers.serving.Request")
        check_request(request)
        if max(request.prompt) >= model.vocab:
            raise ValueError(
                f"request {request.rid}: prompt token {max(request.prompt)} is past the model's "
                f"vocabulary of {model.vocab}"
            )
    if len({r.rid for r in requests}) != len(requests):
        raise ValueError(f"requests need distinct rids, got {[r.rid for r in requests]}")
    checks.require_bool("progress", progress)


# --- helpers.parallel ------------------------------------------------------------------


def check_merge_block(m, total, acc, q, k, v, allowed) -> None:
    """:func:`helpers.parallel.merge_block`'s arguments: q, k, v as for attention, a running
    (max, sum, output) that fits them, ``allowed`` a boolean mask of the scores. Shapes only."""
    scores = checks.check_attention(q, k, v, None, Tensor, "torch.Tensor")
    if allowed is not None:
        checks.require_bool_mask("allowed", allowed)
        checks.require_broadcastable("allowed", tuple(allowed.shape), scores)
    for name, x, layout in (("m", m, q.shape[:-1]), ("total", total, q.shape[:-1]),
                            ("acc", acc, (*q.shape[:-1], v.shape[-1]))):  # fmt: skip
        checks.require_array(name, x, Tensor, "torch.Tensor")
        if tuple(x.shape) != tuple(layout):
            raise ValueError(f"{name} must have shape {tuple(layout)} to fit q {tuple(q.shape)} "
                             f"and v {tuple(v.shape)}, got {tuple(x.shape)}")  # fmt: skip


def check_token_ids(name: str, tokens: Any, vocab: int, layout: str = "(B, T)") -> None:
    """Token ids: an integer tensor ``(B, T)`` with T >= 1 (``(1, T)`` if ``layout`` says so),
    every id in ``0 .. vocab - 1``."""
    checks.require_array(name, tokens, Tensor, "torch.Tensor")
    checks.require_integer_tensor(name, tokens, layout)
    checks.require_ndim(name, tokens, (2,), layout)
    if 0 in tokens.shape or (layout == "(1, T)" and tokens.shape[0] != 1):
        raise ValueError(
            f"{name} must be token ids {layout} with T >= 1, got {tuple(tokens.shape)}"
        )
    if not 0 <= int(tokens.min()) <= int(tokens.max()) < vocab:
        raise ValueError(
            f"{name} must lie in the vocabulary 0..{vocab - 1}, got ids from {int(tokens.min())} "
            f"to {int(tokens.max())}, shape {tuple(tokens.shape)}"
        )


# --- helpers.torch_attention -----------------------------------------------------------


def check_from_torch(module: Any) -> None:
    """An ``nn.MultiheadAttention`` whose weights ``FusedMultiHeadAttention`` can hold."""
    checks.require_array("module", module, nn.MultiheadAttention, "torch.nn.MultiheadAttention")
    if module.in_proj_weight is None:
        raise ValueError(
            "module uses separate q/k/v projections (kdim or vdim differ from embed_dim); "
            f"embed_dim={module.embed_dim}, kdim={module.kdim}, vdim={module.vdim}"
        )
    if module.bias_k is not None or module.add_zero_attn:
        raise ValueError(
            f"module adds extra keys (add_bias_kv={module.bias_k is not None}, "
            f"add_zero_attn={module.add_zero_attn}), which FusedMultiHeadAttention does not "
            "have; build the nn.MultiheadAttention without them"
        )


def check_triton(q: Any, k: Any, v: Any, is_causal: Any) -> None:
    """:func:`helpers.flash.flash_attention_triton`'s arguments: tensors ``(B, h, T, d)``, a
    dtype the kernel computes rightly where it runs, d <= 256, nothing autograd would lose."""
    checks.check_attention(q, k, v, None, torch.Tensor, "torch.Tensor")
    checks.require_bool("is_causal", is_causal)
    if not q.ndim == k.ndim == v.ndim == 4 or k.shape[:2] != q.shape[:2] or v.shape != k.shape:
        raise ValueError(
            "q, k, v must be (B, h, T, d) with the same B, h and d (and k, v the same T): "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    check_triton_dtype_and_grad(q, k, v)
    if q.shape[-1] > 256:
        raise ValueError(
            f"the kernel keeps a (32, d) tile in registers: d <= 256, got q {tuple(q.shape)}"
        )


def check_partials(outs: Any, lses: Any) -> None:
    """:func:`helpers.serving.split_kv.merge_partials`' lists: one output ``(..., T_q, d_v)``
    and one log-sum-exp ``(..., T_q)`` per chunk, all of one shape."""
    if not isinstance(outs, (list, tuple)) or not outs:
        raise ValueError(f"outs must be a non-empty list of tensors, got {outs!r}")
    checks.expect(**{f"outs[{i}]": (o, "... T_q d_v: float") for i, o in enumerate(outs)})
    shapes = [tuple(o.shape) for o in outs], [tuple(getattr(x, "shape", ())) for x in lses]
    if (
        len(outs) != len(lses)
        or {*shapes[0]} != {shapes[0][0]}
        or {*shapes[1]} != {shapes[0][0][:-1]}
    ):
        raise ValueError(f"outs must all be (..., T_q, d_v) and lses (..., T_q), one per chunk: "
                         f"outs {shapes[0]}, lses {shapes[1]}")  # fmt: skip


def check_write(cache: Any, layer: int, slots: Tensor, k: Tensor, v: Tensor) -> None:
    """What :meth:`helpers.serving.PagedKVCache.write` needs: a layer, slots ``(N,)`` in the pool, k and v ``(N, h_kv,
    d_k)`` in the cache's dtype and on its device."""
    layers, num_blocks, h_kv, size, d_k = cache.keys.shape
    checks.require_index("layer", layer, layers)
    checks.expect(slots=(slots, "N: int"), k=(k, f"N {h_kv} {d_k}: float"), v=(v, f"N {h_kv} {d_k}: float"),
                  cache=(cache.keys[0, 0], f"{h_kv} {size} {d_k}: float"))  # fmt: skip
    checks.require_range(
        "slots",
        slots,
        0,
        num_blocks * size - 1,
        f"num_blocks * block_size - 1 = {num_blocks * size - 1}",
    )
