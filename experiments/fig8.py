"""Fig. 8 (§7.3.4): REACT under partial link failures on the k=8 fat-tree.

An 8-rank dual binary tree AllReduce of 20 MB on a k=8 fat-tree (128 hosts, ranks one per pod:
h0, h16, .., h112), 4 ECMP connections per rank pair with one picked at random every epoch,
100 epochs, mean algorithm bandwidth after epoch 25. No other traffic: 1 to 4 directed links are
degraded to 30, 50 or 80 Gb/s from time 0.

Which links fail: the paper draws them "anywhere in the three layers". Most links of a 128-host
fat-tree carry none of an 8-rank job's traffic, and a failure there changes nothing with or
without REACT, so we draw only among the links the job can actually use: every link on the
ECMP path of any ordered pair of rank hosts on any of its 4 ports (host-edge, edge-agg and
agg-core links alike; 300-odd directed links). A swap changes which pairs talk, so any of these
paths may carry a flow at some point. The draw depends on (seed, number of failed links) only,
so the three capacities degrade the same links.

    python experiments/fig8.py             # full: 1..4 links x 30/50/80 Gb/s x 10 seeds (~3 min)
    python experiments/fig8.py --quick     # seconds: a smoke run
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flowsim.routing import Router
from flowsim.topologies import fat_tree
from react.commands.argtypes import (
    add_controller_settings,
    controller_settings,
    react_entry,
    settings_label,
)
from react.control.controller import CONCURRENCY_MODES, ControllerConfig
from react.run.outdir import experiment_dirs, variant_name
from react.run.sweep import scenario_points
from react.show.plots import run_and_plot

RESULTS = Path(__file__).resolve().parents[1] / "results"
"""Where a full run writes (``--out docs/results`` regenerates the committed files)."""

FAILED = (1, 2, 3, 4)
CAPACITIES_GBPS = (30, 50, 80)
K = 8
RANKS = 8
CONNECTIONS = 4
DEFAULT_CONCURRENCY = ControllerConfig().concurrency


def rank_hosts(k: int = K, ranks: int = RANKS) -> list[str]:
    """The scenario's ``spread`` placement: rank i on h{i * hosts // ranks}."""
    hosts = k ** 3 // 4
    return [f"h{i * hosts // ranks}" for i in range(ranks)]


def candidate_links(seed: int, *, k: int = K) -> list[str]:
    """Links (``"src->dst"``) on the ECMP path of any ordered rank pair on any of its ports,
    as the network seeded with ``seed`` routes them; sorted, so draws are reproducible."""
    topo = fat_tree(k)
    router = Router(topo, seed=seed)
    hosts = rank_hosts(k)
    used: set[int] = set()
    for a in hosts:
        for b in hosts:
            if a != b:
                for port in range(CONNECTIONS):
                    used.update(router.route(a, b, port))
    return sorted(f"{topo.links[i].src}->{topo.links[i].dst}" for i in used)


def scenario(failed: int, capacity_gbps: float, seed: int, *, epochs: int,
             candidates: Sequence[str] | None = None,
             concurrency: str = "", settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One point: ``failed`` links drawn among the job's usable links, at ``capacity_gbps``;
    ``concurrency`` is the controller's (react.control.controller.ControllerConfig; empty: its
    default), ``settings`` more controller parameters (``--react-set``)."""
    links = list(candidates) if candidates is not None else candidate_links(seed)
    rng = np.random.default_rng([seed, failed])  # independent of the capacity
    chosen = [links[int(i)] for i in rng.choice(len(links), size=failed, replace=False)]
    return {
        "name": f"fig8-f{failed}-c{capacity_gbps}-s{seed}",
        "seed": seed,
        "connections": CONNECTIONS,
        "topology": {"name": "fat_tree", "k": K},
        "jobs": [{"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": RANKS,
                  "placement": "spread", "message_bytes": 20e6, "epochs": epochs,
                  # The default as plain true, so that stored runs keep their keys; the other
                  # estimates as they were recorded, without the default's search slack.
                  "react": react_entry(settings or {}) if concurrency in
                  ("", DEFAULT_CONCURRENCY) else
                  {"concurrency": concurrency, "search_slack": 0.0, **(settings or {})}}],
        "failures": [{"link": link, "capacity_bps": capacity_gbps * 1e9, "at_s": 0.0}
                     for link in chosen],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fig8", description="Fig. 8: REACT's improvement for an 8-rank tree AllReduce on a "
                                 "k=8 fat-tree with partially failed links.")
    parser.add_argument("--quick", action="store_true",
                        help="tiny run (1 and 2 links at 30 Gb/s, 1 seed, 12 epochs)")
    parser.add_argument("--seeds", type=int, default=5, help="scenarios per point (default 5)")
    parser.add_argument("--epochs", type=int, default=100, help="epochs per run (default 100)")
    parser.add_argument("--store", default=None,
                        help="results store (SQLite, resumable; default results/fig8.sqlite, "
                             "with --quick a temporary folder)")
    parser.add_argument("--out", "--out-dir", dest="out_dir", default=None,
                        help="where fig8.png/.csv go (default results/, docs/results only when "
                             "asked; with --quick a new "
                             "temporary folder, so the committed files stay)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--concurrency", choices=CONCURRENCY_MODES,
                        default=DEFAULT_CONCURRENCY,
                        help="the controller's estimate: flows share links with those that "
                             "overlap them in time (schedule, default), with those of their "
                             "step (step, the paper's), or the second checked by the first "
                             "(checked); the other two without search slack; "
                             "docs/deviations.md; not the default: files of their own")
    add_controller_settings(parser)
    args = parser.parse_args(argv)
    settings = controller_settings(parser, args.react_set)

    failed, caps, seeds, epochs, warmup = FAILED, CAPACITIES_GBPS, range(args.seeds), \
        args.epochs, 25
    if args.quick:
        failed, caps, seeds, epochs, warmup = (1, 2), (30,), range(1), 12, 2
    candidates = {s: candidate_links(s) for s in seeds}
    cases = [({"failed_links": n, "capacity_gbps": c},
              scenario(n, c, s, epochs=epochs, candidates=candidates[s],
                       concurrency=args.concurrency, settings=settings))
             for n in failed for c in caps for s in seeds]
    stem = "fig8" + ("-quick" if args.quick else "")
    if not args.quick:  # other options than the defaults: files of their own
        stem = variant_name(stem, {"s": args.seeds, "e": args.epochs, "c": args.concurrency,
                                   "set-": settings_label(settings)},
                            {"s": 5, "e": 100, "c": DEFAULT_CONCURRENCY, "set-": []})
    points = scenario_points(stem, cases, react="both", warmup_epochs=warmup)
    out_dir, store = experiment_dirs(stem, quick=args.quick, out=args.out_dir,
                                     store=args.store, default_out=RESULTS,
                                     default_store=RESULTS / f"{stem}.sqlite")
    clock = time.perf_counter()
    run_and_plot(points, store=store, png=out_dir / f"{stem}.png",
                 csv_path=out_dir / f"{stem}.csv", x="failed_links", series="capacity_gbps",
                 workers=args.workers, out=sys.stdout,
                 title="Fig. 8: 8-rank tree AllReduce, 20 MB, k=8 fat-tree, 4-way ECMP,\n"
                       "partial link failures",
                 xlabel="failed links", series_format="links at {} Gb/s")
    print(f"{len(points)} runs in {time.perf_counter() - clock:.1f} s "
          f"({len(candidates[seeds[0]])} candidate links for seed {seeds[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
