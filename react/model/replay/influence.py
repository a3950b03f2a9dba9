"""Influence sets of a chunk graph's values: which constrained final buffers each value reaches.

A swap that exchanges two ranks' buffers at a step boundary is fatal when the two values differ
and some final buffer depends on one of them but not the other (the final value would lose one
input and gain another). Both forms come from one backward pass over the original run: a copy
into ``d`` kills ``d``'s earlier value, a flow ``s -> d`` passes ``d``'s later influence to
``s``'s earlier value. :func:`influence_sets` gives the sets themselves (bitsets, exact, for the
linear test); :func:`influence_hashes` a 64-bit sum of random weights per set, on arrays, for
comparing many pairs at once.
"""

from __future__ import annotations

import numpy as np

from react.model.replay.trajectory import Trajectory

__all__ = ["influence_hashes", "influence_sets", "weights"]


def influence_hashes(run: Trajectory) -> dict[int, np.ndarray]:
    """Per step boundary ``t`` (``steps[0] - 1`` included), ``(n, chunks)``: the sum modulo
    2**64 of the :func:`weights` of the constrained final buffers that the value of each (rank
    position, chunk) at the end of ``t`` reaches.

    In a valid pattern a value reaches a final buffer at most once (twice would count it
    twice), so equal influence sets give equal sums; unequal sums prove unequal sets.
    """
    n, width = run.n, len(run.chunks)
    col = run.col
    final = np.zeros(n * width, dtype=bool)
    final[[r * width + col[c] for r, c in run.final]] = True
    where = np.flatnonzero(final)
    infl = np.zeros(n * width, dtype=np.uint64)
    infl[where] = weights(where // width, np.asarray(run.chunks, dtype=np.int64)[where % width])
    out: dict[int, np.ndarray] = {}
    for s in reversed(run.steps):
        out[s] = infl.reshape(n, width)  # never written again: the next step's is a copy
        srcs: list[int] = []
        dsts: list[int] = []
        kills: list[int] = []
        for d, flows in run.into[s].items():
            for src, fchunks, is_copy in flows:
                for c in fchunks:
                    srcs.append(src * width + col[c])
                    dsts.append(d * width + col[c])
                    if is_copy:
                        kills.append(d * width + col[c])
        before = infl
        infl = before.copy()
        infl[kills] = 0
        # Sums of 64-bit words wrap as the weights' arithmetic modulo 2**64 does.
        np.add.at(infl, np.asarray(srcs, dtype=np.intp), before[dsts])
    out[run.steps[0] - 1] = infl.reshape(n, width)
    return out


def influence_sets(run: Trajectory) -> tuple[dict[int, list[list[int]]], bool] | None:
    """Per step boundary ``t`` (``steps[0] - 1`` included), per chunk, per rank position:
    the influence set of the value at the end of ``t``, as the bitset of the ranks whose
    constrained final buffer of that chunk it reaches; and whether every reduce's result
    reaches one. None if a value reaches a final buffer by two paths (counts not 0/1)."""
    col = run.col
    infl = [[1 << r if (r, c) in run.final else 0 for r in range(run.n)] for c in run.chunks]
    sets: dict[int, list[list[int]]] = {}
    no_dead_reduce = True
    for s in reversed(run.steps):
        sets[s] = infl
        new = [list(row) for row in infl]
        for d, flows in run.into[s].items():
            for _, chunks, is_copy in flows:
                for c in chunks:
                    if is_copy:
                        new[col[c]][d] = 0
                    elif not infl[col[c]][d]:
                        no_dead_reduce = False
        for d, flows in run.into[s].items():
            for src, chunks, _ in flows:
                for c in chunks:
                    j = col[c]
                    add = infl[j][d]
                    if new[j][src] & add:
                        return None
                    new[j][src] |= add
        infl = new
    sets[run.steps[0] - 1] = infl
    return sets, no_dead_reduce


def weights(ranks: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    """A fixed pseudo-random odd 64-bit weight per (rank position, chunk): splitmix64 of
    ``rank * K1 + chunk * K2 + 1``, in unsigned 64-bit arithmetic (it wraps modulo 2**64)."""
    k1, k2, k3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), \
        np.uint64(0x94D049BB133111EB)
    z = ranks.astype(np.uint64) * k1 + chunks.astype(np.uint64) * k2 + np.uint64(1)
    z = (z ^ (z >> np.uint64(30))) * k2
    z = (z ^ (z >> np.uint64(27))) * k3
    return (z ^ (z >> np.uint64(31))) | np.uint64(1)
