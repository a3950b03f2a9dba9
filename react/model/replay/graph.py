"""The replay of one chunk graph the swap space keeps: the original run and the questions asked
of it, each answered once and cached.

:class:`GraphReplay` is the :class:`~react.model.replay.trajectory.Trajectory` of a chunk graph
with the swap space's questions on top: the no-replay verdicts on a window (start and end
conditions from :mod:`~react.model.replay.access` and :mod:`~react.model.replay.influence`, the
linear test of :mod:`~react.model.replay.linear`, an unheld send) and, when none decides, the
incremental replay of :mod:`~react.model.replay.incremental`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from react.model.pattern import Pattern
from react.model.replay.access import access_history, overwritten, value_ids
from react.model.replay.incremental import replay_swap
from react.model.replay.influence import influence_hashes, influence_sets
from react.model.replay.linear import Table, decide_by_paths, window_paths
from react.model.replay.trajectory import Trajectory

__all__ = ["GraphReplay"]

_T = TypeVar("_T")


class GraphReplay(Trajectory):
    """The original replay of one chunk graph, kept so that a swap is re-checked incrementally.

    Semantics are those of :mod:`react.model.verify` (bitset buffers, simultaneous steps, double
    counts, unheld sends, a copy plus another write at one step, the final condition). The
    original graph must verify; only buffers that differ from the original's are replayed.
    """

    def __init__(self, pattern: Pattern, g: int, pos: dict[int, int]) -> None:
        super().__init__(pattern, g, pos)
        self._boundaries: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._verdict_cache: dict[tuple[int, int, int, int], bool] = {}
        self._derived: dict[object, object] = {}

    def _cached(self, key: object, build: Callable[[], _T]) -> _T:
        if key not in self._derived:
            self._derived[key] = build()
        return self._derived[key]  # type: ignore[return-value]

    # -- the original state at a step boundary ---------------------------------------------------
    def boundary(self, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The original state at the end of step ``t``, as ``(n, chunks)`` arrays: value ids
        (equal ids, equal buffers), when the value is overwritten
        (:func:`~react.model.replay.access.overwritten`: the step, nan if live, inf if never
        touched again and unconstrained) and an influence hash: the sum of random weights of
        the constrained final buffers the value flows into
        (:func:`~react.model.replay.influence.influence_hashes`).
        """
        cached = self._boundaries.get(t)
        if cached is not None:
            return cached
        history = self._history()
        vid = value_ids(history, self.n, len(self.chunks), t)
        over = overwritten(history, self.n, len(self.chunks), t)
        # Between two steps of this graph nothing changes: the boundary of the last step <= t.
        k = bisect_right(self.steps, t)
        hashes = self._cached("influence", lambda: influence_hashes(self))
        cached = (vid, over, hashes[self.steps[k - 1] if k else self.steps[0] - 1])
        self._boundaries[t] = cached
        return cached

    def _history(self) -> dict[str, np.ndarray]:
        return self._cached("history", lambda: access_history(self))

    def values_at(self, t: int) -> list[list[int]]:
        """The original values at the end of step ``t``, per chunk (in ``chunks`` order), per
        rank position."""
        return self._cached(("values", t), lambda: [
            [self.value(t, r, c) for r in range(self.n)] for c in self.chunks])

    def held(self, t: int) -> np.ndarray:
        """Whether each (rank position, chunk) holds a value at the end of step ``t``."""
        return self._cached(("held", t), lambda: self._history()["nonzero"][
            value_ids(self._history(), self.n, len(self.chunks), t)])

    def sends(self, t: int) -> np.ndarray:
        """Whether each (rank position, chunk) is sent at step ``t``."""

        def build() -> np.ndarray:
            out = np.zeros((self.n, len(self.chunks)), dtype=bool)
            for s, flows in self.out.get(t, {}).items():
                for _, chunks, _ in flows:
                    for c in chunks:
                        out[s, self.col[c]] = True
            return out

        return self._cached(("sends", t), build)

    def reach(self) -> tuple[dict[int, list[list[int]]], bool] | None:
        """Per step boundary ``t`` (``steps[0] - 1`` included), per chunk, per rank position:
        the influence set of the value at the end of ``t``, as the bitset of the ranks whose
        constrained final buffer of that chunk it reaches; and whether every reduce's result
        reaches one. None if a value reaches a final buffer by two paths (counts not 0/1)."""
        return self._cached("reach", lambda: influence_sets(self))

    def paths(self, first: int, last: int) -> Table | None:
        """Per chunk, per rank position ``r``: the bitset of positions with a path from their
        buffer at ``first - 1`` to ``r``'s at ``last`` (a replay of the window from one-hot
        buffers); None if some buffer is reached twice from one source (then ``M`` is not 0/1
        and :meth:`linear_verdicts` does not decide). One replay per ``first`` serves every
        ``last``: each step's result is kept."""
        key = ("paths", first, last)
        if key not in self._derived:
            for t, table in window_paths(self, first).items():
                self._derived[("paths", first, t)] = table
        return self._derived[key]  # type: ignore[return-value]

    # -- verdicts without a replay ---------------------------------------------------------------
    def verdicts(
        self, x: int, ys: np.ndarray, first: int, last: int, meaning_fixed: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """For each partner ``ys[k]`` of ``x`` in window ``[first, last]``: (proven viable,
        proven not viable), both without a replay; partners in neither need :meth:`viable`.
        ``meaning_fixed`` is indexed by partner (all ``n`` of them). Each partner's verdict
        reads only its own row and x's, so asking for the few partners a window has costs
        that many rows, not ``n``.

        Start: if the window begins at the graph's first step, the swapped window is the
        original with ``x`` and ``y`` renamed in places and contents, harmless where the
        meaning names neither (``meaning_fixed``); otherwise, per chunk, x and y must hold
        equal values at ``first - 1`` or values that are dead and overwritten inside the window.
        Either way the state after the swapped window is the original's with the buffers of x
        and y exchanged. End: that exchange is harmless if, per chunk, the two values are equal
        or both dead (proven viable); it is fatal if the values differ and some constrained
        final buffer depends on one but not the other (the final value loses one and gains the
        other: a wrong sum or a double count).
        """
        ys = np.asarray(ys, dtype=np.intp)
        if first <= self.steps[0]:
            start = meaning_fixed[ys]
        else:
            vid, over, _ = self.boundary(first - 1)
            # nan (live) and inf (never touched again) compare False
            inside, inside_x = over[ys] <= last, over[x] <= last
            start = np.all((vid[ys] == vid[x]) | (inside & inside_x), axis=1)
        vid, over, hashes = self.boundary(last)
        equal = vid[ys] == vid[x]
        dead, dead_x = ~np.isnan(over[ys]), ~np.isnan(over[x])
        proven = start & np.all(equal | (dead & dead_x), axis=1)
        rejected = start & ~proven & np.any(~equal & (hashes[ys] != hashes[x]), axis=1)
        itself = ys == x
        proven[itself] = rejected[itself] = False
        return proven, rejected

    def unheld_at_start(self, x: int, ys: np.ndarray, firsts: np.ndarray) -> np.ndarray:
        """For each partner ``ys[k]`` with window starting at ``firsts[k]``: whether the swapped
        graph sends, at that first step, a chunk its new sender does not hold (exact: up to
        then the state is the original's, and :mod:`react.model.verify` rejects such a send).

        Only empty buffers trigger it (AllGather, Broadcast: ranks that have not received yet).
        """
        out = np.zeros(len(ys), dtype=bool)
        for a in np.unique(firsts):
            held = self.held(int(a) - 1)
            sends = self.sends(int(a))
            k = np.flatnonzero(firsts == a)
            y = ys[k]
            out[k] = np.any(sends[x] & ~held[y], axis=1) | np.any(sends[y] & ~held[x], axis=1)
        return out

    def linear_verdicts(
        self, x: int, ys: np.ndarray, first: int, last: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """For each partner in ``ys``, swapping over ``[first, last]``: (proven viable, proven
        not viable), without a replay, for kinds whose buffers are never empty (AllReduce,
        ReduceScatter, Reduce); all False otherwise or where the structure is not 0/1. Why it
        is exact: :mod:`react.model.replay.linear`."""
        key = ("linear", x, ys.dtype.str, ys.tobytes(), first, last)
        proven, rejected = self._cached(key, lambda: self._linear_verdicts(x, ys, first, last))
        return proven.copy(), rejected.copy()  # callers refine them in place

    def _linear_verdicts(
        self, x: int, ys: np.ndarray, first: int, last: int
    ) -> tuple[np.ndarray, np.ndarray]:
        nothing = np.zeros(len(ys), dtype=bool), np.zeros(len(ys), dtype=bool)
        if self.may_be_empty:
            return nothing
        paths = self.paths(first, last)
        reach = self.reach()
        if paths is None or reach is None:
            return nothing
        sets, no_dead_reduce = reach
        return decide_by_paths(x, ys, paths, sets[first - 1], sets[last],
                               self.values_at(first - 1), self.values_at(last), no_dead_reduce)

    # -- the replay ------------------------------------------------------------------------------
    def viable(self, x: int, y: int, first: int, last: int) -> bool:
        """Whether relabelling rank positions ``x`` and ``y`` in this graph's flows of steps
        ``first..last`` keeps the graph valid (cached per unordered pair and window; the
        incremental replay of :func:`~react.model.replay.incremental.replay_swap`)."""
        key = (min(x, y), max(x, y), first, last)
        verdict = self._verdict_cache.get(key)
        if verdict is None:
            verdict = replay_swap(self, x, y, first, last)
            self._verdict_cache[key] = verdict
        return verdict
