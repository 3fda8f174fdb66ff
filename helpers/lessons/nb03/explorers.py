"""The masking explorer of notebook 03: a batch of three padded sentences, one mask type.

``render_masked_heatmap(mask_type, sentence)`` is the pure function the explorer calls: it
attends over one sentence of the batch with the chosen mask and returns the heatmap and a
caption that prints the mask as 0/1 rows (1 = may attend).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from helpers.kit.checks import require_index
from helpers.kit.data import toy_sentence
from helpers.kit.plots import attention_heatmap
from helpers.masks import causal_mask, combine, key_mask, padding_mask
from helpers.numpy_attention import scaled_dot_product_attention

PAD = "<pad>"
SENTENCES = ("the fox chased a red kite", "a fox chased the kite", "the red kite")
MASK_TYPES = ("none", "padding", "causal", "padding+causal")


def padded_batch() -> tuple[list[list[str]], np.ndarray, np.ndarray]:
    """The three sentences padded to T = 6: tokens, embeddings ``(3, 6, 4)`` and lengths ``(3,)``.

    Words take their embeddings from :func:`helpers.kit.data.toy_sentence`; padding is a zero vector.
    Built in notebook 03, section 1 (A batch of sentences of different lengths).
    """
    words, vectors = toy_sentence()
    lookup = dict(zip(words, vectors, strict=True))
    split = [s.split() for s in SENTENCES]
    T = max(len(s) for s in split)
    tokens = [s + [PAD] * (T - len(s)) for s in split]
    pad = np.zeros(vectors.shape[1])
    x = np.array([[lookup.get(t, pad) for t in row] for row in tokens])
    return tokens, x, np.array([len(s) for s in split])


def build_mask(mask_type: str, lengths: np.ndarray, T: int) -> np.ndarray:
    """The boolean mask ``(B, T, T)`` (True = may attend) for one of :data:`MASK_TYPES`.

    The masks of notebook 03, sections 2-4 (padding, causal, both at once), for the explorer
    of section 8 (Explore: mask type → masked heatmap).
    """
    if mask_type not in MASK_TYPES:
        raise ValueError(f"mask_type must be one of {MASK_TYPES}, got {mask_type!r}")
    shape = (len(lengths), T, T)
    keys = key_mask(padding_mask(lengths, T))  # (B, 1, T): every query sees the real keys
    masks = {
        "none": np.ones(shape, dtype=bool),
        "padding": keys,
        "causal": causal_mask(T),
        "padding+causal": combine(keys, causal_mask(T)),
    }
    return np.broadcast_to(masks[mask_type], shape)


def render_masked_heatmap(mask_type: str = "padding", sentence: int = 2) -> tuple[Figure, str]:
    """Self-attention weights ``(T, T)`` of one sentence under a mask, and the mask as text.

    The explorer of notebook 03, section 8 (Explore: mask type → masked heatmap).
    """
    tokens, x, lengths = padded_batch()
    sentence = require_index("sentence", sentence, len(tokens))  # True is not sentence 1
    mask = build_mask(mask_type, lengths, x.shape[1])  # (B, T, T)
    _, weights = scaled_dot_product_attention(x, x, x, mask)  # (B, T, T)
    row = tokens[sentence]
    fig, ax = plt.subplots(figsize=(5.2, 4.0))
    attention_heatmap(weights[sentence], row, row, ax=ax, title=f"mask: {mask_type}")
    width = max(len(t) for t in row)
    lines = [f"mask {mask_type!r}, shape {mask.shape} (B, T_q, T_k); rows: queries, 1 = may attend"]
    lines += [
        f"{t:>{width}}  " + " ".join(str(int(m)) for m in r)
        for t, r in zip(row, mask[sentence], strict=True)
    ]
    return fig, "\n".join(lines)
