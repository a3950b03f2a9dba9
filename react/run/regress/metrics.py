"""What a regression watches in a run: the metrics, how each is toleranced, and the decision trace.

A job's run is reduced to a few numbers a reviewer cares about and the list of decisions its
controller made. Numbers are compared with a tolerance whose meaning depends on the metric
(:data:`METRICS`): times relative to the recorded value, the gain and counts in absolute units,
the sequence of kept swaps by edit distance (how many swaps were inserted, dropped or replaced).
Everything is plain JSON data, so a result survives a trip through a file or a worker process
bit for bit (floats are written with ``repr``, which round-trips exactly).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from react.control.backend import JobRun
from react.control.controller import Decision
from react.run.metrics import change_epochs, summarise

__all__ = ["METRICS", "TRACE_FIELDS", "Metric", "edit_distance", "job_result", "kept_swaps",
           "trace_record", "value_text", "within"]


@dataclass(frozen=True, slots=True)
class Metric:
    """One watched metric: how its tolerance reads and which direction is better."""

    name: str
    tolerance: str  # "relative" | "absolute" | "edits"
    better: str | None  # "lower" | "higher" | None (neither is better)
    description: str


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("mean_time_s", "relative", "lower",
           "mean collective time after the warm-up; tolerance: a fraction of the recorded value"),
    Metric("p95_time_s", "relative", "lower",
           "95th percentile of the collective time after the warm-up; tolerance: a fraction"),
    Metric("gain", "absolute", "higher",
           "mean algorithm bandwidth after the warm-up over the same scenario's without any "
           "controller, minus 1; tolerance: absolute (0.01 = one percentage point)"),
    Metric("pattern_changes", "absolute", None,
           "epochs whose pattern differs from the previous epoch's; tolerance: a count"),
    Metric("settle_epoch", "absolute", "lower",
           "first epoch of the pattern the job ends with (0: never changed); tolerance: epochs"),
    Metric("kept_swaps", "edits", None,
           "the swaps of every trial the controller kept, in order; tolerance: edit distance"),
)}
"""Every metric a suite may watch, by name."""

TRACE_FIELDS = ("batch", "action", "swaps", "reason", "estimated_gain", "observed_gain")
"""The fields of one decision in a trace, in the order goldens show them."""

EQUIVALENT_FIELDS = ("batch", "action", "swaps")
"""The fields an "equivalent" trace must match (reasons and gains may differ)."""


def trace_record(d: Decision) -> dict[str, Any]:
    """One decision as trace data: batch, action, swaps (described), reason, gains."""
    return {
        "batch": d.batch,
        "action": d.action,
        "swaps": [s.describe() for s in d.swaps],
        "reason": d.reason,
        "estimated_gain": _finite(d.estimated_gain),
        "observed_gain": _finite(d.observed_gain),
    }


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def kept_swaps(trace: Sequence[Mapping[str, Any]]) -> list[str]:
    """The swaps of every trial that was kept, in order.

    A decision whose action is ``try`` puts its swaps on trial; the next decision concludes
    the trial: ``revert`` undoes it, anything else keeps it
    (REACT's convention, which the baselines follow). A trial still open at the end is not kept.
    """
    kept: list[str] = []
    for current, following in zip(trace, trace[1:], strict=False):
        if current["action"] == "try" and following["action"] != "revert":
            kept.extend(current["swaps"])
    return kept


def job_result(run: JobRun, *, warmup: int) -> dict[str, Any]:
    """A job's metrics (all but ``gain``, which needs the run without a controller) and trace.

    ``mean_algbw_gbps`` is included for the gain; the caller removes it.
    """
    summary = summarise(run, react=True, warmup=warmup)
    changes = change_epochs(run)
    trace = [trace_record(d) for d in run.decisions]
    return {
        "metrics": {
            "mean_time_s": summary.mean_time_s,
            "p95_time_s": summary.p95_time_s,
            "mean_algbw_gbps": summary.mean_algbw_gbps,
            "pattern_changes": len(changes),
            "settle_epoch": changes[-1] if changes else 0,
            "kept_swaps": kept_swaps(trace),
        },
        "trace": trace,
    }


def edit_distance(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Levenshtein distance: insertions, deletions and replacements turning ``a`` into ``b``."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def value_text(metric: str, value: Any) -> str:
    """A metric's value for people: times in µs, the gain in %, swaps counted."""
    if value is None:
        return "-"
    if metric.endswith("_time_s"):
        return f"{value * 1e6:.1f} us"
    if metric == "gain":
        return f"{value:+.1%}"
    if metric == "kept_swaps":
        return f"{len(value)} swap{'s' if len(value) != 1 else ''}"
    return str(value)


def within(metric: str, golden: Any, new: Any, tolerance: float) -> bool:
    """Whether ``new`` is within ``tolerance`` of ``golden`` for ``metric`` (:data:`METRICS`)."""
    kind = METRICS[metric].tolerance
    if kind == "edits":
        return edit_distance(golden, new) <= tolerance
    if golden is None or new is None:
        return golden is None and new is None
    diff = abs(new - golden)
    if kind == "relative":
        return diff <= tolerance * abs(golden)
    return diff <= tolerance
