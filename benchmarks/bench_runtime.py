"""Benchmark: the real runtime on the emulated network, every figure measured in one run.

Needs root (network namespaces) and, for the Gloo rows, the ``[torch]`` extra. Prints:

1. RCollective's AllReduce time against torch's own ``dist.all_reduce`` on the same rank
   processes and the same emulated star (``--ranks`` ranks, ``--message-bytes``, links at
   ``--link-rate-bps``), for the socket and the Gloo transport and for the ring and the dual-tree
   pattern: medians over ``--epochs`` epochs after warm-up, and their ratio (goal: <= 1.2 at
   8 ranks, 4 MiB); beside them the pattern's time on flowsim at the same rates, which
   separates what the pattern costs (a dual tree moves more bytes over the busiest link than a
   ring at this size) from what RCollective adds;
2. the tuner on a closed loop (tree AllReduce, REACT on, 2 background flows into rank 1):
   per-batch overhead of the leader against the epoch time, epochs any rank waited for it
   (goal: 0), the estimated clock offsets, and the cost of each pattern switch;
3. namespace setup and teardown of the networks of 1 and 2.

Usage: sudo python benchmarks/bench_runtime.py [--ranks 8] [--epochs 10] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flowsim.topologies import star
from react.backends.emu import EmuNetwork
from react.run.scenario import parse_scenario
from react.run.scenario_runs import run_scenario

MIB = 1 << 20


def rcollective_vs_torch(n: int, message_bytes: int, epochs: int, rate_bps: float,
                         transports: list[str], patterns: list[str]) -> None:
    print(f"1. RCollective vs torch all_reduce: {n} ranks on a star at {rate_bps / 1e6:g} "
          f"Mbit/s, {message_bytes / MIB:g} MiB, median of {epochs} epochs")
    print(f"   {'transport':<9} {'pattern':<30} {'RCollective':>12} {'all_reduce':>11} "
          f"{'ratio':>6} {'flowsim':>9} {'RColl/flowsim':>13}")
    predicted = {p: flowsim_time_s(p, n, message_bytes, rate_bps) for p in patterns}
    with EmuNetwork(star(n), link_rate_bps=rate_bps) as net, \
            tempfile.TemporaryDirectory() as tmp:
        print(f"   (network of {n} hosts: setup {net.setup_s:.2f} s)")
        hosts = [f"h{i}" for i in range(n)]
        ips = [net.host_ip(h) for h in hosts]
        for k, (transport, pattern) in enumerate(
                (t, p) for t in transports for p in patterns):
            out = Path(tmp) / f"r{k}.json"
            base = 31000 + 100 * k
            argv = [sys.executable, "-m", "react.runtime.bench", "--world-size", str(n),
                    "--master", f"{ips[0]}:{base}", "--addresses",
                    ",".join(f"{ip}:{base + 1 + r}" for r, ip in enumerate(ips)),
                    "--transport", transport, "--pattern", pattern, "--message-bytes",
                    str(message_bytes), "--epochs", str(epochs), "--timeout-s", "300",
                    "--out", str(out)]
            env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0")
            procs = [net.popen(h, [*argv, "--rank", str(r)], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
                     for r, h in enumerate(hosts)]
            errors = [p.communicate(timeout=900)[1] for p in procs]
            if any(p.returncode for p in procs):
                bad = next(e for p, e in zip(procs, errors, strict=True) if p.returncode)
                print(f"   {transport:<9} {pattern:<30} failed: {bad.strip()[-300:]}")
                continue
            r = json.loads(out.read_text())
            sim = predicted[pattern]
            print(f"   {transport:<9} {pattern:<30} {r['rcollective_median_s'] * 1e3:9.1f} ms "
                  f"{r['torch_median_s'] * 1e3:8.1f} ms {r['ratio']:6.2f} {sim * 1e3:6.1f} ms "
                  f"{r['rcollective_median_s'] / sim:13.2f}", flush=True)
    print(f"   (teardown {net.teardown_s:.2f} s)")


def flowsim_time_s(pattern: str, n: int, message_bytes: int, rate_bps: float) -> float:
    """The pattern's time on flowsim at the same rates (no latency): what the links allow."""
    from flowsim.network import Network
    from react.backends.sim.engine import SimBackend
    from react.patterns import generator

    net = Network(star(n, capacity_bps=rate_bps, latency_s=0.0))
    backend = SimBackend(net, [f"h{i}" for i in range(n)], message_bytes, connections=1)
    (result,) = backend.run_epochs(generator(pattern)(n), 1)
    return result.collective_time_s


def tuner_overhead(n: int, epochs: int, rate_bps: float, message_bytes: int) -> None:
    print(f"2. the tuner on a closed loop: tree AllReduce, {n} ranks, 2 background flows into "
          f"rank 1, {epochs} epochs")
    doc = {
        "name": "bench-tuner", "seed": 0, "backend": "emu", "connections": 1,
        "topology": {"name": "star", "n": n + 2, "capacity_bps": rate_bps},
        "jobs": [{"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": n,
                  "placement": "first", "message_bytes": message_bytes, "epochs": epochs,
                  "react": True}],
        "background": [{"kind": "long_lived", "src": f"h{n + k}", "dst": "tree:1"}
                       for k in range(2)],
        "emu": {"link_rate_bps": rate_bps, "message_bytes": message_bytes},
    }
    t0 = time.monotonic()
    run = run_scenario(parse_scenario(doc))["tree"]
    wall = time.monotonic() - t0
    info = run.info
    epoch_s = statistics.median(run.times_s())
    overhead = info["tuner_overhead_s"]
    print(f"   {len(run.results)} epochs in {wall:.1f} s (median epoch {epoch_s * 1e3:.1f} ms); "
          f"{len(run.decisions)} decisions, {sum(d.changed for d in run.decisions)} changes")
    if overhead:
        print(f"   leader overhead per batch: median {statistics.median(overhead) * 1e3:.1f} ms, "
              f"max {max(overhead) * 1e3:.1f} ms = {max(overhead) / epoch_s:.2f} epochs "
              f"(the ranks have {doc['emu'].get('apply_delay_epochs', 5)} epochs before a "
              "switch)")
    print(f"   epochs any rank waited for the tuner: {info['epochs_waited']}")
    offsets = [abs(v) for v in info["offsets_s"].values()]
    print(f"   clock offsets (0 for ranks on the leader's clock): max {max(offsets) * 1e6:.1f} us")
    if info["switch_cost_s"]:
        costs = ", ".join(f"{c * 1e3:+.1f}" for c in info["switch_cost_s"])
        print(f"   switch epochs against the median of the next three (ms): {costs}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--message-bytes", type=int, default=4 * MIB)
    parser.add_argument("--link-rate-bps", type=float, default=200e6)
    parser.add_argument("--loop-epochs", type=int, default=48)
    parser.add_argument("--quick", action="store_true",
                        help="4 ranks, 3 epochs, socket transport only, a 24-epoch loop")
    args = parser.parse_args(argv)
    transports = ["socket", "torch"]
    if args.quick:
        args.ranks, args.epochs, args.loop_epochs, transports = 4, 3, 24, ["socket"]
    else:
        try:
            import torch  # noqa: F401
        except ImportError:
            transports = ["socket"]
            print("(torch is not installed: socket transport only; torch's all_reduce needs it "
                  "too, so section 1 is skipped)")
    if transports != ["socket"] or args.quick:
        rcollective_vs_torch(args.ranks, args.message_bytes, args.epochs, args.link_rate_bps,
                             transports, ["allreduce_ring", "allreduce_double_binary_tree"])
    tuner_overhead(args.ranks, args.loop_epochs, args.link_rate_bps, args.message_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
