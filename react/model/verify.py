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
from typing import Any

from react.model.errors import PatternError
from react.model.pattern import Flow, Pattern

__all__ = ["first_violation", "verify"]

_PLAN_KEY = "verify_plan"


@dataclass(frozen=True, slots=True)
class _Plan:
    """What the replay needs, derived once per pattern (or per candidate flow list).

    ``ops[c]`` lists chunk ``c``'s steps in order. A step with one flow of the chunk is the entry
    ``(step, src_pos, dst_pos, is_copy, flow_index)``; a step with several is
    ``(step, -1, [(src_pos, dst_pos, is_copy, flow_index), ...], False, -1)`` so that the common
    case (one flow per chunk per step: every ring) takes the fast path without grouping work.
    Positions index ``ranks``; flow indices index ``flows``.
    """

    ops: dict[int, list[tuple[int, int, Any, bool, int]]]
    flows: tuple[Flow, ...]
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


def first_violation(
    pattern: Pattern, chunks: Iterable[int] | None = None, flows: Iterable[Flow] | None = None
) -> str | None:
    """The first violation as a sentence, or ``None`` if the pattern is valid. Never raises on
    a violation; meant for search loops that try thousands of candidate patterns.

    Parameters
    ----------
    pattern : Pattern
    chunks : iterable of int, optional
        Replay only these chunks (and check only their part of the final condition). Exact,
        not an approximation: a chunk's buffers depend on that chunk's flows alone. Pass a chunk
        graph (``pattern.chunk_graphs()[g]``) to re-check only the sub-pattern a swap rewrote.
    flows : iterable of Flow, optional
        Replay these flows instead of the pattern's (their parts outside ``chunks`` are ignored):
        a search can test a rewrite of one chunk graph without building a new :class:`Pattern`,
        whose construction costs more than this check. Their ranks must be the pattern's.

    Returns
    -------
    str or None
        The earliest violation (by step, then flow order; final-state violations come last, by
        rank position then chunk), or ``None``.

    Raises
    ------
    PatternError
        Only if ``chunks`` or ``flows`` names a chunk or rank the pattern does not have.
    """
    n_chunks = len(pattern.chunks)
    if chunks is None:
        selected: list[int] | range = range(n_chunks)
    else:
        selected = sorted(set(chunks))
        for c in selected:
            if not isinstance(c, int) or not 0 <= c < n_chunks:
                raise PatternError(
                    f"first_violation: unknown chunk {c!r}; expected ids 0..{n_chunks - 1}"
                )
    if flows is None:
        plan = pattern._cache.get(_PLAN_KEY)
        if plan is None and chunks is not None:
            # A fresh pattern checked on a few chunks (a swap candidate): replaying only their
            # flows is far cheaper than planning all of them, so do not build the full plan.
            wanted = set(selected)
            plan = _build_plan(
                pattern, tuple(f for f in pattern.flows if not wanted.isdisjoint(f.chunks)), wanted
            )
        elif plan is None:
            plan = _plan(pattern)
    else:
        plan = _build_plan(pattern, tuple(sorted(flows)), set(selected))
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
        plan = _build_plan(pattern, pattern.flows, None)
        pattern._cache[_PLAN_KEY] = plan
    return plan


def _build_plan(pattern: Pattern, flows: tuple[Flow, ...], only: set[int] | None) -> _Plan:
    position = {r: i for i, r in enumerate(pattern.ranks)}
    wanted = range(len(pattern.chunks)) if only is None else only
    try:
        # Column-wise comprehensions and zip run in C: this pass dominates at a million flows.
        entries = list(zip(
            [f.step for f in flows],
            [position[f.src] for f in flows],
            [position[f.dst] for f in flows],
            [f.op == "copy" for f in flows],
            range(len(flows)),
            strict=True,
        ))
    except KeyError as exc:
        raise PatternError(
            f"first_violation: a flow names rank {exc.args[0]!r}, which is not in the pattern"
        ) from None
    per: dict[int, list[tuple[int, int, Any, bool, int]]] = {c: [] for c in wanted}
    for entry, flow in zip(entries, flows, strict=True):
        for c in flow.chunks:
            target = per.get(c)
            if target is not None:
                target.append(entry)
            elif only is None:
                raise PatternError(f"first_violation: flow {flow!r} names unknown chunk {c!r}")
    for c, ops in per.items():
        if len({op[0] for op in ops}) != len(ops):
            per[c] = _grouped(ops)
    return _Plan(per, flows, position)


def _grouped(
    ops: list[tuple[int, int, Any, bool, int]],
) -> list[tuple[int, int, Any, bool, int]]:
    """Merge a chunk's flows of one step into one group entry (see :class:`_Plan`)."""
    out: list[tuple[int, int, Any, bool, int]] = []
    for op in ops:
        if out and out[-1][0] == op[0]:
            last = out[-1]
            if last[1] >= 0:
                out[-1] = (op[0], -1, [last[1:]], False, -1)
            out[-1][2].append(op[1:])
        else:
            out.append(op)
    return out


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
    flows = plan.flows
    drops: list[tuple[int, int, int]] = []  # (flow index, dst position, bits overwritten)
    last_step = _FINAL if limit is None else limit[0]
    for step, s, d, is_copy, f in plan.ops[chunk]:
        if step > last_step:
            return None
        if s >= 0:
            # One flow of this chunk in this step: nothing can conflict (the fast path).
            value = buf[s]
            if not value:
                return (step, f, 0), _not_held(pattern, flows, chunk, f, s)
            if is_copy:
                lost = buf[d] & ~value
                if lost:
                    drops.append((f, d, lost))
                buf[d] = value
            elif buf[d] & value:
                return (step, f, 0), _double(pattern, flows, chunk, f, d, buf[d], value)
            else:
                buf[d] |= value
            continue
        # Several flows: all read the state at the end of the previous step, then write.
        pending: dict[int, tuple[int, bool, int]] = {}
        for s, dst, is_copy, f in d:
            value = buf[s]
            if not value:
                return (step, f, 0), _not_held(pattern, flows, chunk, f, s)
            earlier = pending.get(dst)
            if earlier is not None and (is_copy or earlier[1]):
                return (step, f, 0), _two_writes(pattern, flows, chunk, earlier[2], f, dst)
            if is_copy:
                pending[dst] = (value, True, f)
                continue
            added = earlier[0] if earlier is not None else 0
            held = buf[dst] | added
            if held & value:
                return (step, f, 0), _double(pattern, flows, chunk, f, dst, held, value)
            pending[dst] = (added | value, False, f)
        for dst, (value, is_copy, f) in pending.items():
            if is_copy:
                lost = buf[dst] & ~value
                if lost:
                    drops.append((f, dst, lost))
                buf[dst] = value
            else:
                buf[dst] |= value
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
            cause = _first_drop(pattern, plan.flows, drops, missing)
            if cause:
                text += f"; {cause}"
        extra = have & ~want
        if extra:
            text += f" (extra {_ranks(pattern, extra)})"
        return (_FINAL, pos, chunk), text
    return None


# -- messages ------------------------------------------------------------------------------------
def _flow_text(flows: tuple[Flow, ...], f: int) -> str:
    flow = flows[f]
    chunks = ",".join(str(c) for c in flow.chunks)
    return f"step {flow.step}, flow {flow.src} -> {flow.dst} ({flow.op} of chunk {chunks})"


def _not_held(pattern: Pattern, flows: tuple[Flow, ...], chunk: int, f: int, src: int) -> str:
    flow = flows[f]
    return (
        f"{_flow_text(flows, f)}: rank {pattern.ranks[src]} sends chunk {chunk} but holds "
        f"nothing of it at the end of step {flow.step - 1}"
    )


def _double(
    pattern: Pattern, flows: tuple[Flow, ...], chunk: int, f: int, dst: int, held: int, value: int
) -> str:
    return (
        f"{_flow_text(flows, f)}: rank {pattern.ranks[dst]} holds chunk {chunk} = "
        f"{_ranks(pattern, held)} and would add {_ranks(pattern, value)}, counting "
        f"{_ranks(pattern, held & value)} twice; should hold each contribution once"
    )


def _two_writes(
    pattern: Pattern, flows: tuple[Flow, ...], chunk: int, first: int, second: int, dst: int
) -> str:
    other = flows[first]
    return (
        f"{_flow_text(flows, second)}: rank {pattern.ranks[dst]} also receives chunk {chunk} "
        f"from rank {other.src} ({other.op}) at the same step; a copy and another write of one "
        f"chunk into one rank at one step have no defined order"
    )


def _first_drop(
    pattern: Pattern, flows: tuple[Flow, ...], drops: list[tuple[int, int, int]], missing: int
) -> str:
    # The earliest overwrite that dropped a now-missing contribution is where the loss began.
    for f, dst, lost in drops:
        if lost & missing:
            flow = flows[f]
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
