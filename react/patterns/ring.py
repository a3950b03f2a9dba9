"""Ring patterns: ReduceScatter, AllGather and AllReduce on the ring ``0 -> 1 -> ... -> 0``.

The message is cut into ``n`` chunks of ``1/n``; at every step each rank sends one chunk to its
successor, so every link of the ring carries ``1/n`` of the message per step (the bandwidth-optimal
schedule NCCL uses for its ring algorithm). Chunk ``c`` ends reduced at rank ``c`` after the
ReduceScatter and starts from rank ``c`` in the AllGather, so AllReduce is simply one followed by
the other: ``2(n-1)`` steps.
"""

from __future__ import annotations

from react.model.pattern import Flow, Pattern
from react.patterns._common import check_n, equal_chunks

__all__ = ["allgather_ring", "allreduce_ring", "reduce_scatter_ring"]


def reduce_scatter_ring(n: int) -> Pattern:
    """ReduceScatter on the ring: ``n - 1`` steps; chunk ``c`` ends reduced at its owner ``c``.

    At step ``s`` rank ``r`` adds chunk ``(r - s) mod n`` into rank ``r + 1``: chunk ``c`` starts
    at rank ``c + 1``, collects one contribution per hop and reaches rank ``c`` after ``n - 1``.

    Examples
    --------
    >>> reduce_scatter_ring(4).num_steps
    3
    """
    check_n("reduce_scatter_ring", n)
    return Pattern(
        "reduce_scatter", tuple(range(n)), equal_chunks(n, owned=True),
        tuple(_ring_flows(n, first_step=1, lag=0, op="reduce")), name="reduce_scatter_ring",
    )


def allgather_ring(n: int) -> Pattern:
    """AllGather on the ring: ``n - 1`` steps; rank ``c``'s chunk ``c`` is copied around.

    At step ``s`` rank ``r`` forwards chunk ``(r - s + 1) mod n`` (its own at step 1).
    """
    check_n("allgather_ring", n)
    return Pattern(
        "allgather", tuple(range(n)), equal_chunks(n, owned=True),
        tuple(_ring_flows(n, first_step=1, lag=1, op="copy")), name="allgather_ring",
    )


def allreduce_ring(n: int) -> Pattern:
    """AllReduce on the ring: :func:`reduce_scatter_ring` then :func:`allgather_ring`.

    ``2(n - 1)`` steps of ``n`` flows, each flow ``1/n`` of the message.

    Examples
    --------
    >>> p = allreduce_ring(4)
    >>> p.num_steps, len(p.flows), len(p.chunks)
    (6, 24, 4)
    """
    check_n("allreduce_ring", n)
    flows = _ring_flows(n, first_step=1, lag=0, op="reduce")
    flows += _ring_flows(n, first_step=n, lag=1, op="copy")
    return Pattern(
        "allreduce", tuple(range(n)), equal_chunks(n), tuple(flows), name="allreduce_ring"
    )


def _ring_flows(n: int, first_step: int, lag: int, op: str) -> list[Flow]:
    # At the phase's s-th step (s = 1..n-1) rank r sends chunk (r - s + lag) mod n to r + 1.
    return [
        Flow(first_step + s - 1, r, (r + 1) % n, ((r - s + lag) % n,), op)  # type: ignore[arg-type]
        for s in range(1, n)
        for r in range(n)
    ]
