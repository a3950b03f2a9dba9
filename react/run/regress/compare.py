"""Comparing a rerun with its golden: metric deltas within tolerance, and the first decision that
changed.

A case passes when every watched metric of every job is within its tolerance
(:func:`react.run.regress.metrics.within`) and each job's trace matches the golden's: field for
field (``identical``), or in batch, action and swaps (``equivalent``: the reasons and gains may
carry other numbers). A case also fails when it has no golden, when its jobs differ from the
golden's, when it is not deterministic, and, as an error, when it did not run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from react.run.regress.metrics import (
    EQUIVALENT_FIELDS,
    METRICS,
    TRACE_FIELDS,
    value_text,
    within,
)
from react.run.regress.runner import CaseRun
from react.run.regress.suite import Case

__all__ = ["MetricDelta", "TraceDiff", "Verdict", "compare_case", "first_trace_difference",
           "metric_direction", "run_verdict"]


@dataclass(frozen=True, slots=True)
class MetricDelta:
    """One watched metric of one job: golden and new value, and whether it is within tolerance."""

    job: str
    metric: str
    golden: Any
    new: Any
    tolerance: float
    ok: bool
    direction: str  # "better" | "worse" | "same" | "changed"


@dataclass(frozen=True, slots=True)
class TraceDiff:
    """The first decision of a job whose fields differ; a side is None where its trace ended."""

    job: str
    index: int
    golden: Mapping[str, Any] | None
    new: Mapping[str, Any] | None
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a case's rerun says: ``pass``, ``fail`` (a regression) or ``error`` (did not run)."""

    case: str
    scenario: str
    controller: str
    status: str
    deltas: tuple[MetricDelta, ...]
    trace_diffs: tuple[TraceDiff, ...]
    problems: tuple[str, ...]
    duration_s: float = 0.0


def metric_direction(metric: str, golden: Any, new: Any) -> str:
    """``better``/``worse`` by the metric's sense, ``same``, or ``changed`` (no sense)."""
    if golden == new:
        return "same"
    better = METRICS[metric].better
    if better is None or golden is None or new is None:
        return "changed"
    return "better" if (new < golden) == (better == "lower") else "worse"


def first_trace_difference(job: str, golden: Sequence[Mapping[str, Any]],
                           new: Sequence[Mapping[str, Any]], mode: str) -> TraceDiff | None:
    """The first decision that differs in the fields ``mode`` compares, or None."""
    fields = TRACE_FIELDS if mode == "identical" else EQUIVALENT_FIELDS
    for i in range(max(len(golden), len(new))):
        g = golden[i] if i < len(golden) else None
        n = new[i] if i < len(new) else None
        if g is None or n is None:
            return TraceDiff(job, i, g, n, fields)
        differing = tuple(f for f in fields if g.get(f) != n.get(f))
        if differing:
            return TraceDiff(job, i, g, n, differing)
    return None


def run_verdict(run: CaseRun) -> Verdict:
    """A case judged without a golden (``--record``, or no mode): did it run, deterministically?"""
    problems = [p for p in (run.error, run.nondeterministic and
                            f"not deterministic: {run.nondeterministic}") if p]
    status = "error" if run.error else "fail" if problems else "pass"
    return Verdict(run.case, run.scenario, run.controller, status, (), (), tuple(problems),
                   run.duration_s)


def compare_case(run: CaseRun, golden: Mapping[str, Any] | None, case: Case) -> Verdict:
    """Compare one case's rerun with its golden (module docstring)."""
    def verdict(status: str, problems: Sequence[str], deltas: Sequence[MetricDelta] = (),
                diffs: Sequence[TraceDiff] = ()) -> Verdict:
        return Verdict(run.case, run.scenario, run.controller, status, tuple(deltas),
                       tuple(diffs), tuple(problems), run.duration_s)

    if run.error is not None or run.result is None:
        return verdict("error", [run.error or "no result"])
    problems: list[str] = []
    if run.nondeterministic is not None:
        problems.append(f"not deterministic: {run.nondeterministic}")
    if golden is None:
        return verdict("fail", problems + ["no golden recorded for this case (accept this run "
                                           "with --update)"])
    new_jobs, old_jobs = run.result["jobs"], golden["jobs"]
    if set(new_jobs) != set(old_jobs):
        return verdict("fail", problems + [f"jobs {sorted(new_jobs)} differ from the golden's "
                                           f"{sorted(old_jobs)}"])
    deltas: list[MetricDelta] = []
    diffs: list[TraceDiff] = []
    for job in new_jobs:
        new_m, old_m = new_jobs[job]["metrics"], old_jobs[job].get("metrics", {})
        for metric, tolerance in case.metrics.items():
            if metric not in old_m:
                problems.append(f"job {job}: the golden has no {metric}")
                continue
            g, n = old_m[metric], new_m[metric]
            ok = within(metric, g, n, tolerance)
            deltas.append(MetricDelta(job, metric, g, n, tolerance, ok,
                                      metric_direction(metric, g, n)))
            if not ok:
                problems.append(f"job {job}: {metric} {value_text(metric, g)} -> "
                                f"{value_text(metric, n)} is outside the tolerance "
                                f"{tolerance:g}")
        diff = first_trace_difference(job, old_jobs[job].get("trace", []),
                                      new_jobs[job]["trace"], case.trace)
        if diff is not None:
            diffs.append(diff)
            problems.append(f"job {job}: decisions differ ({case.trace} trace) from decision "
                            f"{diff.index} on: {', '.join(diff.fields)}")
    return verdict("fail" if problems else "pass", problems, deltas, diffs)

