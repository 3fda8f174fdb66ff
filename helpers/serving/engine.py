"""A serving engine: ragged requests, prefill and decode together, one forward per step (nb 12, §5).

Each step packs every scheduled token of every request into one flat batch of ``N`` tokens,
``(N, D)``, with no padding: a prompt being prefilled brings all its tokens, a request being
decoded brings one. The projections run once over all ``N``. Each token's key and value go into
its slot of the paged cache; then every token attends as one row of
:func:`~helpers.serving.paged.paged_attention` over its own request's blocks, with
``seq_len = position + 1``: the causal mask, written as a length. The last token of each request
gives its next token (greedy).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import Tensor
from tqdm.auto import tqdm

from helpers.kit import checks
from helpers.rope import apply_rope_unchecked
from helpers.serving.blocks import PagedKVCache, PoolFull
from helpers.serving.model import TinyLM
from helpers.serving.paged import check_tables, paged_attention_unchecked
from helpers.serving.prefix import PrefixCache
from helpers.serving.scheduler import Request, Scheduler, Work, check_request, token_ids


def packed_forward(
    model: TinyLM, tokens: Tensor, positions: Tensor, slots: Tensor, tables: Tensor,
    cache: PagedKVCache,
) -> Tensor:  # fmt: skip
    """Logits ``(N, vocab)`` of N packed tokens of many requests, their keys and values written
    into ``cache`` on the way.

    tokens, positions, slots ``(N,)``; ``tables (N, max_blocks)``: each token's request's block
    table. Token n attends to the first ``positions[n] + 1`` tokens of its request.
    """
    check_packed(model, tokens, positions, slots, tables, cache)  # once, for every layer
    x = model.embed(tokens)  # (N, D)
    seq_lens = positions + 1
    blocks, offsets = slots // cache.block_size, slots % cache.block_size  # where each token goes
    for i, layer in enumerate(model.layers):
        N, h, h_kv, d = x.shape[0], layer.num_heads, layer.num_kv_heads, layer.d_k
        q = layer.q_proj(x).view(N, h, d).transpose(0, 1)  # (h, N, d): RoPE turns along N
        k = layer.k_proj(x).view(N, h_kv, d).transpose(0, 1)
        q, k = (
            apply_rope_unchecked(q, positions),
            apply_rope_unchecked(k, positions),
        )  # checked once
        cache.keys[i, blocks, :, offsets] = k.transpose(0, 1)  # (N, h_kv, d) into their slots
        cache.values[i, blocks, :, offsets] = layer.v_proj(x).view(N, h_kv, d)
        out = paged_attention_unchecked(
            q.transpose(0, 1), cache.keys[i], cache.values[i], tables, seq_lens
        )  # (N, h, d)
        x = x + layer.out_proj(out.reshape(N, h * d))
    return model.unembed(x)


def check_packed(model, tokens, positions, slots, tables, cache) -> None:
    """What :func:`packed_forward` needs: tokens in the vocabulary, positions within each
    token's table, slots in the pool, a cache that fits the model."""
    check_cache(model, cache)
    checks.expect(tokens=(tokens, "N: int"), positions=(positions, "N: int"), slots=(slots, "N: int"),
                  tables=(tables, "N max_blocks: int"))  # fmt: skip
    num_blocks, size, m = cache.keys.shape[1], cache.block_size, tables.shape[1]
    checks.require_range("tokens", tokens, 0, model.vocab - 1)
    checks.require_range("positions", positions, 0, m * size - 1, f"max_blocks * block_size - 1 = {m * size - 1}")  # fmt: skip
    check_tables(tokens, tables, positions + 1, num_blocks, size, ("tables", "positions + 1"))
    checks.require_range("slots", slots, 0, num_blocks * size - 1, f"num_blocks * block_size - 1 = {num_blocks * size - 1}")  # fmt: skip


def check_cache(model: TinyLM, cache: PagedKVCache) -> None:
    """A pool for each of the model's layers, of its h_kv and d_k, in its dtype."""
    checks.require_array("model", model, TinyLM, "helpers.serving.model.TinyLM")
    checks.require_array("cache", cache, PagedKVCache, "helpers.serving.PagedKVCache")
    first, (layers, _, h_kv, _, d_k) = model.layers[0], cache.keys.shape
    want = (len(model.layers), first.num_kv_heads, first.d_k, model.unembed.weight.dtype)
    if (layers, h_kv, d_k, cache.keys.dtype) != want:
        raise ValueError(f"cache must have the model's (layers, h_kv, d_k, dtype) = {want}, got "
                         f"{(layers, h_kv, d_k, cache.keys.dtype)}: keys {tuple(cache.keys.shape)}")  # fmt: skip


def feed(model: TinyLM, cache: PagedKVCache, seq: object, tokens: list[int]) -> Tensor:
    """Run one sequence's next ``tokens`` through the paged cache: logits ``(len(tokens), vocab)``.

    A new sequence gets blocks for them; a known one appends slots (copying a shared last block
    first). What the engine does for one request, by hand (notebook 12, sections 3 and 4).
    """
    if not token_ids(tokens) or max(tokens) >= model.vocab:  # before any block is taken
        raise ValueError(f"tokens must be a non-empty list of token ids in 0..{model.vocab - 1}, got {tokens!r}")  # fmt: skip
    check_cache(model, cache)
    allocator = cache.allocator
    if seq in allocator.tables:
        start = allocator.lengths[seq]
        need = allocator.blocks_to_append(seq, len(tokens))
        if need > allocator.num_free:  # all or nothing: no slot is taken that is never written
            raise PoolFull(
                f"sequence {seq!r} needs {need} more blocks for {len(tokens)} tokens, "
                f"{allocator.num_free} of {allocator.num_blocks} are free"
            )
        slots = [cache.append(seq) for _ in tokens]
    else:
        start = 0
        allocator.allocate(seq, len(tokens))
        slots = allocator.slots(seq, 0, len(tokens))
    positions = torch.arange(start, start + len(tokens))
    table = cache.block_table([seq]).expand(len(tokens), -1)
    with torch.no_grad():
        return packed_forward(
            model, torch.tensor(tokens), positions, torch.tensor(slots), table, cache
        )


@dataclass
class StepRecord:
    """What one step did: for the pictures of the pool over time."""

    step: int
    tokens: int  # tokens in the packed batch
    prefills: list[int]  # requests that ran a prefill (or a chunk of one) this step
    decodes: list[int]
    finished: list[int]
    preempted: list[int]
    owners: list[tuple[int, ...]]  # per block: the requests holding it after the step
    filled: list[int]  # per block: how many of its slots hold a token
    cached: dict[int, int] = field(default_factory=dict)  # block -> hash of the prefix it holds
    seconds: float = 0.0  # when the step ended, after the run started


@dataclass
class ServeResult:
    """Every request after the run, the steps taken, the wall time, each step's record, and the
    logits each request's tokens were chosen from, ``rid -> (max_new_tokens, vocab)``."""

    requests: list[Request]
    steps: int
    seconds: float
    history: list[StepRecord] = field(default_factory=list)
    logits: dict[int, Tensor] = field(default_factory=dict)

    @property
    def generated(self) -> int:
        return sum(len(r.output) for r in self.requests)

    def outputs(self) -> dict[int, list[int]]:
        return {r.rid: r.output for r in self.requests}


class Engine:
    """A model, a paged cache and a scheduler; :meth:`step` runs one packed forward."""

    def __init__(self, model: TinyLM, cache: PagedKVCache, scheduler: Scheduler) -> None:
        self.model, self.cache, self.scheduler = model, cache, scheduler
        self.step_count = 0
        self.logits: dict[int, list[Tensor]] = {}  # rid -> the logits of each generated token

    def step(self, clock: float = 0.0) -> StepRecord:
        """Schedule, run every scheduled token in one forward, pick each request's next token."""
        work, preempted = self.scheduler.schedule()
        finished = []
        if work:
            logits = self._forward(work)
            self.scheduler.computed(work)  # their keys are in the cache now
            ends = torch.tensor([len(w.tokens) for w in work]).cumsum(0) - 1
            for w, row in zip(work, logits[ends], strict=True):  # a prompt's last chunk, a decode
                if w.last and self._emit(w.request, row, clock):
                    finished.append(w.request.rid)
        record = StepRecord(
            self.step_count, sum(len(w.tokens) for w in work),
            [w.request.rid for w in work if w.prefill],
            [w.request.rid for w in work if not w.prefill], finished,
            [r.rid for r in preempted], *self._owners(),
            dict(getattr(self.cache.allocator, "hash_of", {})), time.perf_counter() - clock,
        )  # fmt: skip
        self.step_count += 1
        return record

    def _forward(self, work: list[Work]) -> Tensor:
        rids = [w.request.rid for w in work]
        per_request = self.cache.block_table(rids)  # (R, max_blocks)
        counts = torch.tensor([len(w.tokens) for w in work])
        positions = _flat([range(w.start, w.start + len(w.tokens)) for w in work])
        tables = per_request.repeat_interleave(counts, dim=0)  # each token: its request's table
        with torch.no_grad():
            return packed_forward(self.model, _flat([w.tokens for w in work]), positions,
                                  _flat([w.slots for w in work]), tables, self.cache)  # fmt: skip

    def _emit(self, request: Request, logits: Tensor, clock: float) -> bool:
        """Append the request's next token; True if that finished it (its blocks are freed)."""
        request.output.append(int(logits.argmax()))
        self.logits.setdefault(request.rid, []).append(logits)
        if request.first_token_step is None:
            request.first_token_step = self.step_count
            request.first_token_seconds = time.perf_counter() - clock
        if not request.done:
            return False
        request.finish_step = self.step_count
        request.finish_seconds = time.perf_counter() - clock
        self.scheduler.finish(request)
        return True

    def _owners(self) -> tuple[list[tuple[int, ...]], list[int]]:
        """Per block: the requests that hold it, and how many of its slots are filled."""
        allocator = self.cache.allocator
        owners: list[list[int]] = [[] for _ in range(allocator.num_blocks)]
        for rid, table in allocator.tables.items():
            for block in table:
                owners[block].append(rid)
        return [tuple(o) for o in owners], allocator.filled()


def _flat(lists) -> Tensor:
    """Lists of ints, one per request, as one flat int64 tensor ``(N,)``."""
    return torch.tensor([x for xs in lists for x in xs], dtype=torch.int64)


def serve(
    model: TinyLM, requests: list[Request], num_blocks: int, block_size: int, max_batch: int,
    policy: str = "continuous", progress: bool = False, prefix_caching: bool = False,
    max_batched_tokens: int | None = None,
) -> ServeResult:  # fmt: skip
    """Run ``requests`` (fresh copies: the originals stay untouched) to the end.

    A request joins the queue at the step of its ``arrival``; steps with nothing to run are
    skipped. The pool holds ``num_blocks`` blocks of ``block_size`` tokens in the model's dtype.
    ``prefix_caching=True`` shares the blocks of cached prefixes (notebook 14);
    ``max_batched_tokens=N`` runs at most N tokens a step, prompts in chunks.
    """
    checks.require_array("model", model, TinyLM, "helpers.serving.model.TinyLM")
    if not isinstance(requests, (list, tuple)):
        raise TypeError(f"requests must be a list of Request, got {type(requests).__name__}")
    for i, request in enumerate(requests):  # all of them before the run: none fails half-way
        checks.require_array(f"requests[{i}]", request, Request, "helpers.serving.Request")
        check_request(request, model.vocab)
    if len({r.rid for r in requests}) != len(requests):
        raise ValueError(f"requests need distinct rids, got {[r.rid for r in requests]}")
    checks.expect(progress=(progress, "bool"), prefix_caching=(prefix_caching, "bool"))
    first = model.layers[0]
    cache = PagedKVCache(len(model.layers), num_blocks, block_size, first.num_kv_heads,
                         first.d_k, model.unembed.weight.dtype)  # fmt: skip
    if prefix_caching:
        cache.allocator = PrefixCache(num_blocks, block_size)
    engine = Engine(model, cache, Scheduler(cache, max_batch, policy, max_batched_tokens))
    fresh = [Request(r.rid, list(r.prompt), r.max_new_tokens, r.arrival) for r in requests]
    for request in fresh:
        engine.scheduler.check(request)  # each fits in the pool
    pending = sorted(fresh, key=lambda r: r.arrival)
    history, done = [], 0
    bar = tqdm(total=len(fresh), desc=f"{policy} batching", disable=not progress)
    start = time.perf_counter()
    while done < len(fresh):
        while pending and pending[0].arrival <= engine.step_count:
            engine.scheduler.add(pending.pop(0))
        if not engine.scheduler.running and not engine.scheduler.waiting:
            engine.step_count = pending[0].arrival  # nothing to do until the next arrival
            continue
        history.append(engine.step(start))
        done += len(history[-1].finished)
        bar.update(len(history[-1].finished))
    seconds = time.perf_counter() - start
    bar.close()
    logits = {rid: torch.stack(rows) for rid, rows in engine.logits.items()}
    return ServeResult(fresh, engine.step_count, seconds, history, logits)
