"""The swap space of a pattern: for each rank, the viable swaps of each kind (paper §5.3).

REACT computes once, at the start of a job, which swaps keep a pattern's meaning (§5.3.1,
appendix A.3), prunes them by a degree rule (§5.3.2), and at run time picks, for a congested
rank, a swap from that set, preferring those that lower the congested rank's degree (the green
nodes of Fig. 1, against the yellow ones that are viable but do not help). This module is that
set. The interpretations below were fixed against the paper's 16-rank example (§4.3, Fig. 1),
which the tests reproduce.

Candidates
    For a rank ``c`` and every other rank ``y``: the :class:`~react.model.transforms.GlobalSwap`
    ``c<->y``; for every chunk graph ``g`` that ``c`` or ``y`` takes part in, the
    :class:`~react.model.transforms.ChunkLocalSwap` ``(g, c, y)``; and a
    :class:`~react.model.transforms.PositionSwap` ``(g, c, y, a, b)`` for every step window of ``g``,
    as the paper's brute force tries every pair of TEN vertices (appendix A.3). Windows are
    taken in canonical form: the *rewritten steps* of ``(g, c, y)`` are those where relabelling
    the two changes a flow, and the windows are ``[E_i, E_j]`` over them, so that no window is a
    no-op, no two give the same rewrite, and the one spanning all rewritten steps is left to the
    chunk-local swap it equals. A global swap that rewrites one chunk graph only (the two ranks
    are interchangeable in the others) equals that graph's chunk-local swap and is left out too
    (not for owned chunks, whose renaming a finer swap cannot do). Windows are ``O(steps^2)``
    per pair, but the degree rule (below) is a condition per step, decided for all partners at
    once per step, and cuts the windows to runs of passing steps first: the ring's windows are
    all cut there (every step of every rank fails), so its ``O(n^2)`` windows cost nothing.

Viable
    The swapped pattern verifies (:func:`react.model.verify.verify`). Checked as cheaply as is exact:

    - a global swap relabels every flow (and, for owned chunks, renames them with their owners),
      so the replay of the swapped pattern is the replay of the original with two ranks renamed:
      it verifies iff the original does, unless the collective's meaning names one of the two
      ranks (the root of a broadcast or reduce). Those are replayed one by one; for the others
      one representative per space is replayed as a guard against a broken transform;
    - a chunk-local swap is the same renaming restricted to one chunk graph, so it is viable
      without a replay when the meaning of that graph's chunks does not name ``c`` or ``y``
      (always for AllReduce; for a rooted kind unless one is the root; for owned chunks unless
      one owns a chunk of the graph). Otherwise it is replayed like a position swap;
    - a position swap is decided without a replay where that is exact: by the start/end
      conditions of :meth:`react.model.replay.GraphReplay.verdicts` (equal or dead buffers at the window's
      bounds), by linear algebra on the buffers' contents for kinds whose buffers are never
      empty (:meth:`GraphReplay.linear_verdicts`: proves and refutes, no replay for the double
      binary tree at all), or, for kinds with empty buffers, by an unheld send at the window's
      first step. The rest is replayed incrementally: only its chunk graph, from the window's
      first step, starting from the original's state cached there, and only the ranks whose
      buffers differ from the original's. The tests cross-check every verdict against
      :func:`react.model.verify.first_violation` on every pair and window of small patterns, and the
      whole space against a brute force that shares nothing with this module.

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
    the degree rule for all partners ``y`` of ``c`` at one step is a handful of vectorised
    operations over that chunk graph's (rank, step) entries; the windows that survive it are
    decided per window for all partners where provable, by a few bitset operations per
    candidate otherwise, and only the rest is replayed. See docs/swapspace.md for the measured
    figures and docs/deviations.md for what the all-window space costs at 1,024 ranks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from react.model.errors import PatternError
from react.model.pattern import Pattern
from react.model.replay import GraphReplay, ReplayCache
from react.model.transforms import PRIORITY, ChunkLocalSwap, GlobalSwap, PositionSwap, Swap
from react.model.verify import first_violation, verify

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
    """

    by_step: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    steps: np.ndarray
    step_start: np.ndarray
    by_rank: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    rank_start: np.ndarray
    span: tuple[int, int]

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
    replays : ReplayCache, optional
        Share the replays of chunk graphs with other spaces: a swap rewrites one chunk graph, so
        the spaces of patterns a few swaps apart replay the same graphs (and answer the same
        questions about them) again. Answers are the same with or without it.

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

    def __init__(
        self, pattern: Pattern, *, check: bool = True, replays: ReplayCache | None = None
    ) -> None:
        if not isinstance(pattern, Pattern):
            raise PatternError(f"SwapSpace: expected a Pattern, got {type(pattern).__name__}")
        if check:
            verify(pattern)
        self.pattern = pattern
        self._pos = {r: i for i, r in enumerate(pattern.ranks)}
        self._tables, self._tin, self._tout, arrays = _degree_tables(pattern, self._pos)
        self._deg = np.maximum(self._tin, self._tout)
        self._replays: dict[int, GraphReplay] = {}
        self._shared = replays
        self._spaces: dict[int, tuple[_Entry, ...]] = {}
        self._swaps: dict[int, tuple[Swap, ...]] = {}
        self._swaps_in: dict[tuple[int, int], tuple[Swap, ...]] = {}
        self._rows: dict[tuple[int, str], tuple[list[int], list[int], int]] = {}
        self._profiles: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        self._per_graph: dict[tuple[int, int], tuple[_Entry, ...]] = {}
        self._global_guard_done = False
        self._orbit = _symmetry(pattern, self._pos, arrays)
        self._arrays = arrays
        self._noop_hashes: dict[tuple[int, int, int], np.ndarray] = {}
        self._touching: dict[int, dict[int, list[int]]] = {}
        self._by_graph: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

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
        if swaps is None and graph is not None and c not in self._spaces and self._orbit[c][0] == c:
            # One chunk graph asked for (the controller's question): compute that graph's swaps
            # and the global ones only. The same entries in the same order as the filter below
            # keeps from the whole space (entries are sorted by kind, graph and window).
            swaps = self._swaps_in.get((c, graph))
            if swaps is None:
                entries = sorted((*self._graph_entries(c, graph), *self._global_entries(c)),
                                 key=_entry_order)
                swaps = tuple(_materialise(self.pattern.ranks, c, entries))
                self._swaps_in[(c, graph)] = swaps
        elif swaps is None:
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
        # Plain ints from cached lists: the controller asks this of every candidate it ranks.
        tin_c, tout_c, total = self._row(c, direction)
        changes: dict[int, list[int]] = {}
        for pos, sign in ((c, -1), (other, 1)):
            for step, gin, gout in self._profile(swap.graph, pos):
                if first <= step <= last:
                    entry = changes.setdefault(step, [tin_c[step], tout_c[step]])
                    entry[0] += sign * gin
                    entry[1] += sign * gout
        for step, (new_in, new_out) in changes.items():
            total += (_load_of(direction, new_in, new_out)
                      - _load_of(direction, tin_c[step], tout_c[step]))
        return total

    def _row(self, c: int, direction: str) -> tuple[list[int], list[int], int]:
        """``c``'s whole-pattern in and out degrees per step, and its load in ``direction``."""
        key = (c, direction)
        row = self._rows.get(key)
        if row is None:
            row = (self._tin[c].tolist(), self._tout[c].tolist(),
                   int(self._load_vector(direction)[c].sum()))
            self._rows[key] = row
        return row

    def _profile(self, g: int, pos: int) -> list[tuple[int, int, int]]:
        """``(step, in, out)`` of rank position ``pos`` in chunk graph ``g``, by step."""
        key = (g, pos)
        profile = self._profiles.get(key)
        if profile is None:
            t, gin, gout = self._tables[g].rank_profile(pos)
            profile = list(zip(t.tolist(), gin.tolist(), gout.tolist(), strict=True))
            self._profiles[key] = profile
        return profile

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
        for g in range(len(self._tables)):
            entries.extend(self._graph_entries(c, g))
        entries.extend(self._global_entries(c))
        return tuple(sorted(entries, key=_entry_order))

    def _graph_entries(self, c: int, g: int) -> tuple[_Entry, ...]:
        """``c``'s chunk-local and position swaps in chunk graph ``g`` (cached)."""
        cached = self._per_graph.get((c, g))
        if cached is not None:
            return cached
        entries: list[_Entry] = []
        table = self._tables[g]
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
        entries.extend(self._position_entries(g, table, c, fixed))
        out = self._per_graph[(c, g)] = tuple(entries)
        return out

    def _global_entries(self, c: int) -> tuple[_Entry, ...]:
        """``c``'s global swaps, as at most one entry (cached)."""
        cached = self._per_graph.get((c, -1))
        if cached is not None:
            return cached
        globals_ = self._drop_noops(-1, 0, 0, c, self._globals(c))
        globals_ = self._drop_local_globals(c, globals_)
        out = (_Entry("global", -1, 0, 0, globals_),) if len(globals_) else ()
        self._per_graph[(c, -1)] = out
        return out

    def _position_entries(
        self, g: int, table: _GraphTable, c: int, fixed: np.ndarray
    ) -> list[_Entry]:
        """The viable position swaps of ``c`` in chunk graph ``g``, one entry per window.

        Candidates come from :meth:`_windows` (canonical windows passing the degree rule);
        viability is decided per window for all partners at once where it is provable
        (:meth:`GraphReplay.verdicts`) and by an incremental replay otherwise. A window that
        starts at the pair's first rewritten step is checked as if it started at the graph's
        first step, one that ends at its last as if it ended at the graph's last: the same
        rewrite, and the form the proofs cover.
        """
        windows = self._windows(g, table, c)
        if windows is None:
            return []
        ys, firsts, lasts, v_firsts, v_lasts = windows
        replay = self._replay(g)
        found: dict[tuple[int, int], list[int]] = {}
        order = np.lexsort((ys, v_lasts, v_firsts))
        ys, firsts, lasts = ys[order], firsts[order], lasts[order]
        v_firsts, v_lasts = v_firsts[order], v_lasts[order]
        cut = np.flatnonzero((np.diff(v_firsts) != 0) | (np.diff(v_lasts) != 0)) + 1
        for lo, hi in zip(np.r_[0, cut], np.r_[cut, len(ys)], strict=True):
            t1, t2 = int(v_firsts[lo]), int(v_lasts[lo])
            group = ys[lo:hi]
            # Linear algebra first (exact both ways where it applies, no replay), then the
            # start/end proofs, then the unheld-send check, then a replay.
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
            _Entry("position", g, a, b, np.asarray(sorted(partners), dtype=np.int64))
            for (a, b), partners in found.items()
        ]

    def _windows(
        self, g: int, table: _GraphTable, c: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Every canonical window of ``c`` in chunk graph ``g`` that passes the degree rule:
        ``(partner, first, last, verdict first, verdict last)`` arrays, or None.

        For a partner ``y`` the *rewritten steps* of ``g`` are those where relabelling ``c`` and
        ``y`` changes a flow (one of them takes part, and they are not interchangeable there, as
        two sibling leaves are). A window's rewrite depends only on which rewritten steps it
        holds, so the canonical windows are ``[E_i, E_j]`` over the rewritten steps ``E``:
        distinct rewrites, none a no-op, and ``[E_0, E_last]``, which equals the chunk-local
        swap, left out. The degree rule (§5.3.2) is a condition per step (outside the window no
        degree changes), so a window passes iff every rewritten step in it does: the windows
        are the runs of passing rewritten steps and their sub-windows. Per step, the check is
        the one of :meth:`_degree_ok`, vectorised over all partners.
        """
        steps = table.steps
        if len(steps) < 2:
            return None
        n = self.pattern.n
        tin, tout, deg = self._tin, self._tout, self._deg
        ct, cin, cout = table.rank_profile(c)
        parts_y: list[np.ndarray] = []
        parts_t: list[np.ndarray] = []
        parts_bad: list[np.ndarray] = []
        # Steps where c takes part: every partner, both sides of the rule.
        for k in range(len(ct)):
            step = int(ct[k])
            col_r, col_in, col_out = table.step_column(step)
            gy_in = np.zeros(n, dtype=np.int64)
            gy_out = np.zeros(n, dtype=np.int64)
            gy_in[col_r] = col_in
            gy_out[col_r] = col_out
            cap = np.maximum(deg[c, step], deg[:, step])
            bad = (
                np.maximum(tin[c, step] - cin[k] + gy_in, tout[c, step] - cout[k] + gy_out) > cap
            ) | (
                np.maximum(tin[:, step] - gy_in + cin[k], tout[:, step] - gy_out + cout[k]) > cap
            )
            # A failing step changes a degree, so it is rewritten; only passing steps can be
            # no-ops (two interchangeable ranks), and only those need the check.
            bad[c] = True  # c is no partner of its own
            rewritten = np.ones(n, dtype=bool)
            if not bad.all():
                rewritten &= bad | ~self._noops_at(g, step, c)
            rewritten[c] = False
            ys = np.flatnonzero(rewritten)
            parts_y.append(ys)
            parts_t.append(np.full(len(ys), step, dtype=np.int64))
            parts_bad.append(bad[ys])
        # Steps where only the partner takes part: c takes its flows (x-side only; y's own
        # degree can only fall).
        r, t, gin, gout = table.by_step
        only_y = (r != c) & ~np.isin(t, ct)
        ys, ts = r[only_y], t[only_y]
        parts_y.append(ys)
        parts_t.append(ts)
        parts_bad.append(
            np.maximum(tin[c, ts] + gin[only_y], tout[c, ts] + gout[only_y])
            > np.maximum(deg[c, ts], deg[ys, ts])
        )
        bad = np.concatenate(parts_bad)
        if bad.all():  # no passing step, no window (every window of the ring ends here)
            return None
        ys = np.concatenate(parts_y)
        ts = np.concatenate(parts_t)
        order = np.lexsort((ts, ys))
        ys, ts, bad = ys[order], ts[order], bad[order]
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
            return None
        i = np.concatenate(out_i)
        j = np.concatenate(out_j)
        starts, ends = i == group_start[i], j == group_end[j]
        keep = ~(starts & ends)
        i, j, starts, ends = i[keep], j[keep], starts[keep], ends[keep]
        if not len(i):
            return None
        v_first = np.where(starts, int(steps[0]), ts[i])
        v_last = np.where(ends, int(steps[-1]), ts[j])
        return ys[i], ts[i], ts[j], v_first, v_last

    def _noops_at(self, g: int, step: int, c: int) -> np.ndarray:
        """For every partner ``y``: whether relabelling ``c`` and ``y`` in chunk graph ``g``'s
        flows of ``step`` leaves them as they are (a hash finds the few candidates, each is
        confirmed on the flows, as in :meth:`_drop_noops`)."""
        hashes = self._noop_hash(g, step, step, keep=False)
        out = np.zeros(self.pattern.n, dtype=bool)
        for y in np.flatnonzero(hashes == hashes[c]):
            if y != c and self._is_noop(g, step, step, c, int(y)):
                out[y] = True
        return out

    def _drop_local_globals(self, c: int, partners: np.ndarray) -> np.ndarray:
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
            hashes = self._noop_hash(g, first, last)
            changed = hashes != hashes[c]
            for y in np.flatnonzero(~changed):
                if y != c and not self._is_noop(g, first, last, c, int(y)):
                    changed[y] = True
            touched += changed
        same = partners[touched[partners] == 1]
        return np.setdiff1d(partners, same) if len(same) else partners

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

    def _noop_hash(self, g: int, first: int, last: int, *, keep: bool = True) -> np.ndarray:
        key = (g, first, last)
        cached = self._noop_hashes.get(key)
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
                self._noop_hashes[key] = cached
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

    def replay_entries(self) -> int:
        """The :attr:`GraphReplay.entries` of the replays this space holds (memory bounds)."""
        return sum(replay.entries for replay in self._replays.values())

    def _replay(self, g: int) -> GraphReplay:
        replay = self._replays.get(g)
        if replay is None:
            if self._shared is None:
                replay = GraphReplay(self.pattern, g, self._pos)
            else:
                replay = self._shared.get(self.pattern, g, self._pos)
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


def _entry_order(entry: _Entry) -> tuple[int, int, int, int]:
    return (PRIORITY[entry.kind], entry.graph, entry.first, entry.last)


def _materialise(ranks: tuple[int, ...], c: int, entries: Sequence[_Entry]) -> Iterator[Swap]:
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
        tables.append(
            _GraphTable(
                by_step, uniq_steps, step_start, by_rank, rank_start,
                (int(uniq_steps[0]), int(uniq_steps[-1])),
            )
        )
    arrays = {
        "step": step, "src": src, "dst": dst, "is_copy": is_copy, "graph": graph,
        "chunk": first_chunk,
    }
    return tuple(tables), tin, tout, arrays
