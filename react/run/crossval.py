"""Cross-validation: one scenario on several backends, side by side (``react crossval``).

Which model can a what-if study trust? :func:`crossval` runs one scenario on each named backend
with the same seeds (same placement, background, ECMP hashes and per-epoch port choices) and
:func:`summarise` compares every backend with the first one:

- the collective time of every epoch;
- the per-flow FCT error: for every epoch in which both ran the same pattern, each flow's
  ``fct / fct_reference - 1``; the median and 95th percentile of its absolute value, and the
  median of its sign (the bias);
- which flows congestion detection (:func:`react.control.detect.detect_congestion`, the job's own
  thresholds) flags in every full batch of ``B`` epochs that ran one pattern;
- the controller's decisions (batch, action, swaps) and whether they, and the pattern each job
  ends with, are the same as the reference's.

Backend names: ``sim`` (flowsim, exact max-min), ``tcp`` (flowsim in the TCP-aware sharing
mode, :mod:`flowsim.tcp`), ``ns3`` (packet level), ``emu`` (real ranks;
it scales messages, so its times are not comparable in absolute terms), and any name of
:data:`react.run.scenario.BACKENDS`; a name may repeat (``sim,sim`` checks determinism).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from react.control.backend import JobRun
from react.model.errors import ReactError

if TYPE_CHECKING:
    from react.run.scenario import Scenario

__all__ = ["DEFAULT_EPOCHS", "BackendOutcome", "CrossvalError", "crossval", "format_table",
           "plot_crossval", "summarise", "variant"]

DEFAULT_EPOCHS = 12
"""Epochs per job in a default (short) cross-validation: two batches of the paper's B = 6."""


class CrossvalError(ReactError, ValueError):
    """A cross-validation request is invalid (an unknown backend, an empty list)."""


def variant(name: str) -> Callable[[Scenario], Scenario]:
    """What turns a scenario into the run named ``name`` (``sim``, ``tcp``, ``ns3``, ``emu``,
    ``gpu``; a ``#suffix`` tells repeats apart); an unknown name fails here, before any run."""
    from react.run.scenario import BACKENDS

    base = name.partition("#")[0]
    if base == "tcp":
        return lambda s: s.with_backend("sim").with_sharing("tcp")
    if base == "sim":
        return lambda s: s.with_backend("sim").with_sharing("maxmin")
    if base not in BACKENDS:
        raise CrossvalError(
            f"crossval: backend {base!r} does not exist; expected one of tcp, "
            f"{', '.join(BACKENDS)}")
    return lambda s: s.with_backend(base)


@dataclass(frozen=True, slots=True)
class BackendOutcome:
    """One backend's run of the scenario: each job's record and the wall time it took."""

    label: str
    backend: str
    runs: dict[str, JobRun]
    wall_s: float


def labels(backends: Sequence[str]) -> list[str]:
    """Unique labels for ``backends``: a repeated name gets ``#2``, ``#3``, ..."""
    seen: dict[str, int] = {}
    out = []
    for name in backends:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def crossval(scenario: Scenario, backends: Sequence[str], *,
             on_epoch: Callable[[str, int], None] | None = None) -> list[BackendOutcome]:
    """Run ``scenario`` on each backend in turn (REACT as the file says); see the module doc.

    ns-3 runs share one child process, so its import is paid once.
    """
    from react.run.scenario_runs import run_scenario

    if not backends:
        raise CrossvalError("crossval: no backends given; expected e.g. sim,ns3")
    variants = [(label, name, variant(name)) for label, name in zip(labels(backends), backends,
                                                                    strict=True)]
    outcomes = []
    with ExitStack() as stack:
        if any(name.partition("#")[0] == "ns3" for name in backends):
            from react.backends.ns3 import shared_child

            stack.enter_context(shared_child())
        for label, name, make in variants:
            start = time.perf_counter()
            runs = run_scenario(make(scenario), on_epoch=on_epoch)
            outcomes.append(BackendOutcome(label, name.partition("#")[0], runs,
                                           time.perf_counter() - start))
    return outcomes


# -- comparison ----------------------------------------------------------------------------------
def _fct_error(run: JobRun, ref: JobRun) -> dict[str, Any]:
    errors: list[float] = []
    epochs = 0
    for k in range(min(len(run.results), len(ref.results))):
        if run.patterns[k] != ref.patterns[k]:
            continue
        epochs += 1
        for mine, theirs in zip(run.results[k].flows, ref.results[k].flows, strict=True):
            if theirs.fct_s > 0:
                errors.append(mine.fct_s / theirs.fct_s - 1.0)
    if not errors:
        return {"epochs": 0, "flows": 0, "median_abs": None, "p95_abs": None, "bias": None}
    e = np.asarray(errors)
    return {"epochs": epochs, "flows": len(errors),
            "median_abs": float(np.median(np.abs(e))),
            "p95_abs": float(np.percentile(np.abs(e), 95)),
            "bias": float(np.median(e))}


def _flagged(run: JobRun, batch_epochs: int, delta1: float, delta2: float
             ) -> list[list[Any]]:
    from react.control.detect import detect_congestion

    out = []
    for b in range(len(run.results) // batch_epochs):
        window = slice(b * batch_epochs, (b + 1) * batch_epochs)
        patterns = run.patterns[window]
        if any(p != patterns[0] for p in patterns):
            continue
        report = detect_congestion(patterns[0], run.results[window], delta1=delta1,
                                   delta2=delta2)
        out.append([b, sorted(f"{c.kind} t{c.flow.step} {c.flow.src}->{c.flow.dst}"
                              for c in report.flows)])
    return out


def _decisions(run: JobRun) -> list[list[Any]]:
    return [[d.batch, d.action, "; ".join(s.describe() for s in d.swaps)]
            for d in run.decisions]


def summarise(scenario: Scenario, outcomes: Sequence[BackendOutcome]) -> dict[str, Any]:
    """The comparison as plain data (what the JSON file holds); the first backend is the
    reference of every error and agreement."""
    ref = outcomes[0]
    out: dict[str, Any] = {
        "scenario": scenario.source,
        "reference": ref.label,
        "epochs": {j.name: j.epochs for j in scenario.jobs},
        "backends": [],
    }
    for outcome in outcomes:
        jobs = {}
        for spec in scenario.jobs:
            run, base = outcome.runs[spec.name], ref.runs[spec.name]
            cfg = spec.controller
            flagged = _flagged(run, cfg.batch_epochs, cfg.delta1, cfg.delta2)
            base_flagged = dict(map(tuple, _flagged(base, cfg.batch_epochs, cfg.delta1,
                                                    cfg.delta2)))
            common = [b for b, flows in flagged if b in base_flagged]
            same_flags = [b for b, flows in flagged if base_flagged.get(b) == flows]
            times = run.times_s()
            jobs[spec.name] = {
                "times_us": [t * 1e6 for t in times],
                "mean_us": float(np.mean(times)) * 1e6 if times else math.nan,
                "fct_error": None if outcome is ref else _fct_error(run, base),
                "flagged": flagged,
                "flag_batches_agreeing": None if outcome is ref else
                [len(same_flags), len(common)],
                "decisions": _decisions(run),
                "same_decisions": None if outcome is ref else
                _decisions(run) == _decisions(base),
                "same_final_pattern": None if outcome is ref else
                (run.patterns[-1] == base.patterns[-1] if run.patterns and base.patterns
                 else None),
            }
        out["backends"].append({"label": outcome.label, "backend": outcome.backend,
                                "wall_s": outcome.wall_s, "jobs": jobs})
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def format_table(summary: dict[str, Any]) -> list[str]:
    """Text lines: one row per job and backend (mean time, FCT error, flags, decisions)."""
    lines = [f"{'job':<10} {'backend':<9} {'mean time':>11} {'vs ref':>8} {'FCT err':>8} "
             f"{'p95 err':>8} {'bias':>7} {'flags same':>10} {'decisions':>10} {'wall s':>8}"]
    ref = summary["backends"][0]
    for name in summary["epochs"]:
        base = ref["jobs"][name]["mean_us"]
        for b in summary["backends"]:
            job = b["jobs"][name]
            fct = job["fct_error"] or {}
            agree = job["flag_batches_agreeing"]
            flags = "ref" if agree is None else f"{agree[0]}/{agree[1]}"
            same = job["same_decisions"]
            decisions = "ref" if same is None else ("same" if same else "differ")
            delta = "ref" if b is ref else _pct(job["mean_us"] / base - 1)
            lines.append(f"{name:<10} {b['label']:<9} {job['mean_us']:>8,.0f} µs {delta:>8} "
                         f"{_pct(fct.get('median_abs')):>8} {_pct(fct.get('p95_abs')):>8} "
                         f"{_pct(fct.get('bias')):>7} {flags:>10} {decisions:>10} "
                         f"{b['wall_s']:>8.1f}")
    return lines


def plot_crossval(summary: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Collective time per epoch, one panel per job, one line per backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary["epochs"])
    fig, axes = plt.subplots(len(names), 1, figsize=(7, 3.2 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        for b in summary["backends"]:
            job = b["jobs"][name]
            fct = job["fct_error"]
            extra = "" if fct is None or fct["median_abs"] is None else (
                f" (FCT err median {_pct(fct['median_abs'])}, p95 {_pct(fct['p95_abs'])})")
            ax.plot(range(len(job["times_us"])), job["times_us"], marker="o", ms=3,
                    label=b["label"] + extra)
        ax.set_title(f"{Path(summary['scenario']).stem}: job {name}")
        ax.set_xlabel("epoch")
        ax.set_ylabel("collective time (µs)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
