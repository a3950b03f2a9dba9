"""Critical paths of a pattern's TEN weighted by flow completion times (paper §5.4.1).

Under the execution rule (a flow starts once every flow it depends on has ended, see
:meth:`react.pattern.Pattern.dependencies`), the collective's time is the length of the longest
dependency chain when each flow weighs its FCT. That chain is the critical path: only congested
ranks on it can shorten the collective. Waiting for the network is already inside the FCTs, so
the path length equals the collective time whenever each flow started as soon as allowed.

Ties between equally long predecessors are broken towards the lowest flow index, so the same
weights always give the same path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from react.errors import ReactError
from react.pattern import Pattern


@dataclass(frozen=True, slots=True)
class CriticalPath:
    """Flow indices from the first flow of the chain to the last, and the chain's length."""

    flows: tuple[int, ...]
    length_s: float


def critical_path(pattern: Pattern, fct_s: Sequence[float] | np.ndarray) -> CriticalPath:
    """Longest dependency chain of ``pattern`` with flow ``i`` weighing ``fct_s[i]``.

    Parameters
    ----------
    pattern : Pattern
    fct_s : sequence of float
        One non-negative weight per flow, in pattern order (observed or mean FCTs).
    """
    weights = np.asarray(fct_s, dtype=np.float64)
    if weights.shape != (len(pattern.flows),):
        raise ReactError(
            f"critical_path: expected {len(pattern.flows)} flow weights, got shape {weights.shape}"
        )
    if not pattern.flows:
        return CriticalPath((), 0.0)
    if np.any(~np.isfinite(weights)) or np.any(weights < 0):
        raise ReactError("critical_path: flow weights must be finite and non-negative")
    deps = pattern.dependencies()
    finish = np.zeros(len(weights))
    before = np.full(len(weights), -1, dtype=np.int64)
    # Flows are sorted by step and depend only on earlier steps, so one pass in order suffices.
    for i, dep in enumerate(deps):
        start = 0.0
        for j in dep:
            if finish[j] > start:
                start = finish[j]
                before[i] = j
        finish[i] = start + weights[i]
    last = int(np.argmax(finish))
    chain = [last]
    while before[chain[-1]] >= 0:
        chain.append(int(before[chain[-1]]))
    return CriticalPath(tuple(reversed(chain)), float(finish[last]))


def estimated_time(pattern: Pattern, fct_s: Sequence[float] | np.ndarray) -> float:
    """The collective time implied by per-flow FCTs (the critical path's length)."""
    return critical_path(pattern, fct_s).length_s
