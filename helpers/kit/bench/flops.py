"""How many floating-point operations attention does, and what rate that is.

The attention core ``softmax(q k^T / sqrt(d_k)) v`` is two batched matmuls per head:
``q k^T`` is ``(T, d_k) @ (d_k, T)`` and ``weights @ v`` is ``(T, T) @ (T, d_k)``, each
``2 * T * T * d_k`` FLOPs (a multiply and an add per term). Over ``B`` sequences and ``h`` heads
the forward pass is ``4 * B * h * T^2 * d_k``. The softmax and the scaling are ``O(T^2)``, too
small to count. A causal mask skips half of the score matrix, so a kernel that skips the masked
blocks does half the work. The backward pass does five such matmuls against the forward's two,
hence the usual ``2.5 x`` forward (the convention of the FlashAttention papers).

The projections of a multi-head attention module are ``4`` matmuls ``(B T, D) @ (D, D)``:
``8 * B * T * D^2`` forward, twice that backward (a gradient for the input and one for the
weight).
"""

from __future__ import annotations

from helpers.kit.checks import require_positive_int

MODES = ("forward", "backward", "forward_backward")
BACKWARD_FACTOR = 2.5  # backward FLOPs of the attention core, as a multiple of the forward
PROJECTION_BACKWARD_FACTOR = 2.0


def _check(**sizes: int) -> None:
    for name, value in sizes.items():
        require_positive_int(name, value)


def _scale(mode: str, backward_factor: float) -> float:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return {"forward": 1.0, "backward": backward_factor, "forward_backward": 1 + backward_factor}[
        mode
    ]


def attention_flops(
    batch: int, heads: int, seq_len: int, d_k: int, causal: bool = False, mode: str = "forward"
) -> float:
    """FLOPs of the attention core for ``q, k, v`` of shape ``(batch, heads, seq_len, d_k)``.

    ``mode`` is ``"forward"`` (``4 B h T^2 d_k``, halved when ``causal``), ``"backward"``
    (2.5 x forward) or ``"forward_backward"`` (3.5 x forward).
    """
    _check(batch=batch, heads=heads, seq_len=seq_len, d_k=d_k)
    forward = 4.0 * batch * heads * seq_len**2 * d_k
    if causal:
        forward /= 2
    return forward * _scale(mode, BACKWARD_FACTOR)


def projection_flops(batch: int, seq_len: int, d_model: int, mode: str = "forward") -> float:
    """FLOPs of the q, k, v and output projections of one attention layer (``8 B T D^2`` forward)."""
    _check(batch=batch, seq_len=seq_len, d_model=d_model)
    return 8.0 * batch * seq_len * d_model**2 * _scale(mode, PROJECTION_BACKWARD_FACTOR)


def tflops_per_second(flops: float, seconds: float) -> float:
    """Achieved rate in TFLOP/s (``1e12`` FLOP/s) for ``flops`` done in ``seconds``."""
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    return flops / seconds / 1e12
