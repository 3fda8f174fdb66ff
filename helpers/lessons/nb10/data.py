"""Sequences whose second half repeats the first, shifted by a random amount (notebook 10, §1).

The first half is L distinct tokens drawn at random; the second half is the same L tokens,
rotated by a random shift r: position ``L + i`` holds ``first[(i + r) % L]``. Since r changes from
sequence to sequence, no fixed position tells the model where to look: to predict a token of the
second half it must find the earlier copy of the current token and read what came after it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from helpers.kit import checks


def repeated_sequences(
    batch: int, half: int, vocab: int, seed: int, random_shift: bool = True
) -> tuple[Tensor, Tensor]:
    """``(tokens (B, 2 L), shifts (B,))``: L distinct random tokens, then the same L rotated.

    ``random_shift=False`` repeats the first half as it is (shift 0 everywhere): then the token
    to predict always sits exactly L places back, and position alone solves the task.
    """
    batch = checks.require_positive_int("batch", batch)
    half = checks.require_positive_int("half", half)
    vocab = checks.require_positive_int("vocab", vocab)
    if half > vocab:
        raise ValueError(f"half={half} distinct tokens need vocab >= {half}, got vocab={vocab}")
    checks.require_bool("random_shift", random_shift)
    seed = checks.require_seed("seed", seed)
    gen = torch.Generator().manual_seed(seed)
    first = torch.rand(batch, vocab, generator=gen).argsort(dim=-1)[:, :half]  # (B, L) distinct
    shifts = torch.randint(0, half, (batch,), generator=gen)  # (B,)
    if not random_shift:
        shifts = torch.zeros_like(shifts)
    index = (torch.arange(half)[None, :] + shifts[:, None]) % half  # (B, L)
    return torch.cat((first, first.gather(1, index)), dim=1), shifts


def predictable(shifts: Tensor, half: int) -> Tensor:
    """Boolean ``(B, 2 L - 1)``: where the repeat lets the next token be predicted.

    Entry t is about predicting token t + 1 from tokens 0..t. It is True in the second half,
    where token t's earlier copy has a successor to read, i.e. everywhere from t = L on except
    where the rotation wraps round (the earlier copy is the first half's last token). ``shifts``
    are the integers ``0 .. L - 1`` :func:`repeated_sequences` draws.
    """
    half = checks.require_positive_int("half", half)
    checks.require_array("shifts", shifts, Tensor, "torch.Tensor")
    checks.require_integer_tensor("shifts", shifts, "(B,)")
    checks.require_ndim("shifts", shifts, (1,), "(B,)")
    if shifts.numel() and not 0 <= int(shifts.min()) <= int(shifts.max()) < half:
        raise ValueError(
            f"shifts must lie in 0..half - 1 = 0..{half - 1} (a rotation of the {half} tokens), "
            f"got values from {int(shifts.min())} to {int(shifts.max())}, shape {tuple(shifts.shape)}"
        )
    t = torch.arange(2 * half - 1, device=shifts.device)
    i = t - half  # index within the second half; negative in the first
    wraps = (i[None, :] + shifts[:, None]) % half == half - 1
    return (i >= 0)[None, :] & ~wraps
