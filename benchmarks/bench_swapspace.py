"""Benchmark: building the swap space (react.model.swapspace): double binary tree, ring and
RD AllGather.

For each pattern and size it prints the time to generate the pattern (not part of the space),
to construct ``SwapSpace`` (which verifies the pattern and builds degree tables), to compute one
rank's swaps on a fresh space (what the controller pays at its first question about a congested
rank), and to compute every rank's swaps on a fresh space (``build_all``, construction
included), with the number of swaps found. Beside them, a brute-force reference in the same
process (appendix A.3: every partner and every step window, applied, the degree rule checked
directly, the whole pattern replayed) for one rank, compared by the distinct rewrites found, and
the ratio of times: absolute times drift between machines, the ratio less.
The reference is skipped where it would take minutes (``--reference-max``).

Usage::

    python benchmarks/bench_swapspace.py                 # n = 16, 128, 1024
    python benchmarks/bench_swapspace.py --sizes 16 128  # quicker
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Mapping

from react.model.errors import PatternError
from react.model.pattern import Pattern
from react.model.swapspace import SwapSpace
from react.model.transforms import GlobalSwap, PositionSwap, Swap
from react.model.verify import first_violation
from react.patterns import (
    allgather_recursive_doubling,
    allreduce_double_binary_tree,
    allreduce_ring,
)

PATTERNS: dict[str, Callable[[int], Pattern]] = {
    "dtree": allreduce_double_binary_tree,
    "ring": allreduce_ring,
    "rd": allgather_recursive_doubling,
}


def brute_force_rank(pattern: Pattern, rank: int) -> int:
    """How many distinct rewrites the reference finds for ``rank`` (appendix A.3): every
    partner, the global swap, and in every chunk graph every window ``[a, b]`` of its steps
    (the whole graph being the chunk-local swap), applied, kept if it changes the flows, passes
    the degree rule (checked directly on the two patterns' degrees) and verifies."""
    degrees = pattern.degrees()
    original = set(pattern.flows)

    def deg(p_degrees: Mapping, t: int, r: int) -> int:
        return max(p_degrees.get((t, r), (0, 0)))

    found = 0
    for y in pattern.ranks:
        if y == rank:
            continue
        candidates: list[Swap] = [GlobalSwap(rank, y)]
        for g in range(len(pattern.chunk_graphs())):
            steps = sorted({pattern.flows[i].step for i in pattern.flows_of_chunk_graph(g)})
            candidates += [PositionSwap(g, rank, y, a, b) for i, a in enumerate(steps)
                           for b in steps[i:]]
        seen: set[frozenset] = set()
        for swap in candidates:
            try:
                after = swap.apply(pattern)
            except PatternError:
                continue
            key = frozenset(after.flows)
            if key == original or key in seen:
                continue
            seen.add(key)
            new = after.degrees()
            if all(
                deg(new, t, r) <= max(deg(degrees, t, rank), deg(degrees, t, y))
                for t in range(1, pattern.num_steps + 1)
                for r in (rank, y)
            ) and first_violation(after) is None:
                found += 1
    return found


def run(name: str, n: int, rank: int, reference_max: int) -> None:
    start = time.perf_counter()
    pattern = PATTERNS[name](n)
    generate = time.perf_counter() - start

    start = time.perf_counter()
    SwapSpace(pattern)
    construct = time.perf_counter() - start

    space = SwapSpace(pattern, check=False)
    start = time.perf_counter()
    swaps = space.swaps_for(rank)
    one_rank = time.perf_counter() - start
    one = len(swaps)

    start = time.perf_counter()
    space = SwapSpace(pattern).build_all()
    every = time.perf_counter() - start
    counts = space.counts()

    line = (
        f"{name:>5} n={n:<5} flows={len(pattern.flows):<8} generate {generate:7.3f}s  "
        f"construct {construct:7.3f}s  rank {rank}: {one:>5} swaps {one_rank:7.3f}s  "
        f"all ranks {every:7.3f}s  ({counts['position']} position, {counts['chunk_local']} "
        f"chunk-local, {counts['global']} global; each swap counted at both ranks)"
    )
    print(line, flush=True)
    if len(pattern.flows) * n <= reference_max:
        start = time.perf_counter()
        expected = brute_force_rank(pattern, rank)
        reference = time.perf_counter() - start
        distinct = len({frozenset(s.apply(pattern).flows) for s in swaps})
        status = ("same rewrites" if expected == distinct
                  else f"MISMATCH: reference found {expected}, the space {distinct}")
        print(
            f"        brute-force reference, rank {rank}: {reference:.3f}s "
            f"({reference / max(one_rank, 1e-9):.0f}x the swap space's one-rank time), {status}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 128, 1024])
    parser.add_argument(
        "--patterns", nargs="+", choices=sorted(PATTERNS), default=["dtree", "ring", "rd"]
    )
    parser.add_argument("--rank", type=int, default=3, help="the rank of the one-rank figure")
    parser.add_argument(
        "--reference-max", type=int, default=5_000,
        help="run the brute-force reference only where flows * n is at most this",
    )
    args = parser.parse_args(argv)
    for name in args.patterns:
        for n in args.sizes:
            run(name, n, args.rank % n, args.reference_max)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
