"""Seeded workloads of notebook 14: chats that repeat their prefixes, and a mix with long prompts.

* :func:`chat_requests` (sections 1 and 3): conversations that all start with one system prompt;
  each turn's prompt is the system prompt, the earlier turns (a message and its reply each) and a
  new message, so most of every later prompt was some earlier prompt. The earlier replies are
  drawn text, as a chat client would resend what the model said.
* :func:`long_prompt_mix` (section 4): short requests that decode for a long while, and a few
  very long prompts that arrive while they do.
* :func:`itl_and_ttft`: the time between each running request's tokens, and each request's time
  to its first token, read off a run's step records.
"""

from __future__ import annotations

import numpy as np

from helpers.kit import checks
from helpers.serving.engine import ServeResult
from helpers.serving.model import VOCAB
from helpers.serving.scheduler import Request


def chat_requests(conversations: int = 6, turns: int = 3, seed: int = 14, system_len: int = 24,
                  message_len: tuple[int, int] = (4, 10), reply_len: int = 8,
                  new_tokens: int = 8, turn_gap: int = 12) -> list[Request]:  # fmt: skip
    """``conversations * turns`` requests, rid ``c * turns + t`` for turn t of conversation c.

    Turn t's prompt: the system prompt (``system_len`` tokens), then for each earlier turn its
    message and a ``reply_len``-token reply, then a new message (``message_len`` tokens, lo to
    hi). Conversation c's turn t arrives at step ``t * turn_gap + c``.
    """
    for name, n in (("conversations", conversations), ("turns", turns), ("system_len", system_len),
                    ("reply_len", reply_len), ("new_tokens", new_tokens)):  # fmt: skip
        checks.require_positive_int(name, n)
    checks.require_non_negative_int("turn_gap", turn_gap)
    lo, hi = (checks.require_positive_int("message_len", n) for n in message_len)
    rng = np.random.default_rng(checks.require_non_negative_int("seed", seed))
    system = rng.integers(0, VOCAB, system_len).tolist()
    requests = []
    for c in range(conversations):
        history = list(system)
        for t in range(turns):
            message = rng.integers(0, VOCAB, rng.integers(lo, hi + 1)).tolist()
            requests.append(Request(c * turns + t, history + message, new_tokens, t * turn_gap + c))
            history += message + rng.integers(0, VOCAB, reply_len).tolist()
    return sorted(requests, key=lambda r: (r.arrival, r.rid))


def repeated_tokens(requests: list[Request]) -> tuple[int, int]:
    """``(repeats, total)``: prompt tokens whose whole prefix up to them was the start of an
    earlier-arriving prompt, and all prompt tokens."""
    seen: list[list[int]] = []
    repeats = 0
    for r in sorted(requests, key=lambda r: (r.arrival, r.rid)):
        repeats += max((_common(r.prompt, p) for p in seen), default=0)
        seen.append(r.prompt)
    return repeats, sum(len(r.prompt) for r in requests)


def _common(a: list[int], b: list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def long_prompt_mix(seed: int = 14, short: int = 6, long: int = 2, long_len: int = 384,
                    new_tokens: int = 48) -> list[Request]:  # fmt: skip
    """``short`` requests of 8 to 16 prompt tokens that each generate ``new_tokens``, all at step
    0, and ``long`` prompts of ``long_len`` tokens (4 new tokens) arriving at steps 8, 20, ..."""
    rng = np.random.default_rng(checks.require_non_negative_int("seed", seed))
    requests = [Request(i, rng.integers(0, VOCAB, rng.integers(8, 17)).tolist(), new_tokens)
                for i in range(checks.require_positive_int("short", short))]  # fmt: skip
    for j in range(checks.require_non_negative_int("long", long)):
        prompt = rng.integers(0, VOCAB, checks.require_positive_int("long_len", long_len)).tolist()
        requests.append(Request(short + j, prompt, 4, 8 + 12 * j))
    return requests


def itl_and_ttft(result: ServeResult) -> tuple[np.ndarray, dict[int, float]]:
    """Inter-token latencies in seconds (every gap between two tokens of one request), and per
    request its time to first token, from the start of the step it arrived at (a run without
    preemption: each token after the first comes from a decode)."""
    checks.require_array("result", result, ServeResult, "helpers.serving.engine.ServeResult")
    if any(r.preemptions for r in result.requests):
        raise ValueError("result must come from a run without preemption (a bigger pool)")
    ends = {h.step: h.seconds for h in result.history}  # when each step that ran ended
    times: dict[int, list[float]] = {r.rid: [ends[r.first_token_step]] for r in result.requests}
    for h in result.history:
        for rid in h.decodes:
            times[rid].append(h.seconds)
    gaps = np.concatenate([np.diff(t) for t in times.values()])
    ttft = {}
    for r in result.requests:
        before = [ends[s] for s in ends if s < r.arrival]
        ttft[r.rid] = ends[r.first_token_step] - (max(before) if before else 0.0)
    return gaps, ttft
