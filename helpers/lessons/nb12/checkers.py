"""Exercises of notebook 12: the block-table gather, the log-sum-exp merge, the acceptance rule.

The checks compare with independent computations: keys copied token by token from
``block * block_size + offset``, attention over all keys at once written out with a softmax,
and the exact distribution of one speculative token summed over every draft token.
"""

from __future__ import annotations

import math

import torch

from helpers.kit.exercises import Slip, assert_shape, exercise


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _keys_by_hand(k_cache: torch.Tensor, table: list[int], seq_len: int) -> torch.Tensor:
    """Token t from block table[t // size], offset t % size, one token at a time: (h_kv, T, d)."""
    size = k_cache.shape[2]
    return torch.stack([k_cache[table[t // size], :, t % size] for t in range(seq_len)], dim=1)


@exercise(
    "gather_keys",
    notebook="12",
    hint="Token t lives in block block_table[t // block_size], at offset t % block_size. Take "
    "the blocks the sequence uses from the pool, in the table's order; for each KV head, lay "
    "their slots end to end (a reshape merges two axes only when they sit next to each other); "
    "then keep the first seq_len tokens.",
)
def _gather_keys():
    num_blocks, h_kv, size, d = 9, 2, 4, 3
    k_cache = _randn(num_blocks, h_kv, size, d, seed=120)

    def returns_the_sequences_keys_in_order(fn):
        table = torch.tensor([6, 2, 7, -1, -1])  # 3 blocks in use, then padding
        got = fn(k_cache, table, 10)
        assert_shape(got, (h_kv, 10, d), "(h_kv, seq_len, d)")
        assert torch.equal(got, _keys_by_hand(k_cache, [6, 2, 7], 10)), (
            "token t must come from block block_table[t // block_size], slot t % block_size; "
            "check the order of the blocks and of the axes"
        )

    def follows_the_table_not_the_block_numbers(fn):
        table = torch.tensor([8, 0, 5])
        got = fn(k_cache, table, 12)
        assert torch.equal(got, _keys_by_hand(k_cache, [8, 0, 5], 12)), (
            "blocks 8, 0, 5 in that order: a block's number says where it is, not where its "
            "tokens come in the sequence"
        )

    def stops_at_seq_len(fn):
        for seq_len, table in ((1, [3, -1]), (4, [3, -1]), (5, [3, 1]), (7, [4, 1, -1])):
            got = fn(k_cache, torch.tensor(table), seq_len)
            assert_shape(got, (h_kv, seq_len, d), "(h_kv, seq_len, d)")
            assert torch.equal(got, _keys_by_hand(k_cache, table, seq_len)), (
                f"seq_len = {seq_len}, block_table {table}: the keys differ"
            )

    def reads_the_sizes_from_k_cache(fn):
        for other in ((12, 2, 4, 3), (9, 2, 3, 3), (9, 3, 4, 3), (9, 2, 4, 5)):  # one size each
            pool = _randn(*other, seed=125)
            table, seq_len = [5, 0, 2], 2 * other[2] + 1  # 3 blocks, the last one partly filled
            want = _keys_by_hand(pool, table, seq_len)
            try:
                got = fn(pool, torch.tensor(table), seq_len)
                right = tuple(got.shape) == tuple(want.shape) and torch.equal(got, want)
            except Exception as error:  # a reshape to the notebook's sizes fails on another pool
                got, right = error, False
            if not right:
                fixed = [f"{name} {mine}" for name, mine, theirs in zip(
                    ("num_blocks", "h_kv", "block_size", "d"), (num_blocks, h_kv, size, d), other,
                    strict=True) if mine != theirs]  # fmt: skip
                raise Slip(
                    f"on a pool of (num_blocks, h_kv, block_size, d) = {other} (the notebook's is "
                    f"{(num_blocks, h_kv, size, d)}), block_table {table}, seq_len {seq_len}: "
                    f"{'the keys differ' if isinstance(got, torch.Tensor) else got!r}",
                    f"your answer works for {', '.join(fixed)} only: read the sizes from "
                    "k_cache.shape (num_blocks, h_kv, block_size, d), not from the notebook's pool.",
                )

    return [
        ("the keys of 10 tokens in 3 blocks, in order", returns_the_sequences_keys_in_order),
        ("blocks come in the table's order", follows_the_table_not_the_block_numbers),
        ("a partly filled last block and -1 padding", stops_at_seq_len),
        ("pools of other sizes: the sizes come from k_cache", reads_the_sizes_from_k_cache),
    ]


def _attention_and_lse(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v, torch.logsumexp(scores, dim=-1)


def _call_merge(fn, *args):
    """``fn(*args)``, with a shape clash between a share and an output named as the slip it is."""
    try:
        return fn(*args)
    except RuntimeError as error:
        if "must match the size of tensor" not in str(error):
            raise
        out_shape, lse_shape = tuple(args[0].shape), tuple(args[1].shape)
        raise Slip(
            f"{type(error).__name__}: {error}. A share has the shape of lse, {lse_shape} "
            f"(..., T_q), an output {out_shape} (..., T_q, d): multiplied as they are, the shares "
            "line up with the last axis, d, not with the queries",
            "give each share a last axis of length 1, share[..., None] (..., T_q, 1), so that "
            "one number multiplies the whole output row of its query.",
        ) from error


@exercise(
    "merge_two",
    notebook="12",
    hint="Each half's output is already averaged over its own keys. Weigh it by the share of "
    "the whole softmax mass that its keys hold: exp(lse) is a half's mass, so the merged lse is "
    "the log of the two masses added, and a half's share is a difference of log-sum-exps, "
    "exponentiated. Work with differences only: exp of a large lse overflows.",
)
def _merge_two():
    T_q, T_k, d = 3, 10, 4
    q, k, v = _randn(2, T_q, d, seed=121), _randn(2, T_k, d, seed=122), _randn(2, T_k, d, seed=123)

    def halves(q, k, v, cut):
        a = _attention_and_lse(q, k[..., :cut, :], v[..., :cut, :])
        b = _attention_and_lse(q, k[..., cut:, :], v[..., cut:, :])
        return (*a, *b)

    def returns_output_and_lse(fn):
        result = _call_merge(fn, *halves(q, k, v, 4))
        assert isinstance(result, tuple) and len(result) == 2, "return the tuple (out, lse)"
        assert_shape(result[0], (2, T_q, d), "(..., T_q, d)", name="out")
        assert_shape(result[1], (2, T_q), "(..., T_q)", name="lse")

    def equals_attention_over_all_keys(fn):
        want_out, want_lse = _attention_and_lse(q, k, v)
        for cut in (1, 4, 9):
            out, lse = fn(*halves(q, k, v, cut))
            assert torch.allclose(out, want_out, atol=1e-12), (
                f"keys cut after {cut}: out differs from attention over all keys by "
                f"{(out - want_out).abs().max().item():.2g}; weigh each half by its share of "
                "the softmax mass, exp(lse_half - lse)"
            )
            assert torch.allclose(lse, want_lse, atol=1e-12), (
                "lse must be the log-sum-exp of all the scores, log(exp(lse_a) + exp(lse_b))"
            )

    def survives_huge_scores(fn):
        big_q = q * 400  # scores in the thousands: exp(lse) overflows, exp(lse_a - lse) does not
        out, lse = fn(*halves(big_q, k, v, 5))
        want_out, want_lse = _attention_and_lse(big_q, k, v)
        assert torch.isfinite(out).all() and torch.isfinite(lse).all(), (
            "scores in the thousands gave inf or NaN: exp(lse) overflows, use differences"
        )
        assert torch.allclose(out, want_out, atol=1e-10), "large scores: out is wrong"

    return [
        ("returns (out, lse) of the right shapes", returns_output_and_lse),
        ("merging two halves equals attention over all keys", equals_attention_over_all_keys),
        ("scores in the thousands do not overflow", survives_huge_scores),
    ]


def _distribution_of_one_token(fn, p, q):
    """Sum over every draft token x: q(x) * (keep it, or draw from the residual instead)."""
    out = torch.zeros_like(p)
    for x in range(len(p)):
        keep, residual = fn(p, q, x)
        out[x] += q[x] * keep
        out += q[x] * (1 - keep) * torch.as_tensor(residual, dtype=p.dtype)
    return out


@exercise(
    "keep_and_residual",
    notebook="12",
    hint="A token the draft offers more often than the target wants must be kept only part of "
    "the time, so that it comes out exactly as often as the target would write it; one it "
    "offers less often is always kept. A rejection then frees probability, and the replacement "
    "must hand it to the tokens the draft under-offers, in proportion to how much each is short. "
    "Return (keep, residual).",
)
def _keep_and_residual():
    p = torch.tensor([0.5, 0.2, 0.2, 0.1], dtype=torch.float64)
    q = torch.tensor([0.25, 0.5, 0.15, 0.1], dtype=torch.float64)

    def keeps_with_probability_min_one_p_over_q(fn):
        for token, want in ((0, 1.0), (1, 0.4), (2, 1.0), (3, 1.0)):
            keep, _ = fn(p, q, token)
            assert math.isclose(float(keep), want, abs_tol=1e-12), (
                f"p = {p.tolist()}, q = {q.tolist()}, token {token}: keep it with probability "
                f"min(1, p/q) = {want}, got {float(keep):.4g}"
            )

    def resamples_where_the_target_wants_more(fn):
        _, residual = fn(p, q, 1)
        want = torch.tensor([0.25, 0.0, 0.05, 0.0], dtype=torch.float64) / 0.3
        got = torch.as_tensor(residual, dtype=torch.float64)
        assert_shape(got, (4,), "(V,)", name="residual")
        assert torch.allclose(got, want, atol=1e-12), (
            f"residual must be max(0, p - q) normalised, {want.numpy().round(3)}, "
            f"got {got.numpy().round(3)}: a rejection only ever takes probability away from "
            "tokens the draft offers more than the target wants (p < q), so the replacement "
            "must give it back where the target has more probability than the draft (p > q), "
            "each in proportion to p - q, and nothing elsewhere"
        )

    def every_token_is_distributed_as_the_target(fn):
        for seed in range(5):
            p_, q_ = (torch.softmax(_randn(6, seed=130 + 2 * seed + i) * 2, 0) for i in range(2))
            got = _distribution_of_one_token(fn, p_, q_)
            assert torch.allclose(got, p_, atol=1e-12), (
                f"one speculative token is distributed as {got.numpy().round(3)}, the target's "
                f"p is {p_.numpy().round(3)}"
            )

    return [
        (
            "keep the draft's token with probability min(1, p/q)",
            keeps_with_probability_min_one_p_over_q,
        ),
        ("on rejection, draw from max(0, p - q) normalised", resamples_where_the_target_wants_more),
        ("the token that comes out is distributed as p", every_token_is_distributed_as_the_target),
    ]
