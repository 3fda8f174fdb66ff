"""Notebook 14's helpers: automatic prefix caching and chunked prefill.

Every serving proof compares with an independent computation: each request decoded alone by the
model's own forward (notebook 08's cache), its logits with the plain forward over the whole text.
Workloads with shared prefixes, block sizes, pool sizes and token budgets are drawn by hypothesis.
"""

from __future__ import annotations

import os
import subprocess
import sys

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from notebook_tools import verdict
from serving_tools import alone, small_model

from helpers.kit import exercises
from helpers.kit.env import single_thread
from helpers.kit.explorer import explore
from helpers.lessons.nb14 import explorers as pictures
from helpers.lessons.nb14.workload import chat_requests
from helpers.serving import PrefixCache, Request, block_hashes, serve
from helpers.serving.prefix import chain_hash

SLOW = settings(max_examples=15, deadline=None, derandomize=True)
FAST = settings(max_examples=40, deadline=None, derandomize=True)


@pytest.fixture(autouse=True)
def _one_thread():
    with single_thread():
        yield


# --- block hashes -------------------------------------------------------------------------------


@FAST
@given(st.lists(st.integers(0, 3), max_size=20), st.lists(st.integers(0, 3), max_size=20),
       st.integers(1, 5))  # fmt: skip
def test_hash_j_is_equal_exactly_when_the_first_j_plus_one_blocks_are(a, b, size):
    ha, hb = block_hashes(a, size), block_hashes(b, size)
    assert len(ha) == len(a) // size and len(hb) == len(b) // size
    assert all(isinstance(h, int) for h in ha)
    for j in range(min(len(ha), len(hb))):
        assert (ha[j] == hb[j]) == (a[: (j + 1) * size] == b[: (j + 1) * size])


def test_a_blocks_own_tokens_are_not_enough_and_a_partial_block_has_no_hash():
    a, b = [1, 2, 3, 4, 5, 6], [9, 9, 9, 4, 5, 6]  # block 1 alike, block 0 not
    assert block_hashes(a, 3)[1] != block_hashes(b, 3)[1]
    assert block_hashes(a + [7, 8], 3) == block_hashes(a, 3)


def test_block_hashes_are_the_same_in_another_process_with_another_hash_seed():
    code = "from helpers.serving import block_hashes; print(block_hashes(list(range(12)), 4))"
    env = dict(os.environ, PYTHONHASHSEED="123")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    assert out.strip() == str(block_hashes(list(range(12)), 4))


# --- the prefix cache's bookkeeping --------------------------------------------------------------


def test_freed_cached_blocks_are_evicted_least_recently_used_first_the_tail_before_the_head():
    cache = PrefixCache(6, 2)
    for seq, tokens in (("a", [1, 2, 3, 4, 5]), ("b", [7, 8, 9, 9, 5])):
        cache.allocate_cached(seq, tokens)
        cache.register(seq, tokens)  # blocks 0-1 of a, blocks 3-4 of b named
    a, b = list(cache.table("a")), list(cache.table("b"))
    cache.free("a")
    cache.free("b")
    assert list(cache.evictable) == [a[1], a[0], b[1], b[0]]  # a first; each tail first
    assert cache.num_free == 6 and len(cache.free_blocks) == 2
    cache.allocate_cached("c", [0, 0, 0, 0, 0, 0, 0])  # 4 blocks: 2 free ones, then 2 evicted
    assert set(cache.table("c")) == {a[2], b[2], a[1], a[0]}
    assert list(cache.evictable) == [b[1], b[0]]
    assert cache.match([7, 8, 9, 9, 1]) == b[:2] and cache.match([1, 2, 3, 4, 1]) == []


def test_a_found_block_counts_as_used_again():
    cache = PrefixCache(4, 2)
    for seq in ("a", "b"):
        cache.allocate_cached(seq, [int(seq == "a"), 1, 2])
        cache.register(seq, [int(seq == "a"), 1, 2])
    first_a, first_b = cache.table("a")[0], cache.table("b")[0]
    cache.free("a"), cache.free("b")
    assert cache.allocate_cached("c", [1, 1, 5]) == 2  # finds a's block: used again
    cache.free("c")
    order = list(cache.evictable)
    assert order.index(first_b) < order.index(first_a)


@FAST
@given(st.lists(st.tuples(st.sampled_from("afr"), st.integers(0, 3), st.integers(1, 9)),
                max_size=30), st.integers(1, 3))  # fmt: skip
def test_a_block_in_use_is_never_evicted_and_the_books_balance(ops, size):
    cache, held, data = PrefixCache(8, size), {}, {}
    for n, (op, seq, length) in enumerate(ops):
        tokens = [seq % 2] * length  # prompts that share prefixes
        if op == "a" and seq not in held and cache.blocks_needed(tokens) <= cache.num_free:
            before = {b: list(t) for b, t in cache.tables.items()}
            cache.allocate_cached(seq, tokens)
            held[seq] = tokens
            for other, table in before.items():
                assert cache.tables[other] == table
        elif op == "r" and seq in held:
            cache.register(seq, held[seq])
        elif op == "f" and seq in held:
            cache.free(seq)
            del held[seq]
        data[n] = None
        in_use = {b for t in cache.tables.values() for b in t}
        assert all(cache.refs[b] > 0 for b in in_use)
        assert not in_use & (set(cache.evictable) | set(cache.free_blocks))
        assert len(in_use) + cache.num_free == 8
        assert all(cache.by_hash[h] == b for b, h in cache.hash_of.items())
        assert set(cache.evictable) <= set(cache.hash_of)


# --- serving: the same tokens, the same logits ---------------------------------------------------


@st.composite
def shared_prefix_mixes(draw):
    base = draw(st.lists(st.integers(0, 15), min_size=1, max_size=12))
    requests = []
    for i in range(draw(st.integers(1, 6))):
        keep = draw(st.integers(0, len(base)))
        own = draw(st.lists(st.integers(0, 15), min_size=0 if keep else 1, max_size=5))
        requests.append(Request(i, base[:keep] + own, draw(st.integers(1, 6)),
                                draw(st.integers(0, 8))))  # fmt: skip
    size = draw(st.integers(1, 4))
    biggest = max(-(-(len(r.prompt) + r.max_new_tokens - 1) // size) for r in requests)
    num_blocks = biggest + draw(st.integers(0, 8))  # tight: eviction and preemption happen
    budget = draw(st.one_of(st.none(), st.integers(1, 12)))
    return requests, num_blocks, size, draw(st.integers(1, 4)), budget


@SLOW
@given(shared_prefix_mixes(), st.booleans())
def test_serving_with_caching_and_any_budget_equals_serving_each_request_alone(mix, caching):
    requests, num_blocks, size, max_batch, budget = mix
    model = small_model()
    result = serve(model, requests, num_blocks, size, max_batch, prefix_caching=caching,
                   max_batched_tokens=budget)  # fmt: skip
    for r in result.requests:
        tokens, scores = alone(model, r)
        assert r.tokens == tokens, f"request {r.rid} differs from serving it alone"
        torch.testing.assert_close(result.logits[r.rid], scores, rtol=0, atol=1e-10)
        assert r.cached_tokens % size == 0 and r.cached_tokens <= len(r.prompt) - 1
        assert caching or r.cached_tokens == 0
    assert all(budget is None or h.tokens <= budget for h in result.history)
    assert all(len(h.prefills) + len(h.decodes) <= max_batch for h in result.history)


def test_a_preempted_requests_cached_tokens_stay_within_its_prompt():
    """The contract bounds ``cached_tokens`` by ``len(prompt) - 1``; a pool of 2 one-token
    blocks preempts request 1, whose new prefill ``[0, 25]`` then finds block ``[0]``: shared,
    but the request reports its first admission's hit (vLLM's ``num_cached_tokens`` too)."""
    requests = [Request(0, [0], 2), Request(1, [0], 2), Request(2, [0], 1)]
    result = serve(small_model(), requests, 2, 1, 2, prefix_caching=True)
    assert result.requests[1].preemptions == 1
    assert all(r.cached_tokens <= len(r.prompt) - 1 for r in result.requests)


@SLOW
@given(shared_prefix_mixes())
def test_without_preemption_caching_saves_exactly_the_cached_tokens(mix):
    requests, _, size, max_batch, budget = mix
    model, pool = small_model(), 200  # no preemption
    plain = serve(model, requests, pool, size, max_batch, max_batched_tokens=budget)
    cached = serve(model, requests, pool, size, max_batch, prefix_caching=True,
                   max_batched_tokens=budget)  # fmt: skip
    assert plain.outputs() == cached.outputs()
    saved = sum(h.tokens for h in plain.history) - sum(h.tokens for h in cached.history)
    assert saved == sum(r.cached_tokens for r in cached.requests)


def test_a_later_prompt_finds_the_shared_prefix_and_float32_agrees_too():
    model = small_model(dtype=torch.float32)
    system = list(range(10))
    requests = [Request(i, system + [i, i + 1], 3, arrival=4 * i) for i in range(3)]
    result = serve(model, requests, 32, 4, 2, prefix_caching=True)
    assert [r.cached_tokens for r in result.requests] == [0, 8, 8]
    plain = serve(model, requests, 32, 4, 2)
    assert result.outputs() == plain.outputs()
    for rid, logits in plain.logits.items():
        torch.testing.assert_close(result.logits[rid], logits, rtol=0, atol=1e-5)


def test_a_finished_requests_blocks_are_reused_by_hash_and_never_leak_into_another_prompt():
    model = small_model()
    a = Request(0, list(range(12)), 2)
    other = Request(1, [15 - t for t in range(12)], 2, arrival=4)  # evicts a's blocks
    again = Request(2, list(range(12)) + [3], 2, arrival=8)
    same = Request(3, list(range(12)) + [4], 2, arrival=3)  # a's blocks, still cached
    result = serve(model, [a, other, again, same], 5, 4, 1, prefix_caching=True)
    by_rid = {r.rid: r for r in result.requests}
    assert by_rid[3].cached_tokens == 12  # found a's three blocks after a finished
    assert by_rid[1].cached_tokens == 0
    for r in result.requests:
        assert r.tokens == alone(model, r)[0]
    found = [h for h in result.history if 3 in h.prefills][0]
    held = [b for b, owners in enumerate(found.owners) if 3 in owners]
    assert set(found.cached) >= set(held[:3])


def test_a_budget_runs_decodes_first_and_chunks_a_long_prompt():
    model = small_model()
    requests = [Request(0, [1, 2], 6), Request(1, list(range(20)), 2, arrival=2)]
    result = serve(model, requests, 16, 4, 2, max_batched_tokens=5)
    chunked = [h for h in result.history if 1 in h.prefills]
    # 4 prompt tokens beside request 0's decode, until it finishes; then the last 4 alone
    assert [h.tokens for h in chunked] == [5, 5, 5, 5, 4]
    assert [h.decodes for h in chunked] == [[0], [0], [0], [0], []]
    assert result.outputs() == {r.rid: alone(model, r)[0][len(r.prompt) :] for r in requests}


# --- bad input ----------------------------------------------------------------------------------

BAD = {
    "prefix_caching_not_a_bool": (
        lambda: serve(small_model(), [Request(0, [1], 2)], 8, 2, 2, prefix_caching="yes"),
        TypeError, "prefix_caching must be True or False"),
    "budget_zero": (
        lambda: serve(small_model(), [Request(0, [1], 2)], 8, 2, 2, max_batched_tokens=0),
        ValueError, "max_batched_tokens must be positive"),
    "budget_a_float": (
        lambda: serve(small_model(), [Request(0, [1], 2)], 8, 2, 2, max_batched_tokens=4.0),
        TypeError, "max_batched_tokens must be an int"),
    "budget_a_bool": (
        lambda: serve(small_model(), [Request(0, [1], 2)], 8, 2, 2, max_batched_tokens=True),
        TypeError, "max_batched_tokens must be an int"),
    "hash_of_floats": (lambda: block_hashes([1.0, 2.0], 1), TypeError, "tokens must be token ids"),
    "hash_of_a_string": (lambda: block_hashes("abc", 1), TypeError, "tokens must be a list"),
    "hash_of_bools": (lambda: block_hashes([True, 1], 1), TypeError, "tokens must be token ids"),
    "hash_block_size": (lambda: block_hashes([1, 2], 0), ValueError, "block_size must be positive"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_to_the_prefix_cache_and_the_budget_gets_a_clear_error(case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message):
        call()


# --- notebook 14's exercises --------------------------------------------------------------------

EXERCISES = ("chained_hashes", "cached_prefix_tokens", "step_plan")


def _chained(tokens, size):
    hashes, previous = [], 0
    for j in range(len(tokens) // size):
        previous = chain_hash(previous, tokens[j * size : (j + 1) * size])
        hashes.append(previous)
    return hashes


def _cached(prompt, size, cached):
    shared = 0
    for h in block_hashes(prompt[:-1], size):
        if h not in cached:
            break
        shared += size
    return shared


def _plan(decodes, prompts, budget):
    plan = [(rid, 1) for rid in decodes[:budget]]
    left = budget - len(plan)
    for rid, tokens in prompts:
        if left == 0:
            break
        plan.append((rid, min(tokens, left)))
        left -= plan[-1][1]
    return plan


RIGHT = {"chained_hashes": _chained, "cached_prefix_tokens": _cached, "step_plan": _plan}
WRONG = {
    "chained_hashes": {
        "own_tokens_only": lambda t, s: [
            chain_hash(0, t[j * s : (j + 1) * s]) for j in range(len(t) // s)
        ],
        "partial_block_too": lambda t, s: (
            _chained(t, s)
            + (
                [chain_hash(_chained(t, s)[-1] if len(t) >= s else 0, t[len(t) // s * s :])]
                if len(t) % s
                else []
            )
        ),  # fmt: skip
    },
    "cached_prefix_tokens": {
        "whole_prompt": lambda p, s, c: _cached(p + [0], s, c),
        "every_hash_in_the_set": lambda p, s, c: s * sum(h in c for h in block_hashes(p[:-1], s)),
    },
    "step_plan": {
        "prompts_first": lambda d, p, b: (
            _plan([], p, b)[: b - len(d)]
            + [(r, 1) for r in d][: b - sum(n for _, n in _plan([], p, b)[: b - len(d)])]
        ),
        "no_chunks": lambda d, p, b: [(r, 1) for r in d[:b]] + list(p),
        "every_decode": lambda d, p, b: [(r, 1) for r in d] + _plan([], p, max(b - len(d), 0)),
    },
}
CAUGHT_BY = [
    ("chained_hashes", "own_tokens_only", 2, "expected"),
    ("chained_hashes", "partial_block_too", 1, "a partial block has none"),
    ("cached_prefix_tokens", "whole_prompt", 2, "Hash prompt[:-1]"),
    ("cached_prefix_tokens", "every_hash_in_the_set", 3, "stop at the first block"),
    ("step_plan", "prompts_first", 1, "decodes go first"),
    ("step_plan", "no_chunks", 1, "expected"),
    ("step_plan", "every_decode", 3, "the rest wait a step"),
]


def test_notebook_14_registers_its_three_exercises():
    assert {e.name for e in exercises.for_notebook("14")} == set(EXERCISES)


@pytest.mark.parametrize("name", EXERCISES)
def test_every_exercise_of_notebook_14_reports_a_stub_as_not_attempted(name):
    def stub(*args):
        raise NotImplementedError

    assert verdict(name, stub) == "not attempted"


@pytest.mark.parametrize("name", EXERCISES)
def test_notebook_14_exercises_pass_right_answers(name):
    assert verdict(name, RIGHT[name]) == "passed"


@pytest.mark.parametrize(
    ("name", "mistake", "check", "message"), CAUGHT_BY, ids=[c[1] for c in CAUGHT_BY]
)
def test_each_exercise_of_notebook_14_rejects_a_typical_wrong_answer(
    name, mistake, check, message, capsys
):
    assert verdict(name, WRONG[name][mistake]) == "failed"
    exercises.check(name, WRONG[name][mistake])
    out = capsys.readouterr().out
    total = len(exercises.get(name).checks)
    assert f"check {check} (of {total}) failed" in out and message in out, out


# --- notebook 14's explorers --------------------------------------------------------------------


def test_the_pool_picture_marks_hits_and_keeps_cached_blocks_of_finished_requests():
    result = pictures.pool_run(40)
    index = next(i for i, h in enumerate(result.history) if pictures.hits_at(result, i))
    record = result.history[index]
    admitted = record.prefills[0]
    held = {b for b, owners in enumerate(record.owners) if admitted in owners}
    assert pictures.hits_at(result, index) <= held
    labels = pictures.prefix_labels(result)
    assert labels[block_hashes(chat_requests()[0].prompt, 4)[0]] == -1  # the system prompt
    assert any(not record.owners[b] for b in result.history[-1].cached)  # cached and free


def test_the_budget_picture_never_shows_a_step_over_the_budget():
    for budget in (8, 64):
        assert max(h.tokens for h in pictures.budget_run(budget).history) <= budget
    fig, caption = pictures.render_budget(16)
    assert "largest ran 16 tokens" in caption
    plt.close(fig)


@pytest.mark.parametrize(
    ("render", "args", "message"),
    [(pictures.render_prefix_pool, (3, 41), "num_blocks must be one of"),
     (pictures.render_prefix_pool, (99, 40), "step must lie in"),
     (pictures.render_budget, (17,), "budget must be one of")],
)  # fmt: skip
def test_the_pictures_name_the_bad_argument(render, args, message):
    with pytest.raises(ValueError, match=message):
        render(*args)


def test_explorers_of_notebook_14_redraw_when_driven_headless():
    step = widgets.IntSlider(value=3, min=0, max=pictures.MAX_STEP)
    box = explore(pictures.render_prefix_pool, step=step,
                  num_blocks=widgets.Dropdown(options=pictures.POOL_SIZES, value=40))  # fmt: skip
    first = box.image.value
    step.value = 9
    assert box.image.value != first and "found by hash" in box.caption.value
    budget = widgets.SelectionSlider(options=pictures.BUDGETS, value=16)
    box = explore(pictures.render_budget, budget=budget)
    first = box.image.value
    budget.value = 64
    assert box.image.value != first and "largest ran 64 tokens" in box.caption.value
