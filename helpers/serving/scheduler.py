"""Which requests run at each step, and where their tokens go (notebook 12, section 5).

Each engine step the scheduler

1. reserves a slot for the next token of every running request (a new block when its last
   block is full; a private copy when its last block is shared). If the pool has no free block
   left, it *preempts* the request admitted last: its blocks go back to the free list and it
   waits at the head of the queue, to be prefilled again (prompt and tokens so far) later;
2. admits waiting requests, oldest first, while there is a free place in the batch and enough
   free blocks for the tokens to prefill. ``policy="continuous"`` admits at every step, as soon
   as a request finishes; ``policy="static"`` only when the whole running batch has finished.

A request that could never fit in the pool, even alone, is refused when it is added.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from helpers.kit import checks
from helpers.kit.entry_checks import check_request
from helpers.serving.blocks import PagedKVCache

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

    @property
    def tokens(self) -> list[int]:
        """Prompt and generated tokens so far."""
        return self.prompt + self.output

    @property
    def done(self) -> bool:
        return len(self.output) >= self.max_new_tokens


@dataclass
class Work:
    """One request's part of a step: the tokens it feeds and the slots their keys go to."""

    request: Request
    tokens: list[int]
    start: int  # the position of tokens[0] in the request
    slots: list[int]


class Scheduler:
    """Waiting and running requests over one :class:`~helpers.serving.blocks.PagedKVCache`."""

    def __init__(self, cache: PagedKVCache, max_batch: int, policy: str = "continuous") -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        self.cache, self.allocator, self.policy = cache, cache.allocator, policy
        self.max_batch = checks.require_positive_int("max_batch", max_batch)
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
        """This step's work (decodes first, then the newly admitted prefills), and the requests
        preempted to make room."""
        preempted: list[Request] = []
        decodes: list[Work] = []
        for request in list(self.running):  # oldest first; the newest is preempted first
            while request in self.running and not self._has_room_for_next(request):
                preempted.append(self._preempt_last())
            if request not in self.running:  # it was the last one, and is preempted itself
                break
            decodes.append(self._decode(request))
        return decodes + self._admit(), preempted

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

    def _decode(self, request: Request) -> Work:
        position = len(request.tokens) - 1  # the last generated token, not yet in the cache
        return Work(request, request.tokens[-1:], position, [self.cache.append(request.rid)])

    def _admit(self) -> list[Work]:
        if self.policy == "static" and self.running:
            return []
        admitted = []
        while self.waiting and len(self.running) < self.max_batch:
            request = self.waiting[0]
            tokens = request.tokens  # a preempted request is prefilled again, output included
            if self.allocator.blocks_for(len(tokens)) > self.allocator.num_free:
                break  # oldest first: nobody overtakes the request at the head
            self.waiting.popleft()
            self.allocator.allocate(request.rid, len(tokens))
            self.running.append(request)
            admitted.append(
                Work(request, tokens, 0, self.allocator.slots(request.rid, 0, len(tokens)))
            )
        return admitted
