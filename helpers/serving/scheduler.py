"""Which requests run at each step, and where their tokens go (notebooks 12 and 14).

Each engine step the scheduler

1. reserves a slot for the next token of every running request (a new block when its last
   block is full; a private copy when its last block is shared). If the pool has no free block
   left, it *preempts* the request admitted last: its blocks go back to the free list and it
   waits at the head of the queue, to be prefilled again (prompt and tokens so far) later;
2. admits waiting requests, oldest first, while there is a free place in the batch and enough
   free blocks for the tokens to prefill. ``policy="continuous"`` admits at every step, as soon
   as a request finishes; ``policy="static"`` only when the whole running batch has finished.

A request that could never fit in the pool, even alone, is refused when it is added.

Notebook 14 adds two things. With a :class:`~helpers.serving.prefix.PrefixCache` as the cache's
allocator, admission shares the blocks of the prompt's longest cached prefix and prefills only
the rest. With ``max_batched_tokens=N`` no step runs more than N tokens: decodes first (oldest
first; beyond N the newest wait a step), then chunks of partly prefilled and then of newly
admitted prompts, oldest first (*chunked prefill*).
"""

from __future__ import annotations

import numbers
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from helpers.kit import checks
from helpers.serving.blocks import PagedKVCache
from helpers.serving.prefix import PrefixCache

POLICIES = ("continuous", "static")


@dataclass
class Request:
    """A prompt, how many tokens to generate, and the engine step at which it arrives."""

    rid: int
    prompt: list[int]
    max_new_tokens: int
    arrival: int = 0
    output: list[int] = field(default_factory=list)
    first_token_step: int | None = None
    finish_step: int | None = None
    first_token_seconds: float | None = None  # after the run started
    finish_seconds: float | None = None
    preemptions: int = 0
    cached_tokens: int = 0  # of its first admission's prefill: shared instead of computed

    @property
    def tokens(self) -> list[int]:
        """Prompt and generated tokens so far."""
        return self.prompt + self.output

    @property
    def done(self) -> bool:
        return len(self.output) >= self.max_new_tokens


def token_ids(tokens: object) -> bool:
    """Whether ``tokens`` is a non-empty list of token ids >= 0 (NumPy integers too; not bools)."""
    return isinstance(tokens, list) and bool(tokens) and all(
        isinstance(t, numbers.Integral) and not isinstance(t, (bool, np.bool_)) and t >= 0 for t in tokens
    )  # fmt: skip


def check_request(request: Request, vocab: int | None = None) -> None:
    """A fresh request: a prompt of token ids (in the vocabulary, if given), tokens to make."""
    checks.require_array("request", request, Request, "helpers.serving.Request")
    if not token_ids(request.prompt):
        raise ValueError(f"request {request.rid}: prompt must be a non-empty list of token ids "
                         f"(ints >= 0), got {request.prompt!r}")  # fmt: skip
    if vocab is not None and max(request.prompt) >= vocab:
        raise ValueError(f"request {request.rid}: prompt token {max(request.prompt)} is past the "
                         f"model's vocabulary of {vocab}")  # fmt: skip
    checks.expect(max_new_tokens=(request.max_new_tokens, "int > 0"), arrival=(request.arrival, "int >= 0"))  # fmt: skip
    if request.output:
        raise ValueError(f"request {request.rid} has output already: {request.output}")


@dataclass
class Work:
    """One request's part of a step: the tokens it feeds and the slots their keys go to."""

    request: Request
    tokens: list[int]
    start: int  # the position of tokens[0] in the request
    slots: list[int]
    prefill: bool = True  # a prompt's chunk (False: one decoded token)

    @property
    def last(self) -> bool:
        """True when the work reaches the request's last token: its logits choose the next."""
        return self.start + len(self.tokens) == len(self.request.tokens)


class Scheduler:
    """Waiting and running requests over one :class:`~helpers.serving.blocks.PagedKVCache`."""

    def __init__(self, cache: PagedKVCache, max_batch: int, policy: str = "continuous",
                 max_batched_tokens: int | None = None) -> None:  # fmt: skip
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        self.cache, self.allocator, self.policy = cache, cache.allocator, policy
        self.max_batch = checks.require_positive_int("max_batch", max_batch)
        self.budget = None
        if max_batched_tokens is not None:
            self.budget = checks.require_positive_int("max_batched_tokens", max_batched_tokens)
        self.caching = isinstance(self.allocator, PrefixCache)
        self.fed: dict[int, int] = {}  # rid -> its tokens whose keys are in the cache
        self.prefill_end: dict[int, int] = {}  # rid -> its tokens at admission
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []

    def add(self, request: Request) -> None:
        """Queue a request; refuse one that the whole pool could not hold."""
        self.check(request)
        self.waiting.append(request)

    def check(self, request: Request) -> None:
        """Raise ValueError for a request that is malformed or could never fit in the pool."""
        check_request(request)
        need = self.allocator.blocks_for(len(request.prompt) + request.max_new_tokens - 1)
        if need > self.allocator.num_blocks:
            raise ValueError(
                f"request {request.rid} needs {need} blocks of {self.allocator.block_size} slots "
                f"(prompt {len(request.prompt)} + max_new_tokens {request.max_new_tokens} - 1 "
                f"tokens), more than the pool's num_blocks = {self.allocator.num_blocks}"
            )

    def schedule(self) -> tuple[list[Work], list[Request]]:
        """This step's work (decodes, then prefill chunks of running and then of newly admitted
        requests), and the requests preempted to make room."""
        preempted: list[Request] = []
        decodes: list[Work] = []
        budget = float("inf") if self.budget is None else self.budget
        for request in list(self.running):  # oldest first; the newest is preempted first
            if request not in self.running or self._prefilling(request):
                continue
            if len(decodes) == budget:
                break  # beyond the budget the newest decodes wait a step
            while request in self.running and not self._has_room_for_next(request):
                preempted.append(self._preempt_last())
            if request not in self.running:  # it was the last one, and is preempted itself
                break
            decodes.append(self._decode(request))
        budget -= len(decodes)
        chunks = []
        for request in self.running:  # partly prefilled prompts, oldest first
            if self._prefilling(request) and budget > 0:
                chunks.append(self._chunk(request, budget))
                budget -= len(chunks[-1].tokens)
        return decodes + chunks + self._admit(budget), preempted

    def computed(self, work: list[Work]) -> None:
        """The step has run: its tokens' keys are in the cache (and their full blocks named)."""
        for w in work:
            self.fed[w.request.rid] = w.start + len(w.tokens)
            if self.caching:
                self.allocator.register(w.request.rid, w.request.tokens[: w.start + len(w.tokens)])

    def finish(self, request: Request) -> None:
        """A request has all its tokens: its blocks go back to the pool."""
        self.running.remove(request)
        self.allocator.free(request.rid)

    def _has_room_for_next(self, request: Request) -> bool:
        length = self.allocator.lengths[request.rid]
        shared = self.allocator.refs[self.allocator.tables[request.rid][-1]] > 1
        new_block = length % self.allocator.block_size == 0 or shared
        return not new_block or self.allocator.num_free > 0

    def _preempt_last(self) -> Request:
        victim = self.running.pop()
        self.allocator.free(victim.rid)
        victim.preemptions += 1
        self.waiting.appendleft(victim)
        return victim

    def _prefilling(self, request: Request) -> bool:
        return self.fed[request.rid] < self.prefill_end[request.rid]

    def _decode(self, request: Request) -> Work:
        position = len(request.tokens) - 1  # the last generated token, not yet in the cache
        slot = self.cache.append(request.rid)
        return Work(request, request.tokens[-1:], position, [slot], prefill=False)

    def _chunk(self, request: Request, budget: float) -> Work:
        """The request's next prefill chunk: as many of its prompt's uncomputed tokens as fit."""
        start = self.fed[request.rid]
        stop = int(min(self.prefill_end[request.rid], start + budget))
        tokens = request.tokens[start:stop]
        return Work(request, tokens, start, self.allocator.slots(request.rid, start, stop))

    def _admit(self, budget: float) -> list[Work]:
        if self.policy == "static" and self.running:
            return []
        admitted = []
        while self.waiting and len(self.running) < self.max_batch and budget > 0:
            request = self.waiting[0]
            tokens = request.tokens  # a preempted request is prefilled again, output included
            if self.caching:
                need = self.allocator.blocks_needed(tokens)
            else:
                need = self.allocator.blocks_for(len(tokens))
            if need > self.allocator.num_free:
                break  # oldest first: nobody overtakes the request at the head
            self.waiting.popleft()
            shared = 0
            if self.caching:  # the blocks of its longest cached prefix are shared, not computed
                shared = self.allocator.allocate_cached(request.rid, tokens)
            else:
                self.allocator.allocate(request.rid, len(tokens))
            if not request.preemptions:  # reported for its first admission, as vLLM does
                request.cached_tokens = shared
            self.fed[request.rid] = shared
            self.prefill_end[request.rid] = len(tokens)
            self.running.append(request)
            admitted.append(self._chunk(request, budget))
            budget -= len(admitted[-1].tokens)
        return admitted
