"""Pruning of candidate swaps: the degree rule (§5.3.2) and swaps that rewrite no flow.

Degree rule: with ``deg(t, r) = max(in, out)`` of rank ``r`` at step ``t`` over the whole
pattern, swapping ``c`` and ``y`` in a window of one chunk graph is kept iff for every step
``t`` and ``r`` in ``{c, y}``: ``deg_after(t, r) <= max(deg_before(t, c), deg_before(t, y))``.
It is a condition per step, decided here for all partners ``y`` at once per step (vectorised
over rank positions): ``c`` after the swap has ``T_c - G_c + G_y`` on the window (T: whole
pattern, G: this graph), ``y`` has ``T_y - G_y + G_c``.

No-ops: a swap that leaves the flows as they are (two sibling leaves of a tree) would cost the
controller a round and change nothing. A hash per rank of its flows (other end, step, chunk,
operation, direction) finds the few candidates, each confirmed on the flows themselves
(:class:`Noops`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from react.model.pattern import Pattern
from react.model.swapspace.tables import Degrees, GraphTable

__all__ = ["Noops", "degree_ok", "step_failures"]


def degree_ok(d: Degrees, table: GraphTable, c: int, first: int, last: int) -> np.ndarray:
    """Partners ``y`` for which swapping ``c`` and ``y`` in ``[first, last]`` of this chunk
    graph takes part in the graph and passes the degree rule (boolean mask over positions).

    ``c`` after the swap: ``T_c - G_c + G_y`` on the window; only steps where ``G_y`` is
    non-zero can raise it (x-side, vectorised over ``y``'s entries). ``y`` after:
    ``T_y - G_y + G_c``, which can only rise where ``G_c`` is non-zero (y-side, vectorised over
    all ``y`` per step of ``c``).
    """
    tin, tout, deg = d.tin, d.tout, d.deg
    n = tin.shape[0]
    r, t, gin, gout = table.by_step
    lo = int(np.searchsorted(t, first, side="left"))
    hi = int(np.searchsorted(t, last, side="right"))
    r, t, gin, gout = r[lo:hi], t[lo:hi], gin[lo:hi], gout[lo:hi]
    own = r == c
    ct, cin, cout = t[own], gin[own], gout[own]
    bad = np.zeros(n, dtype=bool)
    # x-side: c takes y's entries.
    others = ~own
    ys, ts = r[others], t[others]
    gc_in = np.zeros(deg.shape[1], dtype=np.int64)
    gc_out = np.zeros(deg.shape[1], dtype=np.int64)
    gc_in[ct] = cin
    gc_out[ct] = cout
    after = np.maximum(
        tin[c, ts] - gc_in[ts] + gin[others], tout[c, ts] - gc_out[ts] + gout[others]
    )
    worse = after > np.maximum(deg[c, ts], deg[ys, ts])
    bad[ys[worse]] = True
    # y-side: every y takes c's entries, one step of c at a time.
    for k in range(len(ct)):
        step = int(ct[k])
        gy_in, gy_out = _step_degrees(table, step, n)
        after_y = np.maximum(tin[:, step] - gy_in + cin[k], tout[:, step] - gy_out + cout[k])
        bad |= after_y > np.maximum(deg[c, step], deg[:, step])
    if len(ct):
        keep = ~bad
    else:  # c is not in this window: only partners that are can change anything
        keep = np.zeros(n, dtype=bool)
        keep[ys] = True
        keep &= ~bad
    keep[c] = False
    return keep


def step_failures(
    d: Degrees, table: GraphTable, c: int, noops: Noops, g: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (partner, rewritten step) of ``c`` in chunk graph ``g`` and whether that step
    fails the degree rule, as arrays ``(partner, step, fails)``.

    A step is rewritten for partner ``y`` when relabelling ``c`` and ``y`` changes one of its
    flows: steps where ``c`` takes part, for every partner (both sides of the rule), and those
    where only ``y`` does (``c`` takes ``y``'s flows; ``y``'s own degree can only fall, so
    only ``c``'s side is checked). A failing step changes a degree, so it is rewritten; only
    passing steps can be no-ops (two interchangeable ranks), and only those are looked up.
    """
    tin, tout, deg = d.tin, d.tout, d.deg
    n = tin.shape[0]
    ct, cin, cout = table.rank_profile(c)
    parts_y: list[np.ndarray] = []
    parts_t: list[np.ndarray] = []
    parts_bad: list[np.ndarray] = []
    for k in range(len(ct)):
        step = int(ct[k])
        gy_in, gy_out = _step_degrees(table, step, n)
        cap = np.maximum(deg[c, step], deg[:, step])
        bad = (
            np.maximum(tin[c, step] - cin[k] + gy_in, tout[c, step] - cout[k] + gy_out) > cap
        ) | (
            np.maximum(tin[:, step] - gy_in + cin[k], tout[:, step] - gy_out + cout[k]) > cap
        )
        bad[c] = True  # c is no partner of its own
        rewritten = np.ones(n, dtype=bool)
        if not bad.all():
            rewritten &= bad | ~noops.at_step(g, step, c)
        rewritten[c] = False
        ys = np.flatnonzero(rewritten)
        parts_y.append(ys)
        parts_t.append(np.full(len(ys), step, dtype=np.int64))
        parts_bad.append(bad[ys])
    r, t, gin, gout = table.by_step
    only_y = (r != c) & ~np.isin(t, ct)
    ys, ts = r[only_y], t[only_y]
    parts_y.append(ys)
    parts_t.append(ts)
    parts_bad.append(
        np.maximum(tin[c, ts] + gin[only_y], tout[c, ts] + gout[only_y])
        > np.maximum(deg[c, ts], deg[ys, ts])
    )
    return np.concatenate(parts_y), np.concatenate(parts_t), np.concatenate(parts_bad)


def _step_degrees(table: GraphTable, step: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """This graph's in- and out-degree of every rank position at ``step``."""
    col_r, col_in, col_out = table.step_column(step)
    gy_in = np.zeros(n, dtype=np.int64)
    gy_out = np.zeros(n, dtype=np.int64)
    gy_in[col_r] = col_in
    gy_out[col_r] = col_out
    return gy_in, gy_out


class Noops:
    """Which swaps of a pattern leave its flows as they are, for any chunk graph and window.

    ``g == -1`` stands for the whole pattern (global swaps). Hashes per (graph, window) and the
    flows touching each rank per graph are cached: a space asks about the same graph for every
    rank.
    """

    def __init__(self, pattern: Pattern, tables: tuple[GraphTable, ...],
                 arrays: dict[str, np.ndarray]) -> None:
        self.pattern = pattern
        self._tables = tables
        self._arrays = arrays
        self._hashes: dict[tuple[int, int, int], np.ndarray] = {}
        self._touching: dict[int, dict[int, list[int]]] = {}
        self._by_graph: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def drop(self, g: int, first: int, last: int, c: int, partners: np.ndarray) -> np.ndarray:
        """``partners`` without those whose swap with ``c`` in ``[first, last]`` of graph ``g``
        leaves the flows as they are (a no-op swap has equal hashes when no flow joins the two
        ranks)."""
        if not len(partners):
            return partners
        hashes = self._hash(g, first, last)
        maybe = partners[hashes[partners] == hashes[c]]
        if not len(maybe):
            return partners
        noops = [y for y in maybe if self._is_noop(g, first, last, c, int(y))]
        return np.setdiff1d(partners, np.asarray(noops, dtype=np.int64)) if noops else partners

    def at_step(self, g: int, step: int, c: int) -> np.ndarray:
        """For every partner ``y``: whether relabelling ``c`` and ``y`` in chunk graph ``g``'s
        flows of ``step`` leaves them as they are."""
        hashes = self._hash(g, step, step, keep=False)
        out = np.zeros(self.pattern.n, dtype=bool)
        for y in np.flatnonzero(hashes == hashes[c]):
            if y != c and self._is_noop(g, step, step, c, int(y)):
                out[y] = True
        return out

    def drop_local_globals(self, c: int, partners: np.ndarray) -> np.ndarray:
        """``partners`` without those whose global swap equals a chunk-local swap, listed once,
        as the finer kind: the global swap changes the flows of one chunk graph only (in the
        others the two ranks are interchangeable, e.g. sibling leaves). Not for owned chunks:
        there the global swap also renames the owners' chunks, which a finer swap never does
        (if the renaming happens to change no flow, the rewrite is listed twice)."""
        if not len(partners) or self.pattern.kind in ("allgather", "reduce_scatter"):
            return partners
        touched = np.zeros(self.pattern.n, dtype=np.int64)
        for g, table in enumerate(self._tables):
            first, last = table.span
            hashes = self._hash(g, first, last)
            changed = hashes != hashes[c]
            for y in np.flatnonzero(~changed):
                if y != c and not self._is_noop(g, first, last, c, int(y)):
                    changed[y] = True
            touched += changed
        same = partners[touched[partners] == 1]
        return np.setdiff1d(partners, same) if len(same) else partners

    def _hash(self, g: int, first: int, last: int, *, keep: bool = True) -> np.ndarray:
        key = (g, first, last)
        cached = self._hashes.get(key)
        if cached is None:
            a = self._arrays
            idx = self._flows_in(g, first, last)
            step = a["step"][idx].astype(np.uint64)
            src, dst = a["src"][idx].astype(np.uint64), a["dst"][idx].astype(np.uint64)
            tag = (a["chunk"][idx].astype(np.uint64) * np.uint64(4)
                   + a["is_copy"][idx].astype(np.uint64) * np.uint64(2))
            cached = np.zeros(self.pattern.n, dtype=np.uint64)
            with np.errstate(over="ignore"):
                np.add.at(cached, a["src"][idx], _mix(step, dst, tag))
                np.add.at(cached, a["dst"][idx], _mix(step, src, tag + np.uint64(1)))
            if keep:
                self._hashes[key] = cached
        return cached

    def _flows_in(self, g: int, first: int, last: int) -> np.ndarray:
        """Indices of the flows of chunk graph ``g`` (every flow if ``g == -1``) with
        ``first <= step <= last``: a slice of the flows sorted by (graph, step)."""
        a = self._arrays
        if g < 0:
            return np.arange(len(a["step"]))
        if self._by_graph is None:
            order = np.lexsort((a["step"], a["graph"]))
            bounds = np.searchsorted(a["graph"][order], np.arange(len(self._tables) + 1))
            self._by_graph = (order, bounds, a["step"][order])
        order, bounds, steps = self._by_graph
        lo, hi = bounds[g], bounds[g + 1]
        a_ = lo + int(np.searchsorted(steps[lo:hi], first, side="left"))
        b_ = lo + int(np.searchsorted(steps[lo:hi], last, side="right"))
        return order[a_:b_]

    def _is_noop(self, g: int, first: int, last: int, x: int, y: int) -> bool:
        touching = self._touching.get(g)
        if touching is None:
            touching = {}
            a = self._arrays
            indices = self._flows_in(g, *self._tables[g].span) if g >= 0 else range(len(a["step"]))
            for i in indices:
                touching.setdefault(int(a["src"][i]), []).append(int(i))
                touching.setdefault(int(a["dst"][i]), []).append(int(i))
            self._touching[g] = touching
        flows = self.pattern.flows
        rx, ry = self.pattern.ranks[x], self.pattern.ranks[y]
        mine = {
            flows[i] for i in touching.get(x, []) + touching.get(y, [])
            if g < 0 or first <= flows[i].step <= last
        }
        swapped = {
            replace(f, src=_other(f.src, rx, ry), dst=_other(f.dst, rx, ry)) for f in mine
        }
        return swapped == mine


def _other(r: int, x: int, y: int) -> int:
    return y if r == x else x if r == y else r


def _mix(*parts: np.ndarray) -> np.ndarray:
    """A 64-bit mix of integer arrays (splitmix64 finaliser over a running combination)."""
    with np.errstate(over="ignore"):
        z = np.zeros_like(parts[0], dtype=np.uint64)
        for part in parts:
            z = (z ^ part.astype(np.uint64)) * np.uint64(0x9E3779B97F4A7C15)
            z ^= z >> np.uint64(31)
            z *= np.uint64(0xBF58476D1CE4E5B9)
            z ^= z >> np.uint64(29)
    return z
