"""Fig. 5: REACT's gain under random external congestion on a k=8 fat-tree (paper §7.3.1).

Setting (paper §7.3): a k=8 fat-tree (128 servers, 100 Gb/s links, 1 µs), an 8-rank job placed one
rank per pod (h0, h16, .., h112), 20 MB messages, 100 epochs, 4 ECMP connections per rank pair
re-hashed every epoch, mean algorithm bandwidth over epochs 25-99. The x-axis is the number of
congested (source, destination) pairs, ``x`` in {1, 2, 4, 8}; each pair carries ``p`` long-lived
flows, ``p`` in {1, 2, 4}; 10 random scenarios per (x, p); (a) NCCL's dual binary tree AllReduce,
(b) recursive-doubling AllGather. Every scenario runs without and with REACT on identical seeds
(same ECMP hashes, same per-epoch port choices, same background), and the plot shows the gain in
mean algorithm bandwidth, ``algbw_on / algbw_off - 1``.

Which way the external flows go. §7.1 defines the congestion model as flows "from nodes that are
not participating in the collective into one or more nodes that participate"; §7.3.1 says the
sources are drawn "from nodes participating in collective" and the destinations among "the
remaining nodes". We follow §7.1 by default (``--direction in``: a random non-participating host
sends into a random rank): it is the paper's definition of congestion degree, the one its testbed
(§7.2) and worked example (§4.3) use, and the one the rest of this project's scenarios use. The
§7.3.1 reading is one flag away (``--direction out``: the rank sends to a random outside host).
By default the ranks sit one per pod (``--placement spread``), so every rank pair is equally far
apart; ``--placement random`` draws 8 random hosts per scenario instead, which gives swaps path
lengths to shorten (the paper's explanation of recursive doubling's gains). Either way the ``x``
congested ranks are distinct (so at x = 8 every rank is congested, as the
paper's note on Fig. 5 says) and so are the ``x`` outside hosts. A scenario's pairs depend on its
seed and ``x`` only, so the three values of ``p`` congest the same pairs.

Runs go through the sweep machinery (:func:`react.run.sweep.execute` into a :mod:`react.run.store`
SQLite file), so an interrupted run resumes where it stopped. The helpers here (:func:`make_point`,
:func:`run_points`, :func:`paired_rows`) are shared by the Fig. 13 and Table 2 scripts.

Run::

    python -m experiments.fig5            # full: 480 runs, writes results/ fig5.{png,csv}
    python -m experiments.fig5 --quick    # seconds: a handful of short runs
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a file: make `experiments` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from react.commands.argtypes import (
    add_controller_settings,
    controller_settings,
    react_entry,
    settings_label,
)
from react.run.outdir import experiment_dirs, variant_name
from react.run.store import ResultStore, RunRecord
from react.run.sweep import DEFAULT_RUNNER, Point, code_version, execute

COLLECTIVES = {"tree": "allreduce_double_binary_tree", "rd": "allgather_recursive_doubling"}
"""Short names used in parameters and plots -> pattern generators."""

TITLES = {"tree": "(a) dual binary tree AllReduce", "rd": "(b) recursive-doubling AllGather"}

K = 8
RANKS = 8
WARMUP = 25
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
"""Where a full run writes (``--out docs/results`` regenerates the committed files)."""


# -- scenarios -------------------------------------------------------------------------------------
def spread_hosts(k: int = K, ranks: int = RANKS) -> list[str]:
    """One rank per pod of a k-ary fat-tree: h0, h(hosts/ranks), .. (``placement = "spread"``)."""
    hosts = k ** 3 // 4
    return [f"h{i * (hosts // ranks)}" for i in range(ranks)]


def congested_pairs(seed: int, x: int, rank_hosts: Sequence[str], all_hosts: Sequence[str],
                    direction: str = "in") -> list[tuple[str, str]]:
    """``x`` (src, dst) pairs: distinct ranks, each paired with a distinct outside host.

    The draw depends on ``seed`` and ``x`` only, so every ``p`` congests the same pairs.
    ``direction="in"``: outside host -> rank (§7.1); ``"out"``: rank -> outside host (§7.3.1).
    """
    if direction not in ("in", "out"):
        raise ValueError(f"congested_pairs: direction must be 'in' or 'out', got {direction!r}")
    if not 1 <= x <= len(rank_hosts):
        raise ValueError(f"congested_pairs: x must be in 1..{len(rank_hosts)}, got {x}")
    rng = np.random.default_rng([seed, x])
    ranks = [rank_hosts[i] for i in rng.choice(len(rank_hosts), size=x, replace=False)]
    outside = [h for h in all_hosts if h not in set(rank_hosts)]
    others = [outside[i] for i in rng.choice(len(outside), size=x, replace=False)]
    if direction == "in":
        return list(zip(others, ranks, strict=True))
    return list(zip(ranks, others, strict=True))


def scenario_doc(collective: str, pairs: Sequence[tuple[str, str]], p: int, *, seed: int,
                 hosts: Sequence[str], epochs: int = 100, message_bytes: float = 20e6,
                 connections: int = 4, k: int = K, name: str = "fig5",
                 react: bool | Mapping[str, Any] = True) -> dict[str, Any]:
    """A scenario document (the TOML format of :mod:`react.run.scenario`) for one point;
    ``react`` is the job's ``react`` entry (a table: controller parameters)."""
    return {
        "name": name,
        "seed": seed,
        "connections": connections,
        "topology": {"name": "fat_tree", "k": k},
        "jobs": [{
            "name": "job",
            "collective": COLLECTIVES.get(collective, collective),
            "ranks": len(hosts),
            "placement": list(hosts),
            "message_bytes": float(message_bytes),
            "epochs": epochs,
            "react": react if isinstance(react, bool) else dict(react),
        }],
        "background": [{"kind": "long_lived", "src": s, "dst": d, "p": p}
                       for s, d in pairs if p > 0],
    }


# -- running through the sweep machinery -----------------------------------------------------------
def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def make_point(sweep: str, params: Mapping[str, Any], doc: Mapping[str, Any], react: str,
               *, warmup: int = WARMUP, runner: str = DEFAULT_RUNNER) -> Point:
    """A :class:`react.run.sweep.Point` for a generated scenario (the same hashing rule as a spec:
    the on and off runs of one scenario share ``pair_key``)."""
    pair = {"scenario": doc, "seed": doc["seed"], "warmup_epochs": warmup, "runner": runner}
    return Point(_digest({**pair, "react": react}), _digest(pair), sweep, dict(params), doc,
                 str(ROOT), int(doc["seed"]), react, warmup, runner)


def run_points(points: Sequence[Point], store_path: Path, *, workers: int = 1,
               progress: bool = True) -> tuple[list[RunRecord], dict[str, float]]:
    """Run the points the store lacks; return the sweep's stored runs and timing figures.

    Timing: ``wall_s`` and ``cpu_s`` of this call (``cpu_s`` is this process's CPU time: all
    of it with one worker, which runs in this process), ``ran`` (runs executed now) and
    ``run_mean_s`` (mean wall duration of the sweep's stored runs, as each worker measured it).
    """
    store_path.parent.mkdir(parents=True, exist_ok=True)
    sweep = points[0].sweep
    clock, cpu = time.perf_counter(), time.process_time()
    with ResultStore(store_path) as store:
        summary = execute(points, store, workers=workers, progress=progress,
                          version=code_version())
        wanted = {p.key for p in points}
        runs = [r for r in store.runs(sweep=sweep) if r.point_key in wanted]
    wall, cpu = time.perf_counter() - clock, time.process_time() - cpu
    if summary.failed:
        first = summary.failures[0]
        raise RuntimeError(f"{summary.failed} runs failed; first: {first.params}: {first.error}")
    if not summary.complete:
        raise KeyboardInterrupt
    durations = [r.duration_s for r in runs]
    return runs, {"wall_s": wall, "cpu_s": cpu, "ran": float(summary.ok),
                  "runs": float(len(runs)),
                  "run_mean_s": float(np.mean(durations)) if durations else 0.0,
                  "run_sum_s": float(np.sum(durations))}


def paired_rows(runs: Sequence[RunRecord], job: str = "job") -> list[dict[str, Any]]:
    """One row per scenario: its parameters, the off and on metrics of ``job``, the gain."""
    sides: dict[str, dict[str, RunRecord]] = {}
    for run in runs:
        sides.setdefault(run.pair_key, {})[run.react] = run
    rows = []
    for pair in sides.values():
        off, on = pair.get("off"), pair.get("on")
        if off is None or on is None or off.metrics is None or on.metrics is None:
            continue
        a, b = off.metrics[job], on.metrics[job]
        rows.append({
            **off.params,
            "algbw_off_gbps": a["mean_algbw_gbps"],
            "algbw_on_gbps": b["mean_algbw_gbps"],
            "algbw_gain": b["mean_algbw_gbps"] / a["mean_algbw_gbps"] - 1.0,
            "mean_off_s": a["mean_time_s"],
            "mean_on_s": b["mean_time_s"],
            "p95_off_s": a["p95_time_s"],
            "p95_on_s": b["p95_time_s"],
            "decisions": b["decisions"],
            "pattern_changes": b["pattern_changes"],
            "settled_epoch": b["settled_epoch"],
        })
    return rows


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: list[str] = []
    for row in rows:
        fields.extend(k for k in row if k not in fields)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v)
                             for k, v in row.items()})


# -- Fig. 5 ----------------------------------------------------------------------------------------
def random_hosts(seed: int, k: int = K, ranks: int = RANKS) -> list[str]:
    """``ranks`` distinct hosts of a k-ary fat-tree drawn with ``seed`` (rank i on the i-th)."""
    rng = np.random.default_rng([seed, 1000 + ranks])
    return [f"h{i}" for i in rng.choice(k ** 3 // 4, size=ranks, replace=False)]


def fig5_points(collectives: Iterable[str], xs: Iterable[int], ps: Iterable[int],
                scenarios: int, *, epochs: int, direction: str, sweep: str,
                warmup: int = WARMUP, placement: str = "spread",
                react_value: bool | Mapping[str, Any] = True) -> list[Point]:
    """The off and on points of every scenario; ``react_value`` is the job's ``react`` entry
    in the scenario (a table: controller parameters, ``--react-set``)."""
    all_hosts = [f"h{i}" for i in range(K ** 3 // 4)]
    points = []
    for coll in collectives:
        for x in xs:
            for p in ps:
                for s in range(scenarios):
                    hosts = spread_hosts() if placement == "spread" else random_hosts(s)
                    pairs = congested_pairs(s, x, hosts, all_hosts, direction)
                    doc = scenario_doc(coll, pairs, p, seed=s, hosts=hosts, epochs=epochs,
                                       name=sweep, react=react_value)
                    params = {"collective": coll, "x": x, "p": p, "scenario": s,
                              "direction": direction}
                    if placement != "spread":  # (spread runs stored before this key existed)
                        params["placement"] = placement
                    for react in ("off", "on"):
                        points.append(make_point(sweep, params, doc, react, warmup=warmup))
    return points


def variant_title(direction: str = "in", placement: str = "spread", epochs: int = 100,
                  warmup: int = WARMUP) -> str:
    """The figure's title: the setting, and which of the three variants it is (the flows'
    direction and the ranks' placement), so that the three pictures cannot be confused."""
    flows = ("external flows into the ranks" if direction == "in"
             else "flows out of the ranks (section 7.3.1)")
    where = "one rank per pod" if placement == "spread" else "8 random hosts per scenario"
    return (f"Fig. 5: k=8 fat-tree, 8 ranks, 20 MB, 4-way ECMP, epochs {warmup}-{epochs - 1}\n"
            f"{flows}, {where}")


def plot_fig5(rows: Sequence[Mapping[str, Any]], path: Path, *, xs: Sequence[int],
              ps: Sequence[int], title: str | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colls = [c for c in COLLECTIVES if any(r["collective"] == c for r in rows)]
    fig, axes = plt.subplots(1, len(colls), figsize=(6.2 * len(colls), 4.2), squeeze=False)
    colours = {1: "tab:blue", 2: "tab:orange", 4: "tab:green"}
    width = 0.8 / len(ps)
    for ax, coll in zip(axes[0], colls, strict=True):
        for j, p in enumerate(ps):
            data, pos = [], []
            for i, x in enumerate(xs):
                gains = [100 * r["algbw_gain"] for r in rows
                         if r["collective"] == coll and r["x"] == x and r["p"] == p]
                if gains:
                    data.append(gains)
                    pos.append(i + (j - (len(ps) - 1) / 2) * width)
            if not data:
                continue
            colour = colours.get(p, f"C{j}")
            ax.boxplot(data, positions=pos, widths=width * 0.85, patch_artist=True,
                       showfliers=False, boxprops={"facecolor": colour, "alpha": 0.35},
                       medianprops={"color": colour})
            for xpos, gains in zip(pos, data, strict=True):
                ax.scatter(np.full(len(gains), xpos), gains, s=9, color=colour, zorder=3)
            ax.plot([], [], color=colour, lw=6, alpha=0.5, label=f"p = {p}")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks(range(len(xs)), [str(x) for x in xs])
        ax.set_xlabel("congested (src, dst) pairs")
        ax.set_ylabel("mean algbw improvement with REACT (%)")
        ax.set_title(TITLES[coll])
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="upper left")
    fig.suptitle(title or variant_title())
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def summary_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per collective and p: mean, median and max gain; pattern changes; settle epoch."""
    lines = [f"{'coll':<5} {'p':>2} {'n':>3} {'mean gain':>9} {'median':>7} {'max':>7} "
             f"{'min':>7} {'changes':>7} {'settled':>7}"]
    for coll in COLLECTIVES:
        for p in sorted({r["p"] for r in rows}):
            sel = [r for r in rows if r["collective"] == coll and r["p"] == p]
            if not sel:
                continue
            g = np.array([r["algbw_gain"] for r in sel]) * 100
            ch = np.mean([r["pattern_changes"] for r in sel])
            se = np.mean([r["settled_epoch"] for r in sel])
            lines.append(f"{coll:<5} {p:>2} {len(sel):>3} {g.mean():>8.1f}% {np.median(g):>6.1f}%"
                         f" {g.max():>6.1f}% {g.min():>6.1f}% {ch:>7.1f} {se:>7.1f}")
        sel = [r for r in rows if r["collective"] == coll]
        if sel:
            g = np.array([r["algbw_gain"] for r in sel]) * 100
            lines.append(f"{coll:<5} {'all':>2} {len(sel):>3} {g.mean():>8.1f}%")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.fig5",
        description="Paper Fig. 5: REACT's algorithm-bandwidth gain vs the number of congested "
                    "(src, dst) pairs and flows per pair, k=8 fat-tree, tree AllReduce and RD "
                    "AllGather, with and without REACT on identical seeds.")
    parser.add_argument("--quick", action="store_true",
                        help="tiny smoke run: tree only, x in {1, 4}, p = 2, 1 scenario, 13 "
                             "epochs")
    parser.add_argument("--scenarios", type=int, default=10, help="random scenarios per point")
    parser.add_argument("--collectives", nargs="+", choices=list(COLLECTIVES),
                        default=list(COLLECTIVES))
    parser.add_argument("--x", nargs="+", type=int, default=[1, 2, 4, 8], dest="xs",
                        help="congested pair counts")
    parser.add_argument("--p", nargs="+", type=int, default=[1, 2, 4], dest="ps",
                        help="long-lived flows per pair")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--direction", choices=("in", "out"), default="in",
                        help="in: outside host -> rank (§7.1, default); out: rank -> outside "
                             "host (§7.3.1)")
    parser.add_argument("--placement", choices=("spread", "random"), default="spread",
                        help="spread: one rank per pod (default); random: 8 random hosts per "
                             "scenario")
    parser.add_argument("--store", type=Path, help="results store (default results/fig5.sqlite)")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for fig5.png and fig5.csv (default results/, docs/results "
                             "only when asked; with "
                             "--quick a new temporary folder, so the committed files stay)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true")
    add_controller_settings(parser)
    args = parser.parse_args(argv)
    settings = controller_settings(parser, args.react_set)
    warmup = WARMUP
    if args.quick:
        args.collectives, args.xs, args.ps, args.scenarios, args.epochs = ["tree"], [1, 4], [2], \
            1, 13
        warmup = 6
    sweep = ("fig5" + ("-quick" if args.quick else "")
             + ("-out" if args.direction == "out" else "")
             + ("-random" if args.placement == "random" else ""))
    if not args.quick:  # other options than the defaults: a file of their own
        sweep = variant_name(sweep, {"c": args.collectives, "x": args.xs, "p": args.ps,
                                     "s": args.scenarios, "e": args.epochs,
                                     "set-": settings_label(settings)},
                             {"c": list(COLLECTIVES), "x": [1, 2, 4, 8], "p": [1, 2, 4],
                              "s": 10, "e": 100, "set-": []})
    args.out, store = experiment_dirs(sweep, quick=args.quick, out=args.out, store=args.store,
                                     default_out=RESULTS,
                                     default_store=RESULTS / f"{sweep}.sqlite")
    points = fig5_points(args.collectives, args.xs, args.ps, args.scenarios, epochs=args.epochs,
                         direction=args.direction, sweep=sweep, warmup=warmup,
                         placement=args.placement,
                         react_value=react_entry(settings))
    runs, timing = run_points(points, store, workers=args.workers,
                              progress=not args.no_progress)
    rows = sorted(paired_rows(runs), key=lambda r: (list(COLLECTIVES).index(r["collective"]),
                                                     r["x"], r["p"], r["scenario"]))
    write_csv(args.out / f"{sweep}.csv", rows)
    plot_fig5(rows, args.out / f"{sweep}.png", xs=args.xs, ps=args.ps,
              title=variant_title(args.direction, args.placement, args.epochs, warmup))
    for line in summary_lines(rows):
        print(line)
    print(f"{int(timing['runs'])} runs ({int(timing['ran'])} run now) in {timing['wall_s']:.1f} s "
          f"wall, {timing['cpu_s']:.1f} s CPU; mean {timing['run_mean_s']:.3f} s per run, sum "
          f"{timing['run_sum_s']:.1f} s -> {store}")
    print(f"wrote {args.out / f'{sweep}.csv'} and {args.out / f'{sweep}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
