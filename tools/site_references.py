"""The course site's bibliography: the papers the lessons cite, each citation linked to it.

The lessons cite papers in the text as "(Author et al., 2022, *Title*)". :data:`PAPERS` lists
each one the notebooks cite (the citation as written, the title, where to read it); the site
gets a page ``references`` with them all, saying which lessons cite each, and every citation in
a lesson becomes a link to its entry. A citation the notebooks add without an entry here is
found by ``tests/test_site.py``.
"""

from __future__ import annotations

import re

# (citation as the lessons write it, title, link)
PAPERS = [
    ("Vaswani et al., 2017", "Attention Is All You Need", "https://arxiv.org/abs/1706.03762"),
    (
        "Milakov and Gimelshein, 2018",
        "Online normalizer calculation for softmax",
        "https://arxiv.org/abs/1805.02867",
    ),
    (
        "Shoeybi et al., 2019",
        "Megatron-LM: Training Multi-Billion Parameter Language Models Using Model Parallelism",
        "https://arxiv.org/abs/1909.08053",
    ),
    (
        "Elhage et al., 2021",
        "A Mathematical Framework for Transformer Circuits",
        "https://transformer-circuits.pub/2021/framework/index.html",
    ),
    (
        "Dao et al., 2022",
        "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness",
        "https://arxiv.org/abs/2205.14135",
    ),
    (
        "Korthikanti et al., 2022",
        "Reducing Activation Recomputation in Large Transformer Models",
        "https://arxiv.org/abs/2205.05198",
    ),
    (
        "Olsson et al., 2022",
        "In-context Learning and Induction Heads",
        "https://arxiv.org/abs/2209.11895",
    ),
    (
        "Ainslie et al., 2023",
        "GQA: Training Generalized Multi-Query Transformer Models from Multi-Head Checkpoints",
        "https://arxiv.org/abs/2305.13245",
    ),
    (
        "Dao, 2023",
        "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning",
        "https://arxiv.org/abs/2307.08691",
    ),
    (
        "Jacobs et al., 2023",
        "DeepSpeed Ulysses: System Optimizations for Enabling Training of Extreme Long Sequence "
        "Transformer Models",
        "https://arxiv.org/abs/2309.14509",
    ),
    (
        "Xiao et al., 2023",
        "Efficient Streaming Language Models with Attention Sinks",
        "https://arxiv.org/abs/2309.17453",
    ),
    (
        "Liu, Zaharia and Abbeel, 2023",
        "Ring Attention with Blockwise Transformers for Near-Infinite Context",
        "https://arxiv.org/abs/2310.01889",
    ),
    (
        "KIVI (2024)",
        "KIVI: A Tuning-Free Asymmetric 2bit Quantization for KV Cache",
        "https://arxiv.org/abs/2402.02750",
    ),
    (
        "DeepSeek-AI, 2024",
        "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts Language Model",
        "https://arxiv.org/abs/2405.04434",
    ),
    (
        "Shah et al., 2024",
        "FlashAttention-3: Fast and Accurate Attention with Asynchrony and Low-precision",
        "https://arxiv.org/abs/2407.08608",
    ),
    (
        "Zhong et al., 2024",
        "DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large Language Model Serving",
        "https://arxiv.org/abs/2401.09670",
    ),
    (
        "DeepSeek-AI, 2025",
        "DeepSeek-V3.2-Exp: Boosting Long-Context Efficiency with DeepSeek Sparse Attention",
        "https://github.com/deepseek-ai/DeepSeek-V3.2-Exp",
    ),
    (
        "Katharopoulos et al., 2020",
        "Transformers are RNNs: Fast Autoregressive Transformers with Linear Attention",
        "https://arxiv.org/abs/2006.16236",
    ),
    (
        "Schlag et al., 2021",
        "Linear Transformers Are Secretly Fast Weight Programmers",
        "https://arxiv.org/abs/2102.11174",
    ),
    (
        "Yang et al., 2024",
        "Parallelizing Linear Transformers with the Delta Rule over Sequence Length",
        "https://arxiv.org/abs/2406.06484",
    ),
    (
        "Yang et al., 2025",
        "Gated Delta Networks: Improving Mamba2 with Delta Rule",
        "https://arxiv.org/abs/2412.06464",
    ),
]
# What a citation in a lesson looks like: "Name et al., 2022", "A and B, 2018", "Dao, 2023".
CITATION = re.compile(
    r"(?:[A-Z][A-Za-z-]+(?:, [A-Z][A-Za-z-]+)*(?: and [A-Z][A-Za-z-]+| et al\.)?, (?:19|20)\d\d"
    r"|KIVI \(2024\))"
)
PROTECTED = re.compile(r"```.*?```|`[^`\n]*`|\[[^\]]*\]\([^)]*\)|<[^>]+>|\$[^$\n]+\$", re.S)


def anchor(citation: str) -> str:
    """The anchor of the entry's heading on the references page, as MyST makes it."""
    return re.sub(r"[^a-z0-9 -]", "", citation.lower()).replace(" ", "-")


def link_citations(markdown: str) -> tuple[str, set[str]]:
    """Each known citation in ``markdown`` (outside code, links and math) as a link to its
    entry; returns the new markdown and the citations found."""
    known = {citation for citation, _, _ in PAPERS}
    found: set[str] = set()

    def one(match: re.Match) -> str:
        if match.group(0) not in known:
            return match.group(0)
        found.add(match.group(0))
        return f"[{match.group(0)}](references.md#{anchor(match.group(0))})"

    parts, last = [], 0
    for protected in PROTECTED.finditer(markdown):
        parts.append(CITATION.sub(one, markdown[last : protected.start()]))
        parts.append(protected.group(0))
        last = protected.end()
    parts.append(CITATION.sub(one, markdown[last:]))
    return "".join(parts), found


def references_markdown(cited_by: dict[str, list[str]]) -> str:
    """The references page: each paper, its link, and the lessons (page names) citing it."""
    lines = [
        "# References\n",
        "The papers the lessons cite, oldest first. Each citation in a lesson links here.\n",
    ]
    for citation, title, url in PAPERS:
        cited = cited_by.get(citation, [])
        lessons = ", ".join(f"[{name[:2]}]({name}.ipynb)" for name in cited)
        lines.append(
            f"## {citation}\n\n[*{title}*]({url})."
            + (f" Cited in lesson{'s' * (len(cited) > 1)} {lessons}." if cited else "")
        )
    return "\n\n".join(lines) + "\n"
