"""Candidate swaps of a rank, by kind, and their compact form in a swap space.

A space keeps a rank's swaps as :class:`Entry` records, one per kind, chunk graph and window
with the partners as an array, and makes :class:`~react.model.transforms.Swap` objects only
when asked (:func:`materialise`). Position swaps are enumerated over canonical windows
(:func:`windows`): a window's rewrite depends only on which *rewritten steps* it holds, so the
windows ``[E_i, E_j]`` over the rewritten steps ``E`` give every rewrite once and none that is a
no-op; the one spanning all of them equals the chunk-local swap and is left to it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from react.model.pattern import Pattern
from react.model.swapspace.pruning import Noops, step_failures
from react.model.swapspace.tables import Degrees, GraphTable
from react.model.transforms import PRIORITY, ChunkLocalSwap, GlobalSwap, PositionSwap, Swap

__all__ = ["Entry", "Windows", "entry_order", "global_candidates", "materialise", "windows"]

#: ``(partner, first, last, verdict first, verdict last)``, one element per window.
Windows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True, slots=True)
class Entry:
    """Partners (rank positions, sorted) of one rank for one kind, chunk graph and window."""

    kind: str
    graph: int  # -1 for global swaps
    first: int
    last: int
    partners: np.ndarray


def entry_order(entry: Entry) -> tuple[int, int, int, int]:
    """The order of a rank's swaps: by kind (:data:`~react.model.transforms.PRIORITY`), chunk
    graph and window."""
    return (PRIORITY[entry.kind], entry.graph, entry.first, entry.last)


def materialise(ranks: tuple[int, ...], c: int, entries: Sequence[Entry]) -> Iterator[Swap]:
    """The swaps of rank position ``c`` that ``entries`` hold, in their order."""
    x = ranks[c]
    for e in entries:
        for y in e.partners:
            if e.kind == "position":
                yield PositionSwap(e.graph, x, ranks[int(y)], e.first, e.last)
            elif e.kind == "chunk_local":
                yield ChunkLocalSwap(e.graph, x, ranks[int(y)])
            else:
                yield GlobalSwap(x, ranks[int(y)])


def windows(d: Degrees, noops: Noops, g: int, table: GraphTable, c: int) -> Windows | None:
    """Every canonical window of ``c`` in chunk graph ``g`` that passes the degree rule, or None.

    The degree rule (§5.3.2) is a condition per step (outside the window no degree changes), so
    a window passes iff every rewritten step in it does
    (:func:`~react.model.swapspace.pruning.step_failures`): the windows are the runs of passing
    rewritten steps and their sub-windows. A window that starts at the pair's first rewritten
    step has the graph's first step as *verdict first*, one that ends at its last the graph's
    last as *verdict last*: the same rewrite, and the form the viability proofs cover.
    """
    steps = table.steps
    if len(steps) < 2:
        return None
    ys, ts, bad = step_failures(d, table, c, noops, g)
    if bad.all():  # no passing step, no window (every window of the ring ends here)
        return None
    order = np.lexsort((ts, ys))
    ys, ts, bad = ys[order], ts[order], bad[order]
    i, j, starts, ends = _runs(ys, bad)
    if not len(i):
        return None
    v_first = np.where(starts, int(steps[0]), ts[i])
    v_last = np.where(ends, int(steps[-1]), ts[j])
    return ys[i], ts[i], ts[j], v_first, v_last


def _runs(
    ys: np.ndarray, bad: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The windows over rewritten steps sorted by (partner, step): index pairs ``(i, j)`` with
    steps ``i..j`` of one partner all passing, and whether ``i`` / ``j`` is that partner's first
    / last rewritten step (both at once: the chunk-local swap, left out)."""
    m = len(ys)
    new_y = np.r_[True, ys[1:] != ys[:-1]]
    group_start = np.maximum.accumulate(np.where(new_y, np.arange(m), 0))
    end_y = np.r_[ys[1:] != ys[:-1], True]
    group_end = np.minimum.accumulate(np.where(end_y, np.arange(m), m)[::-1])[::-1]
    # A run of passing steps breaks at a new partner or a failing step.
    run = np.cumsum(new_y | bad | np.r_[False, bad[:-1]])
    good = np.flatnonzero(~bad)
    out_i: list[np.ndarray] = []
    out_j: list[np.ndarray] = []
    width = 0
    while True:
        j = good + width
        valid = j < m
        i, j = good[valid], j[valid]
        same = run[i] == run[j]
        if not same.any():
            break
        out_i.append(i[same])
        out_j.append(j[same])
        width += 1
    if not out_i:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty.astype(bool), empty.astype(bool)
    i = np.concatenate(out_i)
    j = np.concatenate(out_j)
    starts, ends = i == group_start[i], j == group_end[j]
    keep = ~(starts & ends)
    return i[keep], j[keep], starts[keep], ends[keep]


def global_candidates(pattern: Pattern, pos: dict[int, int], c: int) -> np.ndarray:
    """Which ranks could exchange roles with ``c`` everywhere (boolean mask over positions):
    any other rank, and with owned chunks only one that owns as many chunks (the k-th chunk of
    one is renamed to the k-th of the other)."""
    keep = np.ones(pattern.n, dtype=bool)
    keep[c] = False
    if pattern.kind in ("allgather", "reduce_scatter"):
        owned = np.zeros(pattern.n, dtype=np.int64)
        for chunk in pattern.chunks:
            owned[pos[chunk.owner]] += 1  # type: ignore[index]
        keep &= owned == owned[c]
    return keep
