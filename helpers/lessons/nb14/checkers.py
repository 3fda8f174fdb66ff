"""Exercises of notebook 14: the chained block hash, the longest cached prefix, a step's plan.

The checks compare with independent computations: prefixes compared token by token (two hashes
must agree exactly when the prefixes do), and each step's plan written out as the rule says it.
"""

from __future__ import annotations

from helpers.kit.exercises import Slip, exercise
from helpers.serving.prefix import block_hashes

TOKENS = [5, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]


@exercise(
    "chained_hashes",
    notebook="14",
    hint="Walk the full blocks in order, tokens[j * block_size : (j + 1) * block_size] for j "
    "in range(len(tokens) // block_size). Block j's hash is chain_hash(previous, block), "
    "where previous is block j - 1's hash (0 before the first block).",
)
def _chained_hashes():
    def one_hash_per_full_block(fn):
        for size in (1, 2, 3, 4, 11, 12):
            got = list(fn(TOKENS, size))
            assert len(got) == len(TOKENS) // size, (
                f"{len(TOKENS)} tokens in blocks of {size}: {len(TOKENS) // size} full blocks, "
                f"so {len(TOKENS) // size} hashes, got {len(got)} (a partial block has none)"
            )

    def the_course_hashes(fn):
        got = list(fn(TOKENS, 3))
        assert got == block_hashes(TOKENS, 3), (
            f"tokens {TOKENS}, block_size 3: expected {block_hashes(TOKENS, 3)}, got {got}"
        )

    def equal_exactly_when_the_prefixes_are(fn):
        a, b = [1, 2, 3, 7, 8, 9], [4, 5, 6, 7, 8, 9]  # block 1 alike, what comes before not
        ha, hb = list(fn(a, 3)), list(fn(b, 3))
        if ha[1] == hb[1]:
            raise Slip(
                f"{a} and {b} in blocks of 3 got the same hash for block 1, {ha[1]}, though "
                "their first blocks differ",
                "hash j must stand for every token up to block j's end: pass block j - 1's "
                "hash as previous, not 0 for every block.",
            )

    return [
        ("one hash per full block", one_hash_per_full_block),
        ("the hashes of 11 tokens in blocks of 3", the_course_hashes),
        ("a block's own tokens are not enough", equal_exactly_when_the_prefixes_are),
    ]


def _shared(prompt: list[int], block_size: int, cached: set[int]) -> int:
    """Tokens of the longest cached prefix, the last token's block never shared: block by block."""
    n = 0
    for j in range((len(prompt) - 1) // block_size):
        if block_hashes(prompt[: (j + 1) * block_size], block_size)[-1] not in cached:
            break
        n += block_size
    return n


@exercise(
    "cached_prefix_tokens",
    notebook="14",
    hint="Hash the blocks of prompt[:-1] (the block holding the last token is always computed: "
    "its logits choose the first new token), and count the hashes in cached from the first "
    "one on, stopping at the first that is missing; return that count times block_size.",
)
def _cached_prefix_tokens():
    system = [7, 3, 3, 0, 1, 8, 2, 2]

    def shares_the_leading_cached_blocks(fn):
        cached = set(block_hashes(system + [4, 4, 4, 4], 4))
        for prompt in (system + [5, 5, 5, 5, 1], system + [9], system[:4] + [6] * 6, [6] * 9):
            want, got = _shared(prompt, 4, cached), fn(prompt, 4, cached)
            assert got == want, f"prompt {prompt}, block_size 4: {want} cached tokens, got {got}"

    def never_the_last_tokens_block(fn):
        cached = set(block_hashes(system, 4))
        got = fn(system, 4, cached)
        if got == len(system):
            raise Slip(
                f"prompt {system}, all of whose blocks are cached: got {got}, every token",
                "the block holding the prompt's last token is computed again: its logits choose "
                "the first new token. Hash prompt[:-1], not the whole prompt.",
            )
        assert got == 4, f"prompt {system}, fully cached, block_size 4: expected 4, got {got}"

    def stops_at_the_first_miss(fn):
        cached = set(block_hashes(system + [1, 1], 2))
        cached.discard(block_hashes(system, 2)[1])  # block 1 evicted, blocks 2 and 3 kept
        got = fn(system + [1, 1, 1], 2, cached)
        if got != 2:
            raise Slip(
                f"blocks 0, 2, 3 and 4 cached, block 1 not: got {got} tokens, expected 2",
                "stop at the first block whose hash is missing: a block's keys are right only "
                "after the same tokens, so a block after a gap cannot be used.",
            )

    return [
        ("prompts that share 0 to 3 cached blocks", shares_the_leading_cached_blocks),
        ("a fully cached prompt still computes its last block", never_the_last_tokens_block),
        ("a gap ends the prefix", stops_at_the_first_miss),
    ]


def _plan(decodes: list[int], prompts: list[tuple[int, int]], budget: int) -> list:
    plan = [(rid, 1) for rid in decodes[:budget]]
    left = budget - len(plan)
    for rid, tokens in prompts:
        if left == 0:
            break
        plan.append((rid, min(tokens, left)))
        left -= plan[-1][1]
    return plan


@exercise(
    "step_plan",
    notebook="14",
    hint="First one token for each decode, oldest first, while the budget lasts. Then, with "
    "what is left, the prompts in order: each gets min(its tokens left, the budget left), and "
    "the step ends when the budget is spent. Return a list of (rid, tokens) pairs.",
)
def _step_plan():
    def cases_and_plans(fn):
        for decodes, prompts, budget in (
            ([0, 1, 2], [(3, 10)], 8),
            ([], [(4, 3), (5, 30), (6, 7)], 16),
            ([0, 1], [], 4),
            ([0], [(3, 2), (4, 2)], 5),
        ):
            want, got = (
                _plan(decodes, prompts, budget),
                [tuple(p) for p in fn(decodes, prompts, budget)],
            )
            if got and got[0][0] not in decodes and decodes:
                raise Slip(
                    f"decodes {decodes}, prompts {prompts}, budget {budget}: your plan {got} "
                    "starts with a prompt",
                    "decodes go first: each running request's next token waits for no prompt, "
                    "which is what keeps the time between its tokens short.",
                )
            assert got == want, (
                f"decodes {decodes}, prompts (rid, tokens left) {prompts}, budget {budget}: "
                f"expected {want}, got {got}"
            )

    def chunks_a_long_prompt(fn):
        got = [tuple(p) for p in fn([0, 1], [(2, 100), (3, 5)], 10)]
        if sum(n for _, n in got) > 10:
            raise Slip(
                f"budget 10, a prompt of 100 tokens left: your plan {got} runs "
                f"{sum(n for _, n in got)} tokens",
                "a prompt longer than the budget left is cut: it runs min(tokens left, budget "
                "left) now and the rest in later steps.",
            )
        assert got == [(0, 1), (1, 1), (2, 8)], f"expected [(0, 1), (1, 1), (2, 8)], got {got}"

    def more_decodes_than_budget(fn):
        got = [tuple(p) for p in fn([0, 1, 2, 3, 4], [(5, 9)], 3)]
        assert got == [(0, 1), (1, 1), (2, 1)], (
            f"5 decodes, budget 3: the 3 oldest decode, the rest wait a step; got {got}"
        )

    return [
        ("four steps' plans", cases_and_plans),
        ("a prompt longer than the budget is chunked", chunks_a_long_prompt),
        ("beyond the budget the newest decodes wait", more_decodes_than_budget),
    ]
