"""What a collective must leave in a rank's buffer: the meaning of each kind, in plain numpy.

Independent of any pattern's flows, so it checks RCollective (and the transports) against the
collective's definition, not against the schedule that produced the bytes: AllReduce sums every
input; AllGather puts chunk ``c`` of its owner's input everywhere; ReduceScatter leaves the sum
of chunk ``c`` at its owner; Broadcast copies the root's input everywhere; Reduce leaves the sum
at the root. Regions a kind leaves undefined (a non-owner's chunks after a ReduceScatter, a
non-root after a Reduce) are masked out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from react.model.pattern import Pattern
from react.runtime.schedule import chunk_bounds


def initial_buffer(pattern: Pattern, mine: np.ndarray, rank: int) -> np.ndarray:
    """What ``rank`` holds before the collective: its input where the kind says it holds data,
    zero elsewhere (AllGather: only its own chunks; Broadcast: only the root), as RCollective's
    contract asks (a pattern may reduce into a chunk its receiver does not hold yet)."""
    out = mine.copy()
    if pattern.kind == "broadcast" and rank != pattern.root:
        out[:] = 0
    elif pattern.kind == "allgather":
        bounds = chunk_bounds(pattern, len(mine))
        for chunk in pattern.chunks:
            if chunk.owner != rank:
                out[bounds[chunk.id]:bounds[chunk.id + 1]] = 0
    return out


def expected_output(pattern: Pattern, inputs: Sequence[np.ndarray], rank: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(expected buffer, mask of defined elements)`` of ``rank`` after ``pattern``'s collective.

    ``inputs[i]`` is the input of ``pattern.ranks[i]``; all of one length and dtype.
    """
    count = len(inputs[0])
    bounds = chunk_bounds(pattern, count)
    position = {r: i for i, r in enumerate(pattern.ranks)}
    me = inputs[position[rank]]
    total = np.sum(np.stack(inputs), axis=0, dtype=me.dtype)
    out = me.copy()
    defined = np.zeros(count, dtype=bool)
    kind = pattern.kind
    if kind == "allreduce":
        out[:], defined[:] = total, True
    elif kind == "broadcast":
        out[:], defined[:] = inputs[position[pattern.root]], True  # type: ignore[index]
    elif kind == "reduce":
        if rank == pattern.root:
            out[:], defined[:] = total, True
    else:  # allgather, reduce_scatter: chunk by chunk
        for chunk in pattern.chunks:
            lo, hi = bounds[chunk.id], bounds[chunk.id + 1]
            if kind == "allgather":
                out[lo:hi] = inputs[position[chunk.owner]][lo:hi]  # type: ignore[index]
                defined[lo:hi] = True
            elif chunk.owner == rank:
                out[lo:hi] = total[lo:hi]
                defined[lo:hi] = True
    return out, defined
