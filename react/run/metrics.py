"""Reading a run: per-job summaries, text tables, decision lists, JSON/CSV files, a timeline plot.

Everything here works on the :class:`~react.run.driver.JobRun` records a run returns and produces
text lines or files; nothing runs a simulation and nothing prints (the CLI prints the lines).
Statistics skip a warm-up of the first epochs (25 by default, as the paper's closed-loop figures
average epochs 25-100), because REACT needs a few batches before its first change can pay off and
the question a table answers is "what does the job see once REACT has settled".
"""

from __future__ import annotations

import json
import math
import os
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import IO, Any

import numpy as np

from react.control.controller import Decision
from react.model.errors import ReactError
from react.run.driver import JobRun
from react.run.store import write_csv_rows

__all__ = [
    "DEFAULT_WARMUP",
    "JobSummary",
    "change_epochs",
    "comparison_table",
    "decision_lines",
    "epoch_rows",
    "plot_timeline",
    "summarise",
    "summary_table",
    "write_csv",
    "write_json",
]

DEFAULT_WARMUP = 25
"""Epochs left out of the statistics by default (the paper averages epochs 25-100)."""

CSV_FIELDS = ("job", "epoch", "react", "collective_time_s", "algbw_gbps", "pattern_changed")


@dataclass(frozen=True, slots=True)
class JobSummary:
    """Statistics of one job over its epochs after the warm-up.

    ``first_epoch`` is the first epoch counted; it is 0 when the run was no longer than the
    warm-up (then every epoch counts, so that tiny runs still report something).
    """

    job: str
    react: bool
    epochs: int
    first_epoch: int
    mean_time_s: float
    p95_time_s: float
    mean_algbw_gbps: float


def summarise(run: JobRun, *, react: bool, warmup: int = DEFAULT_WARMUP) -> JobSummary:
    """Mean and p95 collective time and mean algorithm bandwidth after ``warmup`` epochs."""
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ReactError(f"summarise: warmup must be an integer >= 0, got {warmup!r}")
    if not run.results:
        raise ReactError(f"summarise: job {run.name!r} ran no epochs")
    first = warmup if warmup < len(run.results) else 0
    results = run.results[first:]
    times = np.array([r.collective_time_s for r in results])
    algbw = np.array([r.algorithm_bandwidth_bps for r in results]) / 1e9
    return JobSummary(run.name, react, len(run.results), first, float(times.mean()),
                      float(np.percentile(times, 95)), float(algbw.mean()))


def _window(s: JobSummary) -> str:
    return f"{s.first_epoch}-{s.epochs - 1}"


def summary_table(summaries: Sequence[JobSummary]) -> list[str]:
    """One row per job: the epochs counted, mean and p95 time (µs), mean algbw (Gb/s)."""
    header = (f"{'job':<12} {'REACT':<5} {'epochs':>9} {'mean us':>10} {'p95 us':>10} "
              f"{'algbw Gb/s':>11}")
    lines = [header, "-" * len(header)]
    for s in summaries:
        lines.append(
            f"{s.job:<12} {'on' if s.react else 'off':<5} {_window(s):>9} {_cells(s)}"
        )
    return lines


def comparison_table(off: Sequence[JobSummary], on: Sequence[JobSummary]) -> list[str]:
    """Without and with REACT side by side, per job, and the algorithm-bandwidth gain."""
    by_job = {s.job: s for s in on}
    cols = f"{'mean us':>10} {'p95 us':>10} {'algbw Gb/s':>11}"
    width = len(cols)
    lines = [
        f"{'':<12} {'':>9} | {'without REACT':^{width}} | {'with REACT':^{width}} |",
        f"{'job':<12} {'epochs':>9} | {cols} | {cols} | {'algbw gain':>10}",
    ]
    lines.append("-" * len(lines[-1]))
    for a in off:
        b = by_job.get(a.job)
        if b is None:
            raise ReactError(f"comparison_table: job {a.job!r} has no run with REACT")
        gain = b.mean_algbw_gbps / a.mean_algbw_gbps - 1.0
        lines.append(
            f"{a.job:<12} {_window(a):>9} | {_cells(a)} | {_cells(b)} | {gain:>+10.1%}"
        )
    return lines


def _cells(s: JobSummary) -> str:
    return f"{s.mean_time_s * 1e6:>10.1f} {s.p95_time_s * 1e6:>10.1f} {s.mean_algbw_gbps:>11.2f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def decision_lines(run: JobRun, *, width: int = 100) -> list[str]:
    """The controller's decisions of one job: batch, action, swaps, gains, then the reason."""
    if not run.decisions:
        return [f"job {run.name!r}: no decisions (REACT off, or fewer epochs than one batch)"]
    lines = [f"decisions of job {run.name!r}:",
             f"  {'batch':>5}  {'action':<10} {'est. gain':>9} {'obs. gain':>9}  swaps"]
    for d in run.decisions:
        swaps = "; ".join(s.describe() for s in d.swaps) or "-"
        lines.append(f"  {d.batch:>5}  {d.action:<10} {_pct(d.estimated_gain):>9} "
                     f"{_pct(d.observed_gain):>9}  {swaps}")
        lines.extend(textwrap.wrap(d.reason, width=width, initial_indent="         why: ",
                                   subsequent_indent="              "))
    return lines


_FATES = {
    "kept": ("tab:green", "--", "swap tried and kept"),
    "undone": ("tab:orange", "--", "swap tried, undone a batch later"),
    "reverted": ("tab:red", ":", "back to the previous pattern"),
    "open": ("tab:gray", "--", "swap still on trial at the end"),
}


def change_fates(run: JobRun) -> list[tuple[int, str]]:
    """Each pattern change of ``run`` (its first epoch) and what became of it.

    ``reverted``: the controller went back to the previous pattern (``revert``). Otherwise the
    change put a swap on trial (``try``), and the next batch's decision says its fate:
    ``undone`` if that decision reverts it, ``kept`` if not, ``open`` if the run ended first.
    """
    decisions = run.decisions
    causes = [i for i, d in enumerate(decisions) if d.changed]
    fates = []
    for epoch, i in zip(change_epochs(run), causes, strict=False):
        if decisions[i].action == "revert":
            fates.append((epoch, "reverted"))
        elif i + 1 >= len(decisions):
            fates.append((epoch, "open"))
        else:
            undone = decisions[i + 1].action == "revert"
            fates.append((epoch, "undone" if undone else "kept"))
    return fates


def change_epochs(run: JobRun) -> list[int]:
    """Epochs whose pattern differs from the previous epoch's (where a decision took effect)."""
    return [e for e in range(1, len(run.patterns))
            if run.patterns[e].flows != run.patterns[e - 1].flows]


def epoch_rows(runs: Mapping[str, JobRun], *, react: bool) -> list[dict[str, Any]]:
    """Per-epoch rows (the CSV's): job, epoch, react, time, algbw, pattern changed."""
    rows = []
    for name, run in runs.items():
        changed = set(change_epochs(run))
        for e, result in enumerate(run.results):
            rows.append({
                "job": name,
                "epoch": e,
                "react": react,
                "collective_time_s": result.collective_time_s,
                "algbw_gbps": result.algorithm_bandwidth_bps / 1e9,
                "pattern_changed": e in changed,
            })
    return rows


def _finite(value: Any) -> Any:
    return value if not (isinstance(value, float) and not math.isfinite(value)) else None


def decision_record(job: str, d: Decision) -> dict[str, Any]:
    """A decision as a JSON-ready dict (swaps as text; the pattern itself left out)."""
    return {
        "job": job,
        "batch": d.batch,
        "action": d.action,
        "swaps": [s.describe() for s in d.swaps],
        "estimated_gain": d.estimated_gain,
        "observed_gain": d.observed_gain,
        "mean_time_s": _finite(d.mean_time_s),
        "reason": d.reason,
    }


def write_json(path: str | os.PathLike[str], *, scenario: str, warmup: int,
               summaries: Sequence[JobSummary], rows: Sequence[Mapping[str, Any]],
               decisions: Sequence[Mapping[str, Any]]) -> None:
    """One JSON document: the scenario's name, the warm-up, summaries, epochs and decisions."""
    doc = {
        "scenario": scenario,
        "warmup_epochs": warmup,
        "summary": [asdict(s) for s in summaries],
        "epochs": list(rows),
        "decisions": list(decisions),
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")


def write_csv(path: str | os.PathLike[str], rows: Sequence[Mapping[str, Any]]) -> None:
    """Per-epoch rows as CSV with the header :data:`CSV_FIELDS`."""
    write_csv_rows(path, rows, CSV_FIELDS)


def plot_timeline(path: str | os.PathLike[str] | IO[bytes], *, off: JobRun | None = None,
                  on: JobRun | None = None, title: str = "") -> None:
    """Collective time per epoch without and with REACT; where the with-REACT pattern changed.

    Every change is a vertical line whose colour says, in the legend, what became of it
    (:func:`change_fates`): a swap tried and kept, a swap tried and undone a batch later, a
    return to the previous pattern, a swap still on trial at the end. No per-line text: many
    changes close together would pile their labels up.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    if off is None and on is None:
        raise ReactError("plot_timeline: give at least one of off= and on=")
    fig, ax = plt.subplots(figsize=(9, 4))
    try:
        if off is not None:
            ax.plot([t * 1e6 for t in off.times_s()], color="tab:gray", label="without REACT",
                    drawstyle="steps-post")
        if on is not None:
            ax.plot([t * 1e6 for t in on.times_s()], color="tab:blue", label="with REACT",
                    drawstyle="steps-post")
            labelled: set[str] = set()
            for epoch, fate in change_fates(on):
                colour, style, text = _FATES[fate]
                ax.axvline(epoch, color=colour, linestyle=style, linewidth=1.2,
                           label=None if text in labelled else text)
                labelled.add(text)
        ax.set_xlabel("epoch")
        ax.set_ylabel("collective time (us)")
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
