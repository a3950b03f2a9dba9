"""Table 2 analog in simulation: speedup of mean and p95 collective time, 4 and 8 ranks, p = 0-2.

The paper's Table 2 comes from its testbed (§7.2): NCCL's dual binary tree AllReduce of 100 MB
for 5,000 epochs on 4 or 8 A100 nodes that the cluster scheduler placed, ``p`` = 0, 1, 2 external
flows from an outside node into one rank; each allocation runs the baseline and then REACT, the
speedup is the ratio baseline / REACT of the mean (and of the p95) collective time over the
epochs, and "#changes" counts REACT's pattern changes.

Our analog: the k=8 fat-tree of the simulations (128 servers, 100 Gb/s, 4-way ECMP re-hashed
every epoch) stands in for the Slingshot network. An *allocation* (one per seed) places the job's
ranks on random distinct hosts (the scheduler's choice), picks one rank and one outside host, and
runs ``p`` long-lived flows from that host into that rank (the testbed's external flow is an RDMA
ping-pong of 1 GB messages; a long-lived flow is its steady-state equivalent; ``--background
ping_pong`` runs ``p`` 1 GB ping-pongs instead, outside host -> rank then back, so the congestion
moves between the rank's inbound and outbound links as on the testbed). Baseline and REACT
run the same allocation with the same seeds. All epochs count (no warm-up), as in the testbed.
The speedups and change counts are averaged over the allocations.

Default length: 1,000 epochs per run (the testbed ran 5,000; ``--epochs 5000`` for that, about 5x
the time). Change counts are reported as measured and scaled to 5,000 epochs.

Run::

    python -m experiments.table2            # full, writes results/ table2.csv
    python -m experiments.table2 --epochs 5000   # the testbed's length: table2_e5000.csv
    python -m experiments.table2 --background ping_pong   # table2_bping_pong.csv
    python -m experiments.table2 --noise 0.02   # 2% noise on observed times: table2_noise0.02.csv
    python -m experiments.table2 --quick    # seconds
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a file: make `experiments` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.fig5 import (
    RESULTS,
    K,
    make_point,
    paired_rows,
    run_points,
    scenario_doc,
    write_csv,
)
from react.commands.argtypes import (
    add_controller_settings,
    controller_settings,
    react_entry,
    settings_label,
)
from react.run.outdir import experiment_dirs, variant_name
from react.run.sweep import Point

PAPER = {  # (ranks, p) -> (mean speedup, p95 speedup, #changes), paper Table 2
    (4, 0): (0.964, 0.963, 34.0), (4, 1): (0.999, 0.980, 35.6), (4, 2): (1.138, 1.180, 33.2),
    (8, 0): (1.101, 1.165, 41.25), (8, 1): (1.348, 1.383, 40.0), (8, 2): (1.145, 1.222, 36.25),
}
"""Our reading of the garbled table: columns 4 nodes p=0,1,2 then 8 nodes p=0,1,2; rows mean,
p95, #changes (the text lists each row left to right)."""


def allocation(seed: int, ranks: int, hosts: int = K ** 3 // 4) -> tuple[list[str], str, str]:
    """Random distinct hosts for the ranks, and (outside host, congested rank's host)."""
    rng = np.random.default_rng([seed, ranks])
    picked = rng.choice(hosts, size=ranks + 1, replace=False)
    names = [f"h{i}" for i in picked]
    placed, outside = names[:ranks], names[ranks]
    return placed, outside, placed[int(rng.integers(ranks))]


PING_PONG_BYTES = 1e9
"""The testbed's external flow sends 1 GB at a time (§7.2)."""

BACKGROUNDS = ("long_lived", "ping_pong")


def table2_points(ranks: Sequence[int], ps: Sequence[int], allocations: int, *, epochs: int,
                  message_bytes: float, sweep: str, background: str = "long_lived",
                  react_value: bool | Mapping[str, Any] = True,
                  noise_sigma: float = 0.0) -> list[Point]:
    """The off and on points of every (ranks, p, allocation); ``react_value`` is the job's
    ``react`` entry in the scenario (a table: controller parameters); ``noise_sigma`` the
    measurement noise on every flow's observed time (``[sim] noise_sigma``, both runs)."""
    points = []
    for n in ranks:
        for p in ps:
            for s in range(allocations):
                hosts, src, dst = allocation(s, n)
                doc = scenario_doc("tree", [(src, dst)], p, seed=s, hosts=hosts, epochs=epochs,
                                   message_bytes=message_bytes, name=sweep, react=react_value)
                if background == "ping_pong":
                    for bg in doc["background"]:
                        bg.update(kind="ping_pong", size_bytes=PING_PONG_BYTES)
                if noise_sigma:
                    doc.setdefault("sim", {})["noise_sigma"] = noise_sigma
                params = {"ranks": n, "p": p, "allocation": s}
                for react in ("off", "on"):
                    points.append(make_point(sweep, params, doc, react, warmup=0))
    return points


def table_rows(rows: Sequence[Mapping[str, Any]], epochs: int) -> list[dict[str, Any]]:
    out = []
    for n, p in sorted({(r["ranks"], r["p"]) for r in rows}):
        sel = [r for r in rows if r["ranks"] == n and r["p"] == p]
        mean = float(np.mean([r["mean_off_s"] / r["mean_on_s"] for r in sel]))
        p95 = float(np.mean([r["p95_off_s"] / r["p95_on_s"] for r in sel]))
        changes = float(np.mean([r["pattern_changes"] for r in sel]))
        paper = PAPER.get((n, p), (float("nan"),) * 3)
        out.append({"ranks": n, "p": p, "allocations": len(sel), "speedup_mean": mean,
                    "speedup_p95": p95, "changes": changes,
                    "changes_per_5k": changes * 5000 / epochs,
                    "paper_speedup_mean": paper[0], "paper_speedup_p95": paper[1],
                    "paper_changes": paper[2]})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.table2",
        description="Paper Table 2 in simulation: baseline / REACT ratio of the mean and p95 "
                    "collective time and REACT's pattern changes, tree AllReduce, 4 and 8 "
                    "ranks, p = 0, 1, 2 external flows into one rank.")
    parser.add_argument("--quick", action="store_true",
                        help="tiny smoke run: 4 ranks, p = 0 and 2, 1 allocation, 20 epochs")
    parser.add_argument("--ranks", nargs="+", type=int, default=[4, 8])
    parser.add_argument("--p", nargs="+", type=int, default=[0, 1, 2], dest="ps")
    parser.add_argument("--allocations", type=int, default=5, help="random allocations (seeds)")
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--message-bytes", type=float, default=100e6)
    parser.add_argument("--background", choices=BACKGROUNDS, default="long_lived",
                        help="the external flows: long-lived (default, their steady state) or "
                             "1 GB ping-pongs, outside host -> rank then back, as the testbed's "
                             "(not the default: files of their own)")
    parser.add_argument("--noise", type=float, default=0.0, metavar="SIGMA",
                        help="measurement noise: every flow's observed time times 1 + SIGMA z, "
                             "z standard normal (0 to 0.3; default 0, none; files of their own)")
    parser.add_argument("--store", type=Path, help="results store (default results/table2.sqlite)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default results/, docs/results only when asked; "
                             "with --quick a new "
                             "temporary folder, so the committed files stay)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true")
    add_controller_settings(parser)
    args = parser.parse_args(argv)
    settings = controller_settings(parser, args.react_set)
    if not 0 <= args.noise <= 0.3:
        parser.error(f"--noise {args.noise}: expected a number in [0, 0.3]")
    if args.quick:
        args.ranks, args.ps, args.allocations, args.epochs = [4], [0, 2], 1, 20
    sweep = "table2" + ("-quick" if args.quick else "")
    if not args.quick:  # other options than the defaults: files of their own
        sweep = variant_name(
            sweep, {"n": args.ranks, "p": args.ps, "a": args.allocations, "e": args.epochs,
                    "m": args.message_bytes, "b": args.background, "noise": args.noise,
                    "set-": settings_label(settings)},
            {"n": [4, 8], "p": [0, 1, 2], "a": 5, "e": 1000, "m": 100e6, "b": "long_lived",
             "noise": 0.0, "set-": []})
    args.out, store = experiment_dirs(sweep, quick=args.quick, out=args.out, store=args.store,
                                     default_out=RESULTS,
                                     default_store=RESULTS / f"{sweep}.sqlite")
    points = table2_points(args.ranks, args.ps, args.allocations, epochs=args.epochs,
                           message_bytes=args.message_bytes, sweep=sweep,
                           background=args.background,
                           react_value=react_entry(settings), noise_sigma=args.noise)
    runs, timing = run_points(points, store, workers=args.workers,
                              progress=not args.no_progress)
    rows = paired_rows(runs)
    table = table_rows(rows, args.epochs)
    write_csv(args.out / f"{sweep}.csv", table)
    print(f"{'ranks':>5} {'p':>2} {'n':>2} {'mean':>6} {'p95':>6} {'changes':>7} {'/5k':>6}  "
          f"paper: {'mean':>6} {'p95':>6} {'changes':>7}")
    for t in table:
        print(f"{t['ranks']:>5} {t['p']:>2} {t['allocations']:>2} {t['speedup_mean']:>6.3f} "
              f"{t['speedup_p95']:>6.3f} {t['changes']:>7.1f} {t['changes_per_5k']:>6.1f}  "
              f"       {t['paper_speedup_mean']:>6.3f} {t['paper_speedup_p95']:>6.3f} "
              f"{t['paper_changes']:>7.2f}")
    print(f"{int(timing['runs'])} runs ({int(timing['ran'])} run now) in {timing['wall_s']:.1f} s "
          f"wall, {timing['cpu_s']:.1f} s CPU; mean {timing['run_mean_s']:.3f} s per run "
          f"-> {store}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
