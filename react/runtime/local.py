"""Run a function as N local rank processes and collect what each returns (tests, benchmarks).

Each rank is a fresh process (multiprocessing ``spawn``: no state inherited, safe with threads
and torch) that calls ``fn(rank, world_size, *args)``; its return value (picklable, from our own
child, never from the network) or its traceback comes back on a queue. Every wait is bounded:
whatever has not finished by ``timeout_s`` is killed, and the call raises naming the ranks.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import socket
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from react.model.errors import ReactError
from react.runtime.clock import now_s

__all__ = ["LocalRunError", "free_ports", "run_local"]

_GRACE_S = 3.0  # after a rank failed, how long the others get to report


class LocalRunError(ReactError, RuntimeError):
    """A rank process failed, or did not finish in time."""


def kill_processes(procs: Sequence[Any], timeout_s: float) -> None:
    """Kill every still-running ``subprocess.Popen`` of ``procs`` and reap them all (bounded)."""
    import subprocess

    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        try:
            p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports free on ``host`` right now (bound to port 0, then released).

    Another program may take one before it is used; callers that bind them report that clearly.
    """
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _child(fn: Callable[..., Any], rank: int, world_size: int, args: Sequence[Any],
           results: Any) -> None:
    try:
        results.put((rank, True, fn(rank, world_size, *args)))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))


def run_local(
    fn: Callable[..., Any],
    world_size: int,
    *,
    args: Sequence[Any] = (),
    timeout_s: float = 120.0,
    method: str = "spawn",
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` processes; return results by rank.

    Parameters
    ----------
    fn : callable
        A module-level function (it is pickled by reference into the children).
    world_size : int
        Number of rank processes.
    args : sequence
        Extra picklable arguments, the same for every rank.
    timeout_s : float
        Wall-clock limit for the whole group; stragglers are killed.
    method : str
        multiprocessing start method.

    Raises
    ------
    LocalRunError
        If a rank raised (its traceback is in the message) or the group ran out of time.
    """
    if not isinstance(world_size, int) or world_size < 1:
        raise LocalRunError(f"run_local: world_size must be an integer >= 1, got {world_size!r}")
    ctx: Any = mp.get_context(method)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_child, args=(fn, r, world_size, tuple(args), results), daemon=True)
        for r in range(world_size)
    ]
    out: dict[int, Any] = {}
    failures: dict[int, str] = {}
    deadline = now_s() + timeout_s
    failed_at: float | None = None
    try:
        for p in procs:
            p.start()
        while len(out) + len(failures) < world_size:
            left = deadline - now_s()
            if left <= 0:
                break
            try:
                rank, ok, value = results.get(timeout=min(left, 1.0))
            except queue.Empty:
                # A failed or dead rank leaves its peers waiting on it: allow a grace, then stop.
                crashed = any(not p.is_alive() and p.exitcode not in (0, None) for p in procs)
                if (failures or crashed) and now_s() > (failed_at or now_s()) + _GRACE_S:
                    break
                if crashed and failed_at is None:
                    failed_at = now_s()
                continue
            (out if ok else failures)[rank] = value
            if not ok and failed_at is None:
                failed_at = now_s()
    finally:
        for p in procs:
            p.join(timeout=max(0.1, min(2.0, deadline - now_s())))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=5.0)
        results.close()
    if failures:
        # Every failed rank's traceback: the first to fail is not always the lowest rank.
        text = "\n".join(f"rank {r} failed:\n{failures[r]}" for r in sorted(failures))
        raise LocalRunError(f"run_local: {text}")
    missing = [r for r in range(world_size) if r not in out]
    if missing:
        codes = {r: procs[r].exitcode for r in missing}
        raise LocalRunError(
            f"run_local: ranks {missing} did not report within {timeout_s} s "
            f"(exit codes {codes})"
        )
    return [out[r] for r in range(world_size)]
