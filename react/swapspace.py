"""The swap space of a pattern: for each rank, the viable swaps of each kind (paper §5.3).

REACT computes once, at the start of a job, which swaps keep a pattern's meaning (§5.3.1,
appendix A.3), prunes them by a degree rule (§5.3.2), and at run time picks, for a congested
rank, a swap from that set, preferring those that lower the congested rank's degree (the green
nodes of Fig. 1, against the yellow ones that are viable but do not help). This module is that
set. The interpretations below were fixed against the paper's 16-rank example (§4.3, Fig. 1),
which the tests reproduce.

Candidates
    For a rank ``c`` and every other rank ``y``: the :class:`~react.transforms.GlobalSwap`
    ``c<->y``; for every chunk graph ``g`` that ``c`` or ``y`` takes part in, the
    :class:`~react.transforms.ChunkLocalSwap` ``(g, c, y)``; and for every *phase* of ``g`` the
    :class:`~react.transforms.PositionSwap` ``(g, c, y, phase)``. A phase is a maximal run of
    ``g``'s steps whose flows have the same operation (the reduce and the broadcast half of a
    tree, the reduce-scatter and the all-gather half of a ring); a graph with one phase has no
    position windows other than its whole span, which is the chunk-local swap. The paper's
    brute force tries every pair of TEN vertices (A.3); phase windows keep the candidates the
    paper uses in its examples ("similar optimizations on the reverse broadcast path", §4.3)
    at ``O(phases)`` windows per graph instead of ``O(steps^2)``.

Viable
    The swapped pattern verifies (:func:`react.verify.verify`). Checked as cheaply as is exact:

    - a global swap relabels every flow (and, for owned chunks, renames them with their owners),
      so the replay of the swapped pattern is the replay of the original with two ranks renamed:
      it verifies iff the original does, unless the collective's meaning names one of the two
      ranks (the root of a broadcast or reduce). Those are replayed one by one; for the others
      one representative per space is replayed as a guard against a broken transform;
    - a chunk-local swap is the same renaming restricted to one chunk graph, so it is viable
      without a replay when the meaning of that graph's chunks does not name ``c`` or ``y``
      (always for AllReduce; for a rooted kind unless one is the root; for owned chunks unless
      one owns a chunk of the graph). Otherwise it is replayed like a position swap;
    - a position swap is replayed incrementally: only its chunk graph, from the window's first
      step, starting from the original's state cached there, and only the ranks whose buffers
      differ from the original's (a rank's state is recomputed only when it or a rank it hears
      from differs). Once the window is over and no buffer differs, the rest of the replay is
      the original's and the swap is viable. The tests cross-check this against
      :func:`react.verify.first_violation` on every candidate of small patterns.

Degree rule (§5.3.2)
    With ``deg(t, r) = max(in-degree, out-degree)`` of rank ``r`` at step ``t`` over the whole
    pattern (all chunk graphs; §5.2 uses ``max(in, out)`` too), a swap of ``x`` and ``y`` is
    kept iff for every step ``t`` and ``r`` in ``{x, y}``:
    ``deg_after(t, r) <= max(deg_before(t, x), deg_before(t, y))``; no other rank's degree can
    change. A global swap exchanges the two ranks' whole degree profiles, so it always passes.
    In Fig. 1 (n = 16, tree T1 = chunk graph 1, where 3 aggregates 5 and 1 at step 2) the rule
    removes 3<->4 and 3<->12 in T1: rank 4 already receives from 2 and 6 in T0 at step 2 and
    would then also receive from 5 and 1 (in-degree 4 > 2).

Preferred (green vs yellow, §5.3.2)
    A viable swap is preferred for the congested rank ``c`` if it strictly lowers ``c``'s total
    degree load, ``sum over t of deg(t, c)``; with ``direction="in"`` or ``"out"`` only that
    direction's degree is summed (incoming congestion: lower what ``c`` receives).

Cost
    The paper's brute force is ``O((N log N)^3)``. Here a rank's space is computed on first
    request and cached (``SwapSpace`` itself only builds degree tables, ``O(flows)``, with numpy):
    the degree rule for all partners ``y`` of ``c`` in one window is a handful of vectorised
    operations over that chunk graph's (rank, step) entries, and only the survivors are
    replayed, incrementally. See docs/swapspace.md for the measured figures.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from react.errors import PatternError
from react.pattern import Pattern
from react.transforms import PRIORITY, ChunkLocalSwap, GlobalSwap, PositionSwap, Swap
from react.verify import first_violation, verify

__all__ = ["Direction", "SwapSpace"]

Direction = Literal["any", "in", "out"]
_DIRECTIONS = ("any", "in", "out")
_KINDS = tuple(PRIORITY)


@dataclass(frozen=True, slots=True)
class _GraphTable:
    """Degree contributions of one chunk graph, as numpy arrays of (rank position, step) entries.

    ``by_step`` / ``by_rank`` hold the same entries ``(rank, step, in, out)`` sorted by step and
    by rank, with ``step_start`` / ``rank_start`` giving where each step's / rank's run begins
    (index ``k`` of ``steps`` / rank position ``k``), so a profile is a slice, not a search.
    ``phases`` are the windows ``(first_step, last_step)`` of equal operation, in step order.
    """

    by_step: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    steps: np.ndarray
    step_start: np.ndarray
    by_rank: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    rank_start: np.ndarray
    span: tuple[int, int]
    phases: tuple[tuple[int, int], ...]

    def rank_profile(self, pos: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lo, hi = self.rank_start[pos], self.rank_start[pos + 1]
        _, t, gin, gout = self.by_rank
        return t[lo:hi], gin[lo:hi], gout[lo:hi]

    def step_column(self, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = int(np.searchsorted(self.steps, step))
        if k == len(self.steps) or self.steps[k] != step:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        lo, hi = self.step_start[k], self.step_start[k + 1]
        r, _, gin, gout = self.by_step
        return r[lo:hi], gin[lo:hi], gout[lo:hi]


@dataclass(frozen=True, slots=True)
class _Entry:
    """Partners (rank positions, sorted) of one rank for one kind, chunk graph and window."""

    kind: str
    graph: int  # -1 for global swaps
    first: int
    last: int
    partners: np.ndarray


class SwapSpace:
    """The viable, degree-pruned swaps of a pattern, per rank (module docstring for the rules).

    Parameters
    ----------
    pattern : Pattern
        The pattern the swaps apply to. It must verify (the swaps are found relative to it).
    check : bool
        Verify ``pattern`` first (default). Pass ``False`` only for a pattern known to verify,
        e.g. one produced by a swap from a space: a full replay of a 1,024-rank ring takes seconds.

    Raises
    ------
    PatternError
        If ``check`` and the pattern does not verify.

    Notes
    -----
    A rank's swaps are computed on its first request and cached; :meth:`build_all` computes every
    rank's. Each swap in ``swaps_for(c)`` has ``x == c`` (the rank asked about) and ``y`` the
    partner; the same swap appears as ``y<->c`` in ``y``'s list. A space describes one pattern:
    after applying a swap, build a new space for the new pattern.

    Examples
    --------
    >>> from react.patterns import allreduce_double_binary_tree
    >>> space = SwapSpace(allreduce_double_binary_tree(16))
    >>> ChunkLocalSwap(1, 3, 2) in space.preferred(3, direction="in")
    True
    """

    def __init__(self, pattern: Pattern, *, check: bool = True) -> None:
        if not isinstance(pattern, Pattern):
            raise PatternError(f"SwapSpace: expected a Pattern, got {type(pattern).__name__}")
        if check:
            verify(pattern)
        self.pattern = pattern
        self._pos = {r: i for i, r in enumerate(pattern.ranks)}
        self._tables, self._tin, self._tout, arrays = _degree_tables(pattern, self._pos)
        self._deg = np.maximum(self._tin, self._tout)
        self._replays: dict[int, _GraphReplay] = {}
        self._spaces: dict[int, tuple[_Entry, ...]] = {}
        self._swaps: dict[int, tuple[Swap, ...]] = {}
        self._global_guard_done = False
        self._orbit = _symmetry(pattern, self._pos, arrays)
        self._arrays = arrays
        self._noop_hashes: dict[tuple[int, int, int], np.ndarray] = {}
        self._touching: dict[int, dict[int, list[int]]] = {}

    # -- the queries ---------------------------------------------------------------------------
    def swaps_for(
        self, rank: int, kind: str | None = None, graph: int | None = None
    ) -> tuple[Swap, ...]:
        """The viable, pruned swaps of ``rank``, position > chunk-local > global.

        Parameters
        ----------
        rank : int
        kind : {"position", "chunk_local", "global"}, optional
            Only this kind.
        graph : int, optional
            Only swaps that rewrite this chunk graph (global swaps rewrite every graph).

        Returns
        -------
        tuple of Swap
            Each with ``x == rank``; by kind, then chunk graph, window and partner.
        """
        kinds = self._kinds(kind)
        if graph is not None:
            self._check_graph(graph)
        c = self._rank_pos(rank)
        swaps = self._swaps.get(c)
        if swaps is None:
            swaps = tuple(_materialise(self.pattern.ranks, c, self._space(c)))
            self._swaps[c] = swaps
        return tuple(
            s for s in swaps
            if s.kind in kinds and (graph is None or s.graph is None or s.graph == graph)
        )

    def preferred(
        self, rank: int, direction: Direction = "any", kind: str | None = None,
        graph: int | None = None,
    ) -> tuple[Swap, ...]:
        """The swaps of :meth:`swaps_for` that strictly lower ``rank``'s degree load (green)."""
        self._check_direction(direction)
        base = self.load(rank, direction)
        return tuple(
            s for s in self.swaps_for(rank, kind, graph)
            if self.load_after(rank, s, direction) < base
        )

    def candidates(
        self, rank: int, graph: int | None = None, step: int | None = None,
        direction: Direction = "any",
    ) -> tuple[Swap, ...]:
        """What the controller asks for a congested ``rank``: viable swaps in priority order.

        Position-equivalent before chunk-local before global (§5.3.1), and within each kind the
        preferred ones (§5.3.2) first. ``graph`` restricts position and chunk-local swaps to the
        chunk graph of the congested flow, ``step`` restricts position swaps to windows that
        contain the congested flow's step. Ties are in a fixed order; the paper picks at random
        among them (§5.4.1), which is the caller's choice (see :meth:`candidate_classes`).
        """
        return tuple(
            swap for group in self.candidate_classes(rank, graph, step, direction) for swap in group
        )

    def candidate_classes(
        self, rank: int, graph: int | None = None, step: int | None = None,
        direction: Direction = "any",
    ) -> tuple[tuple[Swap, ...], ...]:
        """:meth:`candidates` cut into its classes of equal rank, in priority order.

        Six classes: for each kind (position, chunk-local, global) the preferred swaps, then the
        others; empty classes included. Within a class the paper picks at random.
        """
        self._check_direction(direction)
        base = self.load(rank, direction)
        out: list[tuple[Swap, ...]] = []
        for kind in _KINDS:
            good: list[Swap] = []
            rest: list[Swap] = []
            for swap in self.swaps_for(rank, kind, graph):
                if (
                    step is not None
                    and isinstance(swap, PositionSwap)
                    and not swap.first_step <= step <= swap.last_step
                ):
                    continue
                (good if self.load_after(rank, swap, direction) < base else rest).append(swap)
            out.append(tuple(good))
            out.append(tuple(rest))
        return tuple(out)

    def load(self, rank: int, direction: Direction = "any") -> int:
        """``rank``'s degree load: ``sum over steps of deg(t, rank)`` (``in``/``out`` only)."""
        self._check_direction(direction)
        c = self._rank_pos(rank)
        return int(self._load_vector(direction)[c].sum())

    def load_after(self, rank: int, swap: Swap, direction: Direction = "any") -> int:
        """``rank``'s degree load in the pattern ``swap`` would produce (``rank`` in the swap)."""
        self._check_direction(direction)
        c = self._rank_pos(rank)
        if rank not in (swap.x, swap.y):
            raise PatternError(
                f"SwapSpace.load_after: rank {rank!r} is not one of the swap's ranks "
                f"({swap.x}, {swap.y})"
            )
        other = self._rank_pos(swap.y if rank == swap.x else swap.x)
        vec = self._load_vector(direction)
        if isinstance(swap, GlobalSwap):
            return int(vec[other].sum())
        self._check_graph(swap.graph)
        table = self._tables[swap.graph]
        first, last = (
            (swap.first_step, swap.last_step) if isinstance(swap, PositionSwap) else table.span
        )
        total = int(vec[c].sum())
        changes: dict[int, list[int]] = {}
        for pos, sign in ((c, -1), (other, 1)):
            t, gin, gout = table.rank_profile(pos)
            for k in range(len(t)):
                step = int(t[k])
                if first <= step <= last:
                    entry = changes.setdefault(
                        step, [int(self._tin[c, step]), int(self._tout[c, step])]
                    )
                    entry[0] += sign * int(gin[k])
                    entry[1] += sign * int(gout[k])
        for step, (new_in, new_out) in changes.items():
            total += _load_of(direction, new_in, new_out) - int(vec[c, step])
        return total

    def counts(self, rank: int | None = None) -> dict[str, int]:
        """How many viable, pruned swaps of each kind ``rank`` has (or all ranks together;
        a swap then counts once per rank it names, so twice)."""
        cs = range(self.pattern.n) if rank is None else (self._rank_pos(rank),)
        totals = dict.fromkeys(_KINDS, 0)
        for c in cs:
            for entry in self._space(c):
                totals[entry.kind] += len(entry.partners)
        return totals

    def build_all(self) -> SwapSpace:
        """Compute every rank's swaps now (they are otherwise computed on first request)."""
        for c in range(self.pattern.n):
            self._space(c)
        return self

    def describe(self, rank: int | None = None) -> str:
        """A readable summary; for ``rank``, its counts and swaps (``*`` marks preferred)."""
        p = self.pattern
        head = f"swap space of {p.name or 'pattern'} ({p.kind}, n={p.n})"
        if rank is None:
            return f"{head}: {len(self._spaces)} of {p.n} ranks computed (lazy per rank)"
        counts = self.counts(rank)
        base = self.load(rank)
        lines = [
            f"{head}, rank {rank}: " + ", ".join(f"{counts[k]} {k}" for k in _KINDS)
            + f"; degree load {base}"
        ]
        for swap in self.candidates(rank):
            after = self.load_after(rank, swap)
            lines.append(f"  {'*' if after < base else ' '} {swap.describe()} (load -> {after})")
        return "\n".join(lines)

    def __iter__(self) -> Iterator[Swap]:
        """Every swap once (as ``x<->y`` with ``x`` before ``y`` in rank order)."""
        for c, r in enumerate(self.pattern.ranks):
            for swap in self.swaps_for(r):
                if self._pos[swap.y] > c:
                    yield swap

    # -- building one rank's space -------------------------------------------------------------
    def _space(self, c: int) -> tuple[_Entry, ...]:
        space = self._spaces.get(c)
        if space is None:
            rep, alpha, beta = self._orbit[c]
            if rep == c:
                space = self._compute(c)
            else:  # an automorphism maps rep to c: map rep's swaps (module docstring)
                space = tuple(
                    sorted(
                        (
                            _Entry(e.kind, e.graph if e.graph < 0 else int(beta[e.graph]),
                                   e.first, e.last, np.sort(alpha[e.partners]))
                            for e in self._space(rep)
                        ),
                        key=_entry_order,
                    )
                )
            self._spaces[c] = space
        return space

    def _compute(self, c: int) -> tuple[_Entry, ...]:
        entries: list[_Entry] = []
        for g, table in enumerate(self._tables):
            first, last = table.span
            ok = self._degree_ok(table, c, first, last)
            fixed = self._meaning_fixed_vec(g, c)
            partners = np.flatnonzero(ok & fixed)
            rest = [int(y) for y in np.flatnonzero(ok & ~fixed)]
            if rest:
                replay = self._replay(g)
                extra = [y for y in rest if replay.viable(c, y, first, last)]
                partners = np.union1d(partners, np.asarray(extra, dtype=np.int64))
            partners = self._drop_noops(g, first, last, c, partners)
            if len(partners):
                entries.append(_Entry("chunk_local", g, first, last, partners))
            if len(table.phases) < 2:
                continue
            for t1, t2 in table.phases:
                ok = self._degree_ok(table, c, t1, t2)
                if not ok.any():
                    continue
                replay = self._replay(g)
                proven, rejected = replay.verdicts(c, t1, t2, fixed)
                partners = np.flatnonzero(ok & proven)
                rest = [int(y) for y in np.flatnonzero(ok & ~proven & ~rejected)]
                extra = [y for y in rest if replay.viable(c, y, t1, t2)]
                if extra:
                    partners = np.union1d(partners, np.asarray(extra, dtype=np.int64))
                partners = self._drop_noops(g, t1, t2, c, partners)
                if len(partners):
                    entries.append(_Entry("position", g, t1, t2, partners))
        globals_ = self._drop_noops(-1, 0, 0, c, self._globals(c))
        if len(globals_):
            entries.append(_Entry("global", -1, 0, 0, globals_))
        return tuple(sorted(entries, key=_entry_order))

    def _drop_noops(
        self, g: int, first: int, last: int, c: int, partners: np.ndarray
    ) -> np.ndarray:
        """``partners`` without those whose swap leaves the flows as they are (e.g. two sibling
        leaves of a tree: the controller would gain nothing from them). ``g == -1``: global.

        A hash per rank of its flows (other end, step, chunk, op, direction) in the rewritten
        part finds the few candidates (a no-op swap has equal hashes when no flow joins the
        two ranks); each is confirmed on the flows themselves.
        """
        if not len(partners):
            return partners
        hashes = self._noop_hash(g, first, last)
        maybe = partners[hashes[partners] == hashes[c]]
        if not len(maybe):
            return partners
        noops = [y for y in maybe if self._is_noop(g, first, last, c, int(y))]
        return np.setdiff1d(partners, np.asarray(noops, dtype=np.int64)) if noops else partners

    def _noop_hash(self, g: int, first: int, last: int) -> np.ndarray:
        key = (g, first, last)
        cached = self._noop_hashes.get(key)
        if cached is None:
            a = self._arrays
            mask = np.ones(len(a["step"]), dtype=bool)
            if g >= 0:
                mask &= a["graph"] == g
                mask &= (a["step"] >= first) & (a["step"] <= last)
            step = a["step"][mask].astype(np.uint64)
            src, dst = a["src"][mask].astype(np.uint64), a["dst"][mask].astype(np.uint64)
            tag = (a["chunk"][mask].astype(np.uint64) * np.uint64(4)
                   + a["is_copy"][mask].astype(np.uint64) * np.uint64(2))
            cached = np.zeros(self.pattern.n, dtype=np.uint64)
            with np.errstate(over="ignore"):
                np.add.at(cached, a["src"][mask], _mix(step, dst, tag))
                np.add.at(cached, a["dst"][mask], _mix(step, src, tag + np.uint64(1)))
            self._noop_hashes[key] = cached
        return cached

    def _is_noop(self, g: int, first: int, last: int, x: int, y: int) -> bool:
        touching = self._touching.get(g)
        if touching is None:
            touching = {}
            a = self._arrays
            indices = np.flatnonzero(a["graph"] == g) if g >= 0 else range(len(a["step"]))
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

    def _degree_ok(self, table: _GraphTable, c: int, first: int, last: int) -> np.ndarray:
        """Partners ``y`` for which swapping ``c`` and ``y`` in ``[first, last]`` of this chunk
        graph takes part in the graph and passes the degree rule (boolean mask over positions).

        ``c`` after the swap: ``T_c - G_c + G_y`` on the window (T: whole pattern, G: this graph);
        only steps where ``G_y`` is non-zero can raise it (x-side, vectorised over ``y``'s
        entries). ``y`` after: ``T_y - G_y + G_c``, which can only rise where ``G_c`` is
        non-zero (y-side, vectorised over all ``y`` per step of ``c``).
        """
        n = self.pattern.n
        tin, tout, deg = self._tin, self._tout, self._deg
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
            col_r, col_in, col_out = table.step_column(step)
            gy_in = np.zeros(n, dtype=np.int64)
            gy_out = np.zeros(n, dtype=np.int64)
            gy_in[col_r] = col_in
            gy_out[col_r] = col_out
            after_y = np.maximum(
                tin[:, step] - gy_in + cin[k], tout[:, step] - gy_out + cout[k]
            )
            bad |= after_y > np.maximum(deg[c, step], deg[:, step])
        if len(ct):
            keep = ~bad
        else:  # c is not in this window: only partners that are can change anything
            keep = np.zeros(n, dtype=bool)
            keep[ys] = True
            keep &= ~bad
        keep[c] = False
        return keep

    def _meaning_fixed_vec(self, g: int, c: int) -> np.ndarray:
        """For every partner ``y``: whether the collective's meaning, restricted to chunk graph
        ``g``, names neither ``c`` nor ``y`` (then renaming them inside ``g`` cannot change
        whether ``g`` verifies: the replay is the original's with two labels exchanged)."""
        p = self.pattern
        n = p.n
        if p.kind == "allreduce":
            return np.ones(n, dtype=bool)
        named = np.zeros(n, dtype=bool)
        if p.kind in ("broadcast", "reduce"):
            named[self._pos[p.root]] = True  # type: ignore[index]
        else:
            for k in p.chunk_graphs()[g]:
                named[self._pos[p.chunks[k].owner]] = True  # type: ignore[index]
        if named[c]:
            return np.zeros(n, dtype=bool)
        return ~named

    def _globals(self, c: int) -> np.ndarray:
        p = self.pattern
        x = p.ranks[c]
        keep = np.ones(p.n, dtype=bool)
        keep[c] = False
        if p.kind in ("allgather", "reduce_scatter"):
            owned = np.zeros(p.n, dtype=np.int64)
            for chunk in p.chunks:
                owned[self._pos[chunk.owner]] += 1  # type: ignore[index]
            keep &= owned == owned[c]
        if p.root is not None:
            root = self._pos[p.root]
            partners = [root] if c != root else list(np.flatnonzero(keep))
            for y in partners:
                if keep[y] and first_violation(GlobalSwap(x, p.ranks[y]).apply(p)) is not None:
                    keep[y] = False
        others = [
            y for y in np.flatnonzero(keep) if p.root is None or p.root not in (x, p.ranks[y])
        ]
        if others:
            self._guard_global(GlobalSwap(x, p.ranks[int(others[0])]))
        return np.flatnonzero(keep)

    def _guard_global(self, swap: GlobalSwap) -> None:
        # The proof (module docstring) says every such global swap verifies; replay one chunk
        # graph of one of them, once, so that a broken transform cannot hide behind the proof.
        if self._global_guard_done:
            return
        p = self.pattern
        if p.kind in ("allgather", "reduce_scatter"):  # chunks are renamed too: whole pattern
            swapped = swap.apply(p)
            block = swapped.chunk_graphs()[0]
        else:  # the swap restricted to chunk graph 0, without rebuilding the other flows
            block = p.chunk_graphs()[0]
            swapped = swap.apply(p.with_flows(p.flows[i] for i in p.flows_of_chunk_graph(0)))
        problem = first_violation(swapped, chunks=block)
        if problem is not None:
            raise PatternError(
                f"SwapSpace: {swap.describe()} should keep the meaning but does not: {problem}"
            )
        self._global_guard_done = True

    def _replay(self, g: int) -> _GraphReplay:
        replay = self._replays.get(g)
        if replay is None:
            replay = _GraphReplay(self.pattern, g, self._pos)
            self._replays[g] = replay
        return replay

    # -- helpers -------------------------------------------------------------------------------
    def _load_vector(self, direction: str) -> np.ndarray:
        if direction == "in":
            return self._tin
        if direction == "out":
            return self._tout
        return self._deg

    def _rank_pos(self, rank: int) -> int:
        try:
            return self._pos[rank]
        except (KeyError, TypeError):
            self.pattern._check_rank(rank)
            raise

    def _check_graph(self, graph: int) -> None:
        count = len(self._tables)
        if not (isinstance(graph, int) and 0 <= graph < count):
            raise PatternError(
                f"SwapSpace: unknown chunk graph {graph!r}; the pattern has chunk graphs "
                f"0..{count - 1}"
            )

    @staticmethod
    def _kinds(kind: str | None) -> tuple[str, ...]:
        if kind is None:
            return _KINDS
        if kind not in _KINDS:
            raise PatternError(f"SwapSpace: unknown swap kind {kind!r}; expected one of {_KINDS}")
        return (kind,)

    @staticmethod
    def _check_direction(direction: str) -> None:
        if direction not in _DIRECTIONS:
            raise PatternError(
                f"SwapSpace: direction={direction!r}, expected one of {_DIRECTIONS}"
            )


def _load_of(direction: str, tin: int, tout: int) -> int:
    if direction == "in":
        return tin
    if direction == "out":
        return tout
    return max(tin, tout)


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


def _entry_order(entry: _Entry) -> tuple[int, int, int]:
    return (PRIORITY[entry.kind], entry.graph, entry.first)


def _materialise(ranks: tuple[int, ...], c: int, entries: tuple[_Entry, ...]) -> Iterator[Swap]:
    x = ranks[c]
    for e in entries:
        for y in e.partners:
            if e.kind == "position":
                yield PositionSwap(e.graph, x, ranks[int(y)], e.first, e.last)
            elif e.kind == "chunk_local":
                yield ChunkLocalSwap(e.graph, x, ranks[int(y)])
            else:
                yield GlobalSwap(x, ranks[int(y)])


# -- symmetry ------------------------------------------------------------------------------------
def _symmetry(
    pattern: Pattern, pos: dict[int, int], arrays: dict[str, np.ndarray]
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """For each rank position ``c``: ``(rep, alpha, beta)`` with ``alpha`` a rank permutation
    (positions) and ``beta`` a chunk-graph permutation that map the pattern onto itself and
    ``rep`` onto ``c``.

    Such an automorphism preserves steps, operations, degrees and (for AllReduce, or a rooted
    kind whose root it fixes) the meaning, so it maps ``rep``'s viable, pruned swaps onto ``c``'s:
    only one rank per orbit is computed. The generators tried are the ring rotation
    ``i -> i+1 mod n`` and the mirror ``i -> n-1-i`` (the two trees of an even double binary
    tree are mirror images); each is checked on every flow, so a pattern without the symmetry
    simply gets none. Owned chunks tie meaning to ranks, so AllGather and ReduceScatter get none.
    """
    n = pattern.n
    ident = np.arange(n)
    graphs = len(pattern.chunk_graphs())
    ident_g = np.arange(graphs)
    none = [(c, ident, ident_g) for c in range(n)]
    if pattern.kind not in ("allreduce", "broadcast", "reduce") or not len(arrays["step"]):
        return none
    step, src, dst = arrays["step"], arrays["src"], arrays["dst"]
    op, graph = arrays["is_copy"].astype(np.int64), arrays["graph"]
    key = ((step * n + src) * n + dst) * 2 + op
    order = np.argsort(key, kind="stable")
    ks = key[order]
    if len(ks) > 1 and np.any(ks[1:] == ks[:-1]):
        return none  # two flows differ only in chunks: the key below would be ambiguous
    gens: list[tuple[np.ndarray, np.ndarray]] = []
    for alpha in ((ident + 1) % n, n - 1 - ident):
        if pattern.root is not None and alpha[pos[pattern.root]] != pos[pattern.root]:
            continue
        image = ((step * n + alpha[src]) * n + alpha[dst]) * 2 + op
        idx = np.searchsorted(ks, image)
        if np.any(idx >= len(ks)) or np.any(ks[np.minimum(idx, len(ks) - 1)] != image):
            continue
        image_graph = graph[order[idx]]
        beta = np.full(graphs, -1, dtype=np.int64)
        beta[graph] = image_graph
        if np.any(beta[graph] != image_graph) or len(np.unique(beta)) != graphs or beta.min() < 0:
            continue
        gens.append((alpha, beta))
    if not gens:
        return none
    out: list[tuple[int, np.ndarray, np.ndarray] | None] = [None] * n
    for c in range(n):
        if out[c] is not None:
            continue
        out[c] = (c, ident, ident_g)
        queue = [c]
        while queue:
            m = queue.pop()
            _, alpha_m, beta_m = out[m]  # type: ignore[misc]
            for alpha, beta in gens:
                m2 = int(alpha[m])
                if out[m2] is None:
                    out[m2] = (c, alpha[alpha_m], beta[beta_m])
                    queue.append(m2)
    return out  # type: ignore[return-value]


# -- degree tables -------------------------------------------------------------------------------
def _degree_tables(
    pattern: Pattern, pos: dict[int, int]
) -> tuple[tuple[_GraphTable, ...], np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Per-graph entry tables, the whole pattern's ``(n, steps + 1)`` in/out degree arrays and
    the flows as arrays (step, src, dst, is_copy, graph; positions for ranks).

    One pass over the flows in Python, the rest in numpy (a 1,024-rank ring has 2 million flows).
    """
    flows = pattern.flows
    n, steps = pattern.n, pattern.num_steps
    graph_of_chunk = np.zeros(len(pattern.chunks), dtype=np.int64)
    for g, block in enumerate(pattern.chunk_graphs()):
        graph_of_chunk[list(block)] = g
    count = len(flows)
    step = np.fromiter((f.step for f in flows), dtype=np.int64, count=count)
    src = np.fromiter((pos[f.src] for f in flows), dtype=np.int64, count=count)
    dst = np.fromiter((pos[f.dst] for f in flows), dtype=np.int64, count=count)
    first_chunk = np.fromiter((f.chunks[0] for f in flows), dtype=np.int64, count=count)
    is_copy = np.fromiter((f.op == "copy" for f in flows), dtype=bool, count=count)
    graph = graph_of_chunk[first_chunk]

    tin = np.zeros((n, steps + 1), dtype=np.int64)
    tout = np.zeros((n, steps + 1), dtype=np.int64)
    np.add.at(tin, (dst, step), 1)
    np.add.at(tout, (src, step), 1)

    # Entries (graph, rank, step) -> (in, out), aggregated.
    width = steps + 1
    key = np.concatenate([(graph * n + dst) * width + step, (graph * n + src) * width + step])
    ein = np.concatenate([np.ones(count, dtype=np.int64), np.zeros(count, dtype=np.int64)])
    uniq, inverse = np.unique(key, return_inverse=True)
    agg_in = np.bincount(inverse, weights=ein, minlength=len(uniq)).astype(np.int64)
    agg_out = np.bincount(inverse, minlength=len(uniq)).astype(np.int64) - agg_in
    e_graph = uniq // (n * width)
    e_rank = (uniq // width) % n
    e_step = uniq % width
    graph_bounds = np.searchsorted(e_graph, np.arange(len(pattern.chunk_graphs()) + 1))

    # Phases: per (graph, step) the set of operations (1 reduce, 2 copy).
    op_bits = np.where(is_copy, 2, 1)
    gs_key = graph * width + step
    order = np.argsort(gs_key, kind="stable")
    gs_sorted = gs_key[order]
    gs_uniq, gs_first = np.unique(gs_sorted, return_index=True)
    gs_bits = np.bitwise_or.reduceat(op_bits[order], gs_first) if len(order) else op_bits
    gs_graph = gs_uniq // width
    gs_step = gs_uniq % width

    tables = []
    for g in range(len(pattern.chunk_graphs())):
        lo, hi = graph_bounds[g], graph_bounds[g + 1]
        r, t, gi, go = e_rank[lo:hi], e_step[lo:hi], agg_in[lo:hi], agg_out[lo:hi]
        by_rank = (r, t, gi, go)  # already sorted by (rank, step)
        rank_start = np.searchsorted(r, np.arange(n + 1))
        o = np.argsort(t, kind="stable")
        by_step = (r[o], t[o], gi[o], go[o])
        uniq_steps, step_first = np.unique(by_step[1], return_index=True)
        step_start = np.append(step_first, len(o))
        mine = gs_graph == g
        phases = _phases(gs_step[mine], gs_bits[mine])
        tables.append(
            _GraphTable(
                by_step, uniq_steps, step_start, by_rank, rank_start,
                (int(uniq_steps[0]), int(uniq_steps[-1])), phases,
            )
        )
    arrays = {
        "step": step, "src": src, "dst": dst, "is_copy": is_copy, "graph": graph,
        "chunk": first_chunk,
    }
    return tuple(tables), tin, tout, arrays


def _phases(steps: np.ndarray, bits: np.ndarray) -> tuple[tuple[int, int], ...]:
    """Maximal runs of steps with the same set of operations (steps sorted)."""
    if len(steps) == 0:
        return ()
    cut = np.flatnonzero(bits[1:] != bits[:-1]) + 1
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut - 1, [len(steps) - 1]])
    return tuple((int(steps[a]), int(steps[b])) for a, b in zip(starts, ends, strict=True))


# -- incremental replay of one chunk graph -------------------------------------------------------
class _GraphReplay:
    """The original replay of one chunk graph, kept so that a swap is re-checked incrementally.

    Semantics are those of :mod:`react.verify` (bitset buffers, simultaneous steps, double
    counts, unheld sends, a copy plus another write at one step, the final condition). The
    original graph must verify; only buffers that differ from the original's are replayed.
    """

    def __init__(self, pattern: Pattern, g: int, pos: dict[int, int]) -> None:
        self.kind = pattern.kind
        self.n = pattern.n
        self.chunks = pattern.chunk_graphs()[g]
        everyone = (1 << self.n) - 1
        # into[t][d] / out[t][s]: flows of step t as (other end, chunks, is_copy).
        self.into: dict[int, dict[int, list[tuple[int, tuple[int, ...], bool]]]] = {}
        self.out: dict[int, dict[int, list[tuple[int, tuple[int, ...], bool]]]] = {}
        for i in pattern.flows_of_chunk_graph(g):
            f = pattern.flows[i]
            s, d, cp = pos[f.src], pos[f.dst], f.op == "copy"
            self.into.setdefault(f.step, {}).setdefault(d, []).append((s, f.chunks, cp))
            self.out.setdefault(f.step, {}).setdefault(s, []).append((d, f.chunks, cp))
        self.steps = sorted(self.into)
        self._boundaries: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        # Initial and required final values per (rank, chunk); None = unconstrained.
        self.initial: dict[tuple[int, int], int] = {}
        self.final: dict[tuple[int, int], int] = {}
        root = -1 if pattern.root is None else pos[pattern.root]
        for c in self.chunks:
            owned_by = pattern.chunks[c].owner
            owner = -1 if owned_by is None else pos[owned_by]
            for r in range(self.n):
                if self.kind in ("allreduce", "reduce_scatter", "reduce"):
                    self.initial[(r, c)] = 1 << r
                elif self.kind == "allgather":
                    self.initial[(r, c)] = 1 << owner if r == owner else 0
                else:
                    self.initial[(r, c)] = 1 << root if r == root else 0
                if self.kind == "allreduce":
                    self.final[(r, c)] = everyone
                elif self.kind == "allgather":
                    self.final[(r, c)] = 1 << owner
                elif self.kind == "broadcast":
                    self.final[(r, c)] = 1 << root
                elif self.kind == "reduce_scatter" and r == owner:
                    self.final[(r, c)] = everyone
                elif self.kind == "reduce" and r == root:
                    self.final[(r, c)] = everyone
        # Accesses per (rank, chunk): (step, reads) -- a send or a reduce into it reads the value
        # at the end of step - 1; a copy into it only overwrites it (for the liveness shortcut).
        self.access: dict[tuple[int, int], list[tuple[int, bool]]] = {}
        for t in self.steps:
            for d, flows in self.into[t].items():
                for s, chunks, is_copy in flows:
                    for c in chunks:
                        self.access.setdefault((s, c), []).append((t, True))
                        self.access.setdefault((d, c), []).append((t, not is_copy))
        for events in self.access.values():
            events.sort()
        self.access_steps = {key: [e[0] for e in ev] for key, ev in self.access.items()}
        self.writes: dict[tuple[int, int], list[int]] = {}
        for t in self.steps:
            for d, flows in self.into[t].items():
                for _, chunks, _ in flows:
                    for c in chunks:
                        self.writes.setdefault((d, c), []).append(t)
        self._verdict_cache: dict[tuple[int, int, int, int], bool] = {}
        # The original trajectory: per (rank, chunk), the steps at which it changed and values.
        self.hist_steps: dict[tuple[int, int], list[int]] = {}
        self.hist_vals: dict[tuple[int, int], list[int]] = {}
        state = dict(self.initial)
        for t in self.steps:
            updates = self._step_updates(t, lambda r, c: state[(r, c)], self.into[t], None)
            if updates is None:
                raise PatternError(
                    f"SwapSpace: chunk graph {g} of the pattern does not verify at step {t}"
                )
            for key, value in updates.items():
                state[key] = value
                self.hist_steps.setdefault(key, [0]).append(t)
                self.hist_vals.setdefault(key, [self.initial[key]]).append(value)

    def overwritten_by(self, t: int, r: int, c: int) -> float | None:
        """If the value of (r, c) at the end of step ``t`` is dead -- its next access is a copy
        into it, with no read at that step -- the step of that copy; ``inf`` if it is never
        accessed again and the final condition does not constrain it; otherwise None (live)."""
        key = (r, c)
        steps = self.access_steps.get(key)
        k = bisect_right(steps, t) if steps else 0
        if not steps or k == len(steps):
            return None if key in self.final else float("inf")
        events = self.access[key]
        s = steps[k]
        while k < len(steps) and steps[k] == s:
            if events[k][1]:
                return None
            k += 1
        return float(s)

    def boundary(self, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The original state at the end of step ``t``, as ``(n, chunks)`` arrays: value ids
        (equal ids, equal buffers), :meth:`overwritten_by` (nan where live) and an influence
        hash: the sum of random weights of the constrained final buffers the value flows into.

        In a valid pattern a value reaches a final buffer at most once (twice would count it
        twice), so equal influence sets give equal sums; unequal sums prove unequal sets.
        """
        cached = self._boundaries.get(t)
        if cached is not None:
            return cached
        n, chunks = self.n, self.chunks
        ids: dict[int, int] = {}
        vid = np.zeros((n, len(chunks)), dtype=np.int64)
        over = np.full((n, len(chunks)), np.nan)
        for j, c in enumerate(chunks):
            for r in range(n):
                vid[r, j] = ids.setdefault(self.value(t, r, c), len(ids))
                o = self.overwritten_by(t, r, c)
                if o is not None:
                    over[r, j] = o
        # Influence, backwards from the end: a copy into d kills d's earlier value; a flow
        # s -> d passes d's later influence to s's earlier value.
        mask = (1 << 64) - 1
        infl = {key: self._weight(key) for key in self.final}
        for s in reversed(self.steps):
            if s <= t:
                break
            adds: list[tuple[tuple[int, int], int]] = []
            kills: list[tuple[int, int]] = []
            for d, flows in self.into[s].items():
                for src, fchunks, is_copy in flows:
                    for c in fchunks:
                        adds.append(((src, c), infl.get((d, c), 0)))
                        if is_copy:
                            kills.append((d, c))
            for key in kills:
                infl.pop(key, None)
            for key, w in adds:
                if w:
                    infl[key] = (infl.get(key, 0) + w) & mask
        hashes = np.zeros((n, len(chunks)), dtype=np.uint64)
        col = {c: j for j, c in enumerate(chunks)}
        for (r, c), w in infl.items():
            hashes[r, col[c]] = np.uint64(w)
        cached = (vid, over, hashes)
        self._boundaries[t] = cached
        return cached

    @staticmethod
    def _weight(key: tuple[int, int]) -> int:
        # A fixed pseudo-random 64-bit weight per (rank, chunk) (splitmix64 of the key).
        z = (key[0] * 0x9E3779B97F4A7C15 + key[1] * 0xBF58476D1CE4E5B9 + 1) & ((1 << 64) - 1)
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & ((1 << 64) - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & ((1 << 64) - 1)
        return (z ^ (z >> 31)) | 1

    def verdicts(
        self, x: int, first: int, last: int, meaning_fixed: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """For every partner ``y`` of ``x`` in window ``[first, last]``: (proven viable, proven
        not viable), both without a replay; partners in neither need :meth:`viable`.

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
        if first <= self.steps[0]:
            start = meaning_fixed.copy()
        else:
            vid, over, _ = self.boundary(first - 1)
            inside = over <= last  # nan (live) and inf (never touched again) compare False
            start = np.all((vid == vid[x]) | (inside & inside[x]), axis=1)
        vid, over, hashes = self.boundary(last)
        equal = vid == vid[x]
        dead = ~np.isnan(over)
        proven = start & np.all(equal | (dead & dead[x]), axis=1)
        rejected = start & ~proven & np.any(~equal & (hashes != hashes[x]), axis=1)
        proven[x] = rejected[x] = False
        return proven, rejected

    def value(self, t: int, r: int, c: int) -> int:
        """The original value of (rank position r, chunk c) at the end of step t."""
        key = (r, c)
        steps = self.hist_steps.get(key)
        if steps is None:
            return self.initial[key]
        return self.hist_vals[key][bisect_right(steps, t) - 1]

    @staticmethod
    def _step_updates(
        t: int,
        read,  # (rank, chunk) -> value at the end of step t - 1
        inflows: dict[int, list[tuple[int, tuple[int, ...], bool]]],
        only: set[int] | None,
    ) -> dict[tuple[int, int], int] | None:
        """New values written at step ``t`` into the ranks of ``only`` (all if None), or None on
        a violation."""
        updates: dict[tuple[int, int], int] = {}
        for d, flows in inflows.items():
            if only is not None and d not in only:
                continue
            pending: dict[int, tuple[int, bool]] = {}
            for s, chunks, is_copy in flows:
                for c in chunks:
                    value = read(s, c)
                    if not value:
                        return None
                    earlier = pending.get(c)
                    if earlier is not None and (is_copy or earlier[1]):
                        return None
                    if is_copy:
                        pending[c] = (value, True)
                    else:
                        added = earlier[0] if earlier is not None else 0
                        if (read(d, c) | added) & value:
                            return None
                        pending[c] = (added | value, False)
            for c, (value, is_copy) in pending.items():
                updates[(d, c)] = value if is_copy else read(d, c) | value
        return updates

    def _written_after(
        self, t: int, key: tuple[int, int], first: int, last: int, other: int
    ) -> bool:
        # Whether the swapped graph writes (r, c) after step t; ``other`` is the partner of r
        # if r is swapped (inside the window r then takes the partner's writes).
        r, c = key
        inside = self.writes.get((other, c), ()) if other >= 0 else self.writes.get(key, ())
        k = bisect_right(inside, t)
        if k < len(inside) and inside[k] <= last:
            return True
        outside = self.writes.get(key, ())
        k = bisect_right(outside, max(t, last))
        return k < len(outside)

    def viable(self, x: int, y: int, first: int, last: int) -> bool:
        """Whether relabelling rank positions ``x`` and ``y`` in this graph's flows of steps
        ``first..last`` keeps the graph valid (cached per unordered pair and window)."""
        key = (min(x, y), max(x, y), first, last)
        verdict = self._verdict_cache.get(key)
        if verdict is None:
            verdict = self._viable(x, y, first, last)
            self._verdict_cache[key] = verdict
        return verdict

    def _viable(self, x: int, y: int, first: int, last: int) -> bool:
        def swap(r: int) -> int:
            return y if r == x else x if r == y else r

        overlay: dict[tuple[int, int], int] = {}
        k = bisect_left(self.steps, first)
        for t in self.steps[k:]:
            inside = t <= last
            if not inside and not overlay:
                return True  # the rest of the replay is the original's, which verifies
            dirty = {r for r, _ in overlay}
            into, out = self.into[t], self.out[t]
            affected = set(dirty)
            if inside:
                affected.update((x, y))
                for r in (x, y):
                    for d, _, _ in out.get(r, ()):
                        affected.add(swap(d))
                for r in dirty:
                    for d, _, _ in out.get(swap(r), ()):
                        affected.add(swap(d))
                inflows = {
                    a: [(swap(s), ch, cp) for s, ch, cp in into.get(swap(a), ())]
                    for a in affected
                }
            else:
                for r in dirty:
                    for d, _, _ in out.get(r, ()):
                        affected.add(d)
                inflows = {a: into.get(a, []) for a in affected}

            def read(r: int, c: int, t: int = t, overlay: dict = overlay) -> int:
                v = overlay.get((r, c))
                return self.value(t - 1, r, c) if v is None else v

            updates = self._step_updates(t, read, inflows, None)
            if updates is None:
                return False
            new_overlay: dict[tuple[int, int], int] = {}
            for a in affected:
                for c in self.chunks:
                    v = updates.get((a, c))
                    if v is None:
                        v = read(a, c)
                    if v != self.value(t, a, c):
                        new_overlay[(a, c)] = v
                        # Fail early: a wrong final value that nothing will write again.
                        want = self.final.get((a, c))
                        if want is not None and v != want:
                            other = y if a == x else x if a == y else -1
                            if not self._written_after(t, (a, c), first, last, other):
                                return False
            overlay = new_overlay
        for key, v in overlay.items():
            want = self.final.get(key)
            if want is not None and v != want:
                return False
        return True
