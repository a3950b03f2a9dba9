"""Fit the TCP-aware sharing mode (flowsim.tcp) to ns-3, and compare both modes with it.

Two steps, so that the fit can be checked without ns-3:

``--measure OUT.csv`` (needs the optional ns-3 package; about 10 minutes on two idle cores) runs
the reference cases on the ns-3 backend and writes them to OUT.csv (the committed file is
``docs/results/ns3_reference.csv``; a script writes into docs/ only when asked): per case the
collective time (or, for the single-flow cases, the flow completion time; for two flows started
together, when the later ends) and the wall time of the ns-3 epoch (its simulator's run only),
beside flowsim's in both sharing modes, measured in the same run: per epoch of a 10-epoch run
(the network built before the clock starts, like ns-3's) and, for reference, a whole one-epoch
run with the scenario parsed and the network built. The cases: the star tree
(p = 0, 1, 2, 4 long-lived flows, and p = 2 from one host), a pair of ranks exchanging 1 MB or
16 MB both ways, a leaf-spine tree with ECMP (p = 0, 1, 2), and leaf-spine cases that isolate
its flows: two flows from or into one host, within a leaf or across a spine, and one flow
alone or beside long-lived flows (:data:`CASES`).

The fit (always) reads that file and fits :class:`flowsim.tcp.TcpModel`:

- ``goodput`` is not fitted but derived: 1448 payload bytes per 1502 on the wire (TCP with
  timestamps, IPv4, PPP);
- ``startup_s`` (whole microseconds, 0-100) and ``reverse_share`` (steps of 0.01, 0.5-1)
  together, with the other corrections off, on the cases without long-lived flows or flows of
  different round trips: the pair of ranks exchanging 1 MB and 16 MB both ways at once and the
  star tree at p = 0. For each start-up, the share that minimises the larger error on the two
  pair cases (the only ones where the cap binds); then the start-up whose (start-up, share)
  minimises the largest error on all three;
- the five parameters of sharing between flows of different round trips and ages
  (``rtt_exponent``, ``ramp_segments``, ``young_weight``, ``young_s``, ``long_lived_extra``)
  together: the combination of :data:`GRID` with the least largest relative error on
  :data:`FIT_SHARING` (the star trees with long-lived flows, the leaf-spine trees at p = 0 and
  1 and the isolating leaf-spine cases).

The other cases are validation only: the star tree at p = 2 from one host and the leaf-spine
tree at p = 2, of 4 MB and of 20 MB.

It prints the fitted values beside :data:`flowsim.tcp.FITTED` (which must be these values) and
a table of every case on ns-3, exact max-min and the TCP-aware mode with the relative errors
and how much faster each flowsim mode was than ns-3; ``--out`` also writes that table as CSV.

    python3 -m experiments.fit_tcp --measure results/ns3_reference.csv   # ns-3 runs, then the fit
    python3 -m experiments.fit_tcp              # the fit and the table, from the committed file
"""

from __future__ import annotations

import argparse
import csv
import gc
import itertools
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

REFERENCE_CSV = Path(__file__).resolve().parents[1] / "docs" / "results" / "ns3_reference.csv"
LINK_BPS = 100e9
LATENCY_S = 2e-6


@dataclass(frozen=True, slots=True)
class Case:
    """One reference case: a scenario document and what its number means."""

    name: str
    kind: str  # "single": FCT of the epoch's first flow; "collective": the collective time;
    #            "last": when the last flow of the jobs' first epochs ended (they start together)
    doc: dict[str, Any]
    size_bytes: float = 0.0  # single-flow cases: bytes of that flow


def _star_tree(p: int, *, sources: int | None = None) -> dict[str, Any]:
    """8-rank dual tree, 20 MB, 100G star with 2 µs links, p long-lived flows into rank 3 from
    ``sources`` other hosts (p by default: one flow each)."""
    sources = p if sources is None else sources
    per = [p // sources + (k < p % sources) for k in range(sources)] if sources else []
    return {
        "seed": 0, "connections": 1,
        "topology": {"name": "star", "n": 8 + max(sources, 1), "latency_s": LATENCY_S},
        "jobs": [{"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": 8,
                  "message_bytes": 20e6, "epochs": 1}],
        "background": [{"kind": "long_lived", "src": f"h{8 + k}", "dst": "tree:3", "p": n}
                       for k, n in enumerate(per)],
    }


def _single(size_bytes: float) -> dict[str, Any]:
    """A 2-rank ring AllReduce: each step one flow each way (independent: full duplex)."""
    return {
        "seed": 0, "connections": 1,
        "topology": {"name": "star", "n": 2, "latency_s": LATENCY_S},
        "jobs": [{"name": "pair", "collective": "allreduce_ring", "ranks": 2,
                  "message_bytes": 2 * size_bytes, "epochs": 1}],
    }


LEAF_SPINE = {"name": "leaf_spine", "leaves": 4, "spines": 2, "hosts_per_leaf": 5}
"""4 leaves x 2 spines, 5 hosts per leaf (h0-h4 under leaf0, ...), 100G, 1 µs links: 2.5:1
oversubscribed; a path within a leaf has 2 links, one across a spine 4."""


def _leaf_spine(background: Sequence[str] = ("h18", "h19"), *,
                message_bytes: float = 4e6) -> dict[str, Any]:
    """16-rank dual tree, 4 MB, on :data:`LEAF_SPINE` (ranks on h0-h15), four ECMP connections
    per pair, a long-lived flow into rank 3 (h3, leaf 0) from each of ``background`` (leaf 3)."""
    return {
        "seed": 1, "connections": 4, "topology": dict(LEAF_SPINE),
        "jobs": [{"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": 16,
                  "message_bytes": message_bytes, "epochs": 1}],
        "background": [{"kind": "long_lived", "src": h, "dst": "tree:3"} for h in background],
    }


def _leaf_spine_flows(flows: Sequence[tuple[str, str]], size_bytes: float,
                      background: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """One flow of ``size_bytes`` per ``(src, dst)`` of ``flows`` on :data:`LEAF_SPINE`, all
    starting together (each a 2-rank broadcast job of its own, one connection: the ECMP seed
    sends every flow and every long-lived ``background`` flow here across spine 0)."""
    return {
        "seed": 1, "connections": 1, "topology": dict(LEAF_SPINE),
        "jobs": [{"name": f"f{k}", "collective": "broadcast_binary_tree", "ranks": 2,
                  "placement": [src, dst], "message_bytes": size_bytes, "epochs": 1}
                 for k, (src, dst) in enumerate(flows)],
        "background": [{"kind": "long_lived", "src": src, "dst": dst}
                       for src, dst in background],
    }


INTO_H3 = (("h18", "h3"), ("h19", "h3"))
CASES: tuple[Case, ...] = (
    Case("pair-1MB", "single", _single(1e6), 1e6),
    Case("pair-16MB", "single", _single(16e6), 16e6),
    *(Case(f"star-tree-p{p}", "collective", _star_tree(p)) for p in (0, 1, 2, 4)),
    Case("star-tree-p2-one-source", "collective", _star_tree(2, sources=1)),
    Case("leaf-spine-tree-p2", "collective", _leaf_spine()),
    # the same tree without the long-lived flows and with one
    Case("leaf-spine-tree-p0", "collective", _leaf_spine(())),
    Case("leaf-spine-tree-p1", "collective", _leaf_spine(("h18",))),
    # the tree at p = 2 with the paper's 20 MB (validation beyond the 2-16 MB flows fitted on)
    Case("leaf-spine-tree-p2-20MB", "collective", _leaf_spine(message_bytes=20e6)),
    # two 2 MB flows from one host or into one host: within a leaf or across a spine
    Case("ls-out-leaf-spine", "last", _leaf_spine_flows((("h0", "h1"), ("h0", "h5")), 2e6)),
    Case("ls-in-leaf-spine", "last", _leaf_spine_flows((("h1", "h0"), ("h5", "h0")), 2e6)),
    Case("ls-out-leaf-leaf", "last", _leaf_spine_flows((("h0", "h1"), ("h0", "h2")), 2e6)),
    Case("ls-out-spine-spine", "last", _leaf_spine_flows((("h0", "h5"), ("h0", "h10")), 2e6)),
    # one 16 MB flow (2 MB: -2MB) alone or beside long-lived flows (from leaf 3 into h3)
    Case("ls-lone-spine", "single", _leaf_spine_flows((("h5", "h3"),), 16e6), 16e6),
    Case("ls-spine-bg2", "single", _leaf_spine_flows((("h5", "h3"),), 16e6, INTO_H3), 16e6),
    Case("ls-leaf-bg2", "single", _leaf_spine_flows((("h1", "h3"),), 16e6, INTO_H3), 16e6),
    Case("ls-spine-bg1", "single", _leaf_spine_flows((("h5", "h3"),), 16e6, INTO_H3[:1]),
         16e6),
    Case("ls-leaf-bg1", "single", _leaf_spine_flows((("h1", "h3"),), 16e6, INTO_H3[:1]),
         16e6),
    Case("ls-uplink-bg1", "single", _leaf_spine_flows((("h15", "h7"),), 16e6, INTO_H3[:1]),
         16e6),
    Case("ls-uplink-bg1-2MB", "single", _leaf_spine_flows((("h15", "h7"),), 2e6, INTO_H3[:1]),
         2e6),
)
FIT_STARTUP = ("pair-1MB", "pair-16MB", "star-tree-p0")
FIT_SHARE = ("pair-1MB", "pair-16MB")
FIT_SHARING = ("ls-out-leaf-spine", "ls-in-leaf-spine", "ls-leaf-bg1", "ls-uplink-bg1-2MB",
               "ls-spine-bg1", "ls-uplink-bg1", "ls-spine-bg2", "ls-leaf-bg2",
               "ls-out-leaf-leaf", "ls-out-spine-spine", "ls-lone-spine", "leaf-spine-tree-p1",
               "leaf-spine-tree-p0", "star-tree-p1", "star-tree-p2", "star-tree-p4")
"""The cases of the joint fit of the five sharing parameters (module docstring), cheap and
telling ones first (the fit drops a combination at its first case off by more than the best)."""
GRID = {
    "rtt_exponent": (1.0, 1.5, 2.0, 2.5, 3.0),
    "ramp_segments": (1.5, 2.0, 2.5, 3.0, 3.5, 4.0),
    "young_weight": (0.3, 0.4, 0.5, 0.6),
    "young_s": (400e-6, 800e-6, 1200e-6, 1600e-6, 2400e-6),
    "long_lived_extra": (0.0, 0.5, 1.0, 1.5),
}
"""The joint fit's grid (every combination is tried)."""
SEGMENT_BYTES = 1448
"""TCP payload per packet (react.backends.ns3.spec's default)."""
HEADER_BYTES = 54
"""Bytes per packet beyond the payload on an ns-3 point-to-point link: TCP 20 + timestamps 12,
IPv4 20, PPP 2."""


# -- running one case ------------------------------------------------------------------------------
def _value(case: Case, runs: dict[str, Any]) -> float:
    if case.kind == "last":  # the last flow of the jobs' first epochs (they start together)
        return max(f.end_s for run in runs.values() for f in run.results[0].flows)
    (run,) = runs.values()
    result = run.results[0]
    if case.kind == "single":
        return result.flows[0].fct_s
    return result.collective_time_s


def run_sim(case: Case, sharing: str, model: Any = None) -> tuple[float, float]:
    """``(value in seconds, wall seconds)`` of ``case`` on flowsim in ``sharing`` mode."""
    from flowsim import tcp
    from react.run.scenario import parse_scenario
    from react.run.scenario_runs import run_scenario

    scenario = parse_scenario(case.doc, source=case.name).with_sharing(sharing)
    defaults = tcp.TcpNetwork.__init__.__kwdefaults__
    saved = defaults["model"]
    if model is not None:
        defaults["model"] = model
    try:
        start = time.perf_counter()
        runs = run_scenario(scenario)
        wall = time.perf_counter() - start
    finally:
        defaults["model"] = saved
    return _value(case, runs), wall


def sim_epoch_s(case: Case, sharing: str, epochs: int = 10) -> float:
    """Wall seconds per epoch of ``case`` on flowsim in ``sharing`` mode, from a run of
    ``epochs`` epochs: the job driver's run only, the scenario parsed and the network built
    before the clock starts (as the ns-3 figure is its simulator's run only), flow records off
    as in a plain run."""
    from react.run.driver import run_jobs
    from react.run.scenario import parse_scenario
    from react.run.scenario_runs import forget_flow_records, open_jobs

    doc = {**case.doc, "jobs": [{**job, "epochs": epochs} for job in case.doc["jobs"]]}
    scenario = parse_scenario(doc, source=case.name).with_sharing(sharing)
    with open_jobs(scenario) as jobs:
        forget_flow_records(jobs)
        # The garbage of earlier runs is collected before the clock starts, not inside it (a
        # full collection here takes 30-50 ms, as long as several epochs).
        gc.collect()
        start = time.perf_counter()
        run_jobs(jobs)
        return (time.perf_counter() - start) / epochs


def run_ns3(case: Case) -> tuple[float, float]:
    """``(value in seconds, wall seconds of the simulated epoch)`` of ``case`` on ns-3."""
    from react.run.driver import run_jobs
    from react.run.scenario import parse_scenario
    from react.run.scenario_runs import open_jobs

    scenario = parse_scenario(case.doc, source=case.name).with_backend("ns3")
    with open_jobs(scenario) as jobs:
        runs = run_jobs(jobs)
        wall = sum(c["wall_s"] for c in jobs[0].backend.world.calls)
    return _value(case, runs), wall


def measure(path: Path) -> None:
    """Run every case on ns-3 and on flowsim (both modes); write the reference CSV."""
    from react.backends.ns3 import shared_child

    rows = []
    with shared_child():
        for case in CASES:
            ns3_s, ns3_wall = run_ns3(case)
            # flowsim, each mode, in the same process and moment: best of 5 whole one-epoch
            # runs (scenario building included) and best of 5 per-epoch walls of 10 epochs
            walls = {mode: min(run_sim(case, mode)[1] for _ in range(5))
                     for mode in ("maxmin", "tcp")}
            epoch = {mode: min(sim_epoch_s(case, mode) for _ in range(5))
                     for mode in ("maxmin", "tcp")}
            rows.append({"case": case.name, "kind": case.kind, "size_bytes": case.size_bytes,
                         "ns3_us": round(ns3_s * 1e6, 3), "ns3_wall_s": round(ns3_wall, 3),
                         "maxmin_wall_s": f"{walls['maxmin']:.6f}",
                         "tcp_wall_s": f"{walls['tcp']:.6f}",
                         "maxmin_epoch_s": f"{epoch['maxmin']:.6f}",
                         "tcp_epoch_s": f"{epoch['tcp']:.6f}"})
            print(f"{case.name:<26} ns-3 {ns3_s * 1e6:>10,.1f} µs  wall {ns3_wall:7.1f} s  "
                  f"(flowsim per epoch {epoch['maxmin'] * 1e3:.1f} / {epoch['tcp'] * 1e3:.1f} "
                  f"ms; one-epoch run {walls['maxmin'] * 1e3:.1f} / {walls['tcp'] * 1e3:.1f} ms)",
                  flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


def read_reference(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return {row["case"]: row for row in csv.DictReader(fh)}


# -- the fit ---------------------------------------------------------------------------------------
def fit(reference: dict[str, dict[str, str]]) -> Any:
    """The :class:`flowsim.tcp.TcpModel` fitted to ``reference`` (module docstring), rounded."""
    from flowsim.tcp import TcpModel

    goodput = SEGMENT_BYTES / (SEGMENT_BYTES + HEADER_BYTES)

    def worst(model: Any, names: Sequence[str]) -> float:
        cases = [c for c in CASES if c.name in names and c.name in reference]
        if not cases:
            raise SystemExit(f"fit_tcp: the reference has none of the cases {', '.join(names)}")
        return max(abs(run_sim(c, "tcp", model)[0] * 1e6 / float(reference[c.name]["ns3_us"])
                       - 1) for c in cases)

    # start-up and reverse share: the cases without long-lived flows (the extra weight is moot)
    shares = np.round(np.arange(0.5, 1.001, 0.01), 2)

    def without_extra(us: int) -> tuple[float, Any]:
        def model(share: float) -> Any:
            return TcpModel(goodput=goodput, startup_s=us / 1e6, reverse_share=float(share))

        share = min(shares, key=lambda r: (worst(model(r), FIT_SHARE), -r))
        return worst(model(share), FIT_STARTUP), model(share)

    base = min((without_extra(us) + (us,) for us in range(0, 101)),
               key=lambda t: (t[0], t[2]))[1]
    # the five sharing parameters together (every combination of GRID), cases in a fixed order:
    # a combination is dropped as soon as one case is off by more than the best so far
    by_name = {c.name: c for c in CASES}
    cases = [by_name[n] for n in FIT_SHARING if n in reference]
    if not cases:
        raise SystemExit(f"fit_tcp: the reference has none of the cases {', '.join(FIT_SHARING)}")
    names = list(GRID)
    best: tuple[float, tuple[float, ...]] = (math.inf, ())
    for values in itertools.product(*GRID.values()):
        model = replace(base, **dict(zip(names, values, strict=True)))
        err = 0.0
        for c in cases:
            err = max(err, abs(run_sim(c, "tcp", model)[0] * 1e6
                               / float(reference[c.name]["ns3_us"]) - 1))
            if err > best[0]:
                break
        if (err, values) < best:
            best = (err, values)
    return replace(base, **dict(zip(names, best[1], strict=True)))


def table(reference: dict[str, dict[str, str]], model: Any) -> list[dict[str, Any]]:
    """Every case on ns-3, exact max-min and the TCP-aware mode, with relative errors."""
    rows = []
    for case in CASES:
        if case.name not in reference:
            continue
        ns3_us = float(reference[case.name]["ns3_us"])
        maxmin_us = run_sim(case, "maxmin")[0] * 1e6
        tcp_us = run_sim(case, "tcp", model)[0] * 1e6
        ref = reference[case.name]
        # per epoch against per epoch (files measured before the epoch columns: whole runs)
        column = "epoch_s" if "tcp_epoch_s" in ref else "wall_s"
        speed = {mode: float(ref["ns3_wall_s"]) / float(ref[f"{mode}_{column}"])
                 for mode in ("maxmin", "tcp")}
        rows.append({"case": case.name, "ns3_us": ns3_us, "maxmin_us": round(maxmin_us, 1),
                     "maxmin_err": round(maxmin_us / ns3_us - 1, 4), "tcp_us": round(tcp_us, 1),
                     "tcp_err": round(tcp_us / ns3_us - 1, 4),
                     "ns3_wall_s": float(ref["ns3_wall_s"]),
                     "speedup_maxmin": round(speed["maxmin"]), "speedup_tcp": round(speed["tcp"])})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", metavar="OUT.csv",
                        help="run the ns-3 cases first, write them to OUT.csv and fit from it "
                             "(needs ns3)")
    parser.add_argument("--reference", metavar="CSV", default=str(REFERENCE_CSV),
                        help=f"the ns-3 measurements to fit (default {REFERENCE_CSV})")
    parser.add_argument("--out", metavar="CSV", help="also write the comparison table as CSV")
    args = parser.parse_args(argv)
    path = Path(args.reference)
    if args.measure:
        path = Path(args.measure)
        measure(path)
    from flowsim.tcp import FITTED

    reference = read_reference(path)
    model = fit(reference)
    for label, m in (("fitted", model), ("FITTED", FITTED)):
        print(f"{label}: goodput {m.goodput:.3f}, startup {m.startup_s * 1e6:.0f} µs, "
              f"reverse share {m.reverse_share:.2f}, rtt exponent {m.rtt_exponent:g}, "
              f"ramp {m.ramp_segments:g} segments, young weight {m.young_weight:g} for "
              f"{m.young_s * 1e6:.0f} µs, long-lived extra {m.long_lived_extra:g}")
    rows = table(reference, model)
    print(f"{'case':<26} {'ns-3 µs':>10} {'max-min':>10} {'err':>7} {'tcp mode':>10} "
          f"{'err':>7} {'ns-3 wall s':>11} {'x faster':>16}")
    for r in rows:
        print(f"{r['case']:<26} {r['ns3_us']:>10,.1f} {r['maxmin_us']:>10,.1f} "
              f"{r['maxmin_err']:>+7.1%} {r['tcp_us']:>10,.1f} {r['tcp_err']:>+7.1%} "
              f"{r['ns3_wall_s']:>11.1f} {r['speedup_maxmin']:>7,} / {r['speedup_tcp']:>6,}")
    if args.out:
        with open(args.out, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
