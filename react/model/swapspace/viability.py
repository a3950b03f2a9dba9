"""Whether a candidate swap keeps the collective's meaning, as cheaply as is exact.

A swap is viable iff the swapped pattern verifies (:func:`react.model.verify.verify`). A
relabelling cannot change whether a chunk graph verifies unless the collective's meaning names
one of the two ranks (:func:`meaning_fixed`); where it does, and for position swaps, the
original graph's replay (:class:`~react.model.replay.GraphReplay`) decides: by proofs on its
state where they apply, by an incremental replay otherwise. The package docstring of
:mod:`react.model.swapspace` gives the whole argument.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from react.model.errors import PatternError
from react.model.pattern import Pattern
from react.model.replay import GraphReplay
from react.model.swapspace.enumeration import Entry, Windows, global_candidates
from react.model.transforms import GlobalSwap
from react.model.verify import first_violation

__all__ = [
    "chunk_local_partners", "global_partners", "guard_global", "meaning_fixed",
    "position_entries",
]


def meaning_fixed(pattern: Pattern, pos: dict[int, int], g: int, c: int) -> np.ndarray:
    """For every partner ``y``: whether the collective's meaning, restricted to chunk graph
    ``g``, names neither ``c`` nor ``y`` (then renaming them inside ``g`` cannot change
    whether ``g`` verifies: the replay is the original's with two labels exchanged)."""
    n = pattern.n
    if pattern.kind == "allreduce":
        return np.ones(n, dtype=bool)
    named = np.zeros(n, dtype=bool)
    if pattern.kind in ("broadcast", "reduce"):
        named[pos[pattern.root]] = True  # type: ignore[index]
    else:
        for k in pattern.chunk_graphs()[g]:
            named[pos[pattern.chunks[k].owner]] = True  # type: ignore[index]
    if named[c]:
        return np.zeros(n, dtype=bool)
    return ~named


def chunk_local_partners(
    replay: Callable[[], GraphReplay], c: int, ok: np.ndarray, fixed: np.ndarray,
    span: tuple[int, int],
) -> np.ndarray:
    """The partners (positions, sorted) among ``ok`` whose chunk-local swap with ``c`` is
    viable: those the meaning does not tie (``fixed``) without a replay, the others replayed
    over the graph's whole ``span`` (``replay()`` gives the graph's replay, built on demand)."""
    first, last = span
    partners = np.flatnonzero(ok & fixed)
    rest = [int(y) for y in np.flatnonzero(ok & ~fixed)]
    if rest:
        graph = replay()
        extra = [y for y in rest if graph.viable(c, y, first, last)]
        partners = np.union1d(partners, np.asarray(extra, dtype=np.int64))
    return partners


def position_entries(
    replay: GraphReplay, g: int, c: int, found_windows: Windows, fixed: np.ndarray
) -> list[Entry]:
    """The viable position swaps of ``c`` in chunk graph ``g``, one entry per window.

    ``found_windows`` are the canonical windows that pass the degree rule
    (:func:`~react.model.swapspace.enumeration.windows`), checked by their verdict bounds.
    Viability is decided per window for all partners at once where it is provable, in order:
    linear algebra (exact both ways where it applies, no replay), the start/end proofs of
    :meth:`GraphReplay.verdicts`, an unheld send at the window's first step; the rest by the
    incremental replay.
    """
    ys, firsts, lasts, v_firsts, v_lasts = found_windows
    found: dict[tuple[int, int], list[int]] = {}
    order = np.lexsort((ys, v_lasts, v_firsts))
    ys, firsts, lasts = ys[order], firsts[order], lasts[order]
    v_firsts, v_lasts = v_firsts[order], v_lasts[order]
    cut = np.flatnonzero((np.diff(v_firsts) != 0) | (np.diff(v_lasts) != 0)) + 1
    for lo, hi in zip(np.r_[0, cut], np.r_[cut, len(ys)], strict=True):
        t1, t2 = int(v_firsts[lo]), int(v_lasts[lo])
        group = ys[lo:hi]
        proven, rejected = replay.linear_verdicts(c, group, t1, t2)
        open_ = ~proven & ~rejected
        if open_.any():
            more, less = replay.verdicts(c, group[open_], t1, t2, fixed)
            proven[open_] = more
            rejected[open_] = less
            open_ = ~proven & ~rejected
        if open_.any() and replay.may_be_empty:
            rejected[open_] |= replay.unheld_at_start(c, group[open_], firsts[lo:hi][open_])
            open_ = ~proven & ~rejected
        for k in np.flatnonzero(proven | open_):
            y = int(group[k])
            if proven[k] or replay.viable(c, y, t1, t2):
                found.setdefault((int(firsts[lo + k]), int(lasts[lo + k])), []).append(y)
    return [
        Entry("position", g, a, b, np.asarray(sorted(partners), dtype=np.int64))
        for (a, b), partners in found.items()
    ]


def global_partners(
    pattern: Pattern, pos: dict[int, int], c: int
) -> tuple[np.ndarray, GlobalSwap | None]:
    """``c``'s partners (positions) with a viable global swap, and one of those swaps that the
    relabelling argument alone proves (for :func:`guard_global`), or None.

    A global swap relabels every flow, so the swapped pattern verifies iff the original does,
    unless the meaning names one of the two ranks (the root of a broadcast or reduce): those
    are replayed one by one.
    """
    x = pattern.ranks[c]
    keep = global_candidates(pattern, pos, c)
    if pattern.root is not None:
        root = pos[pattern.root]
        partners = [root] if c != root else list(np.flatnonzero(keep))
        for y in partners:
            if keep[y] and first_violation(
                    GlobalSwap(x, pattern.ranks[y]).apply(pattern)) is not None:
                keep[y] = False
    others = [
        y for y in np.flatnonzero(keep)
        if pattern.root is None or pattern.root not in (x, pattern.ranks[y])
    ]
    proven = GlobalSwap(x, pattern.ranks[int(others[0])]) if others else None
    return np.flatnonzero(keep), proven


def guard_global(pattern: Pattern, swap: GlobalSwap) -> None:
    """Replay one chunk graph of a global swap the relabelling argument says is viable, so that
    a broken transform cannot hide behind the proof (a space does it once).

    Raises
    ------
    PatternError
        If the swapped graph does not verify.
    """
    if pattern.kind in ("allgather", "reduce_scatter"):  # chunks are renamed too: whole pattern
        swapped = swap.apply(pattern)
        block = swapped.chunk_graphs()[0]
    else:  # the swap restricted to chunk graph 0, without rebuilding the other flows
        block = pattern.chunk_graphs()[0]
        swapped = swap.apply(
            pattern.with_flows(pattern.flows[i] for i in pattern.flows_of_chunk_graph(0)))
    problem = first_violation(swapped, chunks=block)
    if problem is not None:
        raise PatternError(
            f"SwapSpace: {swap.describe()} should keep the meaning but does not: {problem}"
        )
