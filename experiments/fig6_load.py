"""Fig. 6's jobs on their shared servers: what each job sends through them, without and with REACT.

Fig. 6 runs a tree and a ring AllReduce on a star with some servers in common (the job that
finishes first keeps running, so the two overlap throughout). When a job's controller makes that
job faster, the other can get slower though no swap moved any traffic onto it: the faster job
sends its bytes through the shared servers' links in less time, so it takes more of them per
second. This script measures that for chosen runs of the figure: per job, its mean epoch time
(epochs 25-99, as the figure) and the bytes per epoch and per second its flows carry into and
out of the shared servers, with REACT off on both jobs and with REACT as ``--react-on`` says.

Run::

    python3 -m experiments.fig6_load --overlap 1 --seed 3      # the figure's worst ring run
    python3 -m experiments.fig6_load --overlap 1 --seed 3 --react-on ring
    python3 -m experiments.fig6_load --overlap 2 --seed 0 --eps 1e-9   # messages 1 + 1e-9 times

Two jobs sharing links are sensitive to the smallest change (``experiments.sensitivity``):
``--eps`` grows both jobs' messages by that relative amount, to see how much of a gain or loss
is the run's spread rather than REACT's doing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from experiments.draws import grown
from experiments.fig6 import OVERLAPS, REACT_ON, scenario
from react.run.scenario import parse_scenario
from react.run.scenario_runs import run_scenario

WARMUP = 25
"""Epochs left out of the means, as in the figure."""


def shared_load(overlap: int, seed: int, *, react_on: str = "both", epochs: int = 100,
                warmup: int = WARMUP, eps: float = 0.0) -> list[dict[str, Any]]:
    """One row per (REACT off / on, job): epoch time and bytes through the shared servers
    (every message ``1 + eps`` times the figure's)."""
    rows = []
    for react in (False, True):
        doc = grown(scenario(overlap, seed, epochs=epochs, react_on=react_on), eps)
        if not react:
            for job in doc["jobs"]:
                job["react"] = False
        runs = run_scenario(parse_scenario(doc, source=doc["name"]))
        placements = [job["placement"] for job in doc["jobs"]]
        shared = set(placements[0]) & set(placements[1])
        for job, placement in zip(doc["jobs"], placements, strict=True):
            run = runs[job["name"]]
            ranks = {placement.index(host) for host in shared}
            measured = run.results[warmup:]
            into = sum(f.size_bytes for r in measured for f in r.flows if f.flow.dst in ranks)
            out = sum(f.size_bytes for r in measured for f in r.flows if f.flow.src in ranks)
            busy = float(np.sum(run.times_s()[warmup:]))
            rows.append({
                "react": react, "job": job["name"], "shared": sorted(shared),
                "epoch_ms": busy / len(measured) * 1e3,
                "in_mb_per_epoch": into / len(measured) / 1e6,
                "out_mb_per_epoch": out / len(measured) / 1e6,
                "in_gb_per_s": into / busy / 1e9, "out_gb_per_s": out / busy / 1e9,
                "changes": sum(d.changed for d in run.decisions),
            })
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fig6_load",
        description="Fig. 6, one run: each job's epoch time and its bytes through the shared "
                    "servers, with REACT off on both and on as --react-on says.")
    parser.add_argument("--overlap", type=int, choices=OVERLAPS, default=1,
                        help="servers the jobs share (default 1)")
    parser.add_argument("--seed", type=int, default=3,
                        help="the figure's scenario seed, 0-4 there (default 3)")
    parser.add_argument("--react-on", choices=REACT_ON, default="both",
                        help="the jobs REACT runs on in the second run (default both)")
    parser.add_argument("--epochs", type=int, default=100, help="epochs per run (default 100)")
    parser.add_argument("--eps", type=float, default=0.0, metavar="E",
                        help="grow every message by this relative amount (default 0; e.g. "
                             "1e-9 to see the runs' spread)")
    args = parser.parse_args(argv)
    if args.epochs <= WARMUP:
        parser.error(f"--epochs {args.epochs}: expected more than the {WARMUP} warm-up epochs")
    if not -0.5 < args.eps < 0.5:
        parser.error(f"--eps {args.eps}: expected a relative change between -0.5 and 0.5")
    rows = shared_load(args.overlap, args.seed, react_on=args.react_on, epochs=args.epochs,
                       eps=args.eps)
    print(f"overlap {args.overlap}, seed {args.seed}, shared servers "
          f"{', '.join(rows[0]['shared'])}; means over epochs {WARMUP}-{args.epochs - 1}")
    print(f"{'REACT':<6} {'job':<5} {'epoch ms':>9} {'in MB/ep':>9} {'out MB/ep':>10} "
          f"{'in GB/s':>8} {'out GB/s':>9} {'changes':>8}")
    for r in rows:
        print(f"{'on' if r['react'] else 'off':<6} {r['job']:<5} {r['epoch_ms']:>9.3f} "
              f"{r['in_mb_per_epoch']:>9.2f} {r['out_mb_per_epoch']:>10.2f} "
              f"{r['in_gb_per_s']:>8.3f} {r['out_gb_per_s']:>9.3f} {r['changes']:>8}")
    off = {r["job"]: r["epoch_ms"] for r in rows if not r["react"]}
    gains = [f"{r['job']} {off[r['job']] / r['epoch_ms'] - 1:+.1%}" for r in rows if r["react"]]
    print(f"REACT's gain (mean epoch time off / on - 1): {', '.join(gains)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
