"""The explorer of notebook 10: one trained head on one sequence, and what an ablation costs.

``render_trained_heads(model, tokens, shifts, layer, head, example, ablate)`` draws head
``(layer, head)``'s attention map on sequence ``example`` with the heads named by ``ablate``
zeroed, next to that sequence's loss at every position with and without the ablation. The
caption gives the head's two scores on that sequence and the loss on the repeat over all the
sequences, so a learner can break the previous-token head and watch the induction heads go
blind. :class:`TrainedHeadsFigure` draws the same picture into one kept figure, redrawn in
place, for the explorer; :func:`ablation_choices` lists what can be ablated.
"""

from __future__ import annotations

import numbers

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from torch import Tensor

from helpers.kit import checks
from helpers.kit.env import single_thread
from helpers.kit.plots import attention_heatmap
from helpers.lessons.nb10.data import predictable
from helpers.lessons.nb10.model import AttentionOnlyTransformer
from helpers.lessons.nb10.scores import induction_score, previous_token_score
from helpers.lessons.nb10.training import next_token_loss


def ablation_choices(layers: int, heads: int) -> dict[str, frozenset[tuple[int, int]]]:
    """What the explorer can switch off, by label: nothing, any one head, or a whole layer.

    Values are the ``ablate`` sets :meth:`AttentionOnlyTransformer.forward` takes, of
    ``(layer, head)`` pairs. Notebook 10, section 8 (Explore).
    """
    layers = checks.require_positive_int("layers", layers)
    heads = checks.require_positive_int("heads", heads)
    choices = {"nothing": frozenset()}
    for layer in range(layers):
        for head in range(heads):
            choices[f"layer {layer} head {head}"] = frozenset({(layer, head)})
    for layer in range(layers):
        choices[f"all of layer {layer}"] = frozenset((layer, head) for head in range(heads))
    return choices


def _check_data(model, tokens, shifts) -> None:
    checks.require_array("model", model, AttentionOnlyTransformer, "AttentionOnlyTransformer")
    checks.require_array("tokens", tokens, Tensor, "torch.Tensor")
    checks.require_ndim("tokens", tokens, (2,), "(B, T)")
    checks.require_array("shifts", shifts, Tensor, "torch.Tensor")
    batch, length = tokens.shape
    if length % 2 or tuple(shifts.shape) != (batch,):
        raise ValueError(
            f"tokens must be (B, 2 L) and shifts (B,), got tokens {tuple(tokens.shape)} and "
            f"shifts {tuple(shifts.shape)}"
        )
    checks.require_integer_tensor("shifts", shifts, "(B,)")
    half = length // 2
    index = (torch.arange(half, device=shifts.device)[None, :] + shifts[:, None].long()) % half
    wrong = (tokens[:, half:] != tokens[:, :half].gather(1, index.to(tokens.device))).any(dim=1)
    if bool(wrong.any()):  # the caption would name a rotation the tokens do not have
        raise ValueError(
            f"tokens and shifts must come from one repeated_sequences call: the second half of "
            f"row b is its first half rotated by shifts[b], which fails for {int(wrong.sum())} "
            f"of {batch} rows (first: row {int(wrong.nonzero()[0])}); tokens {tuple(tokens.shape)}"
        )


def _check_choice(model, tokens, layer, head, example, ablate, choices) -> None:
    layers, heads = len(model.attention), model.attention[0].num_heads
    for name, value, count in (("layer", layer, layers), ("head", head, heads),
                               ("example", example, len(tokens))):  # fmt: skip
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
        if not 0 <= value < count:  # NumPy integers are welcome
            raise ValueError(f"{name} must be an int in 0..{count - 1}, got {value!r}")
    if ablate not in choices:
        raise ValueError(f"ablate must be one of {list(choices)}, got {ablate!r}")


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
    repeat over all B sequences. A new figure each call; the explorer of notebook 10, section 8
    (Explore) keeps one :class:`TrainedHeadsFigure` and redraws it in place.
    """
    return TrainedHeadsFigure(model, tokens, shifts)(layer, head, example, ablate)


class TrainedHeadsFigure:
    """Notebook 10's explorer picture, built at the first call and then updated in place.

    ``TrainedHeadsFigure(model, tokens, shifts)(layer, head, example, ablate)`` returns what
    :func:`render_trained_heads` returns, but every call returns the *same* figure, redrawn:
    a new heatmap would build 64 tick labels again, half of a redraw's time. The loss of each
    ablation over all B sequences is computed once and kept, so the picture is of the model as
    it was then: after changing its weights, build a new one. Notebook 10, section 8 (Explore).
    """

    def __init__(self, model: AttentionOnlyTransformer, tokens: Tensor, shifts: Tensor):
        _check_data(model, tokens, shifts)
        self.model, self.tokens, self.shifts = model, tokens, shifts
        self.choices = ablation_choices(len(model.attention), model.attention[0].num_heads)
        self.half = tokens.shape[1] // 2
        self.repeat = predictable(shifts, self.half)  # (B, T - 1)
        self._losses: dict[str, Tensor] = {}
        self._fig: Figure | None = None

    def loss(self, ablate: str) -> Tensor:
        """Next-token loss ``(B, T - 1)`` of every sequence with ``ablate``'s heads zeroed."""
        if ablate not in self._losses:
            with torch.no_grad(), single_thread():
                self._losses[ablate] = next_token_loss(
                    self.model, self.tokens, ablate=self.choices[ablate]
                )
        return self._losses[ablate]

    def __call__(self, layer: int, head: int, example: int, ablate: str) -> tuple[Figure, str]:
        _check_choice(self.model, self.tokens, layer, head, example, ablate, self.choices)
        with torch.no_grad(), single_thread():
            _, maps = self.model(self.tokens[example : example + 1], ablate=self.choices[ablate])
        weights = maps[layer][:, head : head + 1]  # (1, 1, T, T)
        clean, broken = self.loss("nothing"), self.loss(ablate)
        if self._fig is None:
            self._build()
        self._update(weights[0, 0].numpy(), layer, head, example, ablate, clean, broken)
        prev = previous_token_score(weights, self.half).item()
        ind = induction_score(weights, self.tokens[example : example + 1], self.half).item()
        with_ablation = (
            f"nothing ablated, {broken[self.repeat].mean():.2f} with {ablate} ablated"
            if self.choices[ablate]
            else "nothing ablated"
        )
        after_wrap = ~self.repeat[example] & (torch.arange(len(self.repeat[example])) >= self.half)
        wrap = "".join(f"; position {j + 1} follows the wrap" for j in after_wrap.nonzero()[:, 0])
        lines = [
            f"sequence {example}: the repeat is rotated by {int(self.shifts[example])}{wrap}",
            f"layer {layer} head {head} here: previous-token score {prev:.2f}, "
            f"induction score {ind:.2f}",
            f"loss on the repeat over all {len(self.tokens)} sequences: "
            f"{clean[self.repeat].mean():.2f} with {with_ablation}",
        ]
        return self._fig, "\n".join(lines)

    def _build(self) -> None:
        """The figure's fixed parts: heatmap and colour bar, the two loss lines, the guides."""
        length = self.tokens.shape[1]
        fig, (left, right) = plt.subplots(
            1, 2, figsize=(11.5, 5.2), gridspec_kw={"width_ratios": [1.15, 1]}
        )
        blank = [""] * length
        attention_heatmap(np.zeros((length, length)), blank, blank, ax=left, annotate=False)
        left.tick_params(labelsize=7)
        left.axhline(self.half, color="white", lw=1)  # the repeat starts at query L...
        left.axvline(self.half, color="white", lw=1)  # ...and at key L
        positions = np.arange(1, length)  # the position of the token being predicted
        self._clean_line = right.plot(positions, np.zeros(length - 1), "o-", color="0.6")[0]
        self._broken_line = right.plot(positions, np.zeros(length - 1), "o-", color="C3")[0]
        right.axvline(self.half - 0.5, color="0.3", linestyle=":")
        vocab = self.model.readout.out_features
        self._chance = right.axhline(np.log(vocab), color="0.3", linestyle="--", lw=1)
        self._chance.set_label(f"log({vocab})")
        right.text(self.half - 0.2, 0.2, "repeat starts", fontsize=9)
        right.set(xlabel="position of the token predicted", ylabel="loss (nats)")
        fig.subplots_adjust(left=0.06, right=0.98, wspace=0.25)  # no tight_layout: 2 draws
        plt.close(fig)  # never shown by pyplot: the explorer shows its picture
        self._fig = fig  # last: a build that failed half-way is tried again at the next call

    def _update(self, weights, layer, head, example, ablate, clean, broken) -> None:
        left, right = self._fig.axes[:2]
        left.collections[0].set_array(weights)
        labels = [str(t) for t in self.tokens[example].tolist()]
        left.set_xticklabels(labels)
        left.set_yticklabels(labels)
        zeroed = " (its output is zeroed)" if (layer, head) in self.choices[ablate] else ""
        left.set_title(f"layer {layer}, head {head}{zeroed}", fontsize=11)
        self._clean_line.set(ydata=clean[example].numpy(), label="nothing ablated")
        ablated = bool(self.choices[ablate])
        self._broken_line.set(ydata=broken[example].numpy(), label=f"{ablate} ablated",
                              visible=ablated)  # fmt: skip
        top = max(9.0, np.ceil(max(clean[example].max().item(), broken[example].max().item())))
        right.set_ylim(0, top)
        right.set_title(f"sequence {example}: loss per position", fontsize=11)
        lines = [self._clean_line, self._broken_line][: 1 + ablated] + [self._chance]
        right.legend(handles=lines, loc="upper right", fontsize=9)
