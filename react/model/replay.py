"""Replays of one chunk graph kept for the swap space's incremental viability checks.

A swap rewrites one chunk graph (a position swap only a window of its steps), so whether the
swapped pattern still verifies is decided from the original graph's replay: the buffers it held
at every step, which of them a window can reach, and linear algebra on their contents. This
module holds that replay (:class:`GraphReplay`, with the semantics of :mod:`react.model.verify`) and
the cache that shares replays between the swap spaces of related patterns
(:class:`ReplayCache`); :mod:`react.model.swapspace` decides which swaps to check and how
(its module docstring says which checks are exact without a replay).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import OrderedDict

import numpy as np

from react.model.errors import PatternError
from react.model.pattern import Pattern

__all__ = ["GraphReplay", "ReplayCache"]


class ReplayCache:
    """Replays of chunk graphs shared by the swap spaces of related patterns, least recently
    used dropped first.

    A replay depends only on the collective's meaning (kind, ranks, root, chunks) and on the
    flows of its chunk graph, which is its key, so a space gets the same answers from a shared
    replay as from its own; its caches (verdicts, paths, boundaries) then serve every space
    whose pattern has that chunk graph. It keeps at most ``size`` replays and, with
    ``max_entries``, at most that many :attr:`GraphReplay.entries` in all (the newest replay
    whatever its size): a dropped replay is built again when asked for, with the same answers.
    """

    def __init__(self, size: int = 256, max_entries: int | None = None) -> None:
        if not (isinstance(size, int) and size >= 1):
            raise PatternError(f"ReplayCache: size must be a positive integer, got {size!r}")
        if max_entries is not None and not (isinstance(max_entries, int) and max_entries >= 1):
            raise PatternError(
                f"ReplayCache: max_entries must be a positive integer or None, got {max_entries!r}")
        self._size = size
        self._max_entries = max_entries
        self._entries = 0
        self._replays: OrderedDict[tuple[object, ...], GraphReplay] = OrderedDict()

    def __len__(self) -> int:
        return len(self._replays)

    def get(self, pattern: Pattern, g: int, pos: dict[int, int]) -> GraphReplay:
        block = pattern.chunk_graphs()[g]
        key = (pattern.kind, pattern.ranks, pattern.root, pattern.chunks, block,
               tuple(pattern.flows[i] for i in pattern.flows_of_chunk_graph(g)))
        replay = self._replays.get(key)
        if replay is None:
            replay = GraphReplay(pattern, g, pos)
            self._replays[key] = replay
            self._entries += replay.entries
            while len(self._replays) > 1 and (
                    len(self._replays) > self._size
                    or (self._max_entries is not None and self._entries > self._max_entries)):
                self._entries -= self._replays.popitem(last=False)[1].entries
        else:
            self._replays.move_to_end(key)
        return replay


class GraphReplay:
    """The original replay of one chunk graph, kept so that a swap is re-checked incrementally.

    Semantics are those of :mod:`react.model.verify` (bitset buffers, simultaneous steps, double
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
        #: What its state can grow to, (rank, chunk) values per step: a recursive-doubling
        #: AllGather of 240 ranks is one graph of 240 chunks, ~85 MiB at 518,400 entries.
        self.entries = self.n * len(self.chunks) * len(self.steps)
        self._boundaries: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        # Initial and required final values per (rank, chunk); None = unconstrained.
        root = -1 if pattern.root is None else pos[pattern.root]
        owner: dict[int, int] = {}
        for c in self.chunks:
            owned_by = pattern.chunks[c].owner
            owner[c] = -1 if owned_by is None else pos[owned_by]
        keys = [(r, c) for c in self.chunks for r in range(self.n)]
        kind = self.kind
        self.initial: dict[tuple[int, int], int]
        if kind in ("allreduce", "reduce_scatter", "reduce"):
            self.initial = {key: 1 << key[0] for key in keys}
        else:  # only the owner (AllGather) or the root (Broadcast) holds a value
            self.initial = dict.fromkeys(keys, 0)
            for c in self.chunks:
                holder = owner[c] if kind == "allgather" else root
                if 0 <= holder < self.n:
                    self.initial[(holder, c)] = 1 << holder
        self.final: dict[tuple[int, int], int]
        if kind == "allreduce":
            self.final = dict.fromkeys(keys, everyone)
        elif kind == "allgather":
            self.final = {(r, c): 1 << owner[c] for r, c in keys}
        elif kind == "broadcast":
            self.final = dict.fromkeys(keys, 1 << root)
        else:  # the owner (ReduceScatter) or the root (Reduce) ends with the sum of all
            self.final = {}
            for c in self.chunks if kind in ("reduce_scatter", "reduce") else ():
                holder = owner[c] if kind == "reduce_scatter" else root
                if 0 <= holder < self.n:
                    self.final[(holder, c)] = everyone
        # Every access of a (rank position, chunk column), as two flat arrays (``_events``): its
        # key ``(r * chunks + j) * span + step`` and whether it reads (a send or a reduce into it
        # reads the value at the end of step - 1; a copy into it only overwrites it, for the
        # liveness shortcut).
        width = len(self.chunks)
        self._col = col = {c: j for j, c in enumerate(self.chunks)}
        self._span = span = (self.steps[-1] + 2) if self.steps else 2
        event_keys: list[int] = []
        event_reads: list[bool] = []
        self.writes: dict[tuple[int, int], list[int]] = {}
        for t in self.steps:
            for d, flows in self.into[t].items():
                for s, chunks, is_copy in flows:
                    for c in chunks:
                        j = col[c]
                        event_keys.append((s * width + j) * span + t)
                        event_reads.append(True)
                        event_keys.append((d * width + j) * span + t)
                        event_reads.append(not is_copy)
                        self.writes.setdefault((d, c), []).append(t)
        self._events = (np.asarray(event_keys, dtype=np.int64),
                        np.asarray(event_reads, dtype=bool))
        self._verdict_cache: dict[tuple[int, int, int, int], bool] = {}
        self._derived: dict[object, object] = {}
        #: Buffers may be empty (nothing received yet): AllGather, Broadcast.
        self.may_be_empty = self.kind in ("allgather", "broadcast")
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

    def boundary(self, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The original state at the end of step ``t``, as ``(n, chunks)`` arrays: value ids
        (equal ids, equal buffers), when the value is overwritten (:meth:`_overwritten`) and an
        influence hash: the sum of random weights of the constrained final buffers the value
        flows into.

        In a valid pattern a value reaches a final buffer at most once (twice would count it
        twice), so equal influence sets give equal sums; unequal sums prove unequal sets.
        """
        cached = self._boundaries.get(t)
        if cached is not None:
            return cached
        vid = self._value_ids(t)
        over = self._overwritten(t)
        # Between two steps of this graph nothing changes: the boundary of the last step <= t.
        k = bisect_right(self.steps, t)
        hashes = self._influence_hashes()[self.steps[k - 1] if k else self.steps[0] - 1]
        cached = (vid, over, hashes)
        self._boundaries[t] = cached
        return cached

    def _history(self) -> dict[str, np.ndarray]:
        """The original trajectory and accesses as flat arrays, for whole-state queries.

        Positions are numbered ``r * chunks + j`` (rank position r, chunk column j), so that a
        query over all of them reshapes to ``(n, chunks)``. ``change``: every position's value
        changes (its initial value at step 0 first, then each write), keyed ``pos * span +
        step`` and ascending, with the interned id of the value (equal ids, equal buffers) in
        ``change_id``; ``group``: every (position, step) at which the position is accessed,
        keyed the same way, with whether any access there reads it (``group_reads``).
        """
        cached = self._derived.get("history")
        if cached is not None:
            return cached  # type: ignore[return-value]
        width, span, col = len(self.chunks), self._span, self._col
        keys: list[int] = []
        values: list[int] = []
        for (r, c), steps in self.hist_steps.items():
            base = (r * width + col[c]) * span
            keys.extend([base + step for step in steps])
            values.extend(self.hist_vals[(r, c)])
        for r, c in self.initial.keys() - self.hist_steps.keys():  # never written
            keys.append((r * width + col[c]) * span)
            values.append(self.initial[(r, c)])
        interned: dict[int, int] = {}
        ids = [interned.setdefault(v, len(interned)) for v in values]
        change = np.asarray(keys, dtype=np.int64)
        order = np.argsort(change)
        order_e = np.argsort(self._events[0], kind="stable")
        event_keys, event_reads = self._events[0][order_e], self._events[1][order_e]
        if event_keys.size:
            group, first = np.unique(event_keys, return_index=True)
            group_reads = np.logical_or.reduceat(event_reads, first)
        else:
            group, group_reads = event_keys, event_reads
        final = np.zeros(self.n * width, dtype=bool)
        final[[r * width + col[c] for r, c in self.final]] = True
        out: dict[str, np.ndarray] = {
            "span": np.asarray(span, dtype=np.int64),
            "change": change[order],
            "change_id": np.asarray(ids, dtype=np.int64)[order],
            "nonzero": np.asarray([v != 0 for v in interned], dtype=bool),
            "group": group,
            "group_reads": group_reads,
            "final": final,
        }
        self._derived["history"] = out
        return out

    def _value_ids(self, t: int) -> np.ndarray:
        """Interned ids of every position's original value at the end of step ``t`` (as
        :meth:`value`: the last change at a step <= t), shaped ``(n, chunks)``."""
        h = self._history()
        span = int(h["span"])
        base = np.arange(self.n * len(self.chunks), dtype=np.int64) * span
        at = np.searchsorted(h["change"], base + min(max(t, 0), span - 1), side="right") - 1
        return h["change_id"][at].reshape(self.n, len(self.chunks))

    def _overwritten(self, t: int) -> np.ndarray:
        """Per position, ``(n, chunks)``: if its value at the end of step ``t`` is dead -- its
        next access is a copy into it, with no read at that step -- the step of that copy;
        ``inf`` if it is never accessed again and the final condition does not constrain it;
        nan if it is live."""
        h = self._history()
        span = int(h["span"])
        base = np.arange(self.n * len(self.chunks), dtype=np.int64) * span
        group = h["group"]
        nxt = np.searchsorted(group, base + min(max(t, 0), span - 1), side="right")
        found = nxt < group.size
        nxt_in = np.where(found, nxt, 0)
        found &= (group[nxt_in] // span) == base // span  # the next access is this position's
        over = np.where(h["final"], np.nan, np.inf)
        step = (group[nxt_in] % span).astype(float)
        over = np.where(found, np.where(h["group_reads"][nxt_in], np.nan, step), over)
        return over.reshape(self.n, len(self.chunks))

    def _influence_hashes(self) -> dict[int, np.ndarray]:
        """Per step boundary ``t`` (``steps[0] - 1`` included), the influence hash of each
        (rank position, chunk) value at the end of ``t`` (:meth:`boundary`), all from one
        backward pass: a copy into d kills d's earlier value; a flow s -> d passes d's later
        influence to s's earlier value."""
        cached = self._derived.get("influence")
        if cached is not None:
            return cached  # type: ignore[return-value]
        n, width = self.n, len(self.chunks)
        col = {c: j for j, c in enumerate(self.chunks)}
        final = self._history()["final"]
        where = np.flatnonzero(final)
        infl = np.zeros(n * width, dtype=np.uint64)
        infl[where] = _weights(where // width,
                               np.asarray(self.chunks, dtype=np.int64)[where % width])
        out: dict[int, np.ndarray] = {}
        for s in reversed(self.steps):
            out[s] = infl.reshape(n, width)  # never written again: the next step's is a copy
            srcs: list[int] = []
            dsts: list[int] = []
            kills: list[int] = []
            for d, flows in self.into[s].items():
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
        out[self.steps[0] - 1] = infl.reshape(n, width)
        self._derived["influence"] = out
        return out

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
        ReduceScatter, Reduce); all False otherwise or where the structure is not 0/1.

        Why it is exact. Buffers hold multisets of ranks' inputs; without a violation the state
        evolves linearly (a copy replaces, a reduce adds), so a final buffer's content is
        ``sum over sources s of N(s -> f) {s}`` with ``N`` the path counts of the flows. With
        ``A`` the paths from the inputs to the buffers at ``first - 1`` (the values there),
        ``M`` those through the window, ``B`` those from the buffers at ``last`` to the
        constrained final buffers (their influence sets) and ``P`` the exchange of x and y,
        the swapped pattern's counts are ``A P M P B`` against the original's ``A M B``; the
        difference reduces, per chunk, to the rank-two matrix
        ``ds (x) b + da (x) (i + k b)`` with ``ds = S_last(y) - S_last(x)``,
        ``da = S_first-1(x) - S_first-1(y)``, ``b = B(x) - B(y)``, ``i = I(y) - I(x)`` (I: the
        influence sets at ``first - 1``) and ``k = M_xx - M_xy - M_yx + M_yy``, all vectors of
        -1/0/1 (in a valid pattern with no empty buffer every count is 0 or 1: two paths
        would count an input twice). Non-zero: some final buffer is wrong, or the run violates
        earlier: not viable. Zero: every final buffer is right, so every reduce whose result
        reaches one adds no input twice; the only violation left would be a double count in a
        result that reaches no final buffer. There is none when the original has no such
        reduce and the swap keeps which buffers reach none (``B(x)``, ``B(y)`` both empty or
        both not, the same for ``I``): then the swapped pattern verifies.
        """
        key = ("linear", x, ys.dtype.str, ys.tobytes(), first, last)
        cached = self._derived.get(key)
        if cached is None:
            cached = self._linear_verdicts(x, ys, first, last)
            self._derived[key] = cached
        proven: np.ndarray
        rejected: np.ndarray
        proven, rejected = cached  # type: ignore[misc]
        return proven.copy(), rejected.copy()  # callers refine them in place

    def _linear_verdicts(
        self, x: int, ys: np.ndarray, first: int, last: int
    ) -> tuple[np.ndarray, np.ndarray]:
        m = len(ys)
        proven = np.zeros(m, dtype=bool)
        rejected = np.zeros(m, dtype=bool)
        if self.may_be_empty:
            return proven, rejected
        paths = self.paths(first, last)
        reach = self.reach()
        if paths is None or reach is None:
            return proven, rejected
        sets, no_dead_reduce = reach
        before, after = sets[first - 1], sets[last]
        v0, v1 = self.values_at(first - 1), self.values_at(last)
        partners = [int(y) for y in ys]
        bad = [False] * m
        unsafe = [False] * m
        zero = _rank_two_is_zero
        for j in range(len(self.chunks)):
            p, i0, i1, s0, s1 = paths[j], before[j], after[j], v0[j], v1[j]
            px, ix, bx, ax, sx = p[x], i0[x], i1[x], s0[x], s1[x]
            pxx = (px >> x) & 1
            for k, y in enumerate(partners):
                if bad[k]:
                    continue
                py, iy, by, ay, sy = p[y], i0[y], i1[y], s0[y], s1[y]
                # ds = 0 and da = 0 (equal values at both ends): both terms vanish.
                if not (sy == sx and ay == ax) and not zero(
                        sy & ~sx, sx & ~sy, bx & ~by, by & ~bx, ax & ~ay, ay & ~ax, iy & ~ix,
                        ix & ~iy, pxx - ((py >> x) & 1) - ((px >> y) & 1) + ((py >> y) & 1)):
                    bad[k] = True
                elif (bx == 0) != (by == 0) or (ix == 0) != (iy == 0):
                    unsafe[k] = True
        rejected = np.asarray(bad, dtype=bool)
        if no_dead_reduce:
            proven = ~rejected & ~np.asarray(unsafe, dtype=bool)
        return proven, rejected

    def values_at(self, t: int) -> list[list[int]]:
        """The original values at the end of step ``t``, per chunk (in ``chunks`` order), per
        rank position."""
        key = ("values", t)
        cached = self._derived.get(key)
        if cached is None:
            cached = [[self.value(t, r, c) for r in range(self.n)] for c in self.chunks]
            self._derived[key] = cached
        return cached  # type: ignore[return-value]

    def reach(self) -> tuple[dict[int, list[list[int]]], bool] | None:
        """Per step boundary ``t`` (``steps[0] - 1`` included), per chunk, per rank position:
        the influence set of the value at the end of ``t``, as the bitset of the ranks whose
        constrained final buffer of that chunk it reaches; and whether every reduce's result
        reaches one. None if a value reaches a final buffer by two paths (counts not 0/1)."""
        if "reach" in self._derived:
            return self._derived["reach"]  # type: ignore[return-value]
        col = {c: j for j, c in enumerate(self.chunks)}
        infl = [
            [1 << r if (r, c) in self.final else 0 for r in range(self.n)] for c in self.chunks
        ]
        sets: dict[int, list[list[int]]] = {}
        no_dead_reduce = True
        for s in reversed(self.steps):
            sets[s] = infl
            new = [list(row) for row in infl]
            for d, flows in self.into[s].items():
                for _, chunks, is_copy in flows:
                    for c in chunks:
                        if is_copy:
                            new[col[c]][d] = 0
                        elif not infl[col[c]][d]:
                            no_dead_reduce = False
            for d, flows in self.into[s].items():
                for src, chunks, _ in flows:
                    for c in chunks:
                        j = col[c]
                        add = infl[j][d]
                        if new[j][src] & add:
                            self._derived["reach"] = None
                            return None
                        new[j][src] |= add
            infl = new
        sets[self.steps[0] - 1] = infl
        out = (sets, no_dead_reduce)
        self._derived["reach"] = out
        return out

    def held(self, t: int) -> np.ndarray:
        """Whether each (rank position, chunk) holds a value at the end of step ``t``."""
        key = ("held", t)
        cached: np.ndarray | None = self._derived.get(key)  # type: ignore[assignment]
        if cached is None:
            cached = self._history()["nonzero"][self._value_ids(t)]
            self._derived[key] = cached
        return cached

    def sends(self, t: int) -> np.ndarray:
        """Whether each (rank position, chunk) is sent at step ``t``."""
        key = ("sends", t)
        cached: np.ndarray | None = self._derived.get(key)  # type: ignore[assignment]
        if cached is None:
            cached = np.zeros((self.n, len(self.chunks)), dtype=bool)
            col = {c: j for j, c in enumerate(self.chunks)}
            for s, flows in self.out.get(t, {}).items():
                for _, chunks, _ in flows:
                    for c in chunks:
                        cached[s, col[c]] = True
            self._derived[key] = cached
        return cached

    def paths(self, first: int, last: int) -> list[list[int]] | None:
        """Per chunk, per rank position ``r``: the bitset of positions with a path from their
        buffer at ``first - 1`` to ``r``'s at ``last`` (a replay of the window from one-hot
        buffers); None if some buffer is reached twice from one source (then ``M`` is not 0/1
        and :meth:`linear_verdicts` does not decide). One replay per ``first`` serves every
        ``last``: each step's result is kept."""
        key = ("paths", first, last)
        if key not in self._derived:
            self._paths_from(first)
        return self._derived[key]  # type: ignore[return-value]

    def _paths_from(self, first: int) -> None:
        states = [[1 << r for r in range(self.n)] for _ in self.chunks]
        broken = False
        for t in self.steps[bisect_left(self.steps, first):]:
            if not broken:
                for j, c in enumerate(self.chunks):
                    state = states[j]
                    new: dict[int, int] = {}
                    for d, flows in self.into[t].items():
                        sources = [(s, cp) for s, chunks, cp in flows if c in chunks]
                        if not sources:
                            continue
                        if any(cp for _, cp in sources):  # the only write (valid pattern)
                            new[d] = state[sources[0][0]]
                            continue
                        acc = state[d]
                        for s, _ in sources:
                            if acc & state[s]:
                                broken = True
                            acc |= state[s]
                        new[d] = acc
                    for d, v in new.items():
                        state[d] = v
            self._derived[("paths", first, t)] = (
                None if broken else [list(state) for state in states]
            )

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
            # Only these buffers can differ from the original's after step t: those the swapped
            # step writes, those already differing, and those the original step writes. Any other
            # holds its original value of step t - 1, which the original kept through step t.
            maybe: dict[int, set[int]] = {a: set() for a in affected}
            for r, c in updates:
                maybe[r].add(c)
            for r, c in overlay:
                maybe[r].add(c)
            for a in affected:
                for _, chunks, _ in into.get(a, ()):
                    maybe[a].update(chunks)
            order = self._col.__getitem__
            for a in affected:
                for c in sorted(maybe[a], key=order):
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


def _rank_two_is_zero(p0: int, p1: int, q0: int, q1: int, r0: int, r1: int, i0: int, i1: int,
                      kappa: int) -> bool:
    """Whether ``p (x) q + r (x) (i + kappa q) = 0`` for -1/0/1 vectors given as bitset pairs
    (``v = v0 - v1``, disjoint; :meth:`GraphReplay.linear_verdicts`).

    If ``p (x) q = 0`` the rest must vanish: ``r = 0`` or ``i = -kappa q``. Otherwise both
    terms are rank one and equal up to sign: ``r = lam p`` (``lam = +-1``, the entries being
    +-1) and ``i + kappa q = -q / lam``, i.e. ``i = mu q`` with ``mu = -(kappa + lam)``.
    """
    if not (p0 or p1) or not (q0 or q1):
        return not (r0 or r1) or _is_multiple(i0, i1, q0, q1, -kappa)
    if r0 == p0 and r1 == p1:
        lam = 1
    elif r0 == p1 and r1 == p0:
        lam = -1
    else:
        return False
    return _is_multiple(i0, i1, q0, q1, -(kappa + lam))


def _is_multiple(v0: int, v1: int, w0: int, w1: int, mu: int) -> bool:
    """Whether ``v = mu w`` for -1/0/1 vectors given as bitset pairs and an integer ``mu``."""
    if mu == 0:
        return not (v0 or v1)
    if mu == 1:
        return v0 == w0 and v1 == w1
    if mu == -1:
        return v0 == w1 and v1 == w0
    return not (v0 or v1 or w0 or w1)


def _weights(ranks: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    """A fixed pseudo-random odd 64-bit weight per (rank position, chunk): splitmix64 of
    ``rank * K1 + chunk * K2 + 1``, in unsigned 64-bit arithmetic (it wraps modulo 2**64)."""
    k1, k2, k3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), \
        np.uint64(0x94D049BB133111EB)
    z = ranks.astype(np.uint64) * k1 + chunks.astype(np.uint64) * k2 + np.uint64(1)
    z = (z ^ (z >> np.uint64(30))) * k2
    z = (z ^ (z >> np.uint64(27))) * k3
    return (z ^ (z >> np.uint64(31))) | np.uint64(1)
