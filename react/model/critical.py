"""Critical paths of a pattern's TEN weighted by flow completion times (paper §5.4.1).

Under an execution rule of :mod:`react.model.execution` (a flow starts once every flow it waits
for has ended; Algorithm 2 by default, as every backend runs it unless told otherwise), the
collective's time is the length of the longest waiting chain when each flow weighs its FCT. That
chain is the critical path: only congested ranks on it can shorten the collective. Waiting for the
network is already inside the FCTs, so the path length equals the collective time whenever each
flow started as soon as its rule allowed.

Ties between equally long predecessors are broken towards the lowest flow index, so the same
weights always give the same path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from react.model.errors import ReactError
from react.model.execution import DEFAULT_EXECUTION, GateArrays, Gates, gate_arrays, gates
from react.model.pattern import Pattern


@dataclass(frozen=True, slots=True)
class CriticalPath:
    """Flow indices from the first flow of the chain to the last, and the chain's length."""

    flows: tuple[int, ...]
    length_s: float


def critical_path(pattern: Pattern, fct_s: Sequence[float] | np.ndarray,
                  execution: str = DEFAULT_EXECUTION) -> CriticalPath:
    """Longest waiting chain of ``pattern`` with flow ``i`` weighing ``fct_s[i]``.

    Parameters
    ----------
    pattern : Pattern
    fct_s : sequence of float
        One non-negative weight per flow, in pattern order (observed or mean FCTs).
    execution : {"algorithm2", "dataflow"}
        The execution rule whose waits make the chains (:mod:`react.model.execution`).
    """
    weights = _weights(pattern, fct_s, "critical_path")
    if not pattern.flows:
        gates(pattern, execution)  # checks the rule
        return CriticalPath((), 0.0)
    if len(pattern.flows) < ARRAY_FLOWS:
        _begin, ends, before = _forward_in_order(gates(pattern, execution), weights.tolist())
        last = max(range(len(ends)), key=lambda i: (ends[i], -i))
        path = [last]
        while before[path[-1]] >= 0:
            path.append(before[path[-1]])
        return CriticalPath(tuple(reversed(path)), float(ends[last]))
    ga = gate_arrays(pattern, execution)
    begin, finish, opened = _forward(_plan(pattern, execution, ga), weights)
    last = int(np.argmax(finish))  # the latest end; ties: the lowest index
    begins, finishes, opens = begin.tolist(), finish.tolist(), opened.tolist()
    path = [last]
    while (first := _before(ga, begins, finishes, opens, path[-1])) >= 0:
        path.append(first)
    return CriticalPath(tuple(reversed(path)), finishes[last])


def schedule(pattern: Pattern, fct_s: Sequence[float] | np.ndarray,
             execution: str = DEFAULT_EXECUTION) -> tuple[np.ndarray, np.ndarray]:
    """When each flow starts and ends if it starts as soon as its rule allows and takes its FCT.

    Returns ``(start_s, end_s)`` in pattern order; ``end_s.max()`` is the critical path's length.
    The controller's estimate uses it to see which predicted flows overlap in time.
    """
    weights = _weights(pattern, fct_s, "schedule")
    if len(pattern.flows) < ARRAY_FLOWS:
        begin_in_order, finish_in_order, _before = _forward_in_order(gates(pattern, execution),
                                                                     weights.tolist())
        return (np.array(begin_in_order, dtype=np.float64),
                np.array(finish_in_order, dtype=np.float64))
    ga = gate_arrays(pattern, execution)
    begin, finish, _opened = _forward(_plan(pattern, execution, ga), weights)
    return begin, finish


def _weights(pattern: Pattern, fct_s: Sequence[float] | np.ndarray, func: str) -> np.ndarray:
    weights = np.asarray(fct_s, dtype=np.float64)
    if weights.shape != (len(pattern.flows),):
        raise ReactError(
            f"{func}: expected {len(pattern.flows)} flow weights, got shape {weights.shape}"
        )
    if np.any(~np.isfinite(weights)) or np.any(weights < 0):
        raise ReactError(f"{func}: flow weights must be finite and non-negative")
    return weights


ARRAY_FLOWS = 256
"""From this many flows on, the forward pass here and the estimate's pricing
(:mod:`react.control.estimate`) run on arrays; below, flow by flow in Python (numpy's per-call
overhead outweighs it there; both give the same floats)."""


@dataclass(frozen=True, slots=True)
class _Plan:
    """A pattern's gates as arrays, for the forward pass one step at a time.

    Every member of a gate has a lower step than every flow waiting for it (:class:`Gates`),
    so the flows of one step (a slice, flows being sorted by step) wait only for gates whose
    opening times are final. ``waits[i]``: flow ``i``'s gates, padded with the gate past the
    last (never opened: time 0); per step, the gates its flows open, the flows (relative to
    the step's first) sorted by gate, and where each gate's run of them starts.
    """

    gates: int
    waits: np.ndarray
    steps: tuple[tuple[int, int, np.ndarray, np.ndarray, np.ndarray], ...]


def _plan(pattern: Pattern, execution: str, ga: GateArrays) -> _Plan:
    return pattern.derived(("critical.plan", execution), lambda: _build_plan(pattern, ga))


def _build_plan(pattern: Pattern, ga: GateArrays) -> _Plan:
    n = len(pattern.flows)
    opens = ga.open_count
    open_gate = ga.open_gate
    open_flow = np.repeat(np.arange(n), opens)
    first_open = np.concatenate(([0], np.cumsum(opens)))
    step = np.fromiter((f.step for f in pattern.flows), np.intp, n)
    bounds = [0, *(np.flatnonzero(np.diff(step)) + 1).tolist(), n]
    steps = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        g = open_gate[first_open[lo]:first_open[hi]]
        order = np.argsort(g, kind="stable")
        g = g[order]
        runs = np.flatnonzero(np.concatenate(([g.size > 0], g[1:] != g[:-1])))
        steps.append((lo, hi, g[runs], open_flow[first_open[lo]:first_open[hi]][order] - lo,
                      runs))
    return _Plan(ga.gates, ga.waits, tuple(steps))


def _forward(plan: _Plan, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each flow's start and end, and each gate's opening time, one step at a time.

    A flow starts at the latest opening of its gates (0 without any) and ends its weight
    later; a gate opens at the latest end of its members (0 without any). Maxima and one sum
    per flow: the same floats as a pass in flow order.
    """
    n = w.size
    begin = np.zeros(n)
    finish = np.zeros(n)
    opened = np.zeros(plan.gates + 1)
    for lo, hi, gates_opened, members, runs in plan.steps:
        start = (opened[plan.waits[lo:hi]].max(axis=1) if plan.waits.shape[1]
                 else np.zeros(hi - lo))
        begin[lo:hi] = start
        end = finish[lo:hi] = start + w[lo:hi]
        if runs.size:
            opened[gates_opened] = np.maximum(opened[gates_opened],
                                              np.maximum.reduceat(end[members], runs))
    return begin, finish, opened[:-1]


def _forward_in_order(gs: Gates, w: list[float]) -> tuple[list[float], list[float], list[int]]:
    """One pass in flow order: each flow's start and end, and the flow whose end let it start
    (-1: none). For small patterns, where it is faster than :func:`_forward` (same floats)."""
    n = len(w)
    begin = [0.0] * n
    finish = [0.0] * n
    before = [-1] * n
    # A gate's opening time and the member that opened it (the lowest index among the last).
    opened = [0.0] * len(gs.members)
    opener = [-1] * len(gs.members)
    # Members of a gate precede (lower step) the flows waiting for it: one pass in order.
    for i in range(n):
        start, first = 0.0, -1
        for g in gs.waits[i]:
            t, j = opened[g], opener[g]
            if t > start or (t == start and 0 <= j < first):
                start, first = t, j
        before[i], begin[i] = first, start
        end = finish[i] = start + w[i]
        for g in gs.opens[i]:
            if end > opened[g]:
                opened[g], opener[g] = end, i
    return begin, finish, before


def _before(ga: GateArrays, begin: list[float], finish: list[float], opened: list[float],
            i: int) -> int:
    """The flow whose end let flow ``i`` start (-1: none, it starts at 0).

    Among the gates that opened when ``i`` started, the lowest of their openers; a gate's
    opener is its lowest member whose end opened it.
    """
    start = begin[i]
    if start == 0.0:
        return -1
    members, first = ga.member_flows, ga.member_start
    return min(min(j for j in members[first[g]:first[g + 1]].tolist() if finish[j] == start)
               for g in ga.waits[i].tolist() if g < ga.gates and opened[g] == start)

