"""Benchmark flowsim's engine against the naive max-min baseline, in one run.

Replays the two SimGrid reference workloads (``tests/data/leafspine128_10k_c{100,1000}.json``:
10,000 flows on a 128-host leaf-spine, ~100 or ~1,000 at once, each flow starting when the flow
it depends on ends) with :class:`flowsim.network.Network` and with the algorithm of
``benchmarks/reference/naive_maxmin.py`` (full progressive filling at every event, pure Python),
and prints flows per second, the speed ratio and the largest relative error against SimGrid's
completion times. Absolute times drift between machines and runs; the ratio, measured in the
same process, is the figure to quote.

Then the per-event cost at small concurrency (the REACT closed loops' regime): ``n`` flows at
once on a 32-host leaf-spine, each replaced by a new random one when it ends, reported as
microseconds per re-solve, with the engine's plain-Python small path and with the compiled fill.

Then a memory check: a k=16 fat-tree (1,024 hosts) with 2,000 concurrent flows between random
hosts, reporting time and peak traced memory.

Usage::

    python benchmarks/bench_flowsim.py              # full replay (baseline: minutes at c1000)
    python benchmarks/bench_flowsim.py --quick 2000 # first 2,000 flows (dependencies are earlier)
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path

import numpy as np

from flowsim.network import Network
from flowsim.topology import Link, Node, Topology

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def load_workload(name: str, limit: int | None = None) -> dict:
    """Read a reference workload; with ``limit``, keep only its first ``limit`` flows.

    Dependencies always point to earlier flows, so a prefix is a closed workload whose SimGrid
    times are not those of the full run, only comparable between simulators run on it.
    """
    with open(DATA / name, encoding="utf-8") as fh:
        data = json.load(fh)
    if limit is not None:
        for key in ("flows", "routes", "done"):
            data[key] = data[key][:limit]
        assert all(f[3] < len(data["flows"]) for f in data["flows"])
    return data


def leafspine_topology(cap_bytes_per_s: list[float]) -> Topology:
    """The workloads' 128-host leaf-spine, with link ids in the files' order.

    Links 0-127: host ``i`` up to leaf ``i // 16``; 128-255: leaf down to host ``i - 128``;
    256-287: leaf ``l`` up to spine ``s`` at ``256 + 4 l + s``; 288-319: spine ``s`` down to leaf
    ``l`` at ``288 + 8 s + l``. Capacities come from the file (bytes/s there, bits/s here).
    """
    hosts = [f"h{i}" for i in range(128)]
    leaves = [f"leaf{i}" for i in range(8)]
    spines = [f"spine{i}" for i in range(4)]
    ends: list[tuple[str, str]] = []
    ends += [(hosts[i], leaves[i // 16]) for i in range(128)]
    ends += [(leaves[i // 16], hosts[i]) for i in range(128)]
    ends += [(leaves[l_], spines[s]) for l_ in range(8) for s in range(4)]
    ends += [(spines[s], leaves[l_]) for s in range(4) for l_ in range(8)]
    links = tuple(
        Link(i, a, b, float(cap_bytes_per_s[i]) * 8.0, 0.0) for i, (a, b) in enumerate(ends)
    )
    nodes = tuple(Node(h, "host") for h in hosts) + tuple(
        Node(s, "switch") for s in leaves + spines
    )
    return Topology(nodes, links, name="leafspine128")


def replay_flowsim(data: dict, topology: Topology | None = None) -> tuple[list[float], Network]:
    """Replay a workload with explicit routes; return each flow's completion time.

    Pass ``topology`` (from :func:`leafspine_topology`) to keep its construction out of a timing.
    """
    topo = topology if topology is not None else leafspine_topology(data["cap"])
    net = Network(topo)
    flows, routes = data["flows"], data["routes"]
    kids: dict[int, list[int]] = defaultdict(list)
    for i, f in enumerate(flows):
        if f[3] >= 0:
            kids[f[3]].append(i)
    done = [math.nan] * len(flows)

    def start(i: int) -> None:
        src, dst, size, _dep = flows[i]
        ev = net.start_flow(f"h{src}", f"h{dst}", float(size), path=routes[i], tag=str(i))
        ev.callbacks.append(lambda e, i=i: finished(i, e.value))

    def finished(i: int, rec) -> None:
        done[i] = rec.end_s
        for k in kids[i]:
            start(k)

    for i, f in enumerate(flows):
        if f[3] < 0:
            start(i)
    net.env.run()
    return done, net


def replay_naive(data: dict) -> list[float]:
    """The baseline's algorithm (benchmarks/reference/naive_maxmin.py), as a function."""
    cap, flows, routes = data["cap"], data["flows"], data["routes"]

    def maxmin(active):
        cnt, rem = defaultdict(int), {}
        for f in active:
            for lk in routes[f]:
                cnt[lk] += 1
                rem[lk] = cap[lk]
        rate, unfixed = {}, set(active)
        while unfixed:
            share = min(rem[lk] / c for lk, c in cnt.items() if c > 0)
            sat = {lk for lk, c in cnt.items() if c > 0 and rem[lk] / c <= share * (1 + 1e-12)}
            for f in [f for f in unfixed if any(lk in sat for lk in routes[f])]:
                rate[f] = share
                unfixed.discard(f)
                for lk in routes[f]:
                    cnt[lk] -= 1
                    rem[lk] -= share
            for lk in sat:
                cnt[lk] = 0
        return rate

    kids = defaultdict(list)
    for i, f in enumerate(flows):
        if f[3] >= 0:
            kids[f[3]].append(i)
    t, left = 0.0, {}
    for i, f in enumerate(flows):
        if f[3] < 0:
            left[i] = float(f[2])
    done: list[float] = [math.nan] * len(flows)
    while left:
        r = maxmin(list(left))
        dt = min(left[f] / r[f] for f in left)
        t += dt
        fin = [f for f in left if left[f] / r[f] <= dt * (1 + 1e-12)]
        for f in left:
            left[f] -= r[f] * dt
        for f in fin:
            del left[f]
            done[f] = t
            for k in kids[f]:
                left[k] = float(flows[k][2])
    return done


def max_rel_err(a: list[float], b: list[float]) -> float:
    x, y = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(x - y) / y))


def mean_duration(data: dict, done: list[float]) -> float:
    """Mean of (end - start), the start being the dependency's end (or 0)."""
    flows = data["flows"]
    starts = [done[f[3]] if f[3] >= 0 else 0.0 for f in flows]
    return float(np.mean(np.asarray(done) - np.asarray(starts)))


def bench_workload(name: str, limit: int | None, repeat_naive: bool = True,
                   repeat: int = 3) -> dict:
    """Replay a workload ``repeat`` times with each simulator, alternating, and compare.

    Machines of this kind (shared virtual CPUs) slow down by 20-40% for seconds at a time, so a
    single pair of runs can land one simulator in a slow spell and the other not. Alternating
    the runs and taking each simulator's best time compares them at the same machine speed;
    the per-pair ratios are reported too, to show the spread.
    """
    data = load_workload(name, limit)
    n = len(data["flows"])
    topo = leafspine_topology(data["cap"])  # setup, not simulation: outside the timing
    fs_times: list[float] = []
    nv_times: list[float] = []
    done: list[float] = []
    ref: list[float] = []
    net = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        run_done, net = replay_flowsim(data, topo)
        fs_times.append(time.perf_counter() - t0)
        if done and run_done != done:
            raise AssertionError(f"{name}: two flowsim replays gave different completion times")
        done = run_done
        if repeat_naive:
            t0 = time.perf_counter()
            ref = replay_naive(data)
            nv_times.append(time.perf_counter() - t0)
    assert net is not None
    t_fs = min(fs_times)
    row = {"workload": name, "flows": n, "flowsim_s": t_fs, "flowsim_flows_per_s": n / t_fs,
           "resolves": net.resolves, "repeat": repeat}
    if limit is None:
        row["err_vs_simgrid"] = max_rel_err(done, data["done"])
        row["mean_dur_rel_diff_vs_simgrid"] = abs(
            mean_duration(data, done) / mean_duration(data, data["done"]) - 1
        )
    if repeat_naive:
        t_nv = min(nv_times)
        pairs = [nv / fs for fs, nv in zip(fs_times, nv_times, strict=True)]
        row.update(naive_s=t_nv, naive_flows_per_s=n / t_nv, speedup=t_nv / t_fs,
                   pair_ratio_min=min(pairs), pair_ratio_max=max(pairs),
                   err_vs_naive=max_rel_err(done, ref))
    return row


def fat_tree_memory(n_flows: int = 2000, k: int = 16, seed: int = 1) -> dict:
    """Start ``n_flows`` flows at once on a k-ary fat-tree and run them to completion.

    Time and peak memory include building the topology and routing (ECMP) every flow.
    """
    from flowsim.topologies import fat_tree

    tracemalloc.start()
    t0 = time.perf_counter()
    topo = fat_tree(k)
    net = Network(topo, seed=seed)
    rng = random.Random(seed)
    hosts = topo.hosts
    for i in range(n_flows):
        src, dst = rng.sample(hosts, 2)
        net.start_flow(src, dst, rng.uniform(1e6, 1e8), port=i)
    net.env.run()
    elapsed = time.perf_counter() - t0
    _cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # ru_maxrss is in KiB on Linux: the whole process's peak, imports and earlier runs included.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"hosts": len(hosts), "links": len(topo.links), "flows": n_flows,
            "finished": len(net.records), "seconds": elapsed, "peak_mib": peak / 2**20,
            "maxrss_mib": rss, "resolves": net.resolves}


def closed_loop(n_concurrent: int, total: int, small: bool = True, seed: int = 5) -> dict:
    """``n_concurrent`` flows at a time on ``leaf_spine(4, 2, 8)`` until ``total`` have run.

    Each finished flow is replaced at once by a new one between random hosts (random size
    0.1-10 MB, random port), so every event is a departure plus an arrival, as in a REACT closed
    loop. ``small=False`` forces the compiled fill whatever the number of flows.
    """
    from flowsim.topologies import leaf_spine

    topo = leaf_spine(leaves=4, spines=2, hosts_per_leaf=8)
    net = Network(topo)
    if not small:
        net._small_flows = 0
    hosts = topo.hosts
    rng = random.Random(seed)
    started = 0

    def start() -> None:
        nonlocal started
        if started >= total:
            return
        started += 1
        src, dst = rng.sample(hosts, 2)
        ev = net.start_flow(src, dst, rng.uniform(1e5, 1e7), port=rng.randrange(4))
        ev.callbacks.append(lambda _e: start())

    for _ in range(n_concurrent):
        start()
    t0 = time.perf_counter()
    net.env.run()
    elapsed = time.perf_counter() - t0
    return {"flows": len(net.records), "seconds": elapsed, "resolves": net.resolves,
            "us_per_resolve": elapsed / net.resolves * 1e6,
            "ends": [r.end_s for r in net.records]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", type=int, default=None, metavar="N",
                        help="replay only the first N flows of each workload (both simulators)")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive baseline")
    parser.add_argument("--no-memory", action="store_true", help="skip the fat-tree memory check")
    parser.add_argument("--no-closed-loop", action="store_true",
                        help="skip the small-concurrency closed-loop timing")
    parser.add_argument("--workloads", nargs="*", default=["c100", "c1000"],
                        choices=["c100", "c1000"])
    parser.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="runs of each simulator per workload, alternating; the best time "
                             "of each is compared (default 3; the naive c1000 replay takes about "
                             "two minutes a run)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: expected at least 1 run")
    print(f"best of {args.repeat} alternating runs each; 'pairs' are the ratios of the "
          f"individual runs")
    print(f"{'workload':<10} {'flows':>6} {'flowsim f/s':>12} {'naive f/s':>10} {'ratio':>7} "
          f"{'pairs':>11} {'max err vs SimGrid':>19} {'mean-dur diff':>14} {'err vs naive':>13}")
    for wl in args.workloads:
        row = bench_workload(f"leafspine128_10k_{wl}.json", args.quick,
                             repeat_naive=not args.no_naive, repeat=args.repeat)
        pairs = (f"{row['pair_ratio_min']:.1f}-{row['pair_ratio_max']:.1f}x"
                 if "pair_ratio_min" in row else "")
        print(f"{wl:<10} {row['flows']:>6} {row['flowsim_flows_per_s']:>12.0f} "
              f"{row.get('naive_flows_per_s', math.nan):>10.0f} "
              f"{row.get('speedup', math.nan):>6.1f}x {pairs:>11} "
              f"{row.get('err_vs_simgrid', math.nan):>19.2e} "
              f"{row.get('mean_dur_rel_diff_vs_simgrid', math.nan):>14.2e} "
              f"{row.get('err_vs_naive', math.nan):>13.2e}", flush=True)
    if not args.no_closed_loop:
        total = min(args.quick or 3000, 3000)
        for n in (8, 16, 32):
            fast = closed_loop(n, total)
            arrays = closed_loop(n, total, small=False)
            same = "identical" if fast["ends"] == arrays["ends"] else "DIFFERENT"
            print(f"closed loop, {n:>2} concurrent flows, {fast['flows']} flows: "
                  f"{fast['us_per_resolve']:.0f} us per re-solve (compiled fill: "
                  f"{arrays['us_per_resolve']:.0f} us, "
                  f"{arrays['us_per_resolve'] / fast['us_per_resolve']:.2f}x); "
                  f"completion times {same}", flush=True)
    if not args.no_memory:
        m = fat_tree_memory()
        print(f"fat-tree k=16: {m['hosts']} hosts, {m['links']} links, {m['flows']} concurrent "
              f"flows ({m['finished']} finished, {m['resolves']} re-solves) in "
              f"{m['seconds']:.1f} s, peak traced memory {m['peak_mib']:.0f} MiB, process max RSS "
              f"{m['maxrss_mib']:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
