"""The course site's glossary: the notation and the terms, each linked from the lessons.

:data:`ENTRIES` is the one source: each entry's name, how the lessons write it (a regular
expression), one plain sentence, and the lessons that teach it. The site gets a page
``glossary`` with them all, and in each lesson the first time the prose uses an entry (in a
markdown cell, outside code, math, headings, links and folded solutions) becomes a link to it.
The notation follows notebook 00's table. ``tests/test_site.py`` checks the page and the links.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Entry(NamedTuple):
    name: str  # the heading on the glossary page
    pattern: str  # how the prose writes it (a regular expression, matched as a whole word)
    meaning: str  # one plain sentence
    lessons: tuple[str, ...]  # the lessons that teach it, by number


def _letter(symbol: str) -> str:
    """A one-letter symbol as the prose writes it: as code, or alone in a table's cell."""
    return rf"`{symbol}`|(?<=\|\x20){symbol}(?=\x20\|)"


# Notation: a symbol is linked where the prose writes it bare (d_k) or as code (`d_k`);
# a one-letter symbol only as code, since a bare "h" or "D" is too often something else.
NOTATION = [
    Entry("B", _letter("B"), "Batch size: how many sequences are processed together.", ("00",)),
    Entry(
        "T",
        _letter("T"),
        "Sequence length: how many tokens a sequence has (one query and one key per token).",
        ("00",),
    ),
    Entry(
        "T_q and T_k",
        r"`?T_[qk]`?",
        "The number of queries and the number of keys, named apart where they differ, as in "
        "cross-attention or when decoding one token against a cache.",
        ("00", "03", "08"),
    ),
    Entry(
        "D",
        _letter("D"),
        "The model width (`d_model`): how many numbers stand for one token between layers.",
        ("00", "04"),
    ),
    Entry("h", _letter("h"), "The number of heads a layer runs side by side.", ("00", "04")),
    Entry(
        "h_kv",
        r"`?h_kv`?",
        "The number of key/value heads when several query heads share one (GQA); h_kv = h is "
        "ordinary multi-head attention and h_kv = 1 is MQA.",
        ("08", "12"),
    ),
    Entry(
        "d_k",
        r"`?d_k`?",
        "The width of one head's queries and keys: D / h in a multi-head layer; scores are "
        "divided by its square root.",
        ("00", "02", "04"),
    ),
    Entry(
        "d_v",
        r"`?d_v`?",
        "The width of one head's values, and so of what the head returns; often equal to d_k.",
        ("01", "02"),
    ),
    Entry(
        "d_c",
        r"`?d_c`?",
        "The width of MLA's latent: the one short vector per token that is cached instead of "
        "every head's keys and values.",
        ("13",),
    ),
    Entry(
        "W_q, W_k, W_v and W_o",
        r"`?W_[qkvo]`?",
        "The learned projections that turn token vectors into queries, keys and values, and "
        "the heads' joined outputs back into model width; in NumPy they act as x @ W.",
        ("01", "02", "04"),
    ),
]

TERMS = [
    Entry(
        "query, key and value",
        r"quer(?:y|ies)",
        "A query is the vector of the token that looks; each key is matched against it, and "
        "each value is what its token hands over when it is looked at.",
        ("00", "01"),
    ),
    Entry(
        "attention weights",
        r"attention weights?",
        "The softmax of one query's scores over the keys: non-negative numbers summing to 1 "
        "that say how much each value counts in the output.",
        ("00", "01"),
    ),
    Entry(
        "scaled dot-product attention",
        r"scaled dot-product attention",
        "softmax(Q Kᵀ / √d_k) V: every query scored against every key, the scores scaled and "
        "turned into weights, the values averaged with them.",
        ("02",),
    ),
    Entry(
        "head",
        r"heads?",
        "One independent attention computation with its own projections; a layer runs h of "
        "them on slices of width d_k and joins their outputs.",
        ("04",),
    ),
    Entry(
        "mask",
        r"masks?",
        "Which query may look at which key. In the course a boolean keep-mask (True = may "
        "attend); a block-mask is its opposite, an additive mask adds -inf to blocked scores.",
        ("03",),
    ),
    Entry(
        "causal",
        r"causal",
        "A mask that lets each token look only at itself and the tokens before it, so that a "
        "model cannot read the future it is trained to predict.",
        ("03",),
    ),
    Entry(
        "padding",
        r"padding|padded",
        "Filler tokens that make sequences of different lengths into one rectangular batch; a "
        "padding mask keeps every query from looking at them.",
        ("03",),
    ),
    Entry(
        "cross-attention",
        r"cross-attention",
        "Attention whose queries come from one sequence and keys and values from another, so "
        "T_q and T_k differ.",
        ("03",),
    ),
    Entry(
        "fused QKV",
        r"fused QKV",
        "One matrix multiplication that makes queries, keys and values at once, with W_q, W_k "
        "and W_v stacked side by side.",
        ("06",),
    ),
    Entry(
        "SDPA",
        r"SDPA",
        "PyTorch's torch.nn.functional.scaled_dot_product_attention, which picks a fused "
        "kernel for the inputs it is given.",
        ("05", "07"),
    ),
    Entry(
        "fused kernel",
        r"fused kernels?",
        "One GPU program doing several steps (scores, softmax, weighted sum) without writing "
        "what lies between them to memory.",
        ("07",),
    ),
    Entry(
        "prefill and decode",
        r"prefill",
        "The two phases of generation: prefill runs the whole prompt at once and fills the "
        "cache; decode then makes one token per step.",
        ("08",),
    ),
    Entry(
        "KV cache",
        r"KV cache",
        "The keys and values of the tokens generated so far, kept so that each new token "
        "computes only its own.",
        ("08",),
    ),
    Entry(
        "GQA and MQA",
        r"GQA|MQA",
        "Grouped-query and multi-query attention: groups of query heads (all of them, for "
        "MQA) share one key/value head, which shrinks the KV cache.",
        ("08",),
    ),
    Entry(
        "RoPE",
        r"RoPE",
        "Rotary position embedding: queries and keys rotated by angles that grow with their "
        "position, so their dot product depends on the distance between them.",
        ("08",),
    ),
    Entry(
        "log-sum-exp",
        r"log-sum-exp",
        "log Σ exp(s), computed as m + log Σ exp(s - m) with m the maximum: softmax's "
        "normaliser, kept so that partial results can be merged exactly.",
        ("09",),
    ),
    Entry(
        "online softmax",
        r"online softmax",
        "Softmax computed in one pass over blocks of scores, rescaling the running sum each "
        "time a larger maximum appears.",
        ("09",),
    ),
    Entry(
        "tiling",
        r"tiling|tiles?",
        "Cutting the queries and keys into blocks small enough for fast on-chip memory and "
        "working block by block.",
        ("09",),
    ),
    Entry(
        "FlashAttention",
        r"FlashAttention",
        "Exact attention computed with tiling and online softmax, so the T × T weights are "
        "never written to memory.",
        ("09",),
    ),
    Entry(
        "split-KV",
        r"split-KV",
        "Decoding with the keys cut into chunks handled in parallel, the chunks' partial "
        "outputs merged with their log-sum-exps.",
        ("12",),
    ),
    Entry(
        "induction head",
        r"induction heads?",
        "A head that finds an earlier occurrence of the current token and predicts the token "
        "that followed it.",
        ("10",),
    ),
    Entry(
        "tensor parallel",
        r"tensor[- ]parallel(?:ism)?",
        "Splitting one layer's heads (and weight matrices) across devices, each device "
        "computing its share.",
        ("11",),
    ),
    Entry(
        "all-reduce",
        r"all-reduce",
        "The collective operation that sums a tensor across devices and gives every device "
        "the sum.",
        ("11",),
    ),
    Entry(
        "ring attention",
        r"ring attention",
        "Attention over a sequence split across devices, each passing its keys and values "
        "around a ring while merging partial results as online softmax does.",
        ("11",),
    ),
    Entry(
        "continuous batching",
        r"continuous batching",
        "Serving many requests as one batch whose members join and leave at every step, "
        "instead of waiting for the slowest.",
        ("12",),
    ),
    Entry(
        "paged attention",
        r"paged attention|PagedAttention",
        "Attention that reads each sequence's keys and values from fixed-size blocks scattered "
        "in one pool, found through its block table.",
        ("12",),
    ),
    Entry(
        "block table",
        r"block tables?",
        "For each sequence, the list of the pool's blocks that hold its keys and values, in order.",
        ("12",),
    ),
    Entry(
        "copy-on-write",
        r"copy-on-write",
        "Sharing a block between sequences until one of them writes to it, and copying it "
        "only then.",
        ("12",),
    ),
    Entry(
        "speculative decoding",
        r"speculative decoding",
        "A small model guesses several tokens and the large one checks them all in one step, "
        "keeping the longest run it agrees with.",
        ("12",),
    ),
    Entry(
        "MLA",
        r"MLA",
        "Multi-head latent attention: keys and values made from one short cached latent per "
        "token, which shrinks the KV cache.",
        ("13",),
    ),
    Entry(
        "latent",
        r"latents?",
        "In MLA, the short vector (width d_c) from which every head's keys and values are "
        "made again when needed.",
        ("13",),
    ),
    Entry(
        "absorption",
        r"absor(?:ption|bed|bs?)",
        "Multiplying MLA's up-projections into the query and output projections, so that "
        "attention runs on the latents themselves.",
        ("13",),
    ),
    Entry(
        "prefix caching",
        r"prefix caching",
        "Keeping the KV cache of a prompt's beginning so that the next request starting the "
        "same way skips its prefill.",
        ("14",),
    ),
    Entry(
        "chunked prefill",
        r"chunked prefill",
        "Cutting a long prompt's prefill into chunks run alongside other requests' decode steps.",
        ("14",),
    ),
    Entry(
        "attention sink",
        r"attention sinks?",
        "A token (often the first) that many heads look at when they have nothing better to "
        "look at.",
        ("10",),
    ),
    Entry(
        "linear attention",
        r"linear attention",
        "Attention without the softmax, so that keys and values can be summed into a fixed "
        "size state and each token costs the same whatever the length.",
        ("16",),
    ),
    Entry(
        "delta rule",
        r"delta rule",
        "A linear-attention update that first removes what the state already stores for a "
        "key and then writes the new value.",
        ("16",),
    ),
]
ENTRIES = NOTATION + TERMS

# Where no link may go: fenced code, math, links, HTML tags, folded solutions, web addresses,
# headings. Inline code is apart: a symbol written as code is linked whole.
BLOCKED = re.compile(
    r"```.*?```|<details>.*?</details>|\$\$.*?\$\$|\$[^$\n]+\$|!?\[[^\]]*\]\([^)]*\)"
    r"|^<([a-z]+)\b[^>]*>.*?</\1>|<[^>]+>|https?://\S+|^ {0,3}#[^\n]*$",
    re.S | re.M,
)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def anchor(name: str) -> str:
    """The anchor of the entry's heading on the glossary page, as MyST makes it."""
    return re.sub(r"[^\w\- ]", "", name.lower().replace(" ", "-"))


def _spans(pattern: re.Pattern, text: str) -> list[tuple[int, int]]:
    return [match.span() for match in pattern.finditer(text)]


def _first_free(entry: Entry, markdown: str) -> re.Match | None:
    """The first place the prose of ``markdown`` names ``entry`` where a link may go."""
    blocked = _spans(BLOCKED, markdown)
    code = _spans(INLINE_CODE, markdown)
    flags = re.I if entry in TERMS else 0  # "Split-KV" starts a sentence; `D` is not `d`
    pattern = entry.pattern.replace(" ", r"\s+")  # a term may break across lines
    for match in re.finditer(rf"(?<![\w`-])(?:{pattern})(?![\w`-])", markdown, flags):
        start, end = match.span()
        if any(s < end and start < e for s, e in blocked):
            continue
        # in code only when the code is the symbol itself: `d_k`, not `x.d_k` or `T`-long
        if any(s < end and start < e and (s, e) != (start, end) for s, e in code):
            continue
        if match.group(0).startswith("`") != match.group(0).endswith("`"):
            continue
        return match
    return None


def link_terms(markdown: str, done: set[str]) -> str:
    """``markdown`` with its first mention of each entry not in ``done`` (entry names) as a
    link to the glossary; the entries linked are added to ``done``."""
    for entry in sorted(ENTRIES, key=lambda e: -len(e.pattern)):  # "KV cache" before "cache"
        if entry.name in done:
            continue
        match = _first_free(entry, markdown)
        if match is None:
            continue
        done.add(entry.name)
        start, end = match.span()
        link = f"[{match.group(0)}](glossary.md#{anchor(entry.name)})"
        markdown = markdown[:start] + link + markdown[end:]
    return markdown


def glossary_markdown(pages: dict[str, str]) -> str:
    """The glossary page; ``pages`` maps a lesson's number to its page name."""
    lines = [
        "# Glossary\n",
        "The course's notation and terms, each in one sentence, with the lessons that teach "
        "it. In a lesson, the first mention of each links here. Notebook 00 has the notation "
        "table.\n",
    ]
    for title, entries in (("Notation", NOTATION), ("Terms", TERMS)):
        lines.append(f"## {title}\n")
        for entry in entries:
            lessons = ", ".join(f"[{n}]({pages[n]}.ipynb)" for n in entry.lessons)
            plural = "s" * (len(entry.lessons) > 1)
            lines.append(
                f"### {entry.name}\n\n{entry.meaning} Taught in lesson{plural} {lessons}.\n"
            )
    return "\n".join(lines)
