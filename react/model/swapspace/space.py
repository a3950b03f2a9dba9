"""The front of the swap space: :class:`SwapSpace` composes enumeration, pruning and viability
per rank, lazily, and answers the controller's questions (the rules: :mod:`react.model.swapspace`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import numpy as np

from react.model.errors import PatternError
from react.model.pattern import Pattern
from react.model.replay import GraphReplay, ReplayCache
from react.model.swapspace.enumeration import Entry, entry_order, materialise, windows
from react.model.swapspace.loads import Loads
from react.model.swapspace.pruning import Noops, degree_ok
from react.model.swapspace.symmetry import symmetry
from react.model.swapspace.tables import degree_tables
from react.model.swapspace.viability import (
    chunk_local_partners,
    global_partners,
    guard_global,
    meaning_fixed,
    position_entries,
)
from react.model.transforms import PRIORITY, GlobalSwap, PositionSwap, Swap
from react.model.verify import verify

__all__ = ["Direction", "SwapSpace"]

Direction = Literal["any", "in", "out"]
_DIRECTIONS = ("any", "in", "out")
_KINDS = tuple(PRIORITY)


class SwapSpace:
    """The viable, degree-pruned swaps of a pattern, per rank (rules: :mod:`react.model.swapspace`).

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
    >>> from react.model.transforms import ChunkLocalSwap
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
        self._degrees, arrays = degree_tables(pattern, self._pos)
        self._loads = Loads(self._degrees)
        self._noops = Noops(pattern, self._degrees.tables, arrays)
        self._orbit = symmetry(pattern, self._pos, arrays)
        self._replays: dict[int, GraphReplay] = {}
        self._shared = replays
        self._spaces: dict[int, tuple[Entry, ...]] = {}
        self._swaps: dict[int, tuple[Swap, ...]] = {}
        self._swaps_in: dict[tuple[int, int], tuple[Swap, ...]] = {}
        self._per_graph: dict[tuple[int, int], tuple[Entry, ...]] = {}
        self._global_guard_done = False

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
                                 key=entry_order)
                swaps = tuple(materialise(self.pattern.ranks, c, entries))
                self._swaps_in[(c, graph)] = swaps
        elif swaps is None:
            swaps = tuple(materialise(self.pattern.ranks, c, self._space(c)))
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
        return self._loads.load(self._rank_pos(rank), direction)

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
        if isinstance(swap, GlobalSwap):  # the two exchange their whole degree profiles
            return self._loads.load(other, direction)
        self._check_graph(swap.graph)
        first, last = (
            (swap.first_step, swap.last_step) if isinstance(swap, PositionSwap)
            else self._degrees.tables[swap.graph].span
        )
        return self._loads.after(c, other, swap.graph, first, last, direction)

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
    def _space(self, c: int) -> tuple[Entry, ...]:
        space = self._spaces.get(c)
        if space is None:
            rep, alpha, beta = self._orbit[c]
            if rep == c:
                space = self._compute(c)
            else:  # an automorphism maps rep to c: map rep's swaps (swapspace.symmetry)
                space = tuple(
                    sorted(
                        (
                            Entry(e.kind, e.graph if e.graph < 0 else int(beta[e.graph]),
                                  e.first, e.last, np.sort(alpha[e.partners]))
                            for e in self._space(rep)
                        ),
                        key=entry_order,
                    )
                )
            self._spaces[c] = space
        return space

    def _compute(self, c: int) -> tuple[Entry, ...]:
        entries: list[Entry] = []
        for g in range(len(self._degrees.tables)):
            entries.extend(self._graph_entries(c, g))
        entries.extend(self._global_entries(c))
        return tuple(sorted(entries, key=entry_order))

    def _graph_entries(self, c: int, g: int) -> tuple[Entry, ...]:
        """``c``'s chunk-local and position swaps in chunk graph ``g`` (cached): candidates
        pruned by the degree rule, then by viability, then no-ops dropped."""
        cached = self._per_graph.get((c, g))
        if cached is not None:
            return cached
        entries: list[Entry] = []
        table = self._degrees.tables[g]
        first, last = table.span
        ok = degree_ok(self._degrees, table, c, first, last)
        fixed = meaning_fixed(self.pattern, self._pos, g, c)
        partners = chunk_local_partners(lambda: self._replay(g), c, ok, fixed, table.span)
        partners = self._noops.drop(g, first, last, c, partners)
        if len(partners):
            entries.append(Entry("chunk_local", g, first, last, partners))
        found = windows(self._degrees, self._noops, g, table, c)
        if found is not None:
            entries.extend(position_entries(self._replay(g), g, c, found, fixed))
        out = self._per_graph[(c, g)] = tuple(entries)
        return out

    def _global_entries(self, c: int) -> tuple[Entry, ...]:
        """``c``'s global swaps, as at most one entry (cached)."""
        cached = self._per_graph.get((c, -1))
        if cached is not None:
            return cached
        partners, proven = global_partners(self.pattern, self._pos, c)
        if proven is not None and not self._global_guard_done:
            guard_global(self.pattern, proven)
            self._global_guard_done = True
        partners = self._noops.drop(-1, 0, 0, c, partners)
        partners = self._noops.drop_local_globals(c, partners)
        out = (Entry("global", -1, 0, 0, partners),) if len(partners) else ()
        self._per_graph[(c, -1)] = out
        return out

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
    def _rank_pos(self, rank: int) -> int:
        try:
            return self._pos[rank]
        except (KeyError, TypeError):
            self.pattern._check_rank(rank)
            raise

    def _check_graph(self, graph: int) -> None:
        count = len(self._degrees.tables)
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
