"""The explorer of notebook 01: one word of the toy sentence as the query, all words as keys.

The keys and the values are the word vectors themselves (``K = V = X``), as in notebook 01.
A ``scale`` multiplies the scores before the softmax: 0 spreads the weights evenly over the
keys, large values put almost all of them on the best-matching key.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from helpers.kit.checks import require_real
from helpers.kit.data import FEATURES, toy_sentence
from helpers.kit.plots import quoted, tied_for_largest
from helpers.numpy_attention import softmax

MAX_SCALE = 20.0  # the largest factor the explorer multiplies the scores by
BAR = "#3b528b"  # viridis blue: an ordinary key
WINNER = "#fde725"  # viridis yellow: the key(s) with the largest weight, as in the heatmaps


def one_query_attention(query: str, scale: float = 1.0) -> dict[str, object]:
    """Attention of one word of the toy sentence over all of its words (``K = V = X``).

    Returns ``tokens`` (T), ``query_vector`` (D,), ``scores`` (T,) = ``scale * (X @ q)``,
    ``weights`` (T,) = softmax of the scores, and ``output`` (D,) = ``weights @ X``. Behind the
    explorer of notebook 01, section 6 (Explore: one query at a time).
    """
    tokens, X = toy_sentence()  # (T, D)
    if query not in tokens:
        raise ValueError(f"query must be one of the words {tokens}, got {query!r}")
    require_real("scale", scale, 0.0, MAX_SCALE)
    q = X[tokens.index(query)]  # (D,)
    scores = scale * (X @ q)  # (T,)
    weights = softmax(scores)  # (T,)
    return {
        "tokens": tokens,
        "query_vector": q,
        "scores": scores,
        "weights": weights,
        "output": weights @ X,  # (D,)
    }


def favourite(query: str, tokens: list[str], weights: np.ndarray) -> str:
    """The caption's line on where the query looks most; a tie is said as a tie.

    Weights ``(T_k,)`` compared as printed (two decimals): all equal is "spreads its weight
    evenly", several tied for the largest are all named, and one is named alone. The caption
    of notebook 01, section 6 (Explore: one query at a time).
    """
    top = tied_for_largest(weights)
    if len(top) == len(weights):
        each = f"weight {weights.max():.2f} each"
        return f"'{query}' spreads its weight evenly over all {len(weights)} keys ({each})"
    if len(top) > 1:
        names = quoted([tokens[j] for j in top])
        return f"'{query}' attends most to {names}, tied (weight {weights.max():.2f} each)"
    return f"'{query}' attends most to '{tokens[top[0]]}' (weight {weights.max():.2f})"


def highlighted(weights: np.ndarray) -> list[bool]:
    """Which bars are drawn in yellow: every key tied for the largest weight, none if all tie.

    ``weights (T_k,)`` -> one flag per key, for the bars of notebook 01, section 6
    (Explore: one query at a time).
    """
    top = tied_for_largest(weights)
    return [bool(len(top) < len(weights) and j in top) for j in range(len(weights))]


def _caption(query: str, scale: float, result: dict) -> str:
    tokens, weights = result["tokens"], result["weights"]
    cells = "".join(f"{token:>8}" for token in tokens)
    return "\n".join(
        [
            f"query '{query}', scores x {scale:g}",
            f"{'key':<8}{cells}",
            f"{'score':<8}" + "".join(f"{s:8.2f}" for s in result["scores"]),
            f"{'weight':<8}" + "".join(f"{w:8.2f}" for w in weights),
            favourite(query, tokens, weights),
            "output = weights @ V: "
            + ", ".join(f"{n} {v:.2f}" for n, v in zip(FEATURES, result["output"], strict=True)),
        ]
    )


def render_one_query(query: str, scale: float = 1.0) -> tuple[Figure, str]:
    """Bars of the query's weights over the keys, and its output next to its own vector.

    The caption prints the scores, the weights and the word the query attends to most (all of
    them when several tie, see :func:`favourite`); those keys' bars are yellow. The explorer
    of notebook 01, section 6 (Explore: one query at a time).
    """
    result = one_query_attention(query, scale)
    tokens, weights = result["tokens"], result["weights"]
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(9.0, 2.9), gridspec_kw={"width_ratios": [5, 4], "wspace": 0.25}
    )
    colours = [WINNER if top else BAR for top in highlighted(weights)]
    left.bar(tokens, weights, color=colours, edgecolor="black", linewidth=0.5)
    for x, w in enumerate(weights):
        left.text(x, w + 0.02, f"{w:.2f}", ha="center", fontsize=9)
    left.set(ylim=(0, 1.1), yticks=[0, 0.5, 1], xlabel="key", ylabel="weight")
    left.set_title(f"query '{query}': softmax({scale:g} x scores)")
    features = np.arange(len(FEATURES))
    right.bar(features - 0.2, result["query_vector"], 0.4, color="0.75", label=f"'{query}'")
    right.bar(features + 0.2, result["output"], 0.4, color=BAR, label="output")
    right.set_xticks(features, [name.replace(" ", "\n") for name in FEATURES])
    right.set(ylim=(0, 1.1), yticks=[0, 0.5, 1], xlabel="feature", ylabel="value")
    right.set_title("output = weights @ V")
    right.legend(loc="upper left", fontsize=9, frameon=False)
    return fig, _caption(query, scale, result)
