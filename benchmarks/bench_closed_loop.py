"""Benchmark: the closed-loop REACT scenario and one controller decision.

Prints (1) wall time of the issue-4 closed-loop scenario (8-rank dual-tree AllReduce, 20 MB,
p=2 long-lived flows into rank 3, 100 epochs, REACT on) on a star and on a k=8 fat-tree with
4-way ECMP, with the same run without REACT beside it for the ratio, and (2) the time of one
controller decision (``Controller.observe`` on a congested batch) at 16 ranks, median of repeats.

Usage: python benchmarks/bench_closed_loop.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from flowsim.network import Network
from flowsim.topologies import fat_tree, star
from flowsim.traffic import long_lived
from react.backends.sim.engine import SimBackend
from react.control.controller import Controller, ControllerConfig
from react.patterns import allreduce_double_binary_tree
from react.run.driver import Job, run_jobs


def closed_loop(react: bool, topology: str, epochs: int = 100) -> float:
    if topology == "star":
        net = Network(star(16))
        hosts, external, connections = [f"h{i}" for i in range(8)], "h8", 1
    else:
        net = Network(fat_tree(8), seed=1)
        hosts, external, connections = [f"h{16 * i}" for i in range(8)], "h100", 4
    for port in range(2):
        long_lived(net, external, hosts[3], port=port)
    pattern = allreduce_double_binary_tree(8)
    controller = Controller(pattern, ControllerConfig(seed=0)) if react else None
    backend = SimBackend(net, hosts, 20e6, connections=connections, seed=0)
    start = time.perf_counter()
    run_jobs([Job("tree", backend, pattern, epochs, controller)])
    return time.perf_counter() - start


def decision_times(repeats: int) -> tuple[float, float]:
    """Median seconds of one ``observe`` on a congested 16-rank batch: (cold, warm).

    Cold: the swap space of the congested rank is computed on demand inside the decision. Warm:
    the initial pattern's swap space was built at job start (``build_all``), as the paper does
    (§5.3.1: "we only generate this once at the start of the job").
    """
    pattern = allreduce_double_binary_tree(16)
    net = Network(star(17, latency_s=2e-6))
    for port in range(2):
        long_lived(net, "h16", "h3", port=port)
    batch = SimBackend(net, [f"h{i}" for i in range(16)], 20e6, connections=1).run_epochs(
        pattern, 6
    )
    cold, warm = [], []
    for _ in range(repeats):
        for times, prebuild in ((cold, False), (warm, True)):
            controller = Controller(pattern, ControllerConfig(seed=0))
            if prebuild:
                controller.swap_space(pattern).build_all()
            start = time.perf_counter()
            controller.observe(batch)
            times.append(time.perf_counter() - start)
    return statistics.median(cold), statistics.median(warm)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="decision timing repeats")
    args = parser.parse_args(argv)
    print("closed loop, 100 epochs, p=2 into rank 3 (wall seconds):")
    print(f"{'topology':<10} {'REACT off':>10} {'REACT on':>10} {'on/off':>8}")
    for topology in ("star", "fat_tree"):
        off = closed_loop(False, topology)
        on = closed_loop(True, topology)
        print(f"{topology:<10} {off:>10.2f} {on:>10.2f} {on / off:>8.2f}")
    cold, warm = decision_times(args.repeats)
    print(f"one controller decision at 16 ranks (median of {args.repeats}): "
          f"{warm * 1e3:.1f} ms with the initial swap space built at job start, "
          f"{cold * 1e3:.1f} ms computing it on demand")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
