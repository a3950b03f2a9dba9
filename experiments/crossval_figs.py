"""Figs. 12 and 5 on three models: exact max-min, the TCP-aware mode and ns-3, with/without REACT.

Does the packet-level model explain why our gains are smaller than the paper's? Points of
Fig. 12 (``experiments/fig12.py``: 8-rank dual tree on a 16-host star, x congested pairs with p
long-lived flows each; x in 1, 2 and p in 1, 2, 4) and of Fig. 5 (``experiments/fig5.py``: the
tree on a k = 8 fat-tree, one rank per pod, 4 ECMP connections; x in 1, 2, p = 2) run without
and with REACT on each backend, same seeds.

Scaled so that the ns-3 points fit in minutes: 2 MB messages instead of 20 MB, 12 epochs
instead of 100 (two batches of B = 6: REACT observes the first and, when it swaps, the second
batch runs its swap), one scenario seed per point instead of 10 (``--seeds`` for more). The gain
is the ratio of the mean collective times over the second batch, without / with REACT, minus
one (the algorithm bandwidth improvement of the papers' figures).

    python3 -m experiments.crossval_figs --figure 12   # sim, tcp, ns3 (about 15 min here)
    python3 -m experiments.crossval_figs --figure 5    # (about 15 min here)
    python3 -m experiments.crossval_figs --quick       # seconds: Fig. 12 x=1, p=2, sim and tcp
    python3 -m experiments.crossval_figs --figure 12 --reuse ns3 --out docs/results
        # re-runs the simulator's two modes only; the ns-3 rows come from the file already there

Writes ``crossval_fig12.csv`` or ``crossval_fig5.csv`` into ``--out`` (default results/; the
committed files with ``--out docs/results``; with --quick a temporary folder). Options other
than the defaults go into the file name (``react.run.outdir.variant_name``). ``--reuse BACKENDS``
takes those backends' rows from the file of that name already in ``--out`` instead of running
them (every point must be there), so that a change to the simulator's modes can be re-run in
seconds beside the hour of ns-3 rows.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fig5  # noqa: E402
from fig12 import scenario as fig12_scenario  # noqa: E402

from react.run.outdir import experiment_dirs, variant_name  # noqa: E402

BATCH = 6
RESULTS = Path(__file__).resolve().parents[1] / "results"


def run_point(doc: dict[str, Any], backend: str) -> dict[str, Any]:
    """One point on one backend: second-batch mean times off and on, and REACT's decisions."""
    from react.run.scenario import parse_scenario
    from react.run.scenario_runs import run_scenario

    scenario = parse_scenario(doc, source=doc["name"], base_dir=fig5.ROOT)
    scenario = (scenario.with_backend("sim").with_sharing(backend) if backend in ("maxmin", "tcp")
                else scenario.with_backend(backend))
    clock = time.perf_counter()
    (job,) = (j.name for j in scenario.jobs)
    off = run_scenario(scenario, react=False)[job]
    on = run_scenario(scenario, react=True)[job]
    wall = time.perf_counter() - clock
    t_off = float(np.mean(off.times_s()[BATCH:2 * BATCH]))
    t_on = float(np.mean(on.times_s()[BATCH:2 * BATCH]))
    first = on.decisions[0] if on.decisions else None
    return {"off_us": round(t_off * 1e6, 1), "on_us": round(t_on * 1e6, 1),
            "gain": round(t_off / t_on - 1, 4),
            "first_batch_us": round(float(np.mean(off.times_s()[:BATCH])) * 1e6, 1),
            "decision": "" if first is None else
            f"{first.action}: " + "; ".join(s.describe() for s in first.swaps),
            "wall_s": round(wall, 1)}


def points(figure: int, seeds: int, message_bytes: float) -> list[tuple[dict[str, Any],
                                                                         dict[str, Any]]]:
    """``(parameters, scenario document)`` of every point of ``figure``."""
    out = []
    if figure == 12:
        for x in (1, 2):
            for p in (1, 2, 4):
                for seed in range(seeds):
                    out.append(({"x": x, "p": p, "seed": seed},
                                fig12_scenario(x, p, seed, epochs=2 * BATCH,
                                               message_bytes=message_bytes)))
        return out
    ranks = fig5.spread_hosts()
    hosts = [f"h{i}" for i in range(fig5.K ** 3 // 4)]
    for x in (1, 2):
        for seed in range(seeds):
            pairs = fig5.congested_pairs(seed, x, ranks, hosts)
            doc = fig5.scenario_doc("tree", pairs, 2, seed=seed, hosts=ranks,
                                    epochs=2 * BATCH, message_bytes=message_bytes,
                                    name=f"fig5-tree-x{x}-p2-s{seed}")
            out.append(({"x": x, "p": 2, "seed": seed}, doc))
    return out


def reused_rows(path: Path, reuse: Sequence[str],
                todo: Sequence[tuple[dict[str, Any], dict[str, Any]]]
                ) -> dict[tuple[str, str, str, str], dict[str, str]]:
    """The rows of the ``reuse`` backends for every point of ``todo``, read from ``path``."""
    if not path.exists():
        raise SystemExit(f"crossval_figs: --reuse {','.join(reuse)}: no earlier results at "
                         f"{path} to take those rows from (run without --reuse first)")
    with open(path, newline="", encoding="utf-8") as fh:
        rows = {(r["x"], r["p"], r["seed"], r["backend"]): r for r in csv.DictReader(fh)}
    out = {}
    for params, _doc in todo:
        for backend in reuse:
            key = (str(params["x"]), str(params["p"]), str(params["seed"]), backend)
            if key not in rows:
                raise SystemExit(f"crossval_figs: --reuse: {path} has no row for x={key[0]} "
                                 f"p={key[1]} seed={key[2]} backend={backend}")
            out[key] = rows[key]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="crossval_figs", description=__doc__.splitlines()[0])
    parser.add_argument("--figure", type=int, choices=(12, 5), default=12,
                        help="which figure's points (default 12)")
    parser.add_argument("--quick", action="store_true",
                        help="Fig. 12 x=1, p=2 on the simulator's two modes only (a smoke run)")
    parser.add_argument("--backends", default="maxmin,tcp,ns3",
                        help="maxmin (flowsim exact), tcp (flowsim TCP-aware), ns3 (default: all)")
    parser.add_argument("--seeds", type=int, default=1, help="scenarios per point (default 1)")
    parser.add_argument("--message-bytes", type=float, default=2e6,
                        help="message size (default 2e6; the paper's 20e6 takes 10x longer)")
    parser.add_argument("--reuse", default="", metavar="BACKENDS",
                        help="backends (of --backends) whose rows are taken from the CSV of the "
                             "same name already in --out instead of being run again (e.g. ns3)")
    parser.add_argument("--out", default=None, help="folder for the CSV")
    args = parser.parse_args(argv)
    backends = args.backends.split(",")
    reuse = [b for b in args.reuse.split(",") if b]
    unknown = [b for b in reuse if b not in backends]
    if unknown or (reuse and args.quick):
        parser.error(f"--reuse {args.reuse}: expected some of --backends ({args.backends}), "
                     "and not with --quick")
    todo = points(args.figure, args.seeds, args.message_bytes)
    if args.quick:
        todo = [(params, doc) for params, doc in points(12, 1, args.message_bytes)
                if params["x"] == 1 and params["p"] == 2]
        backends = ["maxmin", "tcp"]
    stem = f"crossval_fig{args.figure}"
    if not args.quick:  # other options than the defaults: a file of their own
        stem = variant_name(stem, {"s": args.seeds, "m": args.message_bytes,
                                   "b": args.backends},
                            {"s": 1, "m": 2e6, "b": "maxmin,tcp,ns3"})
    out_dir, _ = experiment_dirs(stem, quick=args.quick, out=args.out, default_out=RESULTS)
    path = out_dir / f"{stem}.csv"
    kept = reused_rows(path, reuse, todo) if reuse else {}
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        if "ns3" in backends and "ns3" not in reuse:
            from react.backends.ns3 import shared_child

            stack.enter_context(shared_child())
        for params, doc in todo:
            for backend in backends:
                if backend in reuse:
                    rows.append(kept[(str(params["x"]), str(params["p"]), str(params["seed"]),
                                      backend)])
                    continue
                row = {**params, "backend": backend, **run_point(doc, backend)}
                rows.append(row)
                print(f"x={row['x']} p={row['p']} seed={row['seed']} {backend:<7} off "
                      f"{row['off_us']:>9,.1f} µs  on {row['on_us']:>9,.1f} µs  gain "
                      f"{row['gain']:+.1%}  ({row['decision'] or 'no decision'}; "
                      f"{row['wall_s']} s)", flush=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
