"""Fig. 12 (appendix C.2): REACT on a star with external congested flows.

An 8-rank dual binary tree AllReduce of 20 MB runs on a 16-host star (ranks on h0..h7, one
100 Gb/s link per host, so every pair has exactly one path), 100 epochs, mean algorithm bandwidth
after epoch 25. ``x`` congested (source, destination) pairs each carry ``p`` long-lived external
flows; for every x and every scenario seed the x ranks and the x external hosts (h8..h15) are drawn
at random, the same draw for every p so that the p bars compare like with like. By default the
external flows go *into* the ranks (as in §4.3 and the closed-loop tests: they take a rank's
downlink from the flows it aggregates); ``--direction out`` sends them from the ranks instead
(the paper's Fig. 5 text draws the sources among the collective's nodes).

Every scenario runs without and with REACT (same seeds); results go to a resumable SQLite store.

    python experiments/fig12.py            # full: x in 1,2,4,8, p in 1,2,4, 10 seeds (~3 min)
    python experiments/fig12.py --quick    # seconds: a smoke run
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

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

FLOWS = (1, 2, 4, 8)
P_VALUES = (1, 2, 4)
RANKS = 8
HOSTS = 16


def scenario(flows: int, p: int, seed: int, *, epochs: int, direction: str = "in",
             message_bytes: float = 20e6,
             react: bool | dict[str, Any] = True) -> dict[str, Any]:
    """The scenario document of one point: ``flows`` random (rank, external host) pairs, p each;
    ``react`` is the job's ``react`` entry (a table: controller parameters)."""
    rng = np.random.default_rng([seed, flows])  # independent of p: the p bars share the draw
    ranks = rng.choice(RANKS, size=flows, replace=False)
    externals = RANKS + rng.choice(HOSTS - RANKS, size=flows, replace=False)
    background = []
    for rank, ext in zip(ranks, externals, strict=True):
        src, dst = f"h{int(ext)}", f"tree:{int(rank)}"
        if direction == "out":
            src, dst = dst, src
        background.append({"kind": "long_lived", "src": src, "dst": dst, "p": p})
    return {
        "name": f"fig12-x{flows}-p{p}-s{seed}-{direction}",
        "seed": seed,
        "connections": 1,
        "topology": {"name": "star", "n": HOSTS},
        "jobs": [{"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": RANKS,
                  "placement": "first", "message_bytes": message_bytes, "epochs": epochs,
                  "react": react}],
        "background": background,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fig12", description="Fig. 12: REACT's improvement for an 8-rank tree AllReduce on "
                                  "a star with external congested flows.")
    parser.add_argument("--quick", action="store_true",
                        help="tiny run (x in 1,2; p=2; 1 seed; 12 epochs) for smoke tests")
    parser.add_argument("--seeds", type=int, default=10, help="scenarios per point (default 10)")
    parser.add_argument("--epochs", type=int, default=100, help="epochs per run (default 100)")
    parser.add_argument("--direction", choices=("in", "out"), default="in",
                        help="external flows into the ranks (default) or out of them")
    parser.add_argument("--store", default=None,
                        help="results store (SQLite, resumable; default results/fig12.sqlite, "
                             "with --quick a temporary folder)")
    parser.add_argument("--out", "--out-dir", dest="out_dir", default=None,
                        help="where fig12.png/.csv go (default results/, docs/results only "
                             "when asked; with --quick a new "
                             "temporary folder, so the committed files stay)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    add_controller_settings(parser)
    args = parser.parse_args(argv)
    settings = controller_settings(parser, args.react_set)

    flows_values, ps, seeds, epochs, warmup = FLOWS, P_VALUES, range(args.seeds), args.epochs, 25
    if args.quick:
        flows_values, ps, seeds, epochs, warmup = (1, 2), (2,), range(1), 12, 2
    cases = [({"congested_flows": x, "p": p}, scenario(x, p, s, epochs=epochs,
                                                         direction=args.direction,
                                                         react=react_entry(settings)))
             for x in flows_values for p in ps for s in seeds]
    sweep = "fig12" + ("-quick" if args.quick else "") + ("-out" if args.direction == "out"
                                                           else "")
    stem = "fig12" if args.direction == "in" else "fig12_out"
    if not args.quick:  # other options than the defaults: files of their own
        chosen = {"s": args.seeds, "e": args.epochs, "set-": settings_label(settings)}
        defaults = {"s": 10, "e": 100, "set-": []}
        sweep, stem = variant_name(sweep, chosen, defaults), variant_name(stem, chosen, defaults)
    points = scenario_points(sweep, cases, react="both", warmup_epochs=warmup)
    out_dir, store = experiment_dirs(stem, quick=args.quick, out=args.out_dir,
                                     store=args.store, default_out=RESULTS,
                                     default_store=RESULTS / f"{stem}.sqlite")
    clock = time.perf_counter()
    run_and_plot(points, store=store, png=out_dir / f"{stem}.png",
                 csv_path=out_dir / f"{stem}.csv", x="congested_flows", series="p",
                 workers=args.workers, out=sys.stdout,
                 title="Fig. 12: 8-rank tree AllReduce, 20 MB, star, external flows "
                       f"({args.direction})",
                 xlabel="congested (source, destination) pairs")
    print(f"{len(points)} runs in {time.perf_counter() - clock:.1f} s; wrote "
          f"{out_dir / stem}.png and .csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
