"""Critical paths of a pattern's TEN weighted by flow completion times (paper §5.4.1).

Under an execution rule of :mod:`react.execution` (a flow starts once every flow it waits for has
ended; Algorithm 2 by default, as every backend runs it unless told otherwise), the collective's
time is the length of the longest waiting chain when each flow weighs its FCT. That chain is the
critical path: only congested ranks on it can shorten the collective. Waiting for the network is
already inside the FCTs, so the path length equals the collective time whenever each flow started
as soon as its rule allowed.

Ties between equally long predecessors are broken towards the lowest flow index, so the same
weights always give the same path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from react.errors import ReactError
from react.execution import DEFAULT_EXECUTION, Gates, gates
from react.pattern import Pattern


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
        The execution rule whose waits make the chains (:mod:`react.execution`).
    """
    weights = _weights(pattern, fct_s, "critical_path")
    gs = gates(pattern, execution)
    if not pattern.flows:
        return CriticalPath((), 0.0)
    _begin, finish, before = _forward(gs, weights.tolist())
    n = len(finish)
    last = max(range(n), key=lambda i: (finish[i], -i))
    chain = [last]
    while before[chain[-1]] >= 0:
        chain.append(before[chain[-1]])
    return CriticalPath(tuple(reversed(chain)), float(finish[last]))


def schedule(pattern: Pattern, fct_s: Sequence[float] | np.ndarray,
             execution: str = DEFAULT_EXECUTION) -> tuple[np.ndarray, np.ndarray]:
    """When each flow starts and ends if it starts as soon as its rule allows and takes its FCT.

    Returns ``(start_s, end_s)`` in pattern order; ``end_s.max()`` is the critical path's length.
    The controller's estimate uses it to see which predicted flows overlap in time.
    """
    weights = _weights(pattern, fct_s, "schedule")
    gs = gates(pattern, execution)
    begin, finish, _before = _forward(gs, weights.tolist())
    return np.array(begin, dtype=np.float64), np.array(finish, dtype=np.float64)


def _weights(pattern: Pattern, fct_s: Sequence[float] | np.ndarray, func: str) -> np.ndarray:
    weights = np.asarray(fct_s, dtype=np.float64)
    if weights.shape != (len(pattern.flows),):
        raise ReactError(
            f"{func}: expected {len(pattern.flows)} flow weights, got shape {weights.shape}"
        )
    if np.any(~np.isfinite(weights)) or np.any(weights < 0):
        raise ReactError(f"{func}: flow weights must be finite and non-negative")
    return weights


def _forward(gs: Gates, w: list[float]) -> tuple[list[float], list[float], list[int]]:
    """One pass in flow order: each flow's start and end, and the flow whose end let it start
    (-1: none)."""
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


def estimated_time(pattern: Pattern, fct_s: Sequence[float] | np.ndarray,
                   execution: str = DEFAULT_EXECUTION) -> float:
    """The collective time implied by per-flow FCTs (the critical path's length)."""
    return critical_path(pattern, fct_s, execution).length_s
