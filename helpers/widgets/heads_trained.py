"""The explorer of notebook 10: one trained head on one sequence, and what an ablation costs.

``render_trained_heads(model, tokens, shifts, layer, head, example, ablate)`` draws head
``(layer, head)``'s attention map on sequence ``example`` with the heads named by ``ablate``
zeroed, next to that sequence's loss at every position with and without the ablation. The
caption gives the head's two scores on that sequence and the loss on the repeat over all the
sequences, so a learner can break the previous-token head and watch the induction heads go
blind. :func:`ablation_choices` lists what can be ablated.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from torch import Tensor

from helpers import validation
from helpers.induction.data import predictable
from helpers.induction.model import AttentionOnlyTransformer
from helpers.induction.scores import induction_score, previous_token_score
from helpers.induction.training import next_token_loss
from helpers.plots import attention_heatmap


def ablation_choices(layers: int, heads: int) -> dict[str, frozenset[tuple[int, int]]]:
    """What the explorer can switch off, by label: nothing, any one head, or a whole layer.

    Values are the ``ablate`` sets :meth:`AttentionOnlyTransformer.forward` takes, of
    ``(layer, head)`` pairs. Notebook 10, section 9 (Explore).
    """
    layers = validation.require_positive_int("layers", layers)
    heads = validation.require_positive_int("heads", heads)
    choices = {"nothing": frozenset()}
    for layer in range(layers):
        for head in range(heads):
            choices[f"layer {layer} head {head}"] = frozenset({(layer, head)})
    for layer in range(layers):
        choices[f"all of layer {layer}"] = frozenset((layer, head) for head in range(heads))
    return choices


def _check(model, tokens, shifts, layer, head, example, ablate) -> dict:
    validation.require_array("model", model, AttentionOnlyTransformer, "AttentionOnlyTransformer")
    validation.require_array("tokens", tokens, Tensor, "torch.Tensor")
    validation.require_ndim("tokens", tokens, (2,), "(B, T)")
    validation.require_array("shifts", shifts, Tensor, "torch.Tensor")
    batch, length = tokens.shape
    if length % 2 or tuple(shifts.shape) != (batch,):
        raise ValueError(
            f"tokens must be (B, 2 L) and shifts (B,), got tokens {tuple(tokens.shape)} and "
            f"shifts {tuple(shifts.shape)}"
        )
    layers, heads = len(model.attention), model.attention[0].num_heads
    for name, value, count in (("layer", layer, layers), ("head", head, heads),
                               ("example", example, batch)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
            raise ValueError(f"{name} must be an int in 0..{count - 1}, got {value!r}")
    choices = ablation_choices(layers, heads)
    if ablate not in choices:
        raise ValueError(f"ablate must be one of {list(choices)}, got {ablate!r}")
    return choices


def render_trained_heads(
    model: AttentionOnlyTransformer,
    tokens: Tensor,
    shifts: Tensor,
    layer: int,
    head: int,
    example: int,
    ablate: str,
) -> tuple[Figure, str]:
    """Left: head ``(layer, head)``'s weights ``(T, T)`` on sequence ``example``, with the heads
    in ``ablation_choices(...)[ablate]`` zeroed. Right: that sequence's loss at every position,
    with and without the ablation.

    ``tokens (B, 2 L)`` and ``shifts (B,)`` come from ``repeated_sequences``. The caption gives
    the head's previous-token and induction scores on this sequence and the mean loss on the
    repeat over all B sequences. The explorer of notebook 10, section 9 (Explore).
    """
    choices = _check(model, tokens, shifts, layer, head, example, ablate)
    half = tokens.shape[1] // 2
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors: one thread is faster, and never waits on another
    try:
        with torch.no_grad():
            clean = next_token_loss(model, tokens)  # (B, T - 1)
            broken = (  # nothing ablated: the same numbers, not computed twice
                next_token_loss(model, tokens, ablate=choices[ablate]) if choices[ablate] else clean
            )
            _, maps = model(tokens[example : example + 1], ablate=choices[ablate])
    finally:
        torch.set_num_threads(threads)
    weights = maps[layer][:, head : head + 1]  # (1, 1, T, T)
    repeat = predictable(shifts, half)  # (B, T - 1)
    labels = [str(t) for t in tokens[example].tolist()]

    fig, (left, right) = plt.subplots(
        1, 2, figsize=(11.5, 5.2), gridspec_kw={"width_ratios": [1.15, 1]}
    )
    attention_heatmap(weights[0, 0].numpy(), labels, labels, ax=left, annotate=False)
    left.tick_params(labelsize=7)
    zeroed = " (its output is zeroed)" if (layer, head) in choices[ablate] else ""
    left.set_title(f"layer {layer}, head {head}{zeroed}", fontsize=11)
    positions = np.arange(1, tokens.shape[1])  # the position of the token being predicted
    right.plot(positions, clean[example].numpy(), "o-", color="0.6", label="nothing ablated")
    if choices[ablate]:
        right.plot(positions, broken[example].numpy(), "o-", color="C3", label=f"{ablate} ablated")
    right.axvline(half - 0.5, color="0.3", linestyle=":")
    vocab = model.readout.out_features
    right.axhline(np.log(vocab), color="0.3", linestyle="--", lw=1, label=f"log({vocab})")
    right.text(half - 0.2, 0.2, "repeat starts", fontsize=9)
    top = max(9.0, np.ceil(max(clean[example].max().item(), broken[example].max().item())))
    right.set(xlabel="position of the token predicted", ylabel="loss (nats)", ylim=(0, top))
    right.set_title(f"sequence {example}: loss per position", fontsize=11)
    right.legend(loc="upper right", fontsize=9)
    fig.subplots_adjust(left=0.06, right=0.98, wspace=0.25)  # tight_layout would redraw twice

    prev = previous_token_score(weights, half).item()
    ind = induction_score(weights, tokens[example : example + 1], half).item()
    lines = [
        f"sequence {example}: the repeat is rotated by {int(shifts[example])}",
        f"layer {layer} head {head} here: previous-token score {prev:.2f}, "
        f"induction score {ind:.2f}",
        f"loss on the repeat over all {len(tokens)} sequences: {clean[repeat].mean():.2f} with "
        + (
            f"nothing ablated, {broken[repeat].mean():.2f} with {ablate} ablated"
            if choices[ablate]
            else "nothing ablated"
        ),
    ]
    return fig, "\n".join(lines)
