"""Every pattern generator on NCCL at the job's rank count, checked against numpy and NCCL.

Run one process per GPU: ``torchrun --nproc-per-node=N -m react.backends.gpu.selfcheck
[--out FILE]``. For every generator of :data:`react.patterns.GENERATORS` that exists at N ranks,
in int32 (sums must be exact) and float32 (to a tolerance; NCCL and the pattern add in different
orders), two epochs each, every rank's buffer is compared with the collective's meaning in
plain numpy (:func:`react.runtime.reference.expected_output`) and with NCCL's own collective on
the same inputs (``all_reduce``; ``all_gather`` of every input, chunks picked from their owners;
``all_reduce`` masked to owned chunks for ReduceScatter; ``broadcast``; ``reduce``). Every
epoch's flow timings are gathered to rank 0 and merged with
:func:`react.runtime.timings.merge_epoch`, as the tuner does. Exit status 0 when every check
held; otherwise one line naming the generator, dtype, epoch and first wrong element.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from react.model.errors import ReactError
from react.patterns import patterns_at
from react.runtime.reference import expected_output, initial_buffer
from react.runtime.timings import RankEpochTimings, merge_epoch

__all__ = ["check_all", "main"]


def inputs_for(n: int, count: int, dtype: str) -> list[np.ndarray]:
    """Every rank's input (each rank computes all of them, for the numpy reference)."""
    out = []
    for r in range(n):
        rng = np.random.default_rng(1000 + r)
        if dtype == "int32":
            out.append(rng.integers(-1000, 1000, count).astype(np.int32))
        else:
            out.append(rng.standard_normal(count).astype(np.float32))
    return out


def _nccl_reference(torch: Any, pattern: Any, inputs: list[np.ndarray], rank: int,
                    count: int) -> np.ndarray | None:
    """What NCCL's own collective leaves at ``rank`` (None where the kind leaves nothing)."""
    from react.runtime.schedule import chunk_bounds

    dist = torch.distributed
    mine = torch.from_numpy(inputs[rank]).cuda()
    kind = pattern.kind
    if kind in ("allreduce", "reduce_scatter"):
        dist.all_reduce(mine)
        return mine.cpu().numpy()
    if kind == "reduce":
        dist.reduce(mine, dst=pattern.root)
        return mine.cpu().numpy() if rank == pattern.root else None
    if kind == "broadcast":
        dist.broadcast(mine, src=pattern.root)
        return mine.cpu().numpy()
    if kind == "allgather":
        every = torch.empty(len(inputs) * count, dtype=mine.dtype, device=mine.device)
        dist.all_gather_into_tensor(every, mine)
        rows = every.cpu().numpy().reshape(len(inputs), count)
        out = inputs[rank].copy()
        bounds = chunk_bounds(pattern, count)
        for chunk in pattern.chunks:
            lo, hi = bounds[chunk.id], bounds[chunk.id + 1]
            out[lo:hi] = rows[pattern.ranks.index(chunk.owner), lo:hi]
        return out
    raise ReactError(f"selfcheck: no NCCL counterpart for kind {kind!r}")


def _compare(what: str, got: np.ndarray, want: np.ndarray, exact: bool, n: int) -> None:
    if exact:
        bad = np.flatnonzero(got != want)
    else:
        bad = np.flatnonzero(~np.isclose(got, want, rtol=1e-5, atol=1e-5 * n))
    if bad.size:
        i = int(bad[0])
        raise ReactError(f"{what}: element {i} is {got[i]!r}, expected {want[i]!r} "
                         f"({bad.size} wrong)")


def check_all(count: int = 1 << 16, *, lanes: int = 4, graph: bool = False) -> dict[str, Any]:
    """Run the checks on this rank (the process group is up); rank 0 gets the full report.

    With ``graph`` RCollective posts as CUDA graphs, and each check runs three epochs on one
    buffer: the eager warm-up, the capture (then its replay) and a replay."""
    import torch

    from react.backends.gpu.collective import GpuCollective

    dist = torch.distributed
    rank, n = dist.get_rank(), dist.get_world_size()
    coll = GpuCollective(lanes=lanes, timing=True, graph=graph)
    report: dict[str, Any] = {"world_size": n, "count": count, "lanes": lanes, "graph": graph,
                              "checked": []}
    epoch = 0
    try:
        for name, pattern in patterns_at(n).items():
            for dtype in ("int32", "float32"):
                inputs = inputs_for(n, count, dtype)
                want, defined = expected_output(pattern, inputs, rank)
                nccl = _nccl_reference(torch, pattern, inputs, rank, count)
                merged = []
                buf = None
                for _ in range(3 if graph else 2):
                    start = torch.from_numpy(initial_buffer(pattern, inputs[rank], rank))
                    if buf is None:
                        buf = start.cuda()
                    else:  # the same tensor: a graph replays on the pointer it captured
                        buf.copy_(start)
                    rec = coll.run(pattern, buf, epoch).timings()
                    if rec is None:
                        raise ReactError(f"{name}: the collective ran without flow timing")
                    got = buf.cpu().numpy()
                    where = f"{name} {dtype} n={n} rank {rank} epoch {epoch}"
                    _compare(f"{where} vs numpy", got[defined], want[defined],
                             dtype == "int32", n)
                    if nccl is not None:
                        _compare(f"{where} vs NCCL", got[defined], nccl[defined],
                                 dtype == "int32", n)
                    records: list[Any] = [None] * n
                    dist.all_gather_object(records, rec.to_dict())
                    result = merge_epoch(pattern, [RankEpochTimings.from_dict(d)
                                                   for d in records],
                                         count * np.dtype(dtype).itemsize)
                    bad = [t for t in result.flows if not 0 <= t.end_s - t.start_s
                           or t.end_s > result.collective_time_s + 1e-9]
                    if result.collective_time_s <= 0 or bad:
                        raise ReactError(f"{where}: merged timings inconsistent: epoch "
                                         f"{result.collective_time_s} s, flows {bad[:2]}")
                    merged.append({"epoch_s": result.collective_time_s,
                                   "fct_s": [t.end_s - t.start_s for t in result.flows]})
                    epoch += 1
                report["checked"].append({"generator": name, "dtype": dtype,
                                          "nccl_compared": nccl is not None,
                                          "flows": len(pattern.flows), "merged": merged})
    finally:
        coll.close()
    return report


def main(argv: Sequence[str] | None = None) -> int:
    from react.backends.gpu.cuda import close_gpu_world, init_gpu_world

    parser = argparse.ArgumentParser(prog="python -m react.backends.gpu.selfcheck",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1 << 16, help="elements per message")
    parser.add_argument("--lanes", type=int, default=4)
    parser.add_argument("--graph", action="store_true",
                        help="post as CUDA graphs (GpuCollective(graph=True))")
    parser.add_argument("--out", help="JSON report rank 0 writes")
    args = parser.parse_args(argv)
    rank = -1
    try:
        world = init_gpu_world()
        rank = world.rank
        report = check_all(args.count, lanes=args.lanes, graph=args.graph)
    except ReactError as exc:
        print(f"rank {rank}: {exc}", file=sys.stderr)
        close_gpu_world()
        return 1
    close_gpu_world()
    if rank == 0:
        text = json.dumps(report)
        if args.out:
            with open(args.out, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
        print(json.dumps({"checked": [f"{c['generator']}:{c['dtype']}"
                                      for c in report["checked"]]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
