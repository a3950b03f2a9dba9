"""Fig. 7 (§7.3.3): two jobs sharing only the network on the Alibaba-style fabric.

The fabric is :func:`flowsim.topologies.alibaba_fabric` (48 ToRs x 3 aggregation switches x 15
servers = 720 servers, 100 Gb/s links, so every inter-rack pair has 3 equal-cost paths
ToR -> agg -> ToR), 4 ECMP connections per rank pair with one picked at random each epoch.
Two 8-rank jobs of 20 MB run back to back for 100 epochs on *different* servers of the *same*
four racks, two servers of each job per rack, each job's ranks in a random order: so the jobs
share no server but do share every ToR-agg link their inter-rack flows use (the paper's
"Spine-ToR congestion"), and a rank order that keeps ring neighbours in one rack keeps their
flows off the fabric altogether. The racks, servers and orders are drawn per seed. A job
whose 100 epochs end first keeps running its last pattern (unrecorded) until the other is done
(``[sim] after_epochs = "continue"``), so both jobs' measured epochs share the network.

(a) ring AllReduce + ring AllReduce; (b) recursive-doubling AllGather (job 1) + ring AllReduce
(job 2). Each scenario runs three times with the same seeds: REACT on neither job (the baseline),
on job 1 only, and on both; the figure shows each job's improvement over the baseline.

    python experiments/fig7.py             # full: (a) and (b) x 3 seeds x 3 runs (~8 min here)
    python experiments/fig7.py --quick     # seconds: a smoke run
    python experiments/fig7.py --draws 3   # each run on 3 trajectories (experiments/draws.py)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.draws import add_draws_argument, with_draws
from react.commands.argtypes import (
    add_controller_settings,
    controller_settings,
    react_entry,
    settings_label,
)
from react.run.outdir import experiment_dirs, variant_name
from react.run.sweep import scenario_points
from react.show.plots import run_and_plot

RESULTS = Path(__file__).resolve().parents[1] / "results"
"""Where a full run writes (``--out docs/results`` regenerates the committed files)."""

CASES = {
    "a: ring + ring": ("allreduce_ring", "allreduce_ring"),
    "b: RD + ring": ("allgather_recursive_doubling", "allreduce_ring"),
}
RANKS = 8
TORS, PER_TOR = 48, 15
RACKS_USED = 4


def scenario(case: str, seed: int, *, epochs: int,
             settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One point: both jobs on the same 4 random racks, 2 servers each per rack, disjoint;
    ``settings``: controller parameters of both jobs (``--react-set``)."""
    rng = np.random.default_rng(seed)  # the same placement for (a) and (b)
    racks = rng.choice(TORS, size=RACKS_USED, replace=False)
    per_job = RANKS // RACKS_USED
    hosts: list[list[str]] = [[], []]
    for rack in racks:
        servers = rng.choice(PER_TOR, size=2 * per_job, replace=False)
        for j in range(2):
            hosts[j] += [f"h{int(rack) * PER_TOR + int(s)}"
                         for s in servers[j * per_job:(j + 1) * per_job]]
    placements = [[str(h) for h in rng.permutation(h_list)] for h_list in hosts]
    jobs = []
    for j, (collective, placement) in enumerate(zip(CASES[case], placements, strict=True)):
        jobs.append({"name": f"job{j + 1}", "collective": collective, "ranks": RANKS,
                     "placement": placement, "message_bytes": 20e6, "epochs": epochs,
                     "seed": seed + 1000 * j,
                     # as the scenario says: REACT on job 1 only
                     "react": react_entry(settings or {}, j == 0)})
    return {
        "name": f"fig7-{case[0]}-s{seed}",
        "seed": seed,
        "connections": 4,
        "topology": {"name": "alibaba_fabric"},
        # Jobs of different epoch lengths: the one done first keeps running (unrecorded), so
        # the other's measured epochs share the network too.
        "sim": {"after_epochs": "continue"},
        "jobs": jobs,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fig7", description="Fig. 7: two jobs sharing only the network on the 720-server "
                                 "Alibaba-style fabric; REACT on job 1 only, then on both.")
    parser.add_argument("--quick", action="store_true",
                        help="tiny run (case (a) only, 1 seed, 8 epochs)")
    parser.add_argument("--seeds", type=int, default=3, help="scenarios per case (default 3)")
    parser.add_argument("--epochs", type=int, default=100, help="epochs per run (default 100)")
    parser.add_argument("--store", default=None,
                        help="results store (SQLite, resumable; default results/fig7.sqlite, "
                             "with --quick a temporary folder)")
    parser.add_argument("--out", "--out-dir", dest="out_dir", default=None,
                        help="where fig7.png/.csv go (default results/, docs/results only when "
                             "asked; with --quick a new "
                             "temporary folder, so the committed files stay)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    add_controller_settings(parser)
    add_draws_argument(parser)
    args = parser.parse_args(argv)
    settings = controller_settings(parser, args.react_set)

    cases_used, seeds, epochs, warmup = list(CASES), range(args.seeds), args.epochs, 25
    if args.quick:
        cases_used, seeds, epochs, warmup = cases_used[:1], range(1), 8, 2
    cases = with_draws([({"case": c}, scenario(c, s, epochs=epochs, settings=settings))
                        for c in cases_used for s in seeds], args.draws)
    sweep = "fig7" + ("-quick" if args.quick else "")
    if not args.quick:  # other options than the defaults: files of their own
        sweep = variant_name(sweep, {"s": args.seeds, "e": args.epochs, "d": args.draws,
                                     "set-": settings_label(settings)},
                             {"s": 3, "e": 100, "d": 1, "set-": []})
    # "both": REACT off / on for every job; "scenario": on for job 1 only (the same off run)
    points = (scenario_points(sweep, cases, react="both", warmup_epochs=warmup)
              + scenario_points(sweep, cases, react="scenario", warmup_epochs=warmup))
    out_dir, store = experiment_dirs(sweep, quick=args.quick, out=args.out_dir,
                                     store=args.store, default_out=RESULTS,
                                     default_store=RESULTS / f"{sweep}.sqlite")
    clock = time.perf_counter()
    run_and_plot(points, store=store, png=out_dir / f"{sweep}.png",
                 csv_path=out_dir / f"{sweep}.csv", x="case", workers=args.workers, out=sys.stdout,
                 seeds_csv=out_dir / f"{sweep}_seeds.csv" if args.draws > 1 else None,
                 title="Fig. 7: two 8-rank jobs, 20 MB, Alibaba fabric (720 servers),\n"
                       "network sharing only"
                       + (f", {args.draws} draws per seed" if args.draws > 1 else ""),
                 xlabel="jobs", mode_labels={"on": "REACT on both", "scenario": "REACT on job 1"})
    print(f"{len({p.key for p in points})} runs in {time.perf_counter() - clock:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
