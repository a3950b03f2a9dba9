"""The GPU backend in one command: correctness of every generator, then RCollective vs NCCL.

Run one process per GPU (torchrun sets the ranks)::

    torchrun --standalone --nproc-per-node=N benchmarks/bench_gpu.py --out DIR

1. :func:`react.backends.gpu.selfcheck.check_all`: every generator at n = N, int32 exactly and
   float32 to tolerance, against numpy and NCCL's own collectives; merged flow timings.
2. For each message size and AllReduce pattern, on float32 buffers, interleaved in one run:
   NCCL's ``all_reduce``; RCollective with flow timing off; with timing on (timings read one
   epoch late, as a training loop would); with timing on and one lane (every chunk graph on
   one communicator); timing off and on with the posting replayed as a CUDA graph
   (``GpuCollective(graph=True)``: the warm-up calls run it eagerly, then capture it); and
   ``p2p``, the ring's data movement alone in NCCL point-to-point
   (2(N-1) grouped exchanges of 1/N of the message with the ring neighbours, on the default
   communicator, no reductions, no events): the ceiling of any pattern built from NCCL p2p.
   ``post`` is the host time spent inside one call (posting only). Two clocks: ``sync`` (each
   call alone: host barrier, call, device synchronise; the slowest rank's time, median over
   repetitions) and ``loop`` (``K`` calls back to back, one synchronise at the end; the slowest
   rank's mean per call, median over blocks).
   Algorithm bandwidth = message bytes / time (GB/s, 10^9).
3. The cost of a pattern switch, at the largest size, each as a ratio to one steady epoch of
   the same pattern measured in the same loop (``sync`` clock): ``prepare`` (a pattern
   RCollective has not seen: verify, plan, staging buffers, events; host time), ``first`` (the
   first epoch on it minus a steady one: first use of its buffers and events), and ``new
   lanes`` (what a switch would cost if it needed new NCCL communicators: ``new_group`` for
   every lane, the first collective on each, and the first point-to-point exchange between the
   ring neighbours on it, which sets up NCCL's p2p connections). RCollective makes its lanes
   once at start, so a switch pays only ``prepare`` and ``first``.

Rank 0 writes ``gpu_bench.json`` (everything) and ``gpu_bench.md`` (the tables) under DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from react.backends.gpu.cuda import close_gpu_world, init_gpu_world  # noqa: E402
from react.model.errors import ReactError  # noqa: E402
from react.patterns import generator  # noqa: E402

SIZES_BYTES = (2_000_000, 20_000_000, 100_000_000)
PATTERNS = ("allreduce_ring", "allreduce_double_binary_tree")
VARIANTS = ("nccl", "p2p", "off", "on", "on_1lane", "off_graph", "on_graph")


def _slowest(dist, host_group, values: list[float]) -> list[float]:
    """Element-wise maximum over ranks of per-rank times (Gloo, host side)."""
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, values, group=host_group)
    return [max(col) for col in zip(*every, strict=True)]


def bench(sizes, patterns, reps: int, loop_calls: int, loop_blocks: int) -> list[dict]:
    import torch

    from react.backends.gpu.collective import GpuCollective

    dist = torch.distributed
    host = dist.new_group(backend="gloo")
    colls = {"off": GpuCollective(timing=False), "on": GpuCollective(timing=True),
             "on_1lane": GpuCollective(timing=True, lanes=1),
             "off_graph": GpuCollective(timing=False, graph=True),
             "on_graph": GpuCollective(timing=True, graph=True)}
    rows = []
    epoch = 0
    try:
        for size in sizes:
            buf = torch.zeros(size // 4, dtype=torch.float32, device="cuda")
            n, me = dist.get_world_size(), dist.get_rank()
            part = buf.numel() // n
            scratch = torch.empty(part, dtype=buf.dtype, device=buf.device)
            for name in patterns:
                pattern = generator(name)(dist.get_world_size())
                state = {"prev": None}

                def call(variant: str, _p=pattern, _b=buf, _s=state, _x=scratch, _n=n, _me=me,
                         _part=part) -> None:
                    nonlocal epoch
                    if variant == "nccl":
                        dist.all_reduce(_b)
                        return
                    if variant == "p2p":
                        for step in range(2 * (_n - 1)):
                            k = (_me - step) % _n
                            ops = [dist.P2POp(dist.isend, _b[k * _part:(k + 1) * _part],
                                              (_me + 1) % _n),
                                   dist.P2POp(dist.irecv, _x, (_me - 1) % _n)]
                            for w in dist.batch_isend_irecv(ops):
                                w.wait()
                        return
                    ep = colls[variant].run(_p, _b, epoch)
                    epoch += 1
                    if _s["prev"] is not None:
                        _s["prev"].timings()  # read one epoch late
                    _s["prev"] = ep if colls[variant].timing else None

                def flush(_s=state) -> None:
                    if _s["prev"] is not None:
                        _s["prev"].timings()
                        _s["prev"] = None

                for v in VARIANTS:  # warm-up: plans, buffers, events, NCCL channels
                    for _ in range(5):
                        call(v)
                    flush()
                torch.cuda.synchronize()
                sync = {v: [] for v in VARIANTS}
                post = {v: [] for v in VARIANTS}
                for _ in range(reps):
                    for v in VARIANTS:
                        dist.barrier(group=host)
                        t0 = time.perf_counter()
                        call(v)
                        t1 = time.perf_counter()
                        torch.cuda.synchronize()
                        sync[v].append(time.perf_counter() - t0)
                        post[v].append(t1 - t0)
                        flush()
                loop = {v: [] for v in VARIANTS}
                for _ in range(loop_blocks):
                    for v in VARIANTS:
                        dist.barrier(group=host)
                        t0 = time.perf_counter()
                        for _ in range(loop_calls):
                            call(v)
                        flush()
                        torch.cuda.synchronize()
                        loop[v].append((time.perf_counter() - t0) / loop_calls)
                row = {"pattern": name, "message_bytes": size}
                for v in VARIANTS:
                    s = statistics.median(_slowest(dist, host, sync[v]))
                    lp = statistics.median(_slowest(dist, host, loop[v]))
                    row[v] = {"sync_s": s, "loop_s": lp,
                              "post_s": statistics.median(_slowest(dist, host, post[v])),
                              "sync_algbw_GBps": size / s / 1e9,
                              "loop_algbw_GBps": size / lp / 1e9}
                rows.append(row)
                if dist.get_rank() == 0:
                    print(_line(row), flush=True)
            del buf, scratch
    finally:
        for c in colls.values():
            c.close()
        dist.destroy_process_group(host)
    return rows


def switch_costs(size: int, reps: int) -> dict:
    """Section 3 of the module docstring: the switch's parts against one steady epoch."""
    import torch

    from react.backends.gpu.collective import GpuCollective
    from react.model.pattern import Pattern

    dist = torch.distributed
    host = dist.new_group(backend="gloo")
    n, me = dist.get_world_size(), dist.get_rank()
    buf = torch.zeros(size // 4, dtype=torch.float32, device="cuda")
    coll = GpuCollective(timing=True)
    names = PATTERNS
    epoch = 0
    rows = {k: [] for k in ("steady", "prepare", "first", "lanes", "lanes_p2p")}
    try:
        warm = {name: generator(name)(n) for name in names}
        for p in warm.values():
            for _ in range(3):
                coll.run(p, buf, epoch).timings()
                epoch += 1
        for k in range(reps):
            name = names[k % len(names)]
            dist.barrier(group=host)
            t0 = time.perf_counter()
            coll.run(warm[name], buf, epoch).timings()
            rows["steady"].append(time.perf_counter() - t0)
            epoch += 1
            fresh = Pattern.from_dict(warm[name].to_dict())  # equal, but never seen: no cache
            dist.barrier(group=host)
            t0 = time.perf_counter()
            coll._prepare(fresh, buf, epoch)
            rows["prepare"].append(time.perf_counter() - t0)
            dist.barrier(group=host)
            t0 = time.perf_counter()
            coll.run(fresh, buf, epoch).timings()
            rows["first"].append(time.perf_counter() - t0 - rows["steady"][-1])
            epoch += 1
        part = buf.numel() // n
        scratch = torch.empty(part, dtype=buf.dtype, device=buf.device)
        for _ in range(max(1, reps // 4)):
            dist.barrier(group=host)
            t0 = time.perf_counter()
            lanes = [dist.new_group(list(range(n)), backend="nccl") for _ in range(coll.lanes)]
            for g in lanes:
                dist.all_reduce(torch.zeros(1, device="cuda"), group=g)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            for g in lanes:
                ops = [dist.P2POp(dist.isend, buf[:part], (me + 1) % n, group=g),
                       dist.P2POp(dist.irecv, scratch, (me - 1) % n, group=g)]
                for w in dist.batch_isend_irecv(ops):
                    w.wait()
            torch.cuda.synchronize()
            rows["lanes"].append(t1 - t0)
            rows["lanes_p2p"].append(time.perf_counter() - t0)
            for g in lanes:
                dist.destroy_process_group(g)
        out = {"message_bytes": size, "reps": reps, "lanes": coll.lanes}
        for key, values in rows.items():
            out[key + "_s"] = statistics.median(_slowest(dist, host, values))
        steady = out["steady_s"]
        for key in ("prepare", "first", "lanes", "lanes_p2p"):
            out[key + "_vs_epoch"] = out[key + "_s"] / steady
        return out
    finally:
        coll.close()
        dist.destroy_process_group(host)


def _line(row: dict) -> str:
    parts = [f"{row['pattern']} {row['message_bytes'] / 1e6:g} MB:"]
    for v in VARIANTS:
        parts.append(f"{v} {row[v]['sync_s'] * 1e3:.3f}/{row[v]['loop_s'] * 1e3:.3f} ms")
    return " ".join(parts)


def markdown(rows: list[dict], check: dict, meta: dict) -> str:
    out = [f"Setup: {meta['world_size']} ranks, {meta['gpus']}, torch {meta['torch']}, "
           f"CUDA {meta['cuda']}, NCCL {meta['nccl']}.", "",
           f"Correctness: {len(check['checked'])} checks passed "
           f"({', '.join(sorted({c['generator'] for c in check['checked']}))}; int32 and "
           "float32; against numpy and NCCL).", "",
           "ms per call (algorithm bandwidth GB/s):", "",
           "| clock | pattern | MB | NCCL all_reduce | NCCL p2p ring | RColl timing off | "
           "timing on | on, 1 lane | CUDA graph, timing off | graph, timing on | off/NCCL bw | "
           "on/off time | graph off/NCCL bw |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for clock in ("sync", "loop"):
        for r in rows:
            cells = [f"{r[v][clock + '_s'] * 1e3:.3f} ({r[v][clock + '_algbw_GBps']:.0f})"
                     for v in VARIANTS]
            ratio_bw = r["off"][clock + "_algbw_GBps"] / r["nccl"][clock + "_algbw_GBps"]
            ratio_on = r["on"][clock + "_s"] / r["off"][clock + "_s"]
            ratio_graph = (r["off_graph"][clock + "_algbw_GBps"]
                           / r["nccl"][clock + "_algbw_GBps"])
            out.append(f"| {clock} | {r['pattern']} | {r['message_bytes'] / 1e6:g} | "
                       + " | ".join(cells) + f" | {ratio_bw:.2f} | {ratio_on:.2f} | "
                       f"{ratio_graph:.2f} |")
    sw = meta.get("switch")
    if sw:
        out += ["", f"Pattern switch at {sw['message_bytes'] / 1e6:g} MB (median of "
                f"{sw['reps']}; x = multiples of one steady epoch, {sw['steady_s'] * 1e3:.3f} "
                "ms, sync clock):", "",
                "| prepare (new pattern) | first epoch extra | new lanes + first collective | "
                "+ first p2p |", "| --- | --- | --- | --- |",
                f"| {sw['prepare_s'] * 1e3:.3f} ms ({sw['prepare_vs_epoch']:.2f}x) | "
                f"{sw['first_s'] * 1e3:.3f} ms ({sw['first_vs_epoch']:.2f}x) | "
                f"{sw['lanes_s'] * 1e3:.1f} ms ({sw['lanes_vs_epoch']:.0f}x) | "
                f"{sw['lanes_p2p_s'] * 1e3:.1f} ms ({sw['lanes_p2p_vs_epoch']:.0f}x) |"]
    out += ["", "Host time inside one call (posting only), ms:", "",
            "| pattern | MB | " + " | ".join(VARIANTS) + " |",
            "| --- | --- |" + " --- |" * len(VARIANTS)]
    for r in rows:
        out.append(f"| {r['pattern']} | {r['message_bytes'] / 1e6:g} | "
                   + " | ".join(f"{r[v]['post_s'] * 1e3:.3f}" for v in VARIANTS) + " |")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=".", help="folder rank 0 writes results to")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--loop-calls", type=int, default=20)
    parser.add_argument("--loop-blocks", type=int, default=9)
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES_BYTES))
    parser.add_argument("--switch-reps", type=int, default=20,
                        help="repetitions of the pattern-switch measurement (0: skip it)")
    args = parser.parse_args()
    import torch

    from react.backends.gpu.selfcheck import check_all

    rank = -1
    try:
        world = init_gpu_world()
        rank = world.rank
        t0 = time.perf_counter()
        check = check_all()
        check_s = time.perf_counter() - t0
        if rank == 0:
            print(f"selfcheck: {len(check['checked'])} checks passed in {check_s:.1f} s",
                  flush=True)
        sizes = [int(s) for s in args.sizes.split(",")]
        rows = bench(sizes, PATTERNS, args.reps, args.loop_calls, args.loop_blocks)
        switch = switch_costs(max(sizes), args.switch_reps) if args.switch_reps > 0 else None
    except ReactError as exc:
        print(f"rank {rank}: {exc}", file=sys.stderr)
        close_gpu_world()
        return 1
    if rank == 0:
        meta = {"world_size": world.world_size, "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "nccl": ".".join(str(x) for x in torch.cuda.nccl.version()),
                "gpus": ", ".join(sorted({torch.cuda.get_device_name(i)
                                          for i in range(torch.cuda.device_count())})),
                "host": platform.node(), "reps": args.reps, "loop_calls": args.loop_calls,
                "loop_blocks": args.loop_blocks, "selfcheck_s": check_s, "switch": switch,
                "env": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE",
                                                       "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                       "NVSHMEM_DISABLE_NVLS")}}
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "gpu_bench.json"), "w", encoding="utf-8") as fh:
            json.dump({"meta": meta, "selfcheck": check, "rows": rows}, fh, indent=1)
        text = markdown(rows, check, meta)
        with open(os.path.join(args.out, "gpu_bench.md"), "w", encoding="utf-8") as fh:
            fh.write(text)
        print(text)
    close_gpu_world()
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
