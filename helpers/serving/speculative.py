"""Speculative decoding: a cheap draft proposes, the target checks a whole round at once (nb 12, §7).

Each round the draft proposes ``k`` tokens, one after another. The target then runs once over
the text plus all ``k`` proposals and so scores ``k + 1`` positions: its verdict on each
proposal, and one more token. Proposals are kept up to the first one the target rejects; the
target's own choice replaces it (or, if none is rejected, adds the extra token). A round thus
gives between 1 and ``k + 1`` tokens for one call of the target.

Greedy (``temperature = 0``): a proposal is kept when it is the target's own best token, so the
text is exactly the target's greedy text. Sampling: proposal ``x``, drawn from the draft's
``q``, is kept with probability ``min(1, p(x) / q(x))``, ``p`` the target's distribution; on a
rejection the replacement is drawn from ``max(0, p - q)``, normalised. Every token is then
distributed exactly as if drawn from ``p`` (:func:`step_distribution` computes it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from helpers.kit import checks

Model = Callable[[Tensor], Tensor]  # token ids (1, T) -> logits (1, T, V)


@dataclass(frozen=True)
class Round:
    """One round: the draft's proposals, and the tokens it added (the kept proposals, then the
    target's own token)."""

    proposals: list[int]
    new: list[int]

    @property
    def accepted(self) -> int:
        return len(self.new) - 1


def speculative_decode(
    target: Model, draft: Model, prompt: Tensor, max_new_tokens: int, num_draft: int = 4,
    temperature: float = 0.0, generator: torch.Generator | None = None,
) -> Tensor:  # fmt: skip
    """``(1, T_0 + max_new_tokens)``: the prompt and the new tokens, as the target alone would
    choose them (greedy) or distributed as sampling from it would (``temperature > 0``)."""
    rounds = speculative_rounds(
        target, draft, prompt, max_new_tokens, num_draft, temperature, generator
    )
    new = [torch.tensor([r.new], device=prompt.device) for r in rounds]
    return torch.cat([prompt, *new], dim=1)


def speculative_rounds(
    target: Model, draft: Model, prompt: Tensor, max_new_tokens: int, num_draft: int = 4,
    temperature: float = 0.0, generator: torch.Generator | None = None,
) -> Iterator[Round]:  # fmt: skip
    """:func:`speculative_decode` round by round: what each round proposed and kept. The
    arguments are checked here, before the first round runs."""
    for name, model in (("target", target), ("draft", draft)):
        if not callable(model):
            raise TypeError(f"{name} must be callable: token ids (1, T) -> logits (1, T, V)")
    checks.require_array("prompt", prompt, Tensor, "torch.Tensor")
    if prompt.dtype != torch.int64 or prompt.ndim != 2 or prompt.shape[0] != 1 or not prompt.numel():  # fmt: skip
        raise ValueError(f"prompt must be int64 token ids (1, T_0) with T_0 >= 1, got {prompt.dtype} "
                         f"{tuple(prompt.shape)}")  # fmt: skip
    if int(prompt.min()) < 0:
        raise ValueError(f"prompt must hold token ids >= 0, got {prompt.tolist()}")
    checks.expect(max_new_tokens=(max_new_tokens, "int >= 0"), num_draft=(num_draft, "int > 0"))
    checks.require_real("temperature", temperature, low=0.0)
    if generator is not None and not isinstance(generator, torch.Generator):
        kind = type(generator)
        raise TypeError(f"generator must be a torch.Generator or None, got {kind.__module__}."
                        f"{kind.__qualname__}")  # fmt: skip
    if generator is not None and generator.device.type != "cpu":  # every draw is made on the CPU
        raise ValueError(f"generator must be a CPU torch.Generator, got one on {generator.device}")
    return _rounds(target, draft, prompt, max_new_tokens, num_draft, temperature, generator)


def _rounds(target, draft, prompt, max_new_tokens, num_draft, temperature, generator):
    tokens, stop = prompt, prompt.shape[1] + max_new_tokens
    while tokens.shape[1] < stop:
        k = min(num_draft, stop - tokens.shape[1] - 1)  # the target's own token ends the round
        proposals, q = propose(draft, tokens, k, temperature, generator)
        logits = _call_target(target, torch.cat([tokens, proposals], dim=1), q)
        if q is not None and logits.shape[-1] != q.shape[-1]:
            raise ValueError(
                f"draft and target must share one vocabulary: draft logits (1, T, {q.shape[-1]}), "
                f"target logits {tuple(logits.shape)}"
            )
        p = logits[0, tokens.shape[1] - 1 :]  # (k + 1, V): the verdicts, then one more
        new = verify(p, q, proposals[0], temperature, generator)
        tokens = torch.cat([tokens, new.to(tokens.device)], dim=1)
        yield Round(proposals[0].tolist(), new[0].tolist())


def propose(
    draft: Model, tokens: Tensor, k: int, temperature: float, generator: torch.Generator | None
) -> tuple[Tensor, Tensor | None]:
    """The draft's ``k`` proposals ``(1, k)`` and its distribution at each ``(k, V)`` (None if
    k = 0), one draft call per proposal."""
    proposals, q = tokens[:, :0], []
    for _ in range(k):
        logits = _call(draft, "draft", torch.cat([tokens, proposals], dim=1))[0, -1]
        q.append(distribution(logits, temperature))
        pick = q[-1].argmax() if temperature == 0 else sample(q[-1], generator)
        proposals = torch.cat([proposals, pick.view(1, 1).to(tokens.device)], dim=1)
    return proposals, torch.stack(q) if q else None


def verify(
    p_logits: Tensor, q: Tensor | None, proposals: Tensor, temperature: float,
    generator: torch.Generator | None,
) -> Tensor:  # fmt: skip
    """The round's new tokens ``(1, n)``, ``1 <= n <= k + 1``: the kept proposals, then the
    target's replacement for the first rejected one, or its extra token if none was."""
    p = torch.stack([distribution(row, temperature) for row in p_logits])  # (k + 1, V)
    kept = []
    for i, token in enumerate(proposals.tolist()):
        if temperature == 0:
            if token != int(p[i].argmax()):
                return torch.tensor([kept + [int(p[i].argmax())]])
        elif not accept(p[i], q[i], token, generator):
            return torch.tensor([kept + [int(sample(residual(p[i], q[i]), generator))]])
        kept.append(token)
    last = p[-1].argmax() if temperature == 0 else sample(p[-1], generator)
    return torch.tensor([kept + [int(last)]])


def distribution(logits: Tensor, temperature: float) -> Tensor:
    """``softmax(logits / temperature)`` in float64 on the CPU, where every draw is made (with
    the CPU generator the caller passes); temperature 0: all mass on the argmax."""
    logits = logits.detach().to("cpu", torch.float64)
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(), logits.shape[-1]).double()
    scaled = logits / temperature
    if bool((torch.isinf(scaled) & torch.isfinite(logits)).any()):  # a tiny temperature
        scaled = (logits - logits.max()) / temperature  # gaps to the best first: its share is 1
    return torch.softmax(scaled, dim=-1)


def acceptance_probability(p: Tensor, q: Tensor, token: int) -> float:
    """``min(1, p(token) / q(token))``: how likely the draft's ``token`` is kept."""
    token = checks.require_index("token", token, len(q))  # -1 is no token
    return min(1.0, float(p[token] / q[token]))


def residual(p: Tensor, q: Tensor) -> Tensor:
    """``max(0, p - q)``, normalised: where the target wants more than the draft offered.

    If the draft offered everything the target wants (p = q, where no rejection happens
    anyway) it is ``p`` itself.
    """
    for name, x in (("p", p), ("q", q)):
        checks.expect(**{name: (x, "V: float")})
        if x.numel() == 0 or not bool((x >= 0).all()) or abs(float(x.sum()) - 1) > 1e-6:
            raise ValueError(f"{name} must be a distribution (V,): numbers >= 0 summing to 1, got "
                             f"shape {tuple(x.shape)}, smallest {float(x.min()) if x.numel() else 'none'}, "
                             f"sum {float(x.sum()):.6g}")  # fmt: skip
    if p.shape != q.shape:
        raise ValueError(f"p and q must share one vocabulary: p {tuple(p.shape)}, q {tuple(q.shape)}")  # fmt: skip
    extra = (p - q).clamp(min=0)
    total = extra.sum()
    return extra / total if total > 0 else p


def accept(p: Tensor, q: Tensor, token: int, generator: torch.Generator | None) -> bool:
    """Keep the draft's ``token`` with probability :func:`acceptance_probability` (one draw)."""
    u = torch.rand((), generator=generator, dtype=torch.float64)
    return bool(u * q[token] < p[token])  # u < p / q, without dividing


def sample(probs: Tensor, generator: torch.Generator | None) -> Tensor:
    """One token id drawn from ``probs (V,)``."""
    return torch.multinomial(probs, 1, generator=generator)[0]


def step_distribution(p: Tensor, q: Tensor) -> Tensor:
    """The exact distribution of one speculative token, ``(V,)``: draft x with probability
    q(x), kept with :func:`acceptance_probability`, else a draw from :func:`residual`."""
    out, redraw = torch.zeros_like(p), residual(p, q)  # residual checks p and q
    for x in range(len(q)):
        if q[x] == 0:
            continue
        kept = acceptance_probability(p, q, x)
        out[x] += q[x] * kept
        out += q[x] * (1 - kept) * redraw
    return out


def _call(model: Model, name: str, tokens: Tensor) -> Tensor:
    """``model(tokens)``: logits ``(1, T, V)`` with no NaN and no +inf (-inf bans a token), and
    in each row a token not banned."""
    try:
        logits = model(tokens)
    except (IndexError, ValueError) as error:  # a token past its vocabulary, say
        raise ValueError(
            f"{name} failed on token ids {tokens.tolist()} ({error}): the prompt's tokens (and "
            f"the draft's proposals) must lie in the {name}'s vocabulary"
        ) from error
    if not isinstance(logits, Tensor) or logits.ndim != 3 or logits.shape[:2] != tokens.shape:
        shape = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(
            f"{name} must map token ids (1, T) to logits (1, T, V): given {tuple(tokens.shape)} "
            f"it returned {shape}"
        )
    bad = torch.isnan(logits) | (logits == float("inf"))
    if bool(bad.any()):
        raise ValueError(
            f"{name} returned logits {tuple(logits.shape)} holding NaN or +inf at "
            f"{int(bad.sum())} entries: no token can be chosen from them"
        )
    banned = (logits == float("-inf")).all(dim=-1)  # (1, T)
    if bool(banned.any()):
        raise ValueError(
            f"{name} returned logits {tuple(logits.shape)} that are -inf for every token at "
            f"positions {banned[0].nonzero().flatten().tolist()}: no token can be chosen there"
        )
    return logits


def _call_target(target: Model, tokens: Tensor, q: Tensor | None) -> Tensor:
    """The target on the tokens and the draft's proposals; a proposal past the target's
    vocabulary (an IndexError from its embedding) is named as a vocabulary mismatch."""
    try:
        return _call(target, "target", tokens)
    except ValueError as error:
        if q is None or not isinstance(error.__cause__, (IndexError, ValueError)):
            raise
        raise ValueError(
            f"target failed on the draft's proposals {tokens[0, -len(q) :].tolist()} ({error}): "
            f"draft and target must share one vocabulary, the draft's has V = {q.shape[-1]}"
        ) from error
