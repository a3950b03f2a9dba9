"""The ns-3 child process: builds one packet-level world at a time and runs batches of epochs.

Run as ``python -m react.backends.ns3.child`` by :class:`react.backends.ns3.process.Ns3Process`,
never imported by the parent. It reads one JSON request per line on stdin and writes one JSON
reply per line on the file descriptor that was its stdout; its real stdout is pointed at stderr
first, so that whatever ns-3 or cling print cannot corrupt the replies. A Python error in a
request becomes ``{"ok": false, "error": ...}``; an ns-3 assertion aborts the whole process,
which the parent turns into a readable error.

Requests (``op``):

- ``build``: a fresh world (``world``: hosts, switches, cables, ns-3 defaults, rate changes,
  background flows); any previous world is destroyed first, so one child serves many runs.
- ``run``: one batch of epochs of one pattern: ``flows`` ``[[src, dst, bytes], ...]``, ``deps``
  ``[[flow, before], ...]``, ``ports`` (one list per epoch), ``start_s``, ``gap_s`` and the
  ``routes`` not installed yet; replies each epoch's start, end and every flow's start and end.
- ``counters``: packets forwarded per (node, interface), for tests of the ECMP spread.
- ``quit``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HEADER = Path(__file__).with_name("react_ns3.h")


class _Child:
    def __init__(self) -> None:
        import cppyy
        from ns import ns  # noqa: F401  (loads every ns-3 module and its headers into cling)

        cppyy.cppdef(HEADER.read_text(encoding="utf-8"))
        self.cppyy = cppyy
        self.world: Any = None
        self.cables: list[list[float]] = []
        # batches added but not yet reported: id -> (epoch ids, first flow id per epoch, flows)
        self.pending: dict[str, tuple[list[int], list[int], int]] = {}

    def build(self, world: dict[str, Any]) -> dict[str, Any]:
        gbl = self.cppyy.gbl
        if self.world is not None:
            gbl.ns3.Simulator.Destroy()
            self.world = None
            self.pending.clear()
        w = gbl.react_ns3.World()
        for name, value in world["globals"].items():
            w.SetGlobal(name, value)
        for name, value in world["defaults"].items():
            w.SetDefault(name, value)
        w.SetDeviceQueue(int(world["device_queue_packets"]))
        w.AddNodes(int(world["hosts"]), int(world["switches"]))
        for a, b, bps_ab, bps_ba, delay in world["cables"]:
            w.AddCable(int(a), int(b), float(bps_ab), float(bps_ba), float(delay))
        w.FixRandomStreams(int(world["seed"]))
        for cable, side, at_s, bps in world["rate_changes"]:
            w.ScheduleRate(int(cable), int(side), float(at_s), float(bps))
        self._routes(w, world["routes"])
        for src, dst, conn, start_s, stop_s in world["background"]:
            flow = w.AddFlow(int(src), int(dst), int(conn), 0, -1)
            w.StartFlowAt(flow, float(start_s))
            if stop_s is not None:
                w.StopFlowAt(flow, float(stop_s))
        self.world = w
        self.cables = world["cables"]
        return {}

    @staticmethod
    def _routes(w: Any, routes: list[list[int]]) -> None:
        for node, src, dst, conn, cable, side in routes:
            w.AddRoute(node, src, dst, conn, w.Interface(cable, side))

    def _add_batch(self, batch: dict[str, Any]) -> None:
        w = self.world
        self._routes(w, batch["routes"])
        flows = batch["flows"]
        epochs: list[int] = []
        firsts: list[int] = []
        n_epochs = len(batch["ports"])
        for k, ports in enumerate(batch["ports"]):
            e = w.AddEpoch(k == n_epochs - 1)
            if epochs:
                w.ChainEpochs(epochs[-1], e, float(batch["gap_s"]))
            epochs.append(e)
            first = -1
            for (src, dst, size), conn in zip(flows, ports, strict=True):
                f = w.AddFlow(int(src), int(dst), int(conn), int(size), e)
                first = f if first < 0 else first
            for flow, before in batch["deps"]:
                w.AddDependency(first + flow, first + before)
            firsts.append(first)
        w.StartEpochAt(epochs[0], float(batch["start_s"]))
        self.pending[batch["id"]] = (epochs, firsts, len(flows))

    def run(self, req: dict[str, Any]) -> dict[str, Any]:
        """Add the request's batches, then simulate until some pending batch has ended."""
        w = self.world
        if w is None:
            raise RuntimeError("run before build")
        for batch in req["batches"]:
            self._add_batch(batch)
        misses, drops, marks, events = w.RouteMisses(), w.Drops(), w.Marks(), w.Events()
        wall = time.perf_counter()
        now = w.Run()
        wall = time.perf_counter() - wall
        done = {}
        for key, (epochs, firsts, n) in list(self.pending.items()):
            if w.EpochEnd(epochs[-1]) < 0 and not w.Idle():
                continue  # still running; it ends in a later call (an idle simulator never
                # ends it: reported unfinished)
            done[key] = [{
                "start_s": w.EpochStart(e),
                "end_s": w.EpochEnd(e),
                "flows": [[w.FlowStart(first + i), w.FlowEnd(first + i)] for i in range(n)],
            } for e, first in zip(epochs, firsts, strict=True)]
            del self.pending[key]
        return {
            "done": done,
            "now_s": now,
            "wall_s": wall,
            "events": int(w.Events()) - int(events),
            "drops": int(w.Drops()) - int(drops),
            "marks": int(w.Marks()) - int(marks),
            "route_misses": int(w.RouteMisses()) - int(misses),
            "unknown_connections": int(w.UnknownConnections()),
        }

    def counters(self, req: dict[str, Any]) -> dict[str, Any]:
        w = self.world
        return {"forwarded": [int(w.Forwarded(int(node), int(iface)))
                              for node, iface in req["interfaces"]]}


def _die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (a parent killed by a signal cannot
    close us, and a simulation may run for minutes before it reads stdin again)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def main() -> None:
    _die_with_parent()
    replies = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    started = time.perf_counter()
    try:
        child = _Child()
    except Exception as exc:  # the parent reports it; nothing else to do here
        replies.write(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
        return
    replies.write(json.dumps({"ok": True, "import_s": time.perf_counter() - started}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        op = req.get("op")
        if op == "quit":
            break
        try:
            handler = {"build": lambda r: child.build(r["world"]), "run": child.run,
                       "counters": child.counters}[op]
            reply = {"ok": True, **handler(req)}
        except Exception as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        replies.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
