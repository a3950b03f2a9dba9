"""Fig. 13 (appendix C.3): p95 collective time vs congestion, with 1, 4 and 8 ECMP connections.

Setting: the Fig. 5 fabric and job (:mod:`experiments.fig5`: k=8 fat-tree, 8 ranks one per pod,
NCCL's dual binary tree AllReduce, 100 epochs, statistics over epochs 25-99), message sizes
20 MB, 2 MB and 100 KB, ``p`` = 1 and 4 long-lived external flows per congested (src, dst) pair,
``x`` in {1, 2, 4, 8} congested pairs drawn as in Fig. 5 (outside host -> rank), and
``connections`` = 1 ("no ECMP": each rank pair keeps one hashed path for the whole run), 4 or 8
ECMP connections per rank pair, one picked at random every epoch. Each scenario runs without and
with REACT on identical seeds. The y-axis is the p95 collective time (ms), averaged over the
random scenarios; a dotted line marks the job alone on the fabric with 8-way ECMP (the paper's
"no background flows" reference).

The paper draws 10 scenarios per point for Fig. 5; here the default is 5 per point (720 runs in
all instead of 1,440), to keep the full run near ten minutes on a 2-core machine
(``--scenarios 10`` for the paper's count).

Run::

    python -m experiments.fig13            # full, writes results/ fig13.{png,csv}
    python -m experiments.fig13 --quick    # seconds
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
    WARMUP,
    K,
    congested_pairs,
    make_point,
    paired_rows,
    run_points,
    scenario_doc,
    spread_hosts,
    write_csv,
)
from react.run.outdir import experiment_dirs, variant_name
from react.run.sweep import Point

SIZES = (20e6, 2e6, 1e5)
CONNECTIONS = (1, 4, 8)
STYLE = {1: ("tab:red", "no ECMP"), 4: ("tab:blue", "4-way ECMP"), 8: ("tab:green", "8-way ECMP")}


def fig13_points(sizes: Sequence[float], ps: Sequence[int], xs: Sequence[int],
                 connections: Sequence[int], scenarios: int, *, epochs: int, sweep: str,
                 warmup: int = WARMUP) -> list[Point]:
    hosts = spread_hosts()
    all_hosts = [f"h{i}" for i in range(K ** 3 // 4)]
    points = []

    def add(size: float, p: int, x: int, conn: int, s: int) -> None:
        pairs = congested_pairs(s, x, hosts, all_hosts) if x else []
        doc = scenario_doc("tree", pairs, p, seed=s, hosts=hosts, epochs=epochs,
                           message_bytes=size, connections=conn, name=sweep)
        params = {"size_bytes": size, "p": p, "x": x, "connections": conn, "scenario": s}
        for react in ("off", "on"):
            points.append(make_point(sweep, params, doc, react, warmup=warmup))

    for size in sizes:
        add(size, 0, 0, max(connections), 0)  # the reference: no background flows
        for p in ps:
            for conn in connections:
                for x in xs:
                    for s in range(scenarios):
                        add(size, p, x, conn, s)
    return points


def _label(size: float) -> str:
    return f"{size / 1e6:g} MB" if size >= 1e6 else f"{size / 1e3:g} KB"


def plot_fig13(rows: Sequence[Mapping[str, Any]], path: Path, *, sizes: Sequence[float],
               ps: Sequence[int], xs: Sequence[int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(sizes), len(ps), figsize=(5.2 * len(ps), 3.4 * len(sizes)),
                             squeeze=False)
    for i, size in enumerate(sizes):
        ref = [r for r in rows if r["size_bytes"] == size and r["x"] == 0]
        for j, p in enumerate(ps):
            ax = axes[i][j]
            for conn, (colour, name) in STYLE.items():
                for side, dash, tag in (("off", "-", "tree"), ("on", "--", "tree + REACT")):
                    ys = []
                    for x in xs:
                        sel = [r[f"p95_{side}_s"] for r in rows if r["size_bytes"] == size
                               and r["p"] == p and r["x"] == x and r["connections"] == conn]
                        ys.append(1e3 * float(np.mean(sel)) if sel else np.nan)
                    if not np.all(np.isnan(ys)):
                        ax.plot(xs, ys, dash, marker="o" if side == "off" else "s",
                                color=colour, ms=4, label=f"{name}, {tag}")
            if ref:
                ax.axhline(1e3 * ref[0]["p95_off_s"], color="grey", ls=":",
                           label="no background flows (8-way ECMP)")
            ax.set_xticks(list(xs))
            ax.set_xlabel("congested (src, dst) pairs")
            ax.set_ylabel("p95 collective time (ms)")
            ax.set_title(f"8-rank tree AllReduce, {_label(size)}, p = {p}")
            ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.suptitle("Fig. 13: k=8 fat-tree, p95 collective time over epochs 25-99 (mean of "
                 "scenarios)")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per size, p and ECMP: mean p95 off/on (ms) over all x, and the mean p95 reduction."""
    lines = [f"{'size':>7} {'p':>2} {'conn':>4} {'n':>3} {'p95 off ms':>10} {'p95 on ms':>9} "
             f"{'p95 speedup':>11} {'max':>6}"]
    for size in sorted({r["size_bytes"] for r in rows}, reverse=True):
        for p in sorted({r["p"] for r in rows}):
            for conn in sorted({r["connections"] for r in rows}):
                sel = [r for r in rows if r["size_bytes"] == size and r["p"] == p
                       and r["connections"] == conn]
                if not sel:
                    continue
                off = np.array([r["p95_off_s"] for r in sel])
                on = np.array([r["p95_on_s"] for r in sel])
                ratio = off / on
                lines.append(f"{_label(size):>7} {p:>2} {conn:>4} {len(sel):>3} "
                             f"{1e3 * off.mean():>10.3f} {1e3 * on.mean():>9.3f} "
                             f"{ratio.mean():>11.3f} {ratio.max():>6.2f}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.fig13",
        description="Paper Fig. 13: p95 collective time of the 8-rank tree AllReduce vs the "
                    "number of congested pairs, for no ECMP, 4- and 8-way ECMP, three message "
                    "sizes and p = 1, 4, with and without REACT.")
    parser.add_argument("--quick", action="store_true",
                        help="tiny smoke run: 2 MB, p = 4, x = 2, 1 and 4 connections, 13 epochs")
    parser.add_argument("--scenarios", type=int, default=5, help="random scenarios per point")
    parser.add_argument("--sizes", nargs="+", type=float, default=list(SIZES))
    parser.add_argument("--p", nargs="+", type=int, default=[1, 4], dest="ps")
    parser.add_argument("--x", nargs="+", type=int, default=[1, 2, 4, 8], dest="xs")
    parser.add_argument("--connections", nargs="+", type=int, default=list(CONNECTIONS))
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--store", type=Path, help="results store (default results/fig13.sqlite)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default results/, docs/results only when asked; "
                             "with --quick a new "
                             "temporary folder, so the committed files stay)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    warmup = WARMUP
    if args.quick:
        args.sizes, args.ps, args.xs, args.connections, args.scenarios, args.epochs = \
            [2e6], [4], [2], [1, 4], 1, 13
        warmup = 6
    sweep = "fig13" + ("-quick" if args.quick else "")
    if not args.quick:  # other options than the defaults: files of their own
        sweep = variant_name(
            sweep, {"s": args.scenarios, "size": args.sizes, "p": args.ps, "x": args.xs,
                    "c": args.connections, "e": args.epochs},
            {"s": 5, "size": list(SIZES), "p": [1, 4], "x": [1, 2, 4, 8],
             "c": list(CONNECTIONS), "e": 100})
    args.out, store = experiment_dirs(sweep, quick=args.quick, out=args.out, store=args.store,
                                     default_out=RESULTS,
                                     default_store=RESULTS / f"{sweep}.sqlite")
    points = fig13_points(args.sizes, args.ps, args.xs, args.connections, args.scenarios,
                          epochs=args.epochs, sweep=sweep, warmup=warmup)
    runs, timing = run_points(points, store, workers=args.workers,
                              progress=not args.no_progress)
    rows = sorted(paired_rows(runs), key=lambda r: (-r["size_bytes"], r["p"],
                                                     r["connections"], r["x"], r["scenario"]))
    write_csv(args.out / f"{sweep}.csv", rows)
    plot_fig13(rows, args.out / f"{sweep}.png", sizes=args.sizes, ps=args.ps, xs=args.xs)
    for line in summary_lines([r for r in rows if r["x"] > 0]):
        print(line)
    print(f"{int(timing['runs'])} runs ({int(timing['ran'])} run now) in {timing['wall_s']:.1f} s "
          f"wall, {timing['cpu_s']:.1f} s CPU; mean {timing['run_mean_s']:.3f} s per run "
          f"-> {store}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
