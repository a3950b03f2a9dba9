"""Benchmark: the simulator backend's own cost per epoch, by execution rule and with noise.

``SimBackend.epoch`` is hot in large what-if runs: it launches every flow when its execution rule
allows and collects the timings. To see its cost apart from flowsim's rate solving, each flow runs
on a stub network that completes it after a fixed time (no sharing). Prints, per pattern, the
per-epoch time of the dataflow rule and the ratios of Algorithm 2 (the default) and of Algorithm 2
with 2% measurement noise to it; configurations alternate within one process, best of
``--repeats`` rounds, so the ratios hold on a loaded machine where absolute times do not.

Usage: python3 -m benchmarks.bench_sim_backend [--repeats N]   (from the repository root)
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

from flowsim.network import Network
from flowsim.topologies import fat_tree
from react.backends.sim.engine import SimBackend
from react.patterns import (
    allgather_recursive_doubling,
    allreduce_double_binary_tree,
    allreduce_ring,
)

CONFIGS = {
    "dataflow": {"execution": "dataflow"},
    "algorithm2": {},
    "algorithm2 + noise": {"noise_sigma": 0.02},
}


class StubNetwork:
    """Flows end ``size x 1 ps`` (times 1.0-1.6 by host pair) after they start; nothing shared."""

    def __init__(self) -> None:
        real = Network(fat_tree(8))
        self.env, self.topology = real.env, real.topology

    def start_flow(self, src: str, dst: str, size_bytes: float, **_: object) -> object:
        delay = size_bytes * 1e-12 * (1 + (len(src) * 7 + len(dst) * 3 + int(dst[1:])) % 7 / 10)
        return self.env.timeout(delay, value=SimpleNamespace(end_s=self.env.now + delay))


def per_epoch_s(pattern: object, epochs: int, options: dict) -> float:
    backend = SimBackend(StubNetwork(), [f"h{i}" for i in range(pattern.n)], 4e6,  # type: ignore[arg-type, attr-defined]
                         connections=4, **options)
    start = time.perf_counter()
    backend.run_epochs(pattern, epochs)  # type: ignore[arg-type]
    return (time.perf_counter() - start) / epochs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="rounds per configuration")
    args = parser.parse_args(argv)
    cases = [(allreduce_double_binary_tree(16), 300), (allgather_recursive_doubling(64), 60),
             (allreduce_ring(64), 6)]
    print(f"{'pattern':<46} {'dataflow ms/epoch':>18} " + " ".join(
        f"{name + ' / dataflow':>30}" for name in list(CONFIGS)[1:]))
    for pattern, epochs in cases:
        best = {name: float("inf") for name in CONFIGS}
        for _ in range(args.repeats):
            for name, options in CONFIGS.items():
                best[name] = min(best[name], per_epoch_s(pattern, epochs, options))
        label = f"{pattern.name} n={pattern.n} ({len(pattern.flows)} flows)"
        ratios = " ".join(f"{best[name] / best['dataflow']:>30.2f}" for name in list(CONFIGS)[1:])
        print(f"{label:<46} {best['dataflow'] * 1e3:>18.3f} {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
