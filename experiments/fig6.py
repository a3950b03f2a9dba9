"""Fig. 6 (§7.3.3): two jobs sharing servers on a star, REACT on both against off on both.

Job 1 is an 8-rank dual binary tree AllReduce on h0..h7 of a 16-host star; job 2 an 8-rank ring
AllReduce on ``overlap`` servers drawn at random from job 1's and ``8 - overlap`` of the free
hosts h8..h15, its ranks in a random order (as a scheduler that fragments GPUs would place it).
Both move 20 MB per epoch for 100 epochs, back to back; the ring, whose epochs are shorter, keeps
running its last pattern (unrecorded) until the tree is done (``[sim] after_epochs =
"continue"``), so both jobs' measured epochs share the servers. The mean algorithm bandwidth of
each job after epoch 25 is compared between REACT on both jobs and REACT on neither (same
seeds). A shared server's link carries both jobs' flows, which is the only contention: there is
no other traffic.

``--react-on tree`` (or ``ring``) runs REACT on that job alone against the same baseline: it
separates what a job's own controller does for it from what the other job's controller does to
it (a swap that speeds one job up can load a link the other job cannot avoid).

    python experiments/fig6.py                  # full: 1..4 shared servers x 5 seeds (~3 min)
    python experiments/fig6.py --react-on tree  # REACT on the tree job only: fig6_rtree.csv
    python experiments/fig6.py --quick          # seconds: a smoke run
    python experiments/fig6.py --draws 3        # each run on 3 trajectories (experiments/draws.py)
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

OVERLAPS = (1, 2, 3, 4)
RANKS = 8
HOSTS = 16


REACT_ON = ("both", "tree", "ring")


def scenario(overlap: int, seed: int, *, epochs: int, react_on: str = "both",
             settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One point: job 2 shares ``overlap`` random servers of job 1, ranks in random order.

    ``react_on`` says which jobs' scenario entries have REACT on (runs forced on or off for
    every job ignore it); ``settings``: controller parameters of both jobs (``--react-set``).
    """
    if react_on not in REACT_ON:
        raise ValueError(f"react_on = {react_on!r}: expected one of {', '.join(REACT_ON)}")
    rng = np.random.default_rng([seed, overlap])
    tree_hosts = [f"h{i}" for i in range(RANKS)]
    shared = [tree_hosts[int(i)] for i in rng.choice(RANKS, size=overlap, replace=False)]
    own = [f"h{RANKS + int(i)}" for i in rng.choice(HOSTS - RANKS, size=RANKS - overlap,
                                                    replace=False)]
    ring_hosts = [str(h) for h in rng.permutation(shared + own)]
    job = {"collective": "", "ranks": RANKS, "message_bytes": 20e6, "epochs": epochs}
    return {
        "name": f"fig6-o{overlap}-s{seed}",
        "seed": seed,
        "connections": 1,
        "topology": {"name": "star", "n": HOSTS},
        # The ring's epochs are about half the tree's: it keeps running (unrecorded) after its
        # 100 epochs so that the tree's measured epochs share the servers too.
        "sim": {"after_epochs": "continue"},
        "jobs": [
            {**job, "name": "tree", "collective": "allreduce_double_binary_tree",
             "placement": tree_hosts,
             "react": react_entry(settings or {}, react_on in ("both", "tree"))},
            {**job, "name": "ring", "collective": "allreduce_ring", "placement": ring_hosts,
             "seed": seed + 1000,  # its own per-epoch and controller randomness
             "react": react_entry(settings or {}, react_on in ("both", "ring"))},
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fig6", description="Fig. 6: two jobs (tree and ring AllReduce) sharing 1-4 "
                                 "servers on a star; REACT on both against off on both.")
    parser.add_argument("--quick", action="store_true",
                        help="tiny run (2 shared servers, 1 seed, 8 epochs)")
    parser.add_argument("--seeds", type=int, default=5, help="scenarios per point (default 5)")
    parser.add_argument("--epochs", type=int, default=100, help="epochs per run (default 100)")
    parser.add_argument("--store", default=None,
                        help="results store (SQLite, resumable; default results/fig6.sqlite, "
                             "with --quick a temporary folder)")
    parser.add_argument("--out", "--out-dir", dest="out_dir", default=None,
                        help="where fig6.png/.csv go (default results/, docs/results only when "
                             "asked; with --quick a new "
                             "temporary folder, so the committed files stay)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--react-on", choices=REACT_ON, default="both",
                        help="the jobs REACT runs on, against REACT on neither (default both; "
                             "tree or ring: that job alone, files fig6_rtree/_rring)")
    add_controller_settings(parser)
    add_draws_argument(parser)
    args = parser.parse_args(argv)
    settings = controller_settings(parser, args.react_set)

    overlaps, seeds, epochs, warmup = OVERLAPS, range(args.seeds), args.epochs, 25
    if args.quick:
        overlaps, seeds, epochs, warmup = (2,), range(1), 8, 2
    cases = with_draws([({"overlapping_nodes": o},
                         scenario(o, s, epochs=epochs, react_on=args.react_on, settings=settings))
                        for o in overlaps for s in seeds], args.draws)
    stem = "fig6" + ("-quick" if args.quick else "")
    if not args.quick:  # other options than the defaults: files of their own
        stem = variant_name(stem, {"s": args.seeds, "e": args.epochs, "r": args.react_on,
                                   "d": args.draws, "set-": settings_label(settings)},
                            {"s": 5, "e": 100, "r": "both", "d": 1, "set-": []})
    if args.react_on == "both":
        points = scenario_points(stem, cases, react="both", warmup_epochs=warmup)
        labels = {"on": "REACT on both"}
    else:  # the baseline (off for both) and the scenario's own flags (on for one job)
        points = (scenario_points(stem, cases, react="off", warmup_epochs=warmup)
                  + scenario_points(stem, cases, react="scenario", warmup_epochs=warmup))
        labels = {"scenario": f"REACT on the {args.react_on} job only"}
    out_dir, store = experiment_dirs(stem, quick=args.quick, out=args.out_dir,
                                     store=args.store, default_out=RESULTS,
                                     default_store=RESULTS / f"{stem}.sqlite")
    clock = time.perf_counter()
    run_and_plot(points, store=store, png=out_dir / f"{stem}.png",
                 csv_path=out_dir / f"{stem}.csv", x="overlapping_nodes", workers=args.workers,
                 out=sys.stdout,
                 seeds_csv=out_dir / f"{stem}_seeds.csv" if args.draws > 1 else None,
                 title="Fig. 6: tree (job 1) + ring (job 2) AllReduce, 20 MB, star, "
                       "shared servers"
                       + (f",\n{args.draws} draws per seed" if args.draws > 1 else ""),
                 xlabel="overlapping nodes (servers shared by the two jobs)",
                 mode_labels=labels)
    print(f"{len(points)} runs in {time.perf_counter() - clock:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
