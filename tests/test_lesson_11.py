"""Notebook 11's helpers: tensor-parallel and ring attention over real torch.distributed processes.

Each spawned run costs a few seconds (every process imports torch), so the table of runs is
short and each row varies several things at once: world size, mask, dtype, layout.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import ipywidgets as widgets
import process_tools
import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT
from notebook_tools import verdict

from helpers import masks, parallel, parallel_api
from helpers import torch_attention as ta
from helpers.kit import exercises
from helpers.kit.explorer import explore
from helpers.lessons.nb11 import demo as parallel_demo
from helpers.lessons.nb11 import explorers as parallel_layout

TOL = {torch.float64: 1e-12, torch.float32: 1e-5}


def module_and_input(dtype, bias=True):
    torch.manual_seed(0)
    module = ta.FusedMultiHeadAttention(16, 4, bias=bias).to(dtype)
    return module, torch.randn(2, 7, 16, dtype=dtype)


@pytest.mark.parametrize(
    ("world_size", "dtype", "is_causal", "padded"),
    [
        (2, torch.float64, True, False),
        (4, torch.float64, False, True),
        (2, torch.float32, True, True),
    ],
    ids=["2-f64-causal", "4-f64-padding", "2-f32-causal-padding"],
)
def test_tensor_parallel_attention_equals_one_process(world_size, dtype, is_causal, padded):
    module, x = module_and_input(dtype)
    mask = torch.from_numpy(masks.key_mask(masks.padding_mask([7, 4], 7))) if padded else None
    with torch.no_grad():
        expected, _ = module(x, mask=mask, is_causal=is_causal)
    out = parallel.tensor_parallel_forward(module, x, world_size, is_causal=is_causal, mask=mask)
    torch.testing.assert_close(out, expected, rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize(
    ("world_size", "dtype", "is_causal", "layout"),
    [
        (2, torch.float64, True, "contiguous"),
        (4, torch.float64, False, "contiguous"),
        (4, torch.float32, True, "zigzag"),
    ],
    ids=["2-f64-causal", "4-f64", "4-f32-causal-zigzag"],
)
def test_ring_attention_equals_sdpa_on_the_whole_sequence(world_size, dtype, is_causal, layout):
    gen = torch.Generator().manual_seed(world_size)
    q, k, v = (
        torch.randn(2, 3, 11, 8, generator=gen, dtype=dtype) for _ in range(3)
    )  # 11 % n != 0
    out = parallel.ring_attention_forward(q, k, v, world_size, is_causal, layout)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    torch.testing.assert_close(out, expected, rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("world_size", [2, 4])
def test_tensor_parallel_gives_each_rank_its_own_heads_of_a_per_head_mask(world_size):
    module, x = module_and_input(torch.float64)  # h = 4, T = 7
    mask = torch.rand(2, 4, 7, 7, generator=torch.Generator().manual_seed(7)) > 0.4
    mask[:, 1, 3] = False  # one query of head 1 sees no key: zeros, on one process or many
    with torch.no_grad():
        expected, _ = module(x, mask=mask)
    out = parallel.tensor_parallel_forward(module, x, world_size, mask=mask)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    if world_size == 2:  # PyTorch's plan alike (as notebook 11 runs it; 4 DTensor ranks on
        # gloo have aborted now and then in PyTorch itself: SIGABRT, no Python error)
        by_plan = parallel_api.torch_tensor_parallel_forward(module, x, world_size, mask=mask)
        torch.testing.assert_close(by_plan, expected, rtol=0, atol=1e-12)


def test_ring_attention_takes_inputs_that_require_grad_and_returns_the_forward_pass():
    gen = torch.Generator().manual_seed(6)
    leaves = [torch.randn(1, 2, 6, 4, generator=gen, dtype=torch.float64, requires_grad=True)
              for _ in range(3)]  # fmt: skip
    q, k, v = (leaf * 1.0 for leaf in leaves)  # not leaves: what a model's layer hands on
    out = parallel.ring_attention_forward(q, k, v, 2)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v).detach())
    assert not out.requires_grad


def fail_on_rank_one(rank, world_size):
    """A worker that breaks on one rank while the other waits in a collective."""
    if rank == 1:
        raise ValueError("rank 1 was told to fail")
    tensor = torch.ones(3)
    parallel.dist.all_reduce(tensor)
    return tensor


def test_a_worker_that_raises_gives_a_clear_error_promptly_and_leaves_nothing_running():
    start = time.monotonic()
    with pytest.raises(
        RuntimeError, match=r"worker 1 of 2 failed: ValueError: rank 1 was told to fail"
    ):
        parallel.spawn(fail_on_rank_one, 2, ())
    assert time.monotonic() - start < 60


def test_the_shards_hold_each_ranks_heads_and_add_up_to_the_whole_layer():
    module, _ = module_and_input(torch.float64)
    shards = parallel.tensor_parallel_shards(module, 2)
    w_q, w_k, w_v = module.qkv_proj.weight.detach().chunk(3)
    for r, shard in enumerate(shards):
        rows = slice(8 * r, 8 * r + 8)  # heads 2r and 2r + 1, d_k = 4 each
        torch.testing.assert_close(
            shard["qkv_weight"], torch.cat((w_q[rows], w_k[rows], w_v[rows]))
        )
        assert shard["out_weight"].shape == (16, 8)
    rebuilt = torch.cat([s["out_weight"] for s in shards], dim=1)
    torch.testing.assert_close(rebuilt, module.out_proj.weight.detach())


def test_pytorchs_tensor_parallel_plan_equals_one_process_and_the_split_by_hand():
    module, x = module_and_input(torch.float64)
    mask = torch.from_numpy(masks.key_mask(masks.padding_mask([7, 4], 7)))
    with torch.no_grad():
        expected, _ = module(x, mask=mask, is_causal=True)
    out = parallel_api.torch_tensor_parallel_forward(module, x, 2, is_causal=True, mask=mask)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
def test_rank_ordered_rows_put_each_ranks_shard_in_its_colwise_block(bias):
    module, x = module_and_input(torch.float64, bias=bias)
    ordered = parallel_api.rank_ordered_copy(module, 4)
    blocks = ordered.qkv_proj.weight.detach().chunk(4)  # what ColwiseParallel hands out
    for shard, block in zip(parallel.tensor_parallel_shards(module, 4), blocks, strict=True):
        torch.testing.assert_close(block, shard["qkv_weight"], rtol=0, atol=0)
    if bias:
        for shard, b in zip(parallel.tensor_parallel_shards(module, 4),
                            ordered.qkv_proj.bias.detach().chunk(4), strict=True):  # fmt: skip
            torch.testing.assert_close(b, shard["qkv_bias"], rtol=0, atol=0)
    torch.testing.assert_close(ordered.out_proj.weight, module.out_proj.weight, rtol=0, atol=0)
    assert module.qkv_proj.weight.data_ptr() != ordered.qkv_proj.weight.data_ptr()  # a copy


def causal_pairs(blocks):
    """How many (query, key) pairs each rank computes under a causal mask."""
    return [
        int(sum((other[None, :] <= mine[:, None]).sum() for other in blocks)) for mine in blocks
    ]


def test_zigzag_blocks_cover_the_sequence_and_even_out_the_causal_work():
    contiguous, zigzag = (
        parallel.sequence_blocks(16, 4, layout) for layout in ("contiguous", "zigzag")
    )
    for blocks in (contiguous, zigzag):
        assert sorted(torch.cat(blocks).tolist()) == list(range(16))
    assert causal_pairs(contiguous) == [10, 26, 42, 58]  # the last rank works 5.8x the first
    assert len(set(causal_pairs(zigzag))) == 1  # 34 pairs each


def test_merging_two_key_blocks_with_their_max_and_sum_is_exact_attention():
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 6, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    state = (torch.full((1, 2, 6), float("-inf"), dtype=torch.float64),
             torch.zeros(1, 2, 6, dtype=torch.float64), torch.zeros(1, 2, 6, 4, dtype=torch.float64))  # fmt: skip
    for block in (slice(0, 2), slice(2, 6)):
        state = parallel.merge_block(*state, q / 2.0, k[..., block, :], v[..., block, :])
    m, total, acc = state
    torch.testing.assert_close(acc / total[..., None], F.scaled_dot_product_attention(q, k, v))


BAD = {
    "a_world_size_that_does_not_divide_the_heads": (
        lambda: parallel.tensor_parallel_forward(*module_and_input(torch.float64), world_size=3),
        ValueError,
        "world_size=3 must divide the module's num_heads=4",
    ),
    "more_blocks_than_tokens": (
        lambda: parallel.sequence_blocks(5, 3, "zigzag"),
        ValueError,
        "T=5 tokens are too few for world_size=3: the zigzag layout cuts T into 2 x 3 = 6 chunks",
    ),
    "an_unknown_layout": (
        lambda: parallel.sequence_blocks(8, 2, "striped"),
        ValueError,
        "layout must be 'contiguous' or 'zigzag', got 'striped'",
    ),
    "queries_and_keys_of_different_lengths": (
        lambda: parallel.ring_attention_forward(*(torch.ones(1, 1, n, 4) for n in (3, 5, 5))),
        ValueError,
        r"the same T, got q \(1, 1, 3, 4\), k \(1, 1, 5, 4\)",
    ),
    "x_of_the_wrong_width": (
        lambda: parallel.tensor_parallel_forward(
            module_and_input(torch.float64)[0], torch.ones(1, 2, 4)
        ),
        ValueError,
        r"x has D=4 but the module has d_model=",
    ),
    "a_linear_layer_for_the_module": (
        lambda: parallel.tensor_parallel_forward(torch.nn.Linear(4, 4), torch.ones(1, 2, 4)),
        TypeError,
        "module must be a FusedMultiHeadAttention, got Linear",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_to_the_parallel_helpers_gets_a_clear_error(case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message):
        call()


# --- notebook 11's exercises ------------------------------------------------------------------


def right_shard(weight, num_heads, rank, world_size):
    width = weight.shape[1] // world_size
    rows = slice(rank * width, (rank + 1) * width)
    w_q, w_k, w_v = weight.chunk(3)
    return torch.cat((w_q[rows], w_k[rows], w_v[rows]))


def right_merge(out_a, m_a, l_a, out_b, m_b, l_b):
    m = torch.maximum(m_a, m_b)
    w_a, w_b = l_a * torch.exp(m_a - m), l_b * torch.exp(m_b - m)
    return (out_a * w_a[..., None] + out_b * w_b[..., None]) / (w_a + w_b)[..., None], m, w_a + w_b


def right_block_pair(queries, keys):
    if keys.min() > queries.max():
        return "skip"
    return "full" if keys.max() <= queries.min() else "partial"


RIGHT = {
    "shard_qkv_weight": right_shard,
    "merge_partials": right_merge,
    "causal_block_pair": right_block_pair,
}


def test_notebook_11_has_three_exercises_that_reject_a_stub_and_pass_a_right_answer():
    assert sorted(e.name for e in exercises.for_notebook("11")) == sorted(RIGHT)
    for name, right in RIGHT.items():

        def stub(*args):
            raise NotImplementedError

        assert verdict(name, stub) == "not attempted"
        assert verdict(name, right) == "passed", name


def test_shard_exercise_rejects_one_contiguous_slice_of_the_fused_weight(capsys):
    def one_slice(weight, num_heads, rank, world_size):  # rank 0 would get only Q rows
        rows = weight.shape[0] // world_size
        return weight[rank * rows : (rank + 1) * rows]

    exercises.check("shard_qkv_weight", one_slice)
    assert exercises.RESULTS["shard_qkv_weight"] == "failed"
    assert "your rows are one slice of the fused weight" in capsys.readouterr().out


def test_merge_exercise_rejects_sums_that_were_not_rescaled_to_the_new_max(capsys):
    def unscaled(out_a, m_a, l_a, out_b, m_b, l_b):
        total = l_a + l_b  # forgets that l_a and l_b were taken against different maxima
        out = (out_a * l_a[..., None] + out_b * l_b[..., None]) / total[..., None]
        return out, torch.maximum(m_a, m_b), total

    exercises.check("merge_partials", unscaled)
    assert exercises.RESULTS["merge_partials"] == "failed"
    assert "check 2 (of 3) failed" in capsys.readouterr().out


def test_merge_exercise_rejects_a_right_output_with_an_unscaled_sum(capsys):
    def stale_sum(out_a, m_a, l_a, out_b, m_b, l_b):  # out and m right, l not rescaled
        out, m, _ = right_merge(out_a, m_a, l_a, out_b, m_b, l_b)
        return out, m, l_a + l_b

    exercises.check("merge_partials", stale_sum)
    assert exercises.RESULTS["merge_partials"] == "failed"
    assert "l is not the sum of exp(score - m) over both blocks" in capsys.readouterr().out


def test_merge_exercise_rejects_a_merge_that_divides_by_a_block_that_saw_no_key(capsys):
    def relative_to_b(out_a, m_a, l_a, out_b, m_b, l_b):  # right unless l_b = 0, m_b = -inf
        m = torch.maximum(m_a, m_b)
        ratio = l_a / l_b * torch.exp(m_a - m_b)  # a's weight relative to b's
        out = (out_b + out_a * ratio[..., None]) / (1 + ratio)[..., None]
        return out, m, l_a * torch.exp(m_a - m) + l_b * torch.exp(m_b - m)

    exercises.check("merge_partials", relative_to_b)
    assert exercises.RESULTS["merge_partials"] == "failed"
    assert "check 3 (of 3) failed" in capsys.readouterr().out


def test_block_pair_exercise_rejects_a_strict_rule_for_a_full_pair(capsys):
    def strict(queries, keys):  # key 5 may be seen by query 5: `<` calls that pair partial
        if keys.min() > queries.max():
            return "skip"
        return "full" if keys.max() < queries.min() else "partial"

    exercises.check("causal_block_pair", strict)
    assert exercises.RESULTS["causal_block_pair"] == "failed"
    assert "query 5, key 5: expected 'full', got 'partial'" in capsys.readouterr().out


# --- notebook 11's explorers ------------------------------------------------------------------


@pytest.mark.parametrize(("num_heads", "world_size"), [(4, 2), (8, 4), (6, 3), (2, 1)])
def test_head_owners_are_read_from_the_shards_and_give_each_rank_whole_heads(num_heads, world_size):
    rows, columns = parallel_layout.head_owners(num_heads, world_size)
    D, width = num_heads * parallel_layout.D_K, num_heads * parallel_layout.D_K // world_size
    assert rows.shape == (3 * D,) and columns.shape == (D,)
    expected = torch.arange(D) // width  # in every block, feature f belongs to rank f // width
    assert rows.tolist() == expected.repeat(3).tolist()
    assert columns.tolist() == expected.tolist()


def test_heads_picture_says_what_each_rank_holds():
    fig, text = parallel_layout.render_heads_split(4, 2)
    assert "rank 1: heads 2-3; qkv_proj rows 4-7, 12-15, 20-23; out_proj columns 4-7" in text
    assert "128 of 256 weights" in text and len(fig.axes) == 2


def test_ring_schedule_passes_blocks_on_and_skips_causal_pairs_with_nothing_allowed():
    schedule = parallel_layout.ring_schedule(4, 2, "contiguous", True)
    assert schedule["holds"] == [3, 0, 1, 2]
    assert schedule["sends"] == [(0, 1, 3), (1, 2, 0), (2, 3, 1), (3, 0, 2)]
    assert schedule["skipped"] == [0] and schedule["pairs_so_far"] == [10, 26, 26, 26]
    last = parallel_layout.ring_schedule(4, 4, "contiguous", True)
    assert last["sends"] == [] and last["pairs_so_far"] == [10, 26, 42, 58]
    zigzag = parallel_layout.ring_schedule(4, 4, "zigzag", True)
    assert zigzag["pairs_so_far"] == [34, 34, 34, 34] and zigzag["skipped"] == []
    no_mask = parallel_layout.ring_schedule(2, 2, "contiguous", False)
    assert no_mask["pairs_so_far"] == [128, 128]


def test_ring_picture_says_who_holds_and_sends_what():
    fig, text = parallel_layout.render_ring(4, 2, "contiguous", True)
    assert "rank 0: queries 0-3; holds K,V block 3 (12-15), skips it" in text
    assert (
        "rank 1: queries 4-7; holds K,V block 0 (0-3), computes 16 allowed pairs; sends K,V 0"
        in text
    )
    assert len(fig.axes) == 3
    _, text = parallel_layout.render_ring(4, 4, "zigzag", True)
    assert "sends" not in text.split("\n", 1)[1] and "[34, 34, 34, 34]" in text


def test_spans_writes_positions_as_short_ranges():
    assert parallel_layout.spans([0, 1, 2, 14, 15]) == "0-2, 14-15"
    assert parallel_layout.spans(torch.tensor([7])) == "7"


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: parallel_layout.render_heads_split(6, 4), ValueError,
         "world_size=4 must divide num_heads=6: each rank holds whole heads"),
        (lambda: parallel_layout.render_ring(4, 5, "zigzag", True), ValueError,
         "step=5, but with 4 ranks the ring takes 4 steps: pick a step from 1 to 4"),
        (lambda: parallel_layout.render_ring(4, 1, "striped", True), ValueError,
         "layout must be one of ('contiguous', 'zigzag'), got 'striped'"),
        (lambda: parallel_layout.render_ring(4, 1, "zigzag", 1), TypeError, "is_causal"),
        (lambda: parallel_layout.render_heads_split(4.0, 2), TypeError, "num_heads must be an int"),
    ],
    ids=["heads-not-divisible", "step-past-the-ring", "unknown-layout", "causal-not-bool",
         "heads-a-float"],
)  # fmt: skip
def test_the_explorers_name_the_bad_argument(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_heads_explorer_redraws_when_driven_headless():
    heads = widgets.Dropdown(options=parallel_layout.HEAD_COUNTS, value=8)
    ranks = widgets.Dropdown(options=parallel_layout.WORLD_SIZES, value=4)
    box = explore(parallel_layout.render_heads_split, num_heads=heads, world_size=ranks)
    first = box.image.value
    assert "4 ranks of 2 heads each" in box.caption.value
    ranks.value = 2
    assert box.image.value != first and "2 ranks of 4 heads each" in box.caption.value
    heads.value = 6
    ranks.value = 4
    assert "must divide num_heads=6" in box.caption.value


def test_ring_explorer_steps_and_its_slider_stops_at_the_number_of_ranks():
    ranks = widgets.Dropdown(options=[2, 3, 4, 8], value=4)
    step = widgets.IntSlider(value=4, min=1, max=4)
    widgets.dlink((ranks, "value"), (step, "max"))  # as the notebook wires it
    layout = widgets.ToggleButtons(options=parallel_layout.LAYOUTS, value="contiguous")
    causal = widgets.Checkbox(value=True)
    box = explore(parallel_layout.render_ring, world_size=ranks, step=step, layout=layout,
                  is_causal=causal)  # fmt: skip
    assert "[10, 26, 42, 58]" in box.caption.value
    first = box.image.value
    layout.value = "zigzag"
    assert box.image.value != first and "[34, 34, 34, 34]" in box.caption.value
    ranks.value = 2
    assert step.value == 2 and "step 2 of 2" in box.caption.value


# --- the failing worker of section 6 ----------------------------------------------------------


def test_the_notebooks_failing_worker_reports_its_own_rank_and_leaves_nothing_running():
    """Rank 0 sleeps instead of waiting in a collective, so the error is always rank 1's."""
    start = time.monotonic()
    with pytest.raises(
        RuntimeError, match=r"^worker 1 of 2 failed: ValueError: rank 1 stopped on purpose$"
    ):
        parallel.spawn(parallel_demo.fail_on_rank, 2, (1,))
    assert time.monotonic() - start < 45, "rank 0 was left to sleep out its minute"
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize(
    ("bad_rank", "error", "message"),
    [
        (2, ValueError, "bad_rank must lie in 0..1, got 2"),
        ("1", TypeError, "bad_rank must be an int"),
    ],
)
def test_the_failing_worker_checks_its_arguments(bad_rank, error, message):
    with pytest.raises(error, match=re.escape(message)):
        parallel_demo.fail_on_rank(0, 2, bad_rank)


# --- the launcher and the processes it starts ---------------------------------------------------


def test_a_worker_defined_in_a_notebook_cell_is_refused_saying_where_to_put_it(monkeypatch):
    """In a notebook, __main__ has no file: a spawned process cannot import what a cell defined."""
    main = sys.modules["__main__"]
    monkeypatch.delattr(main, "__file__", raising=False)

    def work(rank, world_size):
        return torch.tensor([rank])

    work.__module__, work.__qualname__ = "__main__", "work"
    monkeypatch.setattr(main, "work", work, raising=False)  # as a cell leaves it
    with pytest.raises(ValueError, match=r"worker work is defined in a notebook cell.*"
                                         r"put work in a \.py file beside the notebook"):  # fmt: skip
        parallel.spawn(work, 2, ())


def test_a_script_without_the_main_guard_is_told_to_add_it(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import torch\nfrom helpers import parallel\n\n\n"
        "def work(rank, world_size):\n    return torch.tensor([rank])\n\n\n"
        "parallel.spawn(work, 2, ())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)  # fmt: skip
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1, done.stderr
    assert re.fullmatch(r"RuntimeError: worker \d of 2 failed: its process did not start: .*", last)
    assert 'put the call under `if __name__ == "__main__":`' in last, last


def test_a_worker_that_returns_no_tensor_is_named():
    with pytest.raises(RuntimeError, match=r"^worker \d of 2 failed: TypeError: a worker must "
                                           r"return a torch\.Tensor, got NoneType$"):  # fmt: skip
        parallel.spawn(process_tools.returns_nothing, 2, ())


@pytest.mark.parametrize(
    ("how", "quitter", "message"),
    [
        ("exit3", 0, "worker 0 of 2 ended with exit code 3 before returning a result"),
        ("os_exit7", 1, "worker 1 of 2 ended with exit code 7 before returning a result"),
        ("sigkill", 0, "worker 0 of 2 ended by signal SIGKILL before returning a result"),
        ("exit0", 1, "worker 1 of 2 ended without returning a result"),
        ("interrupt", 0, "worker 0 of 2 ended without returning a result"),
    ],
)
def test_a_worker_that_ends_without_raising_is_named_not_its_peers_broken_connection(
    how, quitter, message
):
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        parallel.spawn(process_tools.ends_without_raising, 2, (how, quitter))
    assert time.monotonic() - start < 60
    assert multiprocessing.active_children() == []


def test_a_worker_that_ends_cleanly_without_a_result_is_named():
    with pytest.raises(RuntimeError, match=r"^worker 0 of 2 ended without returning a result$"):
        parallel.spawn(process_tools.quits_alone, 2, ())
    assert multiprocessing.active_children() == []


def test_a_crash_after_every_result_was_returned_warns_and_gives_the_results():
    with pytest.warns(RuntimeWarning, match="worker 1 of 2 ended with signal SIGABRT after"):
        results = parallel.spawn(process_tools.aborts_after_returning, 2, ())
    assert [r.item() for r in results] == [0.0, 1.0]
    assert multiprocessing.active_children() == []


def test_a_worker_that_ends_its_own_process_group_returns_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = parallel.spawn(process_tools.ends_its_own_group, 2, ())
    assert [r.item() for r in results] == [0.0, 1.0]


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds processes in /proc")
@pytest.mark.parametrize("moment", ["starting", "running"])
def test_workers_end_with_the_caller_when_it_is_killed(tmp_path, moment):
    """Kill the process that called spawn while its workers import torch, or while they hang
    (one in a collective, one asleep): within seconds no process it started is left."""
    token = f"{moment}-{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, process_tools.TOKEN: token,
           "PYTHONPATH": os.pathsep.join((str(ROOT), str(ROOT / "tests")))}  # fmt: skip
    code = (f"from helpers import parallel; import process_tools; "
            f"parallel.spawn(process_tools.hang, 2, ({str(tmp_path)!r},))")  # fmt: skip
    caller = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        if moment == "starting":  # both workers exist, neither has reached the worker yet
            started = process_tools.wait_until(
                lambda: sum("spawn_main" in c for c in process_tools.marked(token).values()) == 2,
                120,
            )
            assert started and not list(tmp_path.glob("*.running"))
        else:
            assert process_tools.wait_until(lambda: len(list(tmp_path.glob("*.running"))) == 2, 120)
        caller.kill()
        caller.wait()
        gone = process_tools.wait_until(lambda: not process_tools.marked(token), 30)
        assert gone, f"still running after the caller was killed: {process_tools.marked(token)}"
    finally:
        caller.kill()
        process_tools.kill_marked(token)
