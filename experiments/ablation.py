"""Beyond the paper: what each of our controller choices is worth (docs/deviations.md).

Where the paper is silent or where we differ on purpose, the controller has a parameter that
restores the paper's rule (:class:`react.control.controller.ControllerConfig`). This script runs a
subset of the Fig. 5 scenarios (:mod:`experiments.fig5`: k=8 fat-tree, tree AllReduce and RD
AllGather, x congested (src, dst) pairs with p long-lived flows each) once without REACT and once
with REACT in each variant, on the same seeds, and reports each variant's mean and worst gain in
algorithm bandwidth (epochs 25-99) and its pattern changes:

* ``default``: every choice as shipped;
* ``paper-estimate``: an unseen (src, dst) pair priced at the median of its degree class
  (``unseen_pairs = "degree_median"``), as §5.4.1;
* ``greedy``: a beam of one (``search_width = 1``), close to Algorithm 1's walk;
* ``degree-classes``: detection classes by degree alone (``size_aware_detection = false``),
  as Eq. 1;
* ``step-sharing``: the estimate's flows sharing their links with the flows of their step, the
  paper's node degrees (``concurrency = "step"``), with no search slack (the default until
  2026-12; the default shares with the flows that overlap them in time);
* ``no-slack``: the default estimate with a beam that goes on only through steps no worse by
  estimate (``search_slack = 0``; the default lets it go through steps up to 3% worse);
* ``overlap-checked``: the step degrees' search, a candidate tried only if the overlap
  estimate also gives it ``epsilon`` (``concurrency = "checked"``, no slack);
* ``least-excess``: an unseen pair priced from its endpoints' links plus the least path excess
  any observed pair showed, not the mean (``unseen_pairs = "links_least"``).

Run::

    python -m experiments.ablation --out docs/results   # the committed ablation.{csv,md}
    python -m experiments.ablation --quick             # one scenario per point, a temp folder

Without ``--out`` a full run writes into ``results/``; other options than the defaults give the
files their own names (:func:`react.run.outdir.variant_name`).
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a file: make `experiments` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.fig5 import (
    COLLECTIVES,
    RESULTS,
    ROOT,
    K,
    congested_pairs,
    make_point,
    run_points,
    scenario_doc,
    spread_hosts,
    write_csv,
)
from react.run.outdir import experiment_dirs, variant_name

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "paper-estimate": {"unseen_pairs": "degree_median"},
    "greedy": {"search_width": 1},
    "degree-classes": {"size_aware_detection": False},
    "step-sharing": {"concurrency": "step", "search_slack": 0.0},
    "no-slack": {"search_slack": 0.0},
    "overlap-checked": {"concurrency": "checked", "search_slack": 0.0},
    "least-excess": {"unseen_pairs": "links_least"},
}


def ablation_points(collectives: Sequence[str], xs: Sequence[int], ps: Sequence[int],
                    scenarios: int, variants: Sequence[str], *, epochs: int, sweep: str) -> list:
    """One REACT-off point per scenario and one REACT-on point per scenario and variant."""
    hosts = spread_hosts()
    everyone = [f"h{i}" for i in range(K ** 3 // 4)]
    points = []
    for collective in collectives:
        for x in xs:
            for p in ps:
                for seed in range(scenarios):
                    pairs = congested_pairs(seed, x, hosts, everyone)
                    doc = scenario_doc(collective, pairs, p, seed=seed, hosts=hosts,
                                       epochs=epochs, name=sweep)
                    params = {"collective": collective, "x": x, "p": p, "scenario": seed}
                    points.append(make_point(sweep, {**params, "variant": "off"}, doc, "off"))
                    for variant in variants:
                        on = copy.deepcopy(doc)
                        on["jobs"][0]["react"] = {"enabled": True, **VARIANTS[variant]}
                        points.append(make_point(sweep, {**params, "variant": variant}, on,
                                                 "on"))
    return points


def ablation_rows(runs: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per scenario and variant: the gain over the scenario's REACT-off run."""
    def key(params: Mapping[str, Any]) -> tuple:
        return (params["collective"], params["x"], params["p"], params["scenario"])

    off = {key(r.params): r.metrics["job"] for r in runs if r.react == "off" and r.metrics}
    rows = []
    for run in runs:
        if run.react != "on" or not run.metrics or key(run.params) not in off:
            continue
        base, on = off[key(run.params)], run.metrics["job"]
        rows.append({**run.params, "algbw_off_gbps": base["mean_algbw_gbps"],
                     "algbw_on_gbps": on["mean_algbw_gbps"],
                     "gain": on["mean_algbw_gbps"] / base["mean_algbw_gbps"] - 1.0,
                     "pattern_changes": on["pattern_changes"]})
    order = list(VARIANTS)
    return sorted(rows, key=lambda r: (order.index(r["variant"]), r["collective"], r["x"],
                                       r["p"], r["scenario"]))


def summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for variant in VARIANTS:
        for collective in COLLECTIVES:
            sel = [r for r in rows if r["variant"] == variant and r["collective"] == collective]
            if not sel:
                continue
            gains = [r["gain"] for r in sel]
            worst = min(sel, key=lambda r: r["gain"])
            out.append({"variant": variant, "collective": collective, "scenarios": len(sel),
                        "mean_gain": float(np.mean(gains)), "worst_gain": worst["gain"],
                        "worst_at": f"x={worst['x']} p={worst['p']} #{worst['scenario']}",
                        "changes_per_run": float(np.mean([r["pattern_changes"] for r in sel]))})
    return out


def markdown(table: Sequence[Mapping[str, Any]], command: str) -> str:
    lines = ["## Controller ablation: what each deviation from the paper is worth", "",
             f"Regenerate: {command}.", "",
             "Fig. 5 scenarios (k=8 fat-tree, 20 MB, 100 epochs, "
             "gain in mean algorithm bandwidth over epochs 25-99 against the same scenario "
             "without REACT); paper-estimate, greedy and degree-classes each restore one "
             "paper rule; step-sharing, no-slack, overlap-checked and least-excess are "
             "alternative estimates (experiments/ablation.py).",
             "", "| variant | collective | scenarios | mean gain | worst gain (where) | "
             "changes per run |", "|---|---|---:|---:|---:|---:|"]
    for r in table:
        lines.append(f"| {r['variant']} | {r['collective']} | {r['scenarios']} | "
                     f"{r['mean_gain']:+.1%} | {r['worst_gain']:+.1%} ({r['worst_at']}) | "
                     f"{r['changes_per_run']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.ablation",
        description="Each controller choice where we differ from the paper, switched back to "
                    "the paper's rule one at a time, on Fig. 5 scenarios.")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: tree only, x = 2, p = 2, 1 scenario, 30 epochs")
    parser.add_argument("--collectives", nargs="+", choices=list(COLLECTIVES),
                        default=list(COLLECTIVES))
    parser.add_argument("--x", nargs="+", type=int, default=[1, 2, 4], dest="xs")
    parser.add_argument("--p", nargs="+", type=int, default=[2, 4], dest="ps")
    parser.add_argument("--scenarios", type=int, default=3, help="random scenarios per point")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--store", type=Path, help="results store (default "
                                                   "results/ablation.sqlite)")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for ablation.csv and ablation.md (default docs/results; "
                             "with --quick a new temporary folder)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.collectives, args.xs, args.ps, args.scenarios, args.epochs = ["tree"], [2], [2], \
            1, 30
    if args.quick:
        sweep = "ablation-quick"
    else:
        sweep = variant_name("ablation", {
            "c": args.collectives, "x": args.xs, "p": args.ps, "s": args.scenarios,
            "v": args.variants, "e": args.epochs,
        }, {"c": list(COLLECTIVES), "x": [1, 2, 4], "p": [2, 4], "s": 3, "v": list(VARIANTS),
            "e": 100})
    args.out, store = experiment_dirs(sweep, quick=args.quick, out=args.out, store=args.store,
                                     default_out=RESULTS,
                                     default_store=ROOT / "results" / f"{sweep}.sqlite")
    points = ablation_points(args.collectives, args.xs, args.ps, args.scenarios, args.variants,
                             epochs=args.epochs, sweep=sweep)
    runs, timing = run_points(points, store, workers=args.workers,
                              progress=not args.no_progress)
    rows = ablation_rows(runs)
    table = summary(rows)
    write_csv(args.out / f"{sweep}.csv", rows)
    command = ("`python3 -m experiments.regenerate --only ablation` (runs `python3 -m "
               "experiments.ablation --out docs/results`)" if not args.quick
               else "`python3 -m experiments.ablation --quick`")
    (args.out / f"{sweep}.md").write_text(markdown(table, command), encoding="utf-8")
    for r in table:
        print(f"{r['variant']:15s} {r['collective']:5s} mean {r['mean_gain']:+.1%} worst "
              f"{r['worst_gain']:+.1%} ({r['worst_at']}) changes {r['changes_per_run']:.1f}")
    print(f"{int(timing['runs'])} runs in {timing['wall_s']:.0f} s -> {args.out / sweep}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
