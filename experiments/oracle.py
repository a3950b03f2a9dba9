"""Beyond the paper: how far is REACT from the best pattern the transforms can reach?

For a Fig. 5 scenario (:mod:`experiments.fig5`), the *oracle* is the best pattern reachable from
the job's initial pattern by sequences of the three swap transforms (react.model.transforms,
enumerated by :class:`react.model.swapspace.SwapSpace` without REACT's restriction to congested
ranks), judged as follows:

1. Run the scenario without REACT and with REACT, and give the per-flow FCTs of the baseline's
   last 60 epochs and of every REACT epoch (each with the pattern it ran; ``--baseline-only``
   leaves REACT's out) to the controller's own analytical model
   (:class:`react.control.estimate.FctHistory`, paper §5.4.1): a candidate pattern's collective time
   is the critical path (:func:`react.model.critical.critical_path`) of the FCTs the model predicts
   for its flows. REACT's epochs matter: the model knows a (src, dst) pair's cost only if some run
   used that pair, and REACT's explored patterns use many more pairs than the baseline.
2. Beam search over swap sequences: from the initial pattern, apply every viable swap of every
   rank to each of the ``beam`` best patterns found so far, keep the ``beam`` best distinct
   results by estimated time, and repeat ``depth`` times (default 8 wide, 3 deep: about
   2,000 estimates for the 8-rank tree).
3. The model only knows the pairs it saw (other flows get the median FCT of their degree), so the
   ``confirm`` best distinct candidates by estimate (default 4) run in the simulator as fixed
   patterns, REACT off, on the scenario's seeds (same background, same ECMP port draws). The
   oracle is the best of them and the initial pattern, by mean algorithm bandwidth over epochs
   25-99.

REACT's run is the same scenario; its gap to the oracle is ``oracle_algbw / react_algbw - 1``.
REACT's mean includes its exploration epochs; the pattern it ended with is also run fixed
(``react_final``), which separates the cost of exploring from the quality of what it found.

Run::

    python -m experiments.oracle            # tree AllReduce, p = 2, x in {1, 2, 4, 8}, 10 each
    python -m experiments.oracle --collective tree rd --p 1 2 4   # every Fig. 5 scenario:
                                            # fig5_oracle_ctree-rd_p1-2-4.csv
    python -m experiments.oracle --quick    # one scenario, narrow and shallow search
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a file: make `experiments` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.fig5 import RESULTS, K, congested_pairs, scenario_doc, spread_hosts, write_csv
from react.control.estimate import FctHistory, FctModel
from react.model.critical import critical_path
from react.model.pattern import Pattern
from react.model.swapspace import SwapSpace
from react.run.driver import JobRun, run_jobs
from react.run.outdir import experiment_dirs, variant_name
from react.run.scenario import Scenario, parse_scenario
from react.run.scenario_runs import open_jobs

WARMUP = 25


def run_fixed(scenario: Scenario, pattern: Pattern | None = None,
              react: bool = False) -> JobRun:
    """Run the scenario's single job with ``pattern`` (None: its own) fixed, or with REACT."""
    with open_jobs(scenario, react=react) as jobs:
        if pattern is not None:
            jobs[0].pattern = pattern
        return run_jobs(jobs)[jobs[0].name]


def mean_algbw_gbps(run: JobRun, warmup: int = WARMUP) -> float:
    first = warmup if warmup < len(run.results) else 0
    return float(np.mean([r.algorithm_bandwidth_bps for r in run.results[first:]])) / 1e9


def estimate_s(model: FctModel, pattern: Pattern, message_bytes: float) -> float:
    """The analytical collective time: critical path over the model's predicted FCTs."""
    return critical_path(pattern, model.pattern_fcts(pattern, message_bytes)).length_s


def beam_search(model: FctModel, start: Pattern, message_bytes: float, *, beam: int = 8,
                depth: int = 3) -> list[tuple[float, Pattern, tuple[str, ...]]]:
    """Distinct patterns reachable in up to ``depth`` swaps, best estimate first.

    Returns ``(estimated_s, pattern, swap descriptions)`` for every pattern that was ever in
    the beam (the start included), sorted by estimate.
    """
    Candidate = tuple[float, Pattern, tuple[str, ...]]
    seen: dict[Any, Candidate] = {start.flows: (estimate_s(model, start, message_bytes), start,
                                                ())}
    frontier = [seen[start.flows]]
    for _ in range(depth):
        found: dict[Any, Candidate] = {}
        for _est, pattern, path in frontier:
            space = SwapSpace(pattern, check=False)
            for rank in pattern.ranks:
                for swap in space.swaps_for(rank):
                    if swap.x > swap.y:  # x<->y is listed for both ranks; once is enough
                        continue
                    new = swap.apply(pattern)
                    if new.flows in seen or new.flows in found:
                        continue
                    found[new.flows] = (estimate_s(model, new, message_bytes), new,
                                        (*path, swap.describe()))
        if not found:
            break
        frontier = sorted(found.values(), key=lambda t: t[0])[:beam]
        for item in frontier:
            seen[item[1].flows] = item
    return sorted(seen.values(), key=lambda t: t[0])


def oracle_point(collective: str, x: int, p: int, seed: int, *, epochs: int = 100,
                 beam: int = 8, depth: int = 3, confirm: int = 4, direction: str = "in",
                 warmup: int = WARMUP, learn_from_react: bool = True) -> dict[str, Any]:
    """Baseline, REACT, REACT's final pattern fixed, and the oracle for one Fig. 5 scenario.

    ``learn_from_react``: the model also holds every epoch of the REACT run (each with the
    pattern it ran), so it knows the pairs REACT's explored patterns used; otherwise it knows
    only the baseline's last 60 epochs.
    """
    hosts = spread_hosts()
    pairs = congested_pairs(seed, x, hosts, [f"h{i}" for i in range(K ** 3 // 4)], direction)
    doc = scenario_doc(collective, pairs, p, seed=seed, hosts=hosts, epochs=epochs,
                       name="oracle")
    scenario = parse_scenario(doc)
    message = scenario.jobs[0].message_bytes
    clock = time.perf_counter()
    base = run_fixed(scenario)
    start = base.patterns[0]
    react = run_fixed(scenario, react=True)
    final = react.patterns[-1]
    history = FctHistory(60 + (len(react.results) if learn_from_react else 0))
    history.add(start, base.results[-60:])
    if learn_from_react:
        for pattern, result in zip(react.patterns, react.results, strict=True):
            history.add(pattern, [result])
    search = time.perf_counter()
    ranked = beam_search(history.model(), start, message, beam=beam, depth=depth)
    search_s = time.perf_counter() - search
    base_bw = mean_algbw_gbps(base, warmup)
    tried: list[tuple[float, Pattern, tuple[str, ...]]] = [(base_bw, start, ())]
    for _est, pattern, path in [t for t in ranked if t[1].flows != start.flows][:confirm]:
        tried.append((mean_algbw_gbps(run_fixed(scenario, pattern), warmup), pattern, path))
    best_bw, best, best_path = max(tried, key=lambda t: t[0])
    react_bw = mean_algbw_gbps(react, warmup)
    final_bw = (base_bw if final.flows == start.flows
                else mean_algbw_gbps(run_fixed(scenario, final), warmup))
    return {
        "collective": collective, "x": x, "p": p, "scenario": seed,
        **convergence(react, warmup),
        "algbw_base_gbps": base_bw,
        "algbw_react_gbps": react_bw,
        "algbw_react_final_gbps": final_bw,
        "algbw_oracle_gbps": best_bw,
        "react_gain": react_bw / base_bw - 1,
        "react_final_gain": final_bw / base_bw - 1,
        "oracle_gain": best_bw / base_bw - 1,
        "gap_to_oracle": best_bw / react_bw - 1,
        "gap_to_best_known": max(best_bw, final_bw) / react_bw - 1,
        "oracle_swaps": " + ".join(best_path) or "(initial pattern)",
        "oracle_rank_by_estimate": next(i for i, t in enumerate(ranked)
                                        if t[1].flows == best.flows),
        "estimated_gain": estimate_s(history.model(), start, message) / ranked[0][0] - 1,
        "candidates": len(ranked),
        "search_s": search_s,
        "seconds": time.perf_counter() - clock,
    }


def convergence(run: JobRun, warmup: int = WARMUP) -> dict[str, Any]:
    """How REACT's pattern moved: changes, distinct patterns, when it settled.

    ``last_change_epoch`` is the last epoch whose pattern differs from the one before; REACT
    re-explores after ``Emax`` quiet batches (§5.4.2), so it is late even when REACT has found
    its pattern early. ``dominant_*`` describe the pattern run most often after ``warmup``: its
    share of those epochs and the first epoch it ran (when REACT first found it).
    """
    patterns = [p.flows for p in run.patterns]
    changes = [e for e in range(1, len(patterns)) if patterns[e] != patterns[e - 1]]
    counted = patterns[warmup:] if warmup < len(patterns) else patterns
    counts: dict[Any, int] = {}
    for flows in counted:
        counts[flows] = counts.get(flows, 0) + 1
    dominant = max(counts, key=lambda f: counts[f])
    return {
        "pattern_changes": len(changes),
        "distinct_patterns": len(set(patterns)),
        "last_change_epoch": changes[-1] if changes else 0,
        "dominant_first_epoch": patterns.index(dominant),
        "dominant_share": counts[dominant] / len(counted),
        "dominant_is_initial": dominant == patterns[0],
    }


def summary_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [f"{'x':>2} {'n':>3} {'REACT':>7} {'final':>7} {'oracle':>7} {'gap':>7} "
             f"{'gap<=2%':>7} {'gap best':>8} {'changes':>7} {'found at':>8} {'share':>6}"]
    for x in sorted({r["x"] for r in rows}) + ["all"]:
        sel = [r for r in rows if x == "all" or r["x"] == x]
        def m(key: str, sel: Sequence[Mapping[str, Any]] = sel) -> float:
            return 100 * float(np.mean([r[key] for r in sel]))
        close = sum(r["gap_to_oracle"] <= 0.02 for r in sel)
        lines.append(f"{x!s:>2} {len(sel):>3} {m('react_gain'):>6.1f}% "
                     f"{m('react_final_gain'):>6.1f}% {m('oracle_gain'):>6.1f}% "
                     f"{m('gap_to_oracle'):>6.1f}% {close:>4}/{len(sel)} "
                     f"{m('gap_to_best_known'):>7.1f}% "
                     f"{np.mean([r['pattern_changes'] for r in sel]):>7.1f} "
                     f"{np.mean([r['dominant_first_epoch'] for r in sel]):>8.1f} "
                     f"{m('dominant_share'):>5.0f}%")
    return lines


def output_name(args: argparse.Namespace) -> str:
    """``fig5_oracle`` with every option that differs from its default in the name, so that a
    run with other options never overwrites another's file (``--baseline-only`` keeps its
    historical ``_baseline_only``, ``--quick`` is ``_quick``)."""
    if args.quick:
        return "fig5_oracle_quick"
    name = variant_name(
        "fig5_oracle",
        {"c": args.collectives, "p": args.ps, "x": args.xs, "s": args.scenarios,
         "e": args.epochs, "beam": args.beam, "depth": args.depth, "confirm": args.confirm},
        {"c": ["tree"], "p": [2], "x": [1, 2, 4, 8], "s": 10, "e": 100, "beam": 8, "depth": 3,
         "confirm": 4})
    return name + ("_baseline_only" if args.baseline_only else "")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.oracle",
        description="REACT's gap to the best pattern reachable by swaps (beam search with the "
                    "analytical model, confirmed in the simulator), on Fig. 5 scenarios.")
    parser.add_argument("--quick", action="store_true",
                        help="one scenario (x = 1, p = 2), 13 epochs, beam 2, depth 1")
    parser.add_argument("--collective", nargs="+", choices=("tree", "rd"), default=["tree"],
                        dest="collectives", help="one or both (default tree)")
    parser.add_argument("--x", nargs="+", type=int, default=[1, 2, 4, 8], dest="xs")
    parser.add_argument("--p", nargs="+", type=int, default=[2], dest="ps")
    parser.add_argument("--scenarios", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--beam", type=int, default=8)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--confirm", type=int, default=4,
                        help="best candidates by estimate to run in the simulator")
    parser.add_argument("--baseline-only", action="store_true",
                        help="the model knows only the baseline run's FCTs (default: also every "
                             "epoch of the REACT run)")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the CSV (default results/, docs/results only when "
                             "asked; with --quick a new "
                             "temporary folder, so the committed files stay). Its name is "
                             "fig5_oracle plus every option that differs from its default")
    args = parser.parse_args(argv)
    warmup = WARMUP
    if args.quick:
        args.xs, args.scenarios, args.epochs, args.beam, args.depth, args.confirm = \
            [1], 1, 13, 2, 1, 1
        warmup = 6
    name = output_name(args)
    rows = []
    clock = time.perf_counter()
    cells = [(c, p, x, s) for c in args.collectives for p in args.ps for x in args.xs
             for s in range(args.scenarios)]
    for k, (collective, p, x, s) in enumerate(cells, 1):
        rows.append(oracle_point(collective, x, p, s, epochs=args.epochs,
                                 beam=args.beam, depth=args.depth, confirm=args.confirm,
                                 warmup=warmup, learn_from_react=not args.baseline_only))
        print(f"[{k}/{len(cells)}] {collective} p={p} x={x} scenario {s}: oracle "
              f"{rows[-1]['oracle_gain']:+.1%}, REACT {rows[-1]['react_gain']:+.1%} "
              f"({time.perf_counter() - clock:.0f} s)", flush=True)
    args.out, _ = experiment_dirs(name, quick=args.quick, out=args.out,
                                  default_out=RESULTS)
    write_csv(args.out / f"{name}.csv", rows)
    for line in summary_lines(rows):
        print(line)
    print(f"{len(rows)} scenarios in {time.perf_counter() - clock:.1f} s; wrote "
          f"{args.out / f'{name}.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
