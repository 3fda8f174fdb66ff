"""Notebook 12's helpers: the paged KV cache, continuous batching, split-KV and speculative decoding.

Every proof compares with an independent computation: SDPA with ``enable_gqa`` over keys laid out
contiguously for paged attention; the model's own forward (notebook 08's cache) for the paged
engine; greedy decoding of each request alone for the scheduler; full attention for split-KV;
the target's greedy decoding, its exact distribution and direct samples from it for speculative
decoding. Shapes, pools, block sizes and request mixes are drawn by hypothesis.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from notebook_tools import verdict
from serving_tools import alone, small_model

from helpers.kit import exercises
from helpers.kit.env import single_thread
from helpers.kit.explorer import explore
from helpers.lessons.nb12 import explorers as pictures
from helpers.lessons.nb12.task import SUCCESSOR, phrase_sequences
from helpers.lessons.nb12.workload import request_lengths, request_mix, reserved_tokens
from helpers.serving import (
    BlockAllocator,
    PagedKVCache,
    PoolFull,
    Request,
    paged_attention,
    serve,
    speculative_decode,
    split_kv_attention,
)
from helpers.serving import model as lm
from helpers.serving.engine import feed, packed_forward
from helpers.serving.paged import gather_blocks, slot_weights
from helpers.serving.scheduler import Scheduler
from helpers.serving.speculative import (
    residual,
    speculative_rounds,
    step_distribution,
)
from helpers.serving.split_kv import decode_work_units, merge_partials, sm_busy_fraction

FAST = settings(max_examples=25, deadline=None, derandomize=True)
SLOW = settings(max_examples=12, deadline=None, derandomize=True)
TOL = {torch.float64: 1e-10, torch.float32: 1e-5}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: one thread is faster, and steadier when the machine is busy."""
    with single_thread():
        yield


# --- paged attention ----------------------------------------------------------------------------


@st.composite
def paged_problems(draw):
    """A pool, scattered block tables with junk past each sequence's last block, and lengths."""
    h_kv = draw(st.sampled_from([1, 2, 3]))
    h = h_kv * draw(st.sampled_from([1, 2, 4]))
    size, d = draw(st.integers(1, 6)), draw(st.sampled_from([1, 4, 8]))
    lens = draw(st.lists(st.integers(1, 20), min_size=1, max_size=5))
    max_blocks = max(-(-n // size) for n in lens) + draw(st.integers(0, 2))
    need = sum(-(-n // size) for n in lens)
    num_blocks = need + draw(st.integers(0, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    order = rng.permutation(num_blocks)  # blocks handed out in a scrambled order
    tables = rng.integers(-5, num_blocks + 5, (len(lens), max_blocks))  # junk everywhere...
    taken = 0
    for b, n in enumerate(lens):  # ...then each sequence's real blocks
        used = -(-n // size)
        tables[b, :used] = order[taken : taken + used]
        taken += used
    return rng, (num_blocks, h_kv, size, d), h, tables, np.array(lens)


def contiguous_attention(q, k_cache, v_cache, tables, lens):
    """SDPA with enable_gqa over each sequence's keys laid out end to end."""
    rows = []
    for b, n in enumerate(lens.tolist()):
        size = k_cache.shape[2]
        blocks = tables[b, : -(-n // size)].tolist()
        k, v = (torch.cat([c[x] for x in blocks], dim=1)[:, :n] for c in (k_cache, v_cache))
        rows.append(F.scaled_dot_product_attention(q[b, :, None], k, v, enable_gqa=True)[:, 0])
    return torch.stack(rows)


@FAST
@given(paged_problems(), st.sampled_from([torch.float64, torch.float32]))
def test_paged_attention_equals_attention_over_the_contiguous_cache(problem, dtype):
    rng, pool, h, tables, lens = problem
    k_cache, v_cache = (torch.from_numpy(rng.standard_normal(pool)).to(dtype) for _ in "kv")
    q = torch.from_numpy(rng.standard_normal((len(lens), h, pool[3]))).to(dtype)
    tables, lens = torch.from_numpy(tables), torch.from_numpy(lens)
    out = paged_attention(q, k_cache, v_cache, tables, lens)
    assert out.shape == q.shape and out.dtype == dtype
    want = contiguous_attention(q.double(), k_cache.double(), v_cache.double(), tables, lens)
    torch.testing.assert_close(out.double(), want, rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.uint8, torch.int32])
def test_paged_attention_reads_block_tables_of_any_integer_dtype_alike(dtype):
    q, k_cache, v_cache = (torch.randn(s, generator=torch.Generator().manual_seed(i))
                           for i, s in enumerate([(2, 4, 8), (4, 2, 3, 8), (4, 2, 3, 8)]))  # fmt: skip
    tables, lens = torch.tensor([[3, 1], [2, 0]]), torch.tensor([6, 2])
    want = paged_attention(q, k_cache, v_cache, tables, lens)
    assert torch.equal(paged_attention(q, k_cache, v_cache, tables.to(dtype), lens.to(dtype)), want)


@pytest.mark.parametrize("position", range(5))
def test_paged_attention_and_split_kv_refuse_a_numpy_array_naming_it(position):
    names = ("q", "k_cache", "v_cache", "block_tables", "seq_lens")
    args = [Q, POOL, POOL, TABLES, LENS]
    args[position] = args[position].numpy()
    with pytest.raises(TypeError, match=rf"^{names[position]} must be a torch.Tensor, got ndarray"):
        paged_attention(*args)
    qkv = [torch.zeros(1, 2, 8), torch.ones(1, 5, 8), torch.ones(1, 5, 8)]
    if position < 3:
        qkv[position] = qkv[position].numpy()
        with pytest.raises(TypeError, match=rf"^{'qkv'[position]} must be a torch.Tensor"):
            split_kv_attention(*qkv, 2)


def test_stale_numbers_in_slots_past_a_sequence_change_nothing():
    rng = np.random.default_rng(1)
    k_cache, v_cache = (torch.from_numpy(rng.standard_normal((6, 2, 4, 8))) for _ in "kv")
    q = torch.from_numpy(rng.standard_normal((2, 4, 8)))
    tables, lens = torch.tensor([[2, 5], [0, -1]]), torch.tensor([6, 3])
    clean = paged_attention(q, k_cache, v_cache, tables, lens)
    for cache in (k_cache, v_cache):
        cache[5, :, 2:] = float("nan")  # the unfilled end of sequence 0's last block
        cache[0, :, 3:] = float("inf")  # ... and of sequence 1's
        cache[[1, 3, 4]] = float("nan")  # blocks nobody holds
    assert torch.equal(paged_attention(q, k_cache, v_cache, tables, lens), clean)


def test_slot_weights_fall_on_each_sequences_own_slots_and_give_the_output():
    rng = np.random.default_rng(2)
    k_cache, v_cache = (torch.from_numpy(rng.standard_normal((6, 2, 4, 8))) for _ in "kv")
    q = torch.from_numpy(rng.standard_normal((2, 4, 8)))
    tables, lens = torch.tensor([[5, 2], [0, -1]]), torch.tensor([6, 3])
    weights = slot_weights(q, k_cache, tables, lens)  # (B, h, num_blocks * block_size)
    assert weights.shape == (2, 4, 24)
    own = [{20, 21, 22, 23, 8, 9}, {0, 1, 2}]  # block 5, then half of block 2; 3 slots of block 0
    for b in range(2):
        assert {int(i) for i in weights[b].sum(0).nonzero()} == own[b]
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, dtype=torch.float64))
    by_slot = v_cache.transpose(1, 2).reshape(24, 2, 8).repeat_interleave(2, dim=1)  # (slot, h, d)
    out = torch.einsum("bhs,shd->bhd", weights, by_slot)
    torch.testing.assert_close(out, paged_attention(q, k_cache, v_cache, tables, lens))


# --- the block allocator ------------------------------------------------------------------------


def check_allocator(allocator: BlockAllocator) -> None:
    """Counts match the tables, free blocks are held by nobody, every slot is owned once, and
    the filled slots per block are the tokens that sit in it."""
    held = [0] * allocator.num_blocks
    for table in allocator.tables.values():
        for block in table:
            held[block] += 1
    assert held == allocator.refs
    assert sorted(allocator.free_blocks) == [b for b, n in enumerate(held) if n == 0]
    slots = set()  # (block, offset) of every token of every sequence
    for seq, table in allocator.tables.items():
        assert len(table) == allocator.blocks_for(allocator.lengths[seq])
        slots |= {(table[t // allocator.block_size], t % allocator.block_size)
                  for t in range(allocator.lengths[seq])}  # fmt: skip
    counted = [sum(1 for b, _ in slots if b == block) for block in range(allocator.num_blocks)]
    assert allocator.filled() == counted, "filled slots, a shared block's counted once"


@FAST
@given(st.integers(1, 5), st.integers(4, 16), st.lists(st.tuples(st.integers(0, 3),
       st.integers(0, 5), st.integers(1, 9)), max_size=40))  # fmt: skip
def test_block_allocator_keeps_counts_tables_and_free_list_consistent(size, num_blocks, ops):
    allocator, names = BlockAllocator(num_blocks, size), [f"s{i}" for i in range(6)]
    for op, who, n in ops:
        seq, live = names[who], list(allocator.tables)
        try:
            if op == 0 and seq not in allocator.tables:
                allocator.allocate(seq, n)
            elif op == 1 and seq in allocator.tables:
                slot, copy = allocator.append(seq)
                table = allocator.tables[seq]
                assert slot // size == table[-1] and allocator.refs[table[-1]] == 1
                assert copy is None or copy[1] == table[-1]
            elif op == 2 and live and seq not in allocator.tables:
                allocator.fork(live[n % len(live)], seq)
            elif op == 3 and seq in allocator.tables:
                allocator.free(seq)
        except PoolFull:
            pass
        check_allocator(allocator)


def test_a_full_pool_refuses_without_touching_anyone():
    allocator = BlockAllocator(3, 4)
    allocator.allocate("a", 8)
    with pytest.raises(PoolFull, match="needs 2 blocks for 5 tokens, 1 of 3 are free"):
        allocator.allocate("b", 5)
    assert "b" not in allocator.tables and allocator.tables["a"] == [0, 1]
    check_allocator(allocator)


def test_freed_blocks_are_reused_without_leaking_the_old_keys():
    model = small_model()
    cache = PagedKVCache(2, 4, 4, 2, 4, torch.float64)
    feed(model, cache, "a", list(range(11)))  # blocks 0, 1, 2
    old = list(cache.allocator.tables["a"])
    cache.allocator.free("a")
    cache.keys[:, old] = float("nan")  # whatever a finished request leaves behind
    cache.values[:, old] = 1e30
    tokens = [5, 3, 9, 1, 2, 7]
    got = torch.cat([feed(model, cache, "b", tokens[:5]), feed(model, cache, "b", tokens[5:])])
    assert set(cache.allocator.tables["b"]) <= set(old), "b reuses a's blocks"
    torch.testing.assert_close(got, model(torch.tensor([tokens]))[0][0], rtol=0, atol=1e-10)


def test_copy_on_write_gives_a_private_copy_and_leaves_the_shared_block_alone():
    model = small_model()
    cache = PagedKVCache(2, 8, 4, 2, 4, torch.float64)
    prompt = [1, 2, 3, 4, 5, 6]
    feed(model, cache, "base", prompt)  # blocks 0 (full) and 1 (2 of 4 slots)
    cache.allocator.fork("base", "x")
    shared = cache.keys[:, 1].clone()
    got = feed(model, cache, "x", [7, 8])
    tables = cache.allocator.tables
    assert tables["base"] == [0, 1] and tables["x"][0] == 0 and tables["x"][1] not in (0, 1)
    assert torch.equal(cache.keys[:, 1], shared), "the shared block was written"
    assert torch.equal(cache.keys[:, tables["x"][1], :, :2], shared[:, :, :2]), "copied first"
    assert cache.allocator.refs[:2] == [2, 1]
    torch.testing.assert_close(
        got, model(torch.tensor([prompt + [7, 8]]))[0][0, 6:], rtol=0, atol=1e-10
    )


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize(
    "chunks", [[13], [1] * 13, [6, 1, 1, 5]], ids=["prefill", "tokens", "mixed"]
)
def test_the_model_over_a_paged_cache_equals_its_own_forward(dtype, chunks):
    model = small_model(dtype=dtype)
    cache = PagedKVCache(2, 8, 3, 2, 4, dtype)
    tokens, start, rows = phrase_sequences(1, 13, 3)[0].tolist(), 0, []
    for n in chunks:
        rows.append(feed(model, cache, "s", tokens[start : start + n]))
        start += n
    want = model(torch.tensor([tokens]))[0][0]
    torch.testing.assert_close(torch.cat(rows), want, rtol=0, atol=TOL[dtype])


# --- continuous batching --------------------------------------------------------------------


@st.composite
def request_mixes(draw):
    count = draw(st.integers(1, 6))
    requests = [
        Request(i, draw(st.lists(st.integers(0, 15), min_size=1, max_size=9)),
                draw(st.integers(1, 8)), draw(st.integers(0, 6)))
        for i in range(count)
    ]  # fmt: skip
    size = draw(st.integers(1, 4))
    biggest = max(-(-(len(r.prompt) + r.max_new_tokens - 1) // size) for r in requests)
    num_blocks = biggest + draw(st.integers(0, 6))  # tight: preemption happens
    return (
        requests,
        num_blocks,
        size,
        draw(st.integers(1, 4)),
        draw(st.sampled_from(["continuous", "static"])),
    )


@SLOW
@given(request_mixes())
def test_serving_a_mix_equals_serving_each_request_alone(mix):
    requests, num_blocks, size, max_batch, policy = mix
    model = small_model()
    result = serve(model, requests, num_blocks, size, max_batch, policy)
    for r in result.requests:
        tokens, scores = alone(model, r)
        assert r.tokens == tokens, f"request {r.rid} differs from serving it alone"
        torch.testing.assert_close(result.logits[r.rid], scores, rtol=0, atol=1e-10)
    assert all(r.arrival <= r.first_token_step <= r.finish_step for r in result.requests)
    assert all(len(h.prefills) + len(h.decodes) <= max_batch for h in result.history)


def test_the_pool_is_never_overdrawn_and_ends_empty():
    requests = request_mix(
        10, seed=3, prompt_range=(4, 10), output_range=(2, 12), arrival_every=1.0
    )
    model = small_model()
    result = serve(model, requests, num_blocks=12, block_size=2, max_batch=4)
    assert sum(r.preemptions for r in result.requests) > 0, "the pool should be tight here"
    for record in result.history:
        assert sum(record.filled) <= 12 * 2
        assert all(len(owners) <= 1 for owners in record.owners), "a block held twice"
    assert not any(result.history[-1].owners), "every block back in the free list"


def test_static_batching_admits_only_when_the_whole_batch_has_finished():
    requests = request_mix(9, seed=4)
    result = serve(
        small_model(), requests, num_blocks=200, block_size=4, max_batch=3, policy="static"
    )
    running: set[int] = set()
    for record in result.history:
        if record.prefills:
            assert not running, "admitted while others still ran"
        running = (running | set(record.prefills)) - set(record.finished)
    continuous = serve(small_model(), requests, num_blocks=200, block_size=4, max_batch=3)
    assert continuous.steps < result.steps
    assert continuous.outputs() == result.outputs()


def test_a_request_that_can_never_fit_is_refused_before_anything_runs():
    scheduler = Scheduler(PagedKVCache(1, 4, 2, 1, 2), max_batch=2)
    with pytest.raises(ValueError, match=r"request 7 needs 5 blocks of 2 slots \(prompt 6 \+ "
                       r"max_new_tokens 5 - 1 tokens\), more than the pool's num_blocks = 4"):  # fmt: skip
        scheduler.add(Request(7, [1] * 6, 5))
    fits = Request(8, [1] * 6, 3)  # 8 tokens: exactly the pool
    scheduler.add(fits)
    assert list(scheduler.waiting) == [fits]


# --- split-KV ---------------------------------------------------------------------------------


@FAST
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 40), st.integers(1, 8),
       st.integers(1, 40), st.sampled_from([torch.float64, torch.float32]), st.integers(0, 99))  # fmt: skip
def test_split_kv_attention_equals_full_attention(B, T_q, T_k, d, splits, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, 2, T_q, d, generator=gen, dtype=torch.float64) * 3
    k, v = (torch.randn(B, 2, T_k, d, generator=gen, dtype=torch.float64) for _ in "kv")
    splits = min(splits, T_k)
    got = split_kv_attention(q.to(dtype), k.to(dtype), v.to(dtype), splits)
    assert got.dtype == dtype and got.shape == q.shape
    want = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(got.double(), want, rtol=0, atol=TOL[dtype])


def test_split_kv_with_huge_scores():
    rng = np.random.default_rng(5)
    q, k, v = torch.from_numpy(rng.standard_normal((3, 2, 50, 8)))
    got = split_kv_attention(q * 500, k, v, 7)  # scores in the thousands
    assert got.dtype == torch.float64 and bool(got.isfinite().all())
    want = F.scaled_dot_product_attention(q * 500, k, v)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16_bit_inputs_give_16_bit_outputs_close_to_full_precision(dtype):
    gen = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(2, 4, n, 16, generator=gen, dtype=torch.float64) for n in (1, 50, 50))
    want = F.scaled_dot_product_attention(q, k, v)  # (2, 4, 1, 16)
    got = split_kv_attention(q.to(dtype), k.to(dtype), v.to(dtype), 5)
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), want, rtol=0, atol=2e-2)
    pool = k[0].reshape(4, 10, 5, 16).transpose(0, 1)  # 10 blocks of 5 tokens, (10, h_kv, 5, d)
    values = v[0].reshape(4, 10, 5, 16).transpose(0, 1)
    paged = paged_attention(q[0, :, 0][None].to(dtype), pool.to(dtype), values.to(dtype),
                            torch.arange(10)[None], torch.tensor([50]))  # fmt: skip
    assert paged.dtype == dtype
    torch.testing.assert_close(paged[0].double(), want[0, :, 0], rtol=0, atol=2e-2)


def test_merging_partials_weighs_each_by_its_share_of_the_softmax_mass():
    outs = [torch.tensor([[1.0]]), torch.tensor([[3.0]])]
    lses = [torch.tensor([math.log(1.0)]), torch.tensor([math.log(3.0)])]  # masses 1 and 3
    assert merge_partials(outs, lses).item() == pytest.approx(0.25 * 1 + 0.75 * 3)


def test_decode_work_is_one_piece_per_sequence_kv_head_and_split():
    # GQA packing: the query heads that share a KV head are one piece of work.
    assert decode_work_units(1, 32, 8) == 8 and decode_work_units(2, 32, 8, 4) == 64
    assert decode_work_units(3, 32, 32) == 96  # MHA: one piece per query head
    assert decode_work_units(1, 32, 1, 16) == 16  # MQA


def test_decode_work_and_sm_occupancy_are_counted_in_waves():
    assert sm_busy_fraction(32, 132) == pytest.approx(32 / 132)
    assert sm_busy_fraction(133, 132) == pytest.approx(
        133 / 264
    )  # two waves, the second nearly empty
    assert sm_busy_fraction(264, 132) == 1.0


# --- speculative decoding ------------------------------------------------------------------------


class Counting:
    """A callable that counts its calls."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, tokens):
        self.calls += 1
        return self.fn(tokens)


@SLOW
@given(st.integers(0, 50), st.integers(1, 6), st.integers(0, 15), st.integers(1, 7))
def test_greedy_speculative_decoding_is_the_targets_greedy_decoding(seed, num_draft, new, T_0):
    target, draft = small_model(seed), small_model(seed + 1)
    prompt = torch.randint(0, 16, (1, T_0), generator=torch.Generator().manual_seed(seed))
    got = speculative_decode(lm.CachedLM(target), lm.CachedLM(draft), prompt, new, num_draft)
    assert torch.equal(got, lm.generate(target, prompt, new))
    assert torch.equal(speculative_decode(target.logits, draft.logits, prompt, new, num_draft), got)


@pytest.mark.parametrize("num_draft", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("new", [1, 5, 12, 13])
def test_with_a_draft_that_always_agrees_the_target_checks_whole_rounds(num_draft, new):
    target = small_model()
    counted = Counting(target.logits)
    speculative_decode(counted, target.logits, torch.tensor([[1, 2]]), new, num_draft)
    assert counted.calls <= math.ceil(new / num_draft) + 1
    assert counted.calls == math.ceil(new / (num_draft + 1))  # k + 1 tokens per round


@st.composite
def distribution_pairs(draw):
    V = draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p, q = (rng.dirichlet(np.ones(V) * 0.5) for _ in "pq")
    for x in (p, q):  # some exact zeros, as a peaked softmax gives
        x[rng.random(V) < 0.3] = 0.0
        if x.sum() == 0:
            x[0] = 1.0
    return torch.from_numpy(p / p.sum()), torch.from_numpy(q / q.sum())


@FAST
@given(distribution_pairs())
def test_one_speculative_token_is_distributed_exactly_as_the_target(pair):
    p, q = pair
    torch.testing.assert_close(step_distribution(p, q), p, rtol=0, atol=1e-12)
    assert residual(p, q).sum().item() == pytest.approx(1.0)


TABLE = torch.randn(4, 4, generator=torch.Generator().manual_seed(12), dtype=torch.float64) * 1.5
BIAS = torch.tensor([2.0, 0.0, -1.0, 0.0], dtype=torch.float64)


def table_target(tokens):
    return TABLE[tokens]


def table_draft(tokens):
    return (TABLE + BIAS)[tokens]


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize("temperature", [1e-310, 1e-300, 1e-12])
def test_a_tiny_temperature_samples_as_greedy_does_not_a_raw_error(temperature):
    prompt = torch.tensor([[1]])
    greedy = speculative_decode(table_target, table_draft, prompt, 6, 2)
    sampled = speculative_decode(table_target, table_draft, prompt, 6, 2, temperature,
                                 torch.Generator().manual_seed(0))  # fmt: skip
    assert torch.equal(sampled, greedy)


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_speculative_sampling_draws_pairs_as_the_target_does(temperature):
    """4000 seeded runs; chi-square over the 16 pairs (15 degrees of freedom) below 37.7, its
    0.1 % critical value; the draft's own pair distribution lies far beyond it."""
    gen = torch.Generator().manual_seed(13)
    counts = torch.zeros(4, 4, dtype=torch.float64)
    for _ in range(4000):
        out = speculative_decode(table_target, table_draft, torch.tensor([[2]]), 2, 2,
                                 temperature, gen)  # fmt: skip
        counts[out[0, 1], out[0, 2]] += 1
    probs = lambda logits: torch.softmax(logits / temperature, -1)  # noqa: E731
    exact = probs(TABLE[2])[:, None] * probs(TABLE)
    drafted = probs(TABLE[2] + BIAS)[:, None] * probs(TABLE + BIAS)
    assert chi_square(counts, exact) < 37.7
    assert chi_square(counts, drafted) > 10 * 37.7


def test_sampling_is_reproducible_and_leaves_the_global_random_state_alone():
    target, draft = small_model(0), small_model(1)
    prompt = torch.tensor([[3, 1, 4]])
    state = torch.get_rng_state()
    runs = [speculative_decode(target.logits, draft.logits, prompt, 10, 3, 0.8,
                               torch.Generator().manual_seed(5)) for _ in range(2)]  # fmt: skip
    assert torch.equal(runs[0], runs[1])
    assert torch.equal(torch.get_rng_state(), state)
    other = speculative_decode(target.logits, draft.logits, prompt, 10, 3, 0.8,
                               torch.Generator().manual_seed(6))  # fmt: skip
    assert not torch.equal(other, runs[0])


def test_cached_model_equals_the_plain_model_through_rollbacks():
    model = small_model()
    cached = lm.CachedLM(model)
    text = torch.randint(0, 16, (1, 12), generator=torch.Generator().manual_seed(2))
    for stop, tail in ((5, []), (9, []), (7, [3, 3]), (12, []), (4, [1]), (4, [])):
        tokens = torch.cat([text[:, :stop], torch.tensor([tail], dtype=torch.int64)], dim=1)
        torch.testing.assert_close(cached(tokens), model(tokens)[0], rtol=0, atol=1e-10)
    assert cached.forwards == 5  # the last call was a prefix of what it had seen
    edited = text.clone()
    edited[0, 2] = (edited[0, 2] + 1) % 16  # one token changed, the ones after it the same
    torch.testing.assert_close(cached(edited), model(edited)[0], rtol=0, atol=1e-10)
    assert cached.caches[0].length == 12 and cached.tokens_run == 5 + 4 + 2 + 5 + 1 + 10


def test_rounds_keep_proposals_up_to_the_first_rejection():
    models = lm.load_models(torch.float64)
    prompt = phrase_sequences(1, 16, 2024)
    for rnd in speculative_rounds(lm.CachedLM(models["target"]), lm.CachedLM(models["poor draft"]),
                                  prompt, 20, 3):  # fmt: skip
        assert rnd.new[: rnd.accepted] == rnd.proposals[: rnd.accepted]
        assert rnd.accepted == len(rnd.proposals) or rnd.new[-1] != rnd.proposals[rnd.accepted]


# --- the shipped models and their text ----------------------------------------------------------


def test_phrases_repeat_and_follow_their_grammar_about_half_the_time():
    text = phrase_sequences(500, 30, 0)
    periods = [next(p for p in range(4, 13) if torch.equal(row[p:], row[:-p])) for row in text]
    assert set(periods) == set(range(4, 13))
    follows = np.mean([(SUCCESSOR[row[:-1]] == row[1:])[: p - 1].float().mean().item()
                       for row, p in zip(text, periods, strict=True)])  # fmt: skip
    assert 0.45 < follows < 0.6


def test_the_shipped_target_copies_and_the_good_draft_agrees_with_it_more_than_the_poor_one():
    models = lm.load_models()
    prompts = phrase_sequences(32, 28, 77)  # at least two copies of every phrase
    out = lm.generate(models["target"], prompts[:, :24], 4)
    assert (out[:, 24:] == prompts[:, 24:]).float().mean() > 0.95
    with torch.no_grad():
        best = {name: m.logits(prompts).argmax(-1) for name, m in models.items()}
    good = (best["good draft"] == best["target"]).float().mean()
    poor = (best["poor draft"] == best["target"]).float().mean()
    assert good > 0.85 and poor < 0.7


def test_the_training_command_writes_weights_every_model_loads(tmp_path):
    out = tmp_path / "weights.pt"
    done = subprocess.run([sys.executable, "-m", "tools.train_serving", "--out", str(out),
                           "--steps", "3"], check=True, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert "poor draft agrees with the target on" in done.stdout
    state = torch.load(out, weights_only=True)
    for name in lm.CONFIGS:
        lm.make_model(name).load_state_dict(state[name])


# --- memory of a request mix ----------------------------------------------------------------


def test_reserved_slots_contiguous_and_paged():
    lengths = np.array([1, 16, 17, 100])
    assert reserved_tokens(lengths, 128) == 4 * 128
    assert reserved_tokens(lengths, 128, block_size=16) == 16 + 16 + 32 + 112
    assert reserved_tokens(lengths, 128, block_size=1) == lengths.sum()
    drawn = request_lengths(500, 0, 300)
    assert drawn.min() >= 1 and drawn.max() == 300  # the long tail is capped


def test_request_mix_is_seeded_and_arrives_in_order():
    a, b = request_mix(8, 1, arrival_every=2.0), request_mix(8, 1, arrival_every=2.0)
    assert [(r.prompt, r.max_new_tokens, r.arrival) for r in a] == [
        (r.prompt, r.max_new_tokens, r.arrival) for r in b
    ]
    assert [r.arrival for r in a] == sorted(r.arrival for r in a) and a[0].arrival == 0
    assert all(2 <= r.max_new_tokens <= 48 and 4 <= len(r.prompt) <= 24 for r in a)


# --- bad input ----------------------------------------------------------------------------------

POOL = torch.zeros(4, 2, 3, 8)
Q = torch.zeros(2, 4, 8)
TABLES, LENS = torch.tensor([[0, 1], [2, -1]]), torch.tensor([6, 2])


def held_one() -> BlockAllocator:
    """An allocator that holds one sequence, 'a'."""
    allocator = BlockAllocator(4, 2)
    allocator.allocate("a", 3)
    return allocator


BAD = {
    "a_block_table_past_the_pool": (
        lambda: paged_attention(Q, POOL, POOL, torch.tensor([[0, 4], [2, -1]]), LENS),
        ValueError,
        r"block_tables\[0, 1\] = 4 is past the pool of num_blocks = 4.*seq_lens\[0\] = 6",
    ),
    "a_length_past_the_tables_capacity": (
        lambda: paged_attention(Q, POOL, POOL, TABLES, torch.tensor([7, 2])),
        ValueError,
        r"seq_lens must lie in 1..max_blocks \* block_size = 2 \* 3 = 6, got \[7, 2\]",
    ),
    "a_length_of_zero": (
        lambda: paged_attention(Q, POOL, POOL, TABLES, torch.tensor([0, 2])),
        ValueError,
        "seq_lens must lie in 1..",
    ),
    "heads_not_divisible_by_kv_heads": (
        lambda: paged_attention(torch.zeros(2, 3, 8), POOL, POOL, TABLES, LENS),
        ValueError,
        r"h = 3 heads must be divisible by the cache's h_kv = 2: q \(2, 3, 8\)",
    ),
    "float_block_tables": (
        lambda: paged_attention(Q, POOL, POOL, TABLES.float(), LENS),
        TypeError,
        r"block_tables must hold integers \(B, max_blocks\), got dtype torch.float32, shape \(2, 2\)",
    ),
    "a_cache_with_no_kv_head": (
        lambda: paged_attention(Q, POOL[:, :0], POOL[:, :0], TABLES, LENS),
        ValueError,
        r"q and k_cache must not be empty: q \(2, 4, 8\), k_cache \(4, 0, 3, 8\)",
    ),
    "block_tables_on_another_device": (
        lambda: paged_attention(Q, POOL, POOL, TABLES.to("meta"), LENS),
        ValueError,
        r"must be on one device.*block_tables on meta \(2, 2\)",
    ),
    "tables_for_another_batch": (
        lambda: paged_attention(Q, POOL, POOL, TABLES[:1], LENS),
        ValueError,
        r"q and block_tables must share B: q \(2, 4, 8\), block_tables \(1, 2\)",
    ),
    "a_cache_with_another_width": (
        lambda: paged_attention(Q, torch.zeros(4, 2, 3, 6), torch.zeros(4, 2, 3, 6), TABLES, LENS),
        ValueError,
        r"q and k_cache must share d: q \(2, 4, 8\), k_cache \(4, 2, 3, 6\)",
    ),
    "a_list_for_q": (
        lambda: paged_attention([[0.0]], POOL, POOL, TABLES, LENS),
        TypeError,
        "q must be a torch.Tensor, got list",
    ),
    "no_splits": (
        lambda: split_kv_attention(torch.zeros(1, 4, 8), torch.zeros(5, 8), torch.zeros(5, 8), 0),
        ValueError,
        "num_splits must be positive, got 0",
    ),
    "more_splits_than_keys": (
        lambda: split_kv_attention(torch.zeros(1, 4, 8), torch.zeros(5, 8), torch.zeros(5, 8), 6),
        ValueError,
        r"num_splits must lie in 1..T_k = 5 \(each chunk needs a key\), got 6; k \(5, 8\)",
    ),
    "vocabularies_that_differ": (
        lambda: speculative_decode(
            lambda t: torch.zeros(1, t.shape[1], 5),
            lambda t: torch.zeros(1, t.shape[1], 4),
            torch.tensor([[1]]),
            3,
        ),
        ValueError,
        r"draft and target must share one vocabulary: draft logits \(1, T, 4\), target logits \(1, 3, 5\)",
    ),  # fmt: skip
    **{
        f"{name}_logits_holding_{what}_at_temperature_{t}": (
            lambda name=name, bad=bad, t=t: speculative_decode(
                (lambda x: TABLE[x] * bad) if name == "target" else table_target,
                (lambda x: TABLE[x] * bad) if name == "draft" else table_draft,
                torch.tensor([[1]]),
                3,
                2,
                t,
                torch.Generator().manual_seed(0),
            ),
            ValueError,
            rf"{name} returned logits \(1, \d, 4\) holding NaN or \+inf",
        )
        for name in ("target", "draft")
        for what, bad in (("nan", float("nan")), ("inf", float("inf")))
        for t in (0.0, 1.0)
    },
    "a_draft_proposing_past_the_targets_vocabulary": (
        lambda: speculative_decode(
            table_target,
            lambda t: torch.zeros(1, t.shape[1], 6).index_fill(-1, torch.tensor([5]), 1.0),
            torch.tensor([[1]]),
            4,
            2,
        ),
        ValueError,
        r"target failed on the draft's proposals \[5, 5\].*share one vocabulary, the draft's has V = 6",
    ),
    "a_negative_temperature": (
        lambda: speculative_decode(
            table_target, table_draft, torch.tensor([[1]]), 3, temperature=-0.5
        ),
        ValueError,
        "temperature must be a finite number, 0 or more, got -0.5",
    ),
    "a_generator_of_the_wrong_type": (
        lambda: speculative_decode(
            table_target, table_draft, torch.tensor([[1]]), 3, 2, 1.0, np.random.default_rng(0)
        ),
        TypeError,
        "generator must be a torch.Generator or None, got numpy.random._generator.Generator",
    ),  # fmt: skip
    "a_prompt_of_floats": (
        lambda: speculative_decode(table_target, table_draft, torch.tensor([[1.0]]), 3),
        ValueError,
        r"prompt must be int64 token ids \(1, T_0\) with T_0 >= 1, got torch.float32 \(1, 1\)",
    ),
    "a_model_that_is_not_callable": (
        lambda: speculative_decode(table_target, "draft", torch.tensor([[1]]), 3),
        TypeError,
        r"draft must be callable: token ids \(1, T\) -> logits \(1, T, V\)",
    ),
    "a_model_that_returns_the_wrong_shape": (
        lambda: speculative_decode(
            lambda t: torch.zeros(t.shape[1], 4), table_draft, torch.tensor([[1]]), 3
        ),
        ValueError,
        r"target must map token ids \(1, T\) to logits \(1, T, V\): given \(1, 3\) it returned \(3, 4\)",
    ),  # fmt: skip
    "an_unknown_policy": (
        lambda: Scheduler(PagedKVCache(1, 4, 2, 1, 2), max_batch=2, policy="greedy"),
        ValueError,
        r"policy must be one of \('continuous', 'static'\), got 'greedy'",
    ),
    "an_empty_prompt": (
        lambda: serve(small_model(), [Request(0, [], 3)], 8, 2, 2),
        ValueError,
        "request 0: prompt must be a non-empty list of token ids",
    ),
    "a_prompt_of_bools": (
        lambda: serve(small_model(), [Request(0, [True, False], 3)], 8, 2, 2),
        ValueError,
        r"request 0: prompt must be a non-empty list of token ids \(ints >= 0\), got \[True, False\]",
    ),
    "a_prompt_token_past_the_vocabulary": (
        lambda: serve(small_model(), [Request(0, [1, lm.VOCAB], 3)], 8, 2, 2),
        ValueError,
        rf"request 0: prompt token {lm.VOCAB} is past the model's vocabulary of {lm.VOCAB}",
    ),
    "one_request_not_in_a_list": (
        lambda: serve(small_model(), Request(0, [1], 3), 8, 2, 2),
        TypeError,
        "requests must be a list of Request, got Request",
    ),
    "feed_of_a_token_past_the_vocabulary": (
        lambda: feed(small_model(), PagedKVCache(2, 4, 2, 2, 4, torch.float64), "a", [1, 999]),
        ValueError,
        r"tokens must be a non-empty list of token ids in 0..\d+, got \[1, 999\]",
    ),
    "a_cache_of_integers": (
        lambda: PagedKVCache(1, 4, 2, 1, 2, dtype=torch.int64),
        TypeError,
        "dtype must be a floating torch.dtype",
    ),
    **{
        f"reserved_tokens_of_{name}": (lambda args=args: reserved_tokens(*args), error, message)
        for name, args, error, message in (
            (
                "a_negative_length",
                ([-5, 3], 10, 4),
                ValueError,
                "lengths must be 0 or more, got -5",
            ),
            ("float_lengths", ([2.5, 3.0], 10, 4), TypeError, "lengths must hold integers"),
            (
                "a_length_past_max_len",
                ([50, 3], 10),
                ValueError,
                "lengths must be at most max_len = 10, got 50",
            ),
        )
    },
    **{
        f"request_mix_with_{name}": (lambda kw=kw: request_mix(4, 0, **kw), error, message)
        for name, kw, error, message in (
            (
                "arrivals_every_nan_steps",
                {"arrival_every": float("nan")},
                ValueError,
                "arrival_every must be a finite number, 0 or more, got nan",
            ),
            (
                "arrivals_every_minus_one_step",
                {"arrival_every": -1.0},
                ValueError,
                "arrival_every must be a finite number, 0 or more, got -1",
            ),
            (
                "outputs_of_zero_tokens",
                {"output_range": (0, 5)},
                ValueError,
                "output_range must be positive, got 0",
            ),
            (
                "a_reversed_prompt_range",
                {"prompt_range": (9, 3)},
                ValueError,
                r"prompt_range must have lo <= hi, got \(9, 3\)",
            ),
        )
    },
    **{
        f"an_unknown_sequence_to_{name}": (lambda call=call: call(held_one()), ValueError, message)
        for name, call in (
            ("append_to", lambda a: a.append("b")),
            ("fork_from", lambda a: a.fork("b", "c")),
            ("free", lambda a: a.free("b")),
            ("find_slots_of", lambda a: a.slots("b", 0, 1)),
            ("put_in_a_block_table", lambda a: PagedKVCache(1, 4, 2, 1, 2).block_table(["b"])),
        )
        for message in ["no sequence 'b' holds blocks; held: "]
    },
    "two_requests_with_one_rid": (
        lambda: serve(small_model(), [Request(0, [1], 3), Request(0, [2], 3)], 8, 2, 2),
        ValueError,
        r"requests need distinct rids, got \[0, 0\]",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_to_the_serving_helpers_gets_a_clear_error(case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message):
        call()


# --- notebook 12's exercises --------------------------------------------------------------------

EXERCISES = ("gather_keys", "merge_two", "keep_and_residual")


def test_notebook_12_registers_its_three_exercises():
    assert {e.name for e in exercises.for_notebook("12")} == set(EXERCISES)


@pytest.mark.parametrize("name", EXERCISES)
def test_every_exercise_of_notebook_12_reports_a_stub_as_not_attempted(name):
    def stub(*args):
        raise NotImplementedError

    assert verdict(name, stub) == "not attempted"


def _gather(k_cache, table, seq_len):
    used = -(-seq_len // k_cache.shape[2])
    keys = k_cache[table[:used]].transpose(0, 1)
    return keys.reshape(k_cache.shape[1], -1, k_cache.shape[3])[:, :seq_len]


def _gather_without_transpose(k_cache, table, seq_len):  # heads and blocks mixed up
    used = -(-seq_len // k_cache.shape[2])
    return k_cache[table[:used]].reshape(k_cache.shape[1], -1, k_cache.shape[3])[:, :seq_len]


def _gather_sorted(k_cache, table, seq_len):  # blocks in number order, not table order
    used = -(-seq_len // k_cache.shape[2])
    return _gather(k_cache, table[:used].sort().values, seq_len)


def _gather_whole_blocks(k_cache, table, seq_len):  # the last block's empty slots kept
    used = -(-seq_len // k_cache.shape[2])
    return _gather(k_cache, table, used * k_cache.shape[2])


def _merge(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    return torch.exp(lse_a - lse)[..., None] * out_a + torch.exp(lse_b - lse)[
        ..., None
    ] * out_b, lse


def _merge_by_exp(out_a, lse_a, out_b, lse_b):  # right maths, overflows
    a, b = torch.exp(lse_a), torch.exp(lse_b)
    return (a[..., None] * out_a + b[..., None] * out_b) / (a + b)[..., None], torch.log(a + b)


def _merge_without_last_axis(out_a, lse_a, out_b, lse_b):  # (..., T_q) times (..., T_q, d)
    lse = torch.logaddexp(lse_a, lse_b)
    return torch.exp(lse_a - lse) * out_a + torch.exp(lse_b - lse) * out_b, lse


def _keep(p, q, token):
    extra = (p - q).clamp(min=0)
    return min(1.0, float(p[token] / q[token])), extra / extra.sum()


RIGHT = {
    "gather_keys": [_gather],
    "merge_two": [_merge],
    "keep_and_residual": [_keep],
}
WRONG = {
    "gather_keys": {
        "without_the_transpose": _gather_without_transpose,
        "blocks_in_number_order": _gather_sorted,
        "whole_blocks": _gather_whole_blocks,
    },
    "merge_two": {
        "by_exp_of_lse": _merge_by_exp,
        "plain_average": lambda a, la, b, lb: ((a + b) / 2, torch.logaddexp(la, lb)),
        "lse_of_one_half": lambda a, la, b, lb: (_merge(a, la, b, lb)[0], la),
        "output_only": lambda a, la, b, lb: _merge(a, la, b, lb)[0],
        "shares_without_a_last_axis": _merge_without_last_axis,
    },
    "keep_and_residual": {
        "p_over_q_unclipped": lambda p, q, t: (float(p[t] / q[t]), _keep(p, q, t)[1]),
        "resample_from_p": lambda p, q, t: (_keep(p, q, t)[0], p),
        "residual_not_normalised": lambda p, q, t: (_keep(p, q, t)[0], (p - q).clamp(min=0)),
        "residual_the_wrong_way": lambda p, q, t: (
            _keep(p, q, t)[0],
            (q - p).clamp(min=0) / (q - p).clamp(min=0).sum(),
        ),
    },
}


@pytest.mark.parametrize(
    ("name", "answer"), [(n, a) for n, answers in RIGHT.items() for a in answers]
)
def test_notebook_12_exercises_pass_right_answers(name, answer):
    assert verdict(name, answer) == "passed"


@pytest.mark.parametrize(("name", "mistake"), [(n, m) for n, ms in WRONG.items() for m in ms])
def test_notebook_12_exercises_reject_plausible_wrong_answers(name, mistake):
    assert verdict(name, WRONG[name][mistake]) == "failed"


CAUGHT_BY = [
    ("gather_keys", "without_the_transpose", 1, "check the order of the blocks and of the axes"),
    ("gather_keys", "blocks_in_number_order", 1, "check the order"),
    ("gather_keys", "whole_blocks", 1, "expected (h_kv, seq_len, d) = (2, 10, 3), got (2, 12, 3)"),
    ("merge_two", "output_only", 1, "return the tuple (out, lse)"),
    ("merge_two", "shares_without_a_last_axis", 1, "Hint: give each share a last axis of length 1"),
    ("merge_two", "plain_average", 2, "weigh each half by its share"),
    ("merge_two", "lse_of_one_half", 2, "lse must be the log-sum-exp of all the scores"),
    ("merge_two", "by_exp_of_lse", 3, "exp(lse) overflows"),
    ("keep_and_residual", "p_over_q_unclipped", 1, "min(1, p/q) = 1.0, got 2"),
    ("keep_and_residual", "resample_from_p", 2, "got [0.5 0.2 0.2 0.1]"),
    ("keep_and_residual", "residual_not_normalised", 2, "max(0, p - q) normalised"),
    ("keep_and_residual", "residual_the_wrong_way", 2, "where the target has more probability"),
]


@pytest.mark.parametrize(
    ("name", "mistake", "check", "message"), CAUGHT_BY, ids=[c[1] for c in CAUGHT_BY]
)
def test_each_check_of_notebook_12s_exercises_catches_its_own_mistake(
    name, mistake, check, message, capsys
):
    exercises.check(name, WRONG[name][mistake])
    out = capsys.readouterr().out
    total = len(exercises.get(name).checks)
    assert f"check {check} (of {total}) failed" in out and message in out, out


# --- notebook 12's explorers --------------------------------------------------------------------


def test_the_pool_picture_colours_each_held_block_and_counts_the_waste():
    result = pictures.pool_run(4)
    index = next(i for i, h in enumerate(result.history) if sum(1 for o in h.owners if o) >= 3)
    record = result.history[index]
    fig, text = pictures.render_pool(record.step, 4)
    used = sum(1 for o in record.owners if o)
    filled = sum(record.filled)
    assert f"blocks in use {used} of 12 (block_size 4): {filled} of {used * 4} slots" in text
    boxes = fig.axes[0].collections[0]
    partly = sum(1 for o, f in zip(record.owners, record.filled, strict=True) if o and f < 4)
    assert len(boxes.get_paths()) == 12 + partly  # every block, plus the pale end of partial ones
    plt.close("all")


def test_a_preempted_request_is_named_listed_as_waiting_and_drawn_grey_again():
    result = pictures.pool_run(4)
    record = next(h for h in result.history if h.preempted)
    assert (record.step, record.preempted) == (12, [5])  # the step the notebook points at
    fig, text = pictures.render_pool(12, 4)
    assert "preempted here: [5]" in text
    waiting = re.search(r"waiting: \[([\d, ]*)\]", text).group(1)
    assert "5" in waiting.split(", ") and "preempted, to be prefilled again: [5]" in text
    assert "holding blocks: [2, 3, 4]" in text
    # r5 ran at step 11 only, then waits in grey from step 12 until it is prefilled again
    assert pictures.run_spans(result)[5][0] == (11, 12)
    restart = pictures.run_spans(result)[5][1][0]
    bars = fig.axes[1].collections[0]
    grey = [(round(x0), round(x1)) for path, face in zip(bars.get_paths(), bars.get_facecolors(),
                                                         strict=True)
            if np.allclose(face[:3], pictures.FREE) and path.vertices[0, 1] < 5 < path.vertices[2, 1]
            for x0, x1 in [(path.vertices[:, 0].min(), path.vertices[:, 0].max())]]  # fmt: skip
    assert (12, restart) in grey
    plt.close("all")


def test_each_run_span_ends_where_the_request_is_preempted_or_finishes():
    for size in pictures.BLOCK_SIZES:
        result = pictures.pool_run(size)
        spans = pictures.run_spans(result)
        for r in result.requests:
            assert len(spans[r.rid]) == r.preemptions + 1
            assert spans[r.rid][0][0] == r.first_token_step
            assert spans[r.rid][-1][1] == r.finish_step + 1
            ends, starts = [b for _, b in spans[r.rid][:-1]], [a for a, _ in spans[r.rid][1:]]
            assert all(b <= a for b, a in zip(ends, starts, strict=True))  # waits between runs
            assert all(a < b for a, b in spans[r.rid])


def test_the_pool_caption_says_where_the_run_ended_past_its_last_step():
    last = pictures.pool_run(4).history[-1].step
    _, text = pictures.render_pool(pictures.MAX_STEP, 4)
    assert text.startswith(f"step {pictures.MAX_STEP}: the run ended at step {last}")
    assert "blocks in use: none of 12" in text and "0 of 0 slots" not in text
    _, text = pictures.render_pool(6, 4)  # no request in the engine between steps 5 and 8
    assert text.startswith("step 6: nothing to run") and "as step 5 left it" in text
    _, text = pictures.render_pool(last, 4)  # only r9 is left, decoding its last token
    assert "1 token in the forward" in text and "1 tokens" not in text
    plt.close("all")


def test_smaller_blocks_let_the_same_mix_finish_in_fewer_steps():
    steps = [pictures.pool_run(size).steps for size in pictures.BLOCK_SIZES]
    assert steps == sorted(steps) and steps[0] < steps[-1]


def test_the_speculation_picture_shows_each_round_and_counts_its_calls():
    fig, text = pictures.render_speculation(4, "good draft")
    rounds, forwards = pictures.speculation_runs("good draft", 4)
    assert f"24 new tokens in {len(rounds[0])} target calls" in text
    assert f"{sum(forwards)} target calls instead of {pictures.SPEC_PROMPTS * 24}" in text
    assert len(fig.axes[0].collections[0].get_paths()) == sum(
        len(r.proposals) + 1 for r in rounds[0]
    )
    good, poor = pictures.acceptance("good draft", 4), pictures.acceptance("poor draft", 4)
    assert good[0] > poor[0] and good[1] > poor[1]
    plt.close("all")


@pytest.mark.parametrize(
    ("render", "args", "message"),
    [(pictures.render_pool, (71, 4), "step must lie in 0..70, got 71"),
     (pictures.render_pool, (3, 5), r"block_size must be one of \(2, 4, 8, 16\), got 5"),
     (pictures.render_speculation, (9, "good draft"), "num_draft must be one of"),
     (pictures.render_speculation, (2, "no draft"), "draft must be one of")],
)  # fmt: skip
def test_the_serving_pictures_name_the_bad_argument(render, args, message):
    with pytest.raises(ValueError, match=message):
        render(*args)


def test_serving_explorers_redraw_when_driven_headless():
    step = widgets.IntSlider(value=3, min=0, max=pictures.MAX_STEP)
    box = explore(pictures.render_pool, step=step,
                  block_size=widgets.Dropdown(options=pictures.BLOCK_SIZES, value=4))  # fmt: skip
    first = box.image.value
    step.value = 20
    assert box.image.value != first and "step " in box.caption.value
    k = widgets.IntSlider(value=2, min=1, max=8)
    box = explore(pictures.render_speculation, num_draft=k,
                  draft=widgets.ToggleButtons(options=pictures.DRAFTS, value="poor draft"))  # fmt: skip
    first = box.image.value
    k.value = 3
    assert box.image.value != first and "proposals kept" in box.caption.value


# --- silently wrong no more (the serving-hardening probes) --------------------------------------


def test_feed_that_raises_pool_full_leaves_the_sequence_as_it_was():
    model = small_model()
    cache = PagedKVCache(2, 3, 2, 2, 4, torch.float64)
    feed(model, cache, "a", [1, 2, 3])  # blocks 0 and 1, one slot free in block 1
    before = (list(cache.allocator.tables["a"]), cache.allocator.lengths["a"])
    with pytest.raises(PoolFull, match="needs 2 more blocks for 4 tokens, 1 of 3 are free"):
        feed(model, cache, "a", [4, 5, 6, 7])  # one slot left, then one block: not two
    assert (cache.allocator.tables["a"], cache.allocator.lengths["a"]) == before
    assert cache.allocator.num_free == 1
    got = feed(model, cache, "a", [4])  # the next token still sees exactly its 3 predecessors
    torch.testing.assert_close(
        got, model(torch.tensor([[1, 2, 3, 4]]))[0][0, 3:], atol=1e-10, rtol=0
    )


@pytest.mark.parametrize(
    ("start", "stop", "message"),
    [(0, 4, "stop <= the length 3 of sequence 'a', got start 0, stop 4"),
     (-1, 2, "start must be 0 or more, got -1"),
     (2, 1, "0 <= start <= stop <= the length 3")],
)  # fmt: skip
def test_slots_refuse_tokens_past_the_sequence_and_negative_starts(start, stop, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        held_one().slots("a", start, stop)


def packed_call(positions, slots=None, tables=None, tokens=None):
    """packed_forward of a small model over a pool of 4 blocks of 2 slots, block table [0, 1]."""
    cache = PagedKVCache(2, 4, 2, 2, 4, torch.float64)
    n = len(positions)
    tokens = torch.arange(n) if tokens is None else tokens
    slots = torch.arange(n) if slots is None else slots
    tables = torch.tensor([[0, 1]]).expand(n, -1) if tables is None else tables
    return packed_forward(small_model(), tokens, torch.tensor(positions), slots, tables, cache)


def test_packed_forward_refuses_a_position_past_the_table():
    with pytest.raises(ValueError, match=re.escape("positions must lie in 0..max_blocks * block_size - 1 = 3, got [0, 4]")):  # fmt: skip
        packed_call([0, 4])
    with pytest.raises(ValueError, match=re.escape("tables[0, 0] = 9 is past the pool of num_blocks = 4")):  # fmt: skip
        packed_call([0, 1], tables=torch.tensor([[9, 1], [9, 1]]))
    with pytest.raises(ValueError, match=re.escape("slots must lie in 0..num_blocks * block_size - 1 = 7, got [0, -1]")):  # fmt: skip
        packed_call([0, 1], slots=torch.tensor([0, -1]))
    assert packed_call([0, 1, 2, 3]).shape == (4, lm.VOCAB)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_speculative_decoding_refuses_a_target_that_bans_every_token(temperature):
    def banned(tokens):
        return torch.full((1, tokens.shape[1], 4), float("-inf"), dtype=torch.float64)

    with pytest.raises(ValueError, match=r"target returned logits \(1, \d, 4\) that are -inf for every token"):  # fmt: skip
        speculative_decode(banned, table_draft, torch.tensor([[1]]), 3, 2, temperature,
                           torch.Generator().manual_seed(0))  # fmt: skip


def test_merging_chunks_that_have_no_key_gives_zeros_not_nan():
    out = torch.randn(2, 3, 4, dtype=torch.float64)
    none = torch.full((2, 3), float("-inf"), dtype=torch.float64)
    assert torch.equal(
        merge_partials([out, out], [none, none]), torch.zeros(2, 3, 4, dtype=torch.float64)
    )
    nan_out = torch.full_like(out, float("nan"))  # what 0 / 0 gives a chunk with no key
    lse = torch.zeros(2, 3, dtype=torch.float64)
    torch.testing.assert_close(merge_partials([out, nan_out], [lse, none]), out)


@pytest.mark.parametrize(
    ("outs", "lses", "message"),
    [([torch.zeros(2, 3, 4)] * 2, [torch.zeros(2, 3)], "outs must all be (..., T_q, d_v) and lses (..., T_q), one per chunk"),
     ([torch.zeros(2, 3, 4)] * 2, [torch.zeros(1, 3)] * 2, "lses [(1, 3), (1, 3)]"),
     ([torch.zeros(2, 3, 4), torch.zeros(1, 3, 4)], [torch.zeros(2, 3)] * 2, "outs [(2, 3, 4), (1, 3, 4)]"),
     ([], [], "outs must be a non-empty list of tensors, got []")],
    ids=["lists_of_two_lengths", "lses_that_broadcast", "outs_that_broadcast", "empty_lists"],
)  # fmt: skip
def test_merge_partials_refuses_lists_that_do_not_match(outs, lses, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        merge_partials(outs, lses)


P4 = torch.tensor([0.5, 0.2, 0.2, 0.1], dtype=torch.float64)


@pytest.mark.parametrize("fn", [residual, step_distribution], ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("p", "q", "message"),
    [(P4, torch.tensor([0.6, 0.6, -0.3, 0.1], dtype=torch.float64), "q must be a distribution (V,): numbers >= 0 summing to 1, got shape (4,), smallest -0.3"),
     (P4 * 2, P4, "p must be a distribution (V,): numbers >= 0 summing to 1, got shape (4,), smallest 0.2, sum 2"),
     (P4, P4[None], "q must have shape (V,), got shape (1, 4)"),
     (P4, torch.tensor([0.5, 0.5], dtype=torch.float64), "p and q must share one vocabulary: p (4,), q (2,)")],
    ids=["negative", "not_summing_to_one", "two_axes", "two_vocabularies"],
)  # fmt: skip
def test_residual_and_step_distribution_refuse_what_is_not_a_distribution(fn, p, q, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        fn(p, q)


@pytest.mark.parametrize(
    ("call", "message"),
    [(lambda: gather_blocks(POOL, torch.tensor([[-2]]), torch.tensor([3])), "block_tables[0, 0] = -2 is past the pool of num_blocks = 4"),
     (lambda: gather_blocks(POOL, TABLES, torch.tensor([0, 2])), "seq_lens must lie in 1..max_blocks * block_size = 2 * 3 = 6, got [0, 2]"),
     (lambda: gather_blocks(POOL, TABLES, LENS[:1]), "seq_lens and block_tables must share B: seq_lens (1,), block_tables (2, 2)"),
     (lambda: gather_blocks(POOL[0], TABLES, LENS), "cache must have shape (num_blocks, h_kv, block_size, d), got shape (2, 3, 8)"),
     (lambda: slot_weights(Q, POOL, torch.tensor([[-2, 0], [1, 2]]), LENS), "block_tables[0, 0] = -2 is past the pool"),
     (lambda: slot_weights(Q, POOL, TABLES, torch.tensor([0, 2])), "seq_lens must lie in 1..")],
    ids=["gather_a_negative_block", "gather_no_token", "gather_lengths_of_another_batch", "gather_one_layer_too_few", "slot_weights_a_negative_block", "slot_weights_no_token"],
)  # fmt: skip
def test_gather_blocks_and_slot_weights_check_as_paged_attention_does(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def _gather_for_block_size_4(k_cache, table, seq_len):  # the notebook's block size, hard-coded
    keys = k_cache[table[: -(-seq_len // 4)]].transpose(0, 1)
    return keys.reshape(k_cache.shape[1], -1, k_cache.shape[3])[:, :seq_len]


def _gather_for_two_kv_heads(k_cache, table, seq_len):  # the notebook's h_kv, hard-coded
    keys = k_cache[table[: -(-seq_len // k_cache.shape[2])]].transpose(0, 1)
    return keys.reshape(2, -1, k_cache.shape[3])[:, :seq_len]


@pytest.mark.parametrize(
    ("answer", "hint"),
    [(_gather_for_block_size_4, "your answer works for block_size 4 only: read the sizes from k_cache.shape"),
     (_gather_for_two_kv_heads, "your answer works for h_kv 2 only: read the sizes from k_cache.shape")],
    ids=["block_size", "h_kv"],
)  # fmt: skip
def test_the_gather_keys_checker_names_a_hard_coded_size(answer, hint, capsys):
    exercises.check("gather_keys", answer)
    out = capsys.readouterr().out
    assert "check 4 (of 4) failed" in out and hint in out, out


def test_no_request_of_the_pool_picture_is_drawn_in_a_grey():
    """Grey means "waiting" (timeline) and "free" (pool): no request may look like either."""
    colours = [tuple(c) for c in pictures.request_colours()]
    assert len(colours) == pictures.POOL_REQUESTS == len(set(colours))
    assert all(np.ptp(colour) > 0.1 for colour in colours), colours  # r = g = b is a grey
