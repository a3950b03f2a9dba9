"""The original run of one chunk graph: its flows per step, the collective's conditions on its
buffers, and the value every buffer held after every step.

Everything else in :mod:`react.model.replay` reads from this record; the step rule
(:func:`step_updates`) is the one place where the semantics of :mod:`react.model.verify` are
restated, so the original run and the incremental replays of swapped windows agree on them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from react.model.errors import PatternError
from react.model.pattern import Pattern

__all__ = ["Inflows", "Trajectory", "step_updates"]

#: One step's flows by one of their ends: ``{rank position: [(other end, chunks, is_copy)]}``.
Inflows = dict[int, list[tuple[int, tuple[int, ...], bool]]]


class Trajectory:
    """The original run of chunk graph ``g`` of ``pattern``, ranks as positions (``pos``).

    ``into[t][d]`` / ``out[t][s]``: the flows of step ``t`` by receiver / sender; ``initial``
    and ``final``: the buffers' values before the first step and those the collective's meaning
    requires at the end (a buffer missing from ``final`` is unconstrained); ``writes[(r, c)]``:
    the steps at which buffer ``(r, c)`` is written; ``hist_steps`` / ``hist_vals``: the steps
    at which each buffer changed and its values then (the initial one at step 0 first). Values
    are bitsets of the ranks whose input a buffer holds, as in :mod:`react.model.verify`.

    Raises
    ------
    PatternError
        If the chunk graph does not verify.
    """

    def __init__(self, pattern: Pattern, g: int, pos: dict[int, int]) -> None:
        self.kind = pattern.kind
        self.n = pattern.n
        self.chunks = pattern.chunk_graphs()[g]
        self.into, self.out = _flows_by_step(pattern, g, pos)
        self.steps = sorted(self.into)
        #: What its state can grow to, (rank, chunk) values per step: a recursive-doubling
        #: AllGather of 240 ranks is one graph of 240 chunks, ~85 MiB at 518,400 entries.
        self.entries = self.n * len(self.chunks) * len(self.steps)
        self.initial, self.final = _conditions(pattern, self.chunks, pos)
        #: Column of each chunk in the ``(n, chunks)`` arrays; ``span``: one more than the last
        #: step and the step before the first, so that ``pos * span + step`` keys are unique.
        self.col = {c: j for j, c in enumerate(self.chunks)}
        self.span = (self.steps[-1] + 2) if self.steps else 2
        self.writes: dict[tuple[int, int], list[int]] = {}
        for t in self.steps:
            for d, flows in self.into[t].items():
                for _, chunks, _ in flows:
                    for c in chunks:
                        self.writes.setdefault((d, c), []).append(t)
        #: Buffers may be empty (nothing received yet): AllGather, Broadcast.
        self.may_be_empty = self.kind in ("allgather", "broadcast")
        self.hist_steps: dict[tuple[int, int], list[int]] = {}
        self.hist_vals: dict[tuple[int, int], list[int]] = {}
        state = dict(self.initial)
        for t in self.steps:
            updates = step_updates(t, lambda r, c: state[(r, c)], self.into[t], None)
            if updates is None:
                raise PatternError(
                    f"SwapSpace: chunk graph {g} of the pattern does not verify at step {t}"
                )
            for key, value in updates.items():
                state[key] = value
                self.hist_steps.setdefault(key, [0]).append(t)
                self.hist_vals.setdefault(key, [self.initial[key]]).append(value)

    def value(self, t: int, r: int, c: int) -> int:
        """The original value of (rank position r, chunk c) at the end of step t."""
        key = (r, c)
        steps = self.hist_steps.get(key)
        if steps is None:
            return self.initial[key]
        return self.hist_vals[key][bisect_right(steps, t) - 1]


def step_updates(
    t: int, read: Callable[[int, int], int], inflows: Inflows, only: set[int] | None
) -> dict[tuple[int, int], int] | None:
    """New values written at step ``t`` into the ranks of ``only`` (all if None), or None on
    a violation; ``read(rank, chunk)`` gives the value at the end of step ``t - 1``.

    A violation, as in :mod:`react.model.verify`: sending an empty buffer, a copy plus another
    write into one buffer at one step, or a reduce that would count an input twice.
    """
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


def _flows_by_step(pattern: Pattern, g: int, pos: dict[int, int]) -> tuple[
        dict[int, Inflows], dict[int, Inflows]]:
    """``into[t][d]`` / ``out[t][s]``: the flows of chunk graph ``g`` at step ``t`` as
    ``(other end, chunks, is_copy)``, in pattern order."""
    into: dict[int, Inflows] = {}
    out: dict[int, Inflows] = {}
    for i in pattern.flows_of_chunk_graph(g):
        f = pattern.flows[i]
        s, d, cp = pos[f.src], pos[f.dst], f.op == "copy"
        into.setdefault(f.step, {}).setdefault(d, []).append((s, f.chunks, cp))
        out.setdefault(f.step, {}).setdefault(s, []).append((d, f.chunks, cp))
    return into, out


def _conditions(pattern: Pattern, chunks: tuple[int, ...], pos: dict[int, int]) -> tuple[
        dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """Initial and required final values per (rank position, chunk) of these chunks: the
    collective's meaning (a buffer left out of the final ones is unconstrained)."""
    n, kind = pattern.n, pattern.kind
    everyone = (1 << n) - 1
    root = -1 if pattern.root is None else pos[pattern.root]
    owner: dict[int, int] = {}
    for c in chunks:
        owned_by = pattern.chunks[c].owner
        owner[c] = -1 if owned_by is None else pos[owned_by]
    keys = [(r, c) for c in chunks for r in range(n)]
    initial: dict[tuple[int, int], int]
    if kind in ("allreduce", "reduce_scatter", "reduce"):
        initial = {key: 1 << key[0] for key in keys}
    else:  # only the owner (AllGather) or the root (Broadcast) holds a value
        initial = dict.fromkeys(keys, 0)
        for c in chunks:
            holder = owner[c] if kind == "allgather" else root
            if 0 <= holder < n:
                initial[(holder, c)] = 1 << holder
    final: dict[tuple[int, int], int]
    if kind == "allreduce":
        final = dict.fromkeys(keys, everyone)
    elif kind == "allgather":
        final = {(r, c): 1 << owner[c] for r, c in keys}
    elif kind == "broadcast":
        final = dict.fromkeys(keys, 1 << root)
    else:  # the owner (ReduceScatter) or the root (Reduce) ends with the sum of all
        final = {}
        for c in chunks if kind in ("reduce_scatter", "reduce") else ():
            holder = owner[c] if kind == "reduce_scatter" else root
            if 0 <= holder < n:
                final[(holder, c)] = everyone
    return initial, final
