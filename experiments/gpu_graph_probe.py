"""Can a pattern's NCCL posting be captured as a CUDA graph? A probe on one GPU.

The GPU backend posts every NCCL group of a collective from the host, and at 100 MB that host
work is what holds RCollective at about half NCCL's AllReduce bandwidth and makes its flow
stamps noisy (docs/results/gpu.md). Replaying a CUDA graph of the whole posting would take the
host out. Before building that into :mod:`react.backends.gpu.collective`, this probe checks, on
any one GPU (one rank sending to itself through NCCL, so no second GPU is needed), each thing
the backend would rely on:

1. ``eager``: ``batch_isend_irecv`` of a rank to itself moves the bytes (the reference);
2. ``graph``: the same group captured in a ``torch.cuda.CUDAGraph`` after a warm-up, replayed
   10 times, each replay's result checked;
3. ``events``: timing events recorded inside the capture (``external=True`` where torch takes
   it) give elapsed times after a replay, and how they compare with the eager transfer's;
4. ``lanes``: two streams forked inside the capture, each posting on its own communicator
   (``new_group``), joined again: both transfers right after each replay;
5. ``host``: host time to post one group eagerly against one ``replay()`` (no sync), and
   the GPU time of each, over many calls;
6. ``allreduce_graph``: NCCL's ``all_reduce`` captured and replayed with timing events, a
   control whose capture torch supports;
7. ``collective``: RCollective itself (``GpuCollective(graph=True)`` against its eager
   posting) on a 2-rank ring whose peer is mapped to this rank (:func:`_self_plan`): the same
   buffer after 8 epochs, the flows timed, host and GPU time per epoch back to back, and the
   same buffers after pattern switches and on a second buffer.

Each check runs on its own: a failure is recorded with its error and the others go on. Writes
``OUT/graph_probe.json`` and ``OUT/graph_probe.md``; exit status 0 even when checks fail (the
page says which).

Usage (on a machine with a GPU and torch built with NCCL)::

    python3 experiments/gpu_graph_probe.py --out OUT [--mbytes 100]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _timing_event(torch: Any, external: bool) -> tuple[Any, bool]:
    """A timing event, made ``external`` (a record node in a captured graph) where torch can."""
    if external:
        try:
            return torch.cuda.Event(enable_timing=True, external=True), True
        except TypeError:
            pass
    return torch.cuda.Event(enable_timing=True), False


def _self_group(dist: Any, src: Any, dst: Any, group: Any = None) -> list[Any]:
    """A send and a receive of this rank to itself, as one NCCL group."""
    ops = [dist.P2POp(dist.isend, src, 0, group=group), dist.P2POp(dist.irecv, dst, 0, group=group)]
    return dist.batch_isend_irecv(ops)


def probe(mbytes: float) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
    n = int(mbytes * 1e6) // 4
    src = torch.arange(n, dtype=torch.float32, device=dev)
    dst = torch.zeros(n, dtype=torch.float32, device=dev)
    out: dict[str, Any] = {
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "gpu": torch.cuda.get_device_name(0), "bytes": n * 4,
    }
    checks: dict[str, Any] = {}
    out["checks"] = checks

    def run(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        t0 = time.perf_counter()
        try:
            checks[name] = {"ok": True, **fn()}
        except Exception as exc:  # a probe: record any failure and go on
            checks[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                            "traceback": traceback.format_exc()[-2000:]}
            torch.cuda.synchronize()
        checks[name]["wall_s"] = round(time.perf_counter() - t0, 3)
        print(name, "ok" if checks[name]["ok"] else checks[name]["error"], flush=True)

    def eager() -> dict[str, Any]:
        dst.zero_()
        start, _ = _timing_event(torch, False)
        end, _ = _timing_event(torch, False)
        start.record()
        for w in _self_group(dist, src, dst):
            w.wait()
        end.record()
        torch.cuda.synchronize()
        return {"equal": bool(torch.equal(src, dst)), "ms": start.elapsed_time(end)}

    run("eager", eager)

    stream = torch.cuda.Stream()
    captured: dict[str, Any] = {}

    def graph() -> dict[str, Any]:
        with torch.cuda.stream(stream):  # warm-up on the capture stream
            for w in _self_group(dist, src, dst):
                w.wait()
        torch.cuda.synchronize()
        # "global" (the default) fails a capture when another thread touches CUDA meanwhile
        # (NCCL's watchdog may); "thread_local" is what the backend would use then.
        failed = {}
        for mode in ("global", "thread_local"):
            g = torch.cuda.CUDAGraph()
            e0, external = _timing_event(torch, True)
            e1, _ = _timing_event(torch, True)
            try:
                with torch.cuda.graph(g, stream=stream, capture_error_mode=mode):
                    e0.record()
                    for w in _self_group(dist, src, dst):
                        w.wait()
                    e1.record()
            except Exception as exc:  # a probe: try the other mode
                failed[mode] = f"{type(exc).__name__}: {exc}"[:500]
                torch.cuda.synchronize()
                continue
            break
        else:
            raise RuntimeError(f"capture failed in both modes: {failed}")
        captured.update(graph=g, e0=e0, e1=e1, external=external, mode=mode)
        return {"capture_mode": mode, "failed_modes": failed,
                "replays_equal": _replays_equal(torch, g, src, dst, 10)}

    run("graph", graph)

    def events() -> dict[str, Any]:
        if "graph" not in captured:
            raise RuntimeError("no captured graph (the graph check failed)")
        g, e0, e1 = captured["graph"], captured["e0"], captured["e1"]
        times = []
        for _ in range(10):
            g.replay()
            torch.cuda.synchronize()
            times.append(e0.elapsed_time(e1))
        return {"external": captured["external"], "elapsed_ms": times}

    run("events", events)

    def lanes() -> dict[str, Any]:
        if "graph" not in captured:
            raise RuntimeError("no captured graph (the graph check failed)")
        a, b = dist.new_group([0]), dist.new_group([0])
        half = n // 2
        s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
        for grp, sl in ((a, slice(0, half)), (b, slice(half, n))):  # warm up both lanes
            for w in _self_group(dist, src[sl], dst[sl], grp):
                w.wait()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream, capture_error_mode=captured["mode"]):
            fork = torch.cuda.Event()
            fork.record()
            joins = []
            for s, grp, sl in ((s1, a, slice(0, half)), (s2, b, slice(half, n))):
                s.wait_event(fork)
                with torch.cuda.stream(s):
                    for w in _self_group(dist, src[sl], dst[sl], grp):
                        w.wait()
                    done = torch.cuda.Event()
                    done.record()
                joins.append(done)
            for done in joins:
                torch.cuda.current_stream().wait_event(done)
        return {"replays_equal": _replays_equal(torch, g, src, dst, 5)}

    run("lanes", lanes)

    def host() -> dict[str, Any]:
        if "graph" not in captured:
            raise RuntimeError("no captured graph (the graph check failed)")
        g = captured["graph"]
        calls = 50
        out_h: dict[str, Any] = {"calls": calls}
        for name, post in (("eager", lambda: [w.wait() for w in _self_group(dist, src, dst)]),
                           ("replay", g.replay)):
            torch.cuda.synchronize()
            start, _ = _timing_event(torch, False)
            end, _ = _timing_event(torch, False)
            start.record()
            t0 = time.perf_counter()
            for _ in range(calls):
                post()
            host_s = time.perf_counter() - t0
            end.record()
            torch.cuda.synchronize()
            out_h[name] = {"host_us_per_call": round(host_s / calls * 1e6, 1),
                           "gpu_ms_per_call": round(start.elapsed_time(end) / calls, 4)}
        return out_h

    run("host", host)

    def allreduce_graph() -> dict[str, Any]:
        # The collective path, whose capture torch supports, as a control for the p2p checks.
        with torch.cuda.stream(stream):
            dist.all_reduce(dst)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        mode = captured.get("mode", "thread_local")
        e0, external = _timing_event(torch, True)
        e1, _ = _timing_event(torch, True)
        with torch.cuda.graph(g, stream=stream, capture_error_mode=mode):
            e0.record()
            dist.all_reduce(dst)
            e1.record()
        results, times = [], []
        for _ in range(5):
            dst.copy_(src)
            torch.cuda.synchronize()
            g.replay()
            torch.cuda.synchronize()
            results.append(bool(torch.equal(src, dst)))
            times.append(e0.elapsed_time(e1))
        return {"capture_mode": mode, "external": external, "replays_equal": results,
                "elapsed_ms": times}

    run("allreduce_graph", allreduce_graph)
    run("collective", lambda: _collective_check(torch, n))
    return out


def _replays_equal(torch: Any, graph: Any, src: Any, dst: Any, times: int) -> list[bool]:
    """Replay a captured copy of ``src`` into ``dst`` ``times`` times, ``dst`` cleared before
    each; whether each replay moved the bytes."""
    out = []
    for _ in range(times):
        dst.zero_()
        torch.cuda.synchronize()
        graph.replay()
        torch.cuda.synchronize()
        out.append(bool(torch.equal(src, dst)))
    return out


def _self_plan(orig: Callable[..., Any]) -> Callable[..., Any]:
    """``gpu_plan`` with every peer mapped to this rank and each step's groups merged into one.

    On one GPU the backend's own posting can only talk to itself: rank 0 of a 2-rank ring
    then sends each step's chunk into its own receive (both in one NCCL group, as a send to
    oneself needs; a step's send and receive belong to different chunk graphs, so the step's
    groups are merged across graphs). The bytes land in the wrong chunk, so the result is not
    the AllReduce, but it is the same for the eager posting and the graph, which is what is
    compared."""
    from dataclasses import replace

    from react.backends.gpu.plan import GpuGroup, GpuPlan

    def plan(pattern: Any, rank: int, count: int, lanes: int) -> GpuPlan:
        base = orig(pattern, 0, count, lanes)
        merged: dict[int, list[GpuGroup]] = {}  # by step: a ring's chunks are graphs apart
        for g in base.groups:
            merged.setdefault(g.step, []).append(g)
        groups = tuple(
            GpuGroup(gs[0].graph, gs[0].step, gs[0].lane,
                     tuple(replace(o, peer=0) for g in gs for o in g.sends),
                     tuple(replace(o, peer=0) for g in gs for o in g.recvs))
            for gs in merged.values())
        return GpuPlan(base.rank, base.count, base.lanes, base.graphs, groups)

    return plan


def _collective_check(torch: Any, n: int) -> dict[str, Any]:
    """RCollective's graph mode against its eager posting, on one GPU (:func:`_self_plan`):
    the same buffer after 8 epochs, and host and GPU time per epoch back to back."""
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    import react.backends.gpu.collective as collective
    from react.patterns import allreduce_ring

    collective.gpu_plan = _self_plan(collective.gpu_plan)
    ring = allreduce_ring(2)
    dev = torch.device("cuda", 0)
    out: dict[str, Any] = {}
    colls = {}
    for mode in ("eager", "graph"):
        coll = collective.GpuCollective(lanes=2, timing=True, graph=mode == "graph")
        coll.world_size = 2  # rank 0 of a 2-rank pattern whose peer is itself
        colls[mode] = coll
    buffers = {}
    for mode, coll in colls.items():
        buf = (torch.arange(n, dtype=torch.float32, device=dev) % 1000) / 1000
        for e in range(8):
            epoch = coll.run(ring, buf, e)
        epoch.wait()
        flows = epoch.timings()
        buffers[mode] = buf
        out[f"{mode}_flows_timed"] = (len(flows.sends) + len(flows.recvs)
                                      if flows is not None else 0)
        out[f"{mode}_epoch_ms"] = round((flows.end_s - flows.start_s) * 1e3, 4) if flows else None
    out["same_buffer"] = bool(torch.equal(buffers["eager"], buffers["graph"]))
    out["graphs_captured"] = sum(len(p.graphs) for p in colls["graph"]._prepared.values())
    for mode, coll in colls.items():
        buf = torch.zeros(n, dtype=torch.float32, device=dev)
        for e in range(5):  # warm-up (and, in graph mode, the captures)
            coll.run(ring, buf, e).wait()
        for timing in (True, False):
            coll.timing = timing
            torch.cuda.synchronize()
            start, _ = _timing_event(torch, False)
            end, _ = _timing_event(torch, False)
            start.record()
            t0 = time.perf_counter()
            calls = 50
            for e in range(calls):
                last = coll.run(ring, buf, 100 + e)
            host_s = time.perf_counter() - t0
            end.record()
            last.wait()
            torch.cuda.synchronize()
            out[f"{mode}_timing_{'on' if timing else 'off'}"] = {
                "host_us_per_epoch": round(host_s / calls * 1e6, 1),
                "gpu_ms_per_epoch": round(start.elapsed_time(end) / calls, 4)}
        coll.timing = True
    # A pattern switch and a new buffer, as the closed loop makes them: the ring and its global
    # swap alternating (each a prepared pattern of its own: one eager epoch, then captures),
    # then a second buffer (its own captures); the graph mode against the eager posting.
    from react.model.transforms import GlobalSwap

    swapped = GlobalSwap(0, 1).apply(ring)
    ends = {}
    for mode, coll in colls.items():
        first = (torch.arange(n, dtype=torch.float32, device=dev) % 997) / 997
        second = first.clone()
        for e in range(12):
            coll.run(ring if e % 3 else swapped, first, 200 + e)
        for e in range(6):
            coll.run(swapped, second, 300 + e)
        torch.cuda.synchronize()
        ends[mode] = (first, second)
    out["switch_same_buffers"] = [bool(torch.equal(a, b))
                                  for a, b in zip(ends["eager"], ends["graph"], strict=True)]
    out["graphs_captured_in_all"] = sum(len(p.graphs)
                                        for p in colls["graph"]._prepared.values())
    out.update(_switch_cost(torch, colls, swapped, n, dev))
    return out


def _switch_cost(torch: Any, colls: dict[str, Any], pattern: Any, n: int, dev: Any
                 ) -> dict[str, Any]:
    """What the first epochs on a new buffer cost, each waited for (host wall time): in
    graph mode one eager epoch, then a capture per timing-event set, then replays; eager
    posting beside it. The excess is the first ``k`` epochs' time less ``k`` steady ones
    (the median of the last four), ``k`` the epochs until graph mode stops capturing."""
    out: dict[str, Any] = {}
    epochs = 12
    for mode, coll in colls.items():
        fresh = (torch.arange(n, dtype=torch.float32, device=dev) % 991) / 991
        before = sum(len(p.graphs) for p in coll._prepared.values())
        times, captured = [], []
        for e in range(epochs):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            coll.run(pattern, fresh, 400 + e).wait()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
            captured.append(sum(len(p.graphs) for p in coll._prepared.values()) - before)
        out[f"{mode}_new_buffer_epoch_ms"] = [round(t, 3) for t in times]
        out[f"{mode}_new_buffer_graphs"] = captured[-1]
        if mode == "graph":
            k = captured.index(captured[-1]) + 1  # the epoch of the last capture, counted
            out["graph_switch_epochs"] = k
    k = out.get("graph_switch_epochs", 5)
    for mode in colls:
        times = out[f"{mode}_new_buffer_epoch_ms"]
        steady = sorted(times[-4:])[1:3]
        out[f"{mode}_switch_excess_ms"] = round(sum(times[:k]) - k * sum(steady) / 2, 3)
    return out


def _teardown(wait_s: float = 30.0) -> bool:
    """Destroy the process group on a helper thread; whether it finished within ``wait_s``
    (the first run of this probe hung there, after every check had passed)."""
    import threading

    import torch.distributed as dist

    thread = threading.Thread(target=dist.destroy_process_group, daemon=True)
    thread.start()
    thread.join(wait_s)
    return not thread.is_alive()


def page(result: dict[str, Any]) -> str:
    lines = [f"# CUDA-graph probe: {result.get('gpu', '?')}, torch {result.get('torch')}, CUDA "
             f"{result.get('cuda')}, NCCL {result.get('nccl')}, {result.get('bytes', 0) / 1e6:.0f}"
             " MB", "", "| check | ok | what came back |", "|---|---|---|"]
    for name, c in result.get("checks", {}).items():
        shown = {k: v for k, v in c.items() if k not in ("ok", "traceback")}
        lines.append(f"| {name} | {'yes' if c['ok'] else 'no'} | `{json.dumps(shown)}` |")
    if "teardown_finished" in result:
        lines += ["", f"Process group teardown finished within 30 s: {result['teardown_finished']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for the JSON and page")
    parser.add_argument("--mbytes", type=float, default=100.0,
                        help="megabytes moved per transfer (default 100)")
    args = parser.parse_args(argv)
    if not args.mbytes > 0:
        parser.error(f"--mbytes must be positive, got {args.mbytes}")
    try:
        import torch
    except ImportError:
        parser.error("torch is not installed: this probe needs torch with CUDA and NCCL")
    if not torch.cuda.is_available():
        parser.error("no CUDA device: this probe needs a GPU")
    args.out.mkdir(parents=True, exist_ok=True)
    result = probe(args.mbytes)

    def write() -> None:
        (args.out / "graph_probe.json").write_text(json.dumps(result, indent=1),
                                                   encoding="utf-8")
        (args.out / "graph_probe.md").write_text(page(result), encoding="utf-8")

    write()  # before the teardown, which may hang
    print(page(result), flush=True)
    result["teardown_finished"] = _teardown()
    write()
    print("teardown finished:", result["teardown_finished"], flush=True)
    os._exit(0)  # a hung NCCL teardown thread must not keep the process


if __name__ == "__main__":
    sys.exit(main())
