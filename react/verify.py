"""Check that a pattern's flows implement its collective, by replaying them on symbolic buffers.

The paper checks a rewritten pattern with one bit per (rank, chunk): "has seen rank r's data"
(appendix A.3). That misses a reduction that adds a contribution twice, which a real AllReduce
turns into a wrong sum. We count instead: ``buf[rank][chunk]`` is the *set* of ranks whose input
the buffer contains, or "nothing held", and a reduce that would add a rank already present is a
violation at once, because contributions never cancel.

The replay, for every chunk (chunks never mix, so each is replayed alone, which is also what lets
:func:`first_violation` re-check only the chunks a swap touched):

- initial state: AllReduce, ReduceScatter, Reduce: every rank holds every chunk = {itself};
  AllGather: each rank holds the chunks it owns = {owner}; Broadcast: the root holds every
  chunk = {root}; everything else holds nothing;
- step by step, all flows of step ``t`` read their source as it was at the end of step ``t - 1``
  (a step is a simultaneous exchange, the TEN edge ``(t-1, src) -> (t, dst)`` of §5.1);
  ``reduce``: ``dst |= src`` (overlap = double count); ``copy``: ``dst = src``; sending a chunk
  the source does not hold, or two writes of one chunk into one rank at one step where one is a
  copy (their order would be undefined), are violations;
- final state: AllReduce: every rank holds every chunk = all ranks; AllGather: every rank holds
  chunk ``c`` = {owner(c)}; ReduceScatter: each owner holds its chunks = all ranks; Broadcast:
  every rank holds every chunk = {root}; Reduce: the root holds every chunk = all ranks.

Sets are Python ints used as bitsets over the ranks' positions, so a check costs a few machine
words even at 1,024 ranks; the per-chunk flow lists are built once per pattern and cached on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from react.errors import PatternError
from react.pattern import Pattern

__all__ = ["first_violation", "verify"]

_PLAN_KEY = "verify_plan"


@dataclass(frozen=True, slots=True)
class _Plan:
    """What the replay needs, derived once per pattern.

    ``ops[c]`` lists chunk ``c``'s flows as ``(step, src_pos, dst_pos, is_copy, flow_index)`` in
    step order (the pattern's flows are stored sorted by step); positions index ``ranks``.
    """

    ops: tuple[list[tuple[int, int, int, bool, int]], ...]
    position: dict[int, int]


def verify(pattern: Pattern) -> None:
    """Raise :class:`PatternError` unless ``pattern``'s flows implement its collective.

    Parameters
    ----------
    pattern : Pattern

    Raises
    ------
    PatternError
        Naming the first violation in step order: the step, the flow, the rank and chunk, what
        the rank holds and what it should hold (rank sets printed compactly, ``{0-3,5}``).

    Examples
    --------
    >>> from react.patterns import allreduce_ring
    >>> verify(allreduce_ring(4))  # returns None: the ring implements AllReduce
    """
    problem = first_violation(pattern)
    if problem is not None:
        label = pattern.name or "pattern"
        raise PatternError(f"{label} ({pattern.kind}, n={pattern.n}) is not valid: {problem}")


def first_violation(pattern: Pattern, chunks: Iterable[int] | None = None) -> str | None:
    """The first violation as a sentence, or ``None`` if the pattern is valid. Never raises on
    a violation; meant for search loops that try thousands of candidate patterns.

    Parameters
    ----------
    pattern : Pattern
    chunks : iterable of int, optional
        Replay only these chunks (and check only their part of the final condition). Exact,
        not an approximation: a chunk's buffers depend on that chunk's flows alone. Pass a chunk
        graph (``pattern.chunk_graphs()[g]``) to re-check only the sub-pattern a swap rewrote.

    Returns
    -------
    str or None
        The earliest violation (by step, then flow order; final-state violations come last, by
        rank position then chunk), or ``None``.

    Raises
    ------
    PatternError
        Only if ``chunks`` names a chunk the pattern does not have.
    """
    plan = _plan(pattern)
    if chunks is None:
        selected: Iterable[int] = range(len(pattern.chunks))
    else:
        selected = sorted(set(chunks))
        for c in selected:
            if not isinstance(c, int) or not 0 <= c < len(pattern.chunks):
                last = len(pattern.chunks) - 1
                raise PatternError(
                    f"first_violation: unknown chunk {c!r}; expected ids 0..{last}"
                )
    best: tuple[tuple[int, int, int], str] | None = None
    for c in selected:
        # A later chunk only matters if it fails at an earlier (step, flow): stop its replay there.
        limit = best[0] if best is not None else None
        found = _replay_chunk(pattern, plan, c, limit)
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    return None if best is None else best[1]


# -- the replay ----------------------------------------------------------------------------------
_FINAL = 1 << 62  # sorts final-state violations after every flow violation


def _plan(pattern: Pattern) -> _Plan:
    # Cached on the pattern (immutable), so repeated checks of one pattern pay this pass once.
    plan = pattern._cache.get(_PLAN_KEY)
    if plan is None:
        position = {r: i for i, r in enumerate(pattern.ranks)}
        ops: list[list[tuple[int, int, int, bool, int]]] = [[] for _ in pattern.chunks]
        for i, flow in enumerate(pattern.flows):
            op = (flow.step, position[flow.src], position[flow.dst], flow.op == "copy", i)
            for c in flow.chunks:
                ops[c].append(op)
        plan = _Plan(tuple(ops), position)
        pattern._cache[_PLAN_KEY] = plan
    return plan


def _initial(pattern: Pattern, plan: _Plan, chunk: int) -> list[int]:
    n = pattern.n
    if pattern.kind in ("allreduce", "reduce_scatter", "reduce"):
        return [1 << i for i in range(n)]
    buf = [0] * n
    holder = pattern.chunks[chunk].owner if pattern.kind == "allgather" else pattern.root
    assert holder is not None  # Pattern's structure check guarantees owner / root
    pos = plan.position[holder]
    buf[pos] = 1 << pos
    return buf


def _replay_chunk(
    pattern: Pattern, plan: _Plan, chunk: int, limit: tuple[int, int, int] | None
) -> tuple[tuple[int, int, int], str] | None:
    """Replay one chunk; return ``((step, flow, 0), message)`` of its first violation, if any.

    Violations at or after ``limit`` are not looked for (an earlier chunk already failed there).
    """
    buf = _initial(pattern, plan, chunk)
    ops = plan.ops[chunk]
    drops: list[tuple[int, int, int]] = []  # (flow index, dst position, bits overwritten)
    i, m = 0, len(ops)
    while i < m:
        step = ops[i][0]
        if limit is not None and step > limit[0]:
            return None
        j = i + 1
        while j < m and ops[j][0] == step:
            j += 1
        if j == i + 1:
            # One flow of this chunk in this step: nothing can conflict (inlined for speed).
            _, s, d, is_copy, f = ops[i]
            value = buf[s]
            if not value:
                return (step, f, 0), _not_held(pattern, chunk, f, s)
            if is_copy:
                lost = buf[d] & ~value
                if lost:
                    drops.append((f, d, lost))
                buf[d] = value
            else:
                if buf[d] & value:
                    return (step, f, 0), _double(pattern, chunk, f, d, buf[d], value)
                buf[d] |= value
        else:
            # Several flows: all read the state at the end of the previous step, then write.
            pending: dict[int, tuple[int, bool, int]] = {}
            for _, s, d, is_copy, f in ops[i:j]:
                value = buf[s]
                if not value:
                    return (step, f, 0), _not_held(pattern, chunk, f, s)
                earlier = pending.get(d)
                if earlier is not None and (is_copy or earlier[1]):
                    return (step, f, 0), _two_writes(pattern, chunk, earlier[2], f, d)
                if not is_copy:
                    added = earlier[0] if earlier is not None else 0
                    held = buf[d] | added
                    if held & value:
                        return (step, f, 0), _double(pattern, chunk, f, d, held, value)
                    pending[d] = (added | value, False, f)
                else:
                    pending[d] = (value, True, f)
            for d, (value, is_copy, f) in pending.items():
                if is_copy:
                    lost = buf[d] & ~value
                    if lost:
                        drops.append((f, d, lost))
                    buf[d] = value
                else:
                    buf[d] |= value
        i = j
    if limit is not None and limit[0] < _FINAL:
        return None
    return _final(pattern, plan, chunk, buf, drops)


def _final(
    pattern: Pattern, plan: _Plan, chunk: int, buf: list[int], drops: list[tuple[int, int, int]]
) -> tuple[tuple[int, int, int], str] | None:
    n = pattern.n
    everyone = (1 << n) - 1
    kind = pattern.kind
    if kind == "allreduce":
        must = {pos: everyone for pos in range(n)} if buf.count(everyone) != n else {}
    elif kind == "allgather":
        owner = pattern.chunks[chunk].owner
        want = 1 << plan.position[owner]  # type: ignore[index]
        must = {pos: want for pos in range(n)} if buf.count(want) != n else {}
    elif kind == "broadcast":
        want = 1 << plan.position[pattern.root]  # type: ignore[index]
        must = {pos: want for pos in range(n)} if buf.count(want) != n else {}
    elif kind == "reduce_scatter":
        must = {plan.position[pattern.chunks[chunk].owner]: everyone}  # type: ignore[index]
    else:  # reduce
        must = {plan.position[pattern.root]: everyone}  # type: ignore[index]
    for pos, want in must.items():
        have = buf[pos]
        if have == want:
            continue
        rank = pattern.ranks[pos]
        held = "nothing of it" if not have else _ranks(pattern, have)
        text = (
            f"at the end, rank {rank} holds chunk {chunk} = {held}, "
            f"should hold {_ranks(pattern, want)}"
        )
        missing = want & ~have
        if missing:
            text += f" (missing {_ranks(pattern, missing)})"
            cause = _first_drop(pattern, drops, missing)
            if cause:
                text += f"; {cause}"
        extra = have & ~want
        if extra:
            text += f" (extra {_ranks(pattern, extra)})"
        return (_FINAL, pos, chunk), text
    return None


# -- messages ------------------------------------------------------------------------------------
def _flow_text(pattern: Pattern, f: int) -> str:
    flow = pattern.flows[f]
    chunks = ",".join(str(c) for c in flow.chunks)
    return f"step {flow.step}, flow {flow.src} -> {flow.dst} ({flow.op} of chunk {chunks})"


def _not_held(pattern: Pattern, chunk: int, f: int, src: int) -> str:
    flow = pattern.flows[f]
    return (
        f"{_flow_text(pattern, f)}: rank {pattern.ranks[src]} sends chunk {chunk} but holds "
        f"nothing of it at the end of step {flow.step - 1}"
    )


def _double(pattern: Pattern, chunk: int, f: int, dst: int, held: int, value: int) -> str:
    return (
        f"{_flow_text(pattern, f)}: rank {pattern.ranks[dst]} holds chunk {chunk} = "
        f"{_ranks(pattern, held)} and would add {_ranks(pattern, value)}, counting "
        f"{_ranks(pattern, held & value)} twice; should hold each contribution once"
    )


def _two_writes(pattern: Pattern, chunk: int, first: int, second: int, dst: int) -> str:
    other = pattern.flows[first]
    return (
        f"{_flow_text(pattern, second)}: rank {pattern.ranks[dst]} also receives chunk {chunk} "
        f"from rank {other.src} ({other.op}) at the same step; a copy and another write of one "
        f"chunk into one rank at one step have no defined order"
    )


def _first_drop(pattern: Pattern, drops: list[tuple[int, int, int]], missing: int) -> str:
    # The earliest overwrite that dropped a now-missing contribution is where the loss began.
    for f, dst, lost in drops:
        if lost & missing:
            flow = pattern.flows[f]
            return (
                f"{_ranks(pattern, lost & missing)} was first overwritten at step {flow.step} by "
                f"the copy {flow.src} -> {flow.dst}, which replaced {_ranks(pattern, lost)} "
                f"held by rank {pattern.ranks[dst]}"
            )
    return ""


def _ranks(pattern: Pattern, bits: int) -> str:
    """A rank set as compact text, runs of three or more collapsed: ``{0-3,5,6}``."""
    labels = sorted(pattern.ranks[i] for i in range(bits.bit_length()) if bits >> i & 1)
    parts: list[str] = []
    k = 0
    while k < len(labels):
        j = k
        while j + 1 < len(labels) and labels[j + 1] == labels[j] + 1:
            j += 1
        if j - k >= 2:
            parts.append(f"{labels[k]}-{labels[j]}")
        else:
            parts.extend(str(x) for x in labels[k : j + 1])
        k = j + 1
    return "{" + ",".join(parts) + "}"
