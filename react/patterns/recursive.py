"""Recursive patterns: recursive-doubling AllGather and halving-doubling (Rabenseifner) AllReduce.

Both pair rank ``r`` with ``r XOR d`` for distances ``d`` that are powers of two, so they need
``log2 n`` steps instead of the ring's ``n - 1``, at the price of messages that grow (doubling) or
shrink (halving) from step to step. They are defined for a power of two ``p`` of ranks.

Any other ``n`` uses the standard *fold / unfold* adaptation (Thakur, Rabenseifner and Gropp,
"Optimization of collective communication operations in MPICH", IJHPCA 2005, §4): with ``p``
the largest power of two below or at ``n``, each extra rank ``e = p .. n-1`` first hands its data
to a partner ``e - p`` in the core ``0 .. p-1`` (one step), the core runs the power-of-two
algorithm with the partners acting for both, and finally each partner copies the result back to
its extra rank (one step). MPICH pairs neighbouring ranks instead; pairing ``e`` with ``e - p``
keeps the core's ranks contiguous, which makes the pattern easier to read. Extra ranks are idle
in between, and the partners carry more data: that imbalance is the cost of the adaptation.
"""

from __future__ import annotations

from react.model.pattern import Flow, Pattern
from react.patterns._common import check_n, equal_chunks

__all__ = ["allgather_recursive_doubling", "allreduce_halving_doubling"]


def allgather_recursive_doubling(n: int) -> Pattern:
    """AllGather by recursive doubling: at step ``s`` rank ``r`` sends every chunk it holds to
    ``r XOR 2^(s-1)``, so each flow carries twice the data of the step before.

    Chunk ``c`` (``1/n`` of the message) is rank ``c``'s input. For ``n`` a power of two there are
    ``log2 n`` steps and the flows of step ``s`` carry ``2^(s-1)`` chunks. Otherwise the module's
    fold / unfold adaptation adds a first step (extra rank ``e`` copies its chunk to ``e - p``)
    and a last one (``e - p`` copies every other chunk to ``e``).

    Parameters
    ----------
    n : int
        Number of ranks, at least 2.

    Examples
    --------
    >>> p = allgather_recursive_doubling(8)
    >>> p.num_steps, [len(f.chunks) for f in p.flows if f.src == 0]
    (3, [1, 2, 4])
    """
    check_n("allgather_recursive_doubling", n)
    p = 1 << (n.bit_length() - 1)
    flows: list[Flow] = []
    # held[r]: the chunks core rank r holds; after folding it includes its extra rank's chunk.
    held = [{r} for r in range(p)]
    step = 0
    if n > p:
        step = 1
        for e in range(p, n):
            flows.append(Flow(step, e, e - p, (e,), "copy"))
            held[e - p].add(e)
    distance = 1
    while distance < p:
        step += 1
        for r in range(p):
            flows.append(Flow(step, r, r ^ distance, tuple(sorted(held[r])), "copy"))
        held = [held[r] | held[r ^ distance] for r in range(p)]
        distance <<= 1
    if n > p:
        step += 1
        for e in range(p, n):
            others = tuple(c for c in range(n) if c != e)
            flows.append(Flow(step, e - p, e, others, "copy"))
    return Pattern(
        "allgather", tuple(range(n)), equal_chunks(n, owned=True), tuple(flows),
        name="allgather_recursive_doubling",
    )


def allreduce_halving_doubling(n: int) -> Pattern:
    """AllReduce by recursive halving (ReduceScatter) then recursive doubling (AllGather):
    Rabenseifner's algorithm, the bandwidth-optimal AllReduce in ``2 log2 n`` steps.

    The message is cut into ``p`` chunks of ``1/p`` (``p`` the largest power of two ``<= n``).
    Halving: at step ``s`` (distance ``d = p / 2^s``) rank ``r`` keeps the half of its current
    block that contains ``r`` and adds the other half, the ``d`` chunks around ``r XOR d``, into
    ``r XOR d``; after ``log2 p`` steps rank ``r`` holds chunk ``r`` fully reduced. Doubling: at
    step ``s`` (``d = 2^(s-1)``) rank ``r`` copies its ``d`` reduced chunks to ``r XOR d``. For
    other ``n`` the module's fold / unfold adaptation adds a first step (extra rank ``e`` adds all
    chunks into ``e - p``) and a last one (``e - p`` copies the result to ``e``).

    Parameters
    ----------
    n : int
        Number of ranks, at least 2.

    Examples
    --------
    >>> p = allreduce_halving_doubling(8)
    >>> p.num_steps, [len(f.chunks) for f in p.flows if f.src == 0]
    (6, [4, 2, 1, 1, 2, 4])
    """
    check_n("allreduce_halving_doubling", n)
    p = 1 << (n.bit_length() - 1)
    every = tuple(range(p))
    flows: list[Flow] = []
    step = 0
    if n > p:
        step = 1
        flows.extend(Flow(step, e, e - p, every, "reduce") for e in range(p, n))
    distance = p >> 1
    while distance:  # halving: d = p/2, p/4, ..., 1
        step += 1
        for r in range(p):
            q = r ^ distance
            start = q & ~(distance - 1)  # the d-aligned block that contains q
            flows.append(Flow(step, r, q, tuple(range(start, start + distance)), "reduce"))
        distance >>= 1
    distance = 1
    while distance < p:  # doubling: d = 1, 2, ..., p/2
        step += 1
        for r in range(p):
            start = r & ~(distance - 1)  # the d-aligned block that contains r
            flows.append(Flow(step, r, r ^ distance, tuple(range(start, start + distance)), "copy"))
        distance <<= 1
    if n > p:
        step += 1
        flows.extend(Flow(step, e - p, e, every, "copy") for e in range(p, n))
    return Pattern(
        "allreduce", tuple(range(n)), equal_chunks(p), tuple(flows),
        name="allreduce_halving_doubling",
    )
