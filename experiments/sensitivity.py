"""How far a scenario's collective times move when every message grows by a relative ``eps``.

A lone job on an otherwise idle network answers linearly: its flows' times grow by at most
``eps`` (less where latency is part of them). Jobs that share links while they run need not:
max-min sharing couples their flows, and on the 720-server what-ifs a change of 1e-14 in the
message size moves single epochs by up to 8% (REACT off) or 22% (on) over 20 epochs, as much
as a change of 1e-9 does (measured: docs/benchmarks.md, "twelfth look"). Such a scenario's
single-epoch numbers are one draw from a spread, not a value to the last digit: compare means
over epochs or seeds, and read any difference smaller than this spread as none. This script
measures the spread for a scenario.

For each ``eps`` it runs the scenario with every job's message multiplied by ``1 + eps`` and
prints, per job, the largest relative change of one epoch's time against the unperturbed run,
the change of the mean epoch time, and the largest change over ``eps`` (1 or less: linear).
With ``--gain`` it runs the scenario and each perturbed copy without and with REACT instead,
and prints every job's REACT gain (mean algorithm bandwidth after the warm-up, as ``react run
--compare``) per draw and its mean, min and max over the draws: whether a gain is REACT's doing
or one draw's luck.

Run::

    python3 -m experiments.sensitivity experiments/scenarios/whatif_alibaba_64.toml --epochs 2
    python3 -m experiments.sensitivity SCENARIO --eps 1e-12 1e-9 --react off --csv OUT.csv
    python3 -m experiments.sensitivity experiments/scenarios/two_jobs_star.toml --gain
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from react.model.errors import ReactError
from react.run.metrics import DEFAULT_WARMUP, summarise
from react.run.scenario import Scenario, ScenarioError, load_scenario
from react.run.scenario_runs import run_scenario

DEFAULT_EPS = (1e-14, 1e-12, 1e-9)
COLUMNS = ("eps", "job", "epochs", "max_epoch_change", "mean_change", "max_change_over_eps")
GAIN_COLUMNS = ("eps", "job", "gain")


def perturbed(scenario: Scenario, eps: float) -> Scenario:
    """``scenario`` with every job's message ``1 + eps`` times as large."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) \
            or not 0.0 < abs(eps) < 0.5:
        raise ScenarioError(f"eps must be a number with 0 < |eps| < 0.5, got {eps!r}")
    return replace(scenario, jobs=tuple(replace(j, message_bytes=j.message_bytes * (1.0 + eps))
                                        for j in scenario.jobs))


def _check_simulator(scenario: Scenario) -> None:
    if scenario.backend != "sim":
        raise ScenarioError(f"{scenario.source}: backend {scenario.backend!r}; the sensitivity "
                            "runs on the simulator only (the others are not deterministic)")


def epoch_times(scenario: Scenario, react: bool | None) -> dict[str, list[float]]:
    """Every job's epoch times, by job name."""
    return {name: run.times_s() for name, run in run_scenario(scenario, react=react).items()}


def responses(scenario: Scenario, eps: Sequence[float], *, react: bool | None = None,
              log: Any = None) -> list[dict[str, Any]]:
    """One row per (eps, job) with the columns of :data:`COLUMNS` (module docstring)."""
    _check_simulator(scenario)
    runs = [perturbed(scenario, e) for e in eps]  # bad eps fails before any run
    total = len(runs) + 1
    if log:
        print(f"run 1/{total}: unperturbed", file=log, flush=True)
    base = epoch_times(scenario, react)
    rows = []
    for k, (e, s) in enumerate(zip(eps, runs, strict=True), start=2):
        if log:
            print(f"run {k}/{total}: eps {e:g}", file=log, flush=True)
        times = epoch_times(s, react)
        for job, ref in base.items():
            got = times[job]
            changes = [abs(b / a - 1.0) for a, b in zip(ref, got, strict=True)]
            mean_ref, mean_got = sum(ref) / len(ref), sum(got) / len(got)
            rows.append({"eps": e, "job": job, "epochs": len(ref),
                         "max_epoch_change": max(changes),
                         "mean_change": mean_got / mean_ref - 1.0,
                         "max_change_over_eps": max(changes) / abs(e)})
    return rows


def react_gains(scenario: Scenario, eps: Sequence[float], *, warmup: int = DEFAULT_WARMUP,
                log: Any = None) -> list[dict[str, Any]]:
    """One row per (draw, job): REACT's gain in the scenario (``eps`` 0) and in each perturbed
    copy, columns :data:`GAIN_COLUMNS`."""
    _check_simulator(scenario)
    draws = [(0.0, scenario)] + [(e, perturbed(scenario, e)) for e in eps]
    rows = []
    for k, (e, s) in enumerate(draws, start=1):
        if log:
            print(f"draw {k}/{len(draws)}: eps {e:g}, without and with REACT", file=log,
                  flush=True)
        off, on = run_scenario(s, react=False), run_scenario(s, react=True)
        for job, run in off.items():
            a = summarise(run, react=False, warmup=warmup)
            b = summarise(on[job], react=True, warmup=warmup)
            rows.append({"eps": e, "job": job, "gain": b.mean_algbw_gbps / a.mean_algbw_gbps - 1})
    return rows


def _print_gains(rows: Sequence[dict[str, Any]]) -> None:
    print(f"{'eps':>8} {'job':<12} {'REACT gain':>11}")
    for r in rows:
        print(f"{r['eps']:8.0e} {r['job']:<12} {r['gain']:+11.2%}")
    print(f"\n{'job':<12} {'draws':>5} {'mean gain':>10} {'min':>8} {'max':>8}")
    for job in dict.fromkeys(r["job"] for r in rows):
        gains = [r["gain"] for r in rows if r["job"] == job]
        print(f"{job:<12} {len(gains):>5} {sum(gains) / len(gains):+10.2%} {min(gains):+8.2%} "
              f"{max(gains):+8.2%}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="sensitivity",
        description="How far each job's epoch times move when every message grows by a relative "
                    "eps (simulator only). A lone job answers linearly (max change / eps <= 1); "
                    "jobs that share links may not.")
    parser.add_argument("scenario", help="a scenario file (TOML)")
    parser.add_argument("--epochs", type=int, metavar="N",
                        help="run every job N epochs instead of the file's value")
    parser.add_argument("--eps", type=float, nargs="+", default=list(DEFAULT_EPS), metavar="E",
                        help="relative growths of the messages "
                             f"(default {' '.join(map(str, DEFAULT_EPS))})")
    parser.add_argument("--react", choices=("file", "on", "off"), default="file",
                        help="REACT as the file says (default), or on or off for every job")
    parser.add_argument("--gain", action="store_true",
                        help="instead: REACT's gain per job (without / with REACT on every job) "
                             "in the scenario and each perturbed copy")
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, metavar="N",
                        help=f"with --gain: epochs left out of the means (default "
                             f"{DEFAULT_WARMUP}, as react run)")
    parser.add_argument("--csv", metavar="OUT", help="also write the rows as CSV")
    args = parser.parse_args(argv)
    if args.gain and args.react != "file":
        parser.error("--react does not apply with --gain (it runs every job without and with)")
    if args.warmup < 0:
        parser.error(f"--warmup {args.warmup}: expected 0 or more epochs")
    try:
        scenario = load_scenario(args.scenario)
        if args.epochs is not None:
            scenario = scenario.with_epochs(args.epochs)
        if args.gain:
            rows = react_gains(scenario, args.eps, warmup=args.warmup, log=sys.stderr)
        else:
            react = {"file": None, "on": True, "off": False}[args.react]
            rows = responses(scenario, args.eps, react=react, log=sys.stderr)
    except (ScenarioError, ReactError) as exc:
        parser.error(str(exc))
    if args.gain:
        _print_gains(rows)
        if args.csv:
            _write_csv(args.csv, rows, GAIN_COLUMNS)
        return 0
    print(f"{'eps':>8} {'job':<12} {'epochs':>6} {'max epoch change':>17} {'mean change':>12} "
          f"{'max / eps':>10}")
    for r in rows:
        print(f"{r['eps']:8.0e} {r['job']:<12} {r['epochs']:6d} {r['max_epoch_change']:17.3e} "
              f"{r['mean_change']:+12.3e} {r['max_change_over_eps']:10.3g}")
    if args.csv:
        _write_csv(args.csv, rows, COLUMNS)
    return 0


def _write_csv(path: str, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    raise SystemExit(main())
