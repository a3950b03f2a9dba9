"""Congestion on one host: background processes streaming peer-to-peer copies into a GPU.

The lent machines have GPUs on NVLink and nothing else, so a rank is congested the way another
tenant would congest it: a separate process loops ``b.copy_(a)`` with ``a`` on a source GPU and
``b`` on the congested rank's GPU, for a bounded time. ``p`` such streams give congestion
degree ``p``. A stream loads its source GPU's egress as much as the target's ingress, so the
sources are drawn from distinct GPUs where possible (:func:`copy_sources`): GPUs that run no
rank of the job first (they load nobody's egress that matters), then the job's other ranks, in a
fixed order (nearest index after the target first). When ``p`` exceeds the other GPUs, sources
repeat: on 2 GPUs every stream comes from the one other GPU, so ``p`` streams share that GPU's
egress and its link, and the rank pair's flows in that direction compete with all of them at
once (measured: 2 streams slow a 100 MiB transfer less than 1, docs/results/gpu.md).

Run one stream: ``python -m react.backends.gpu.copystream --src 0 --dst 1 --duration-s 30``;
it prints ``{"type": "ready"}`` once its first copies ran and, at the end, a JSON line with
the bytes it moved and its rate. :class:`CopyStreams` starts and stops several (a context
manager: every process is gone when the block exits, however it exits).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from react.backends.gpu.cuda import MULTICAST_OFF, GpuError

__all__ = ["COPY_BYTES", "CopyStreams", "copy_sources", "main"]

COPY_BYTES = 64 * 1024 * 1024
"""Bytes of one ``b.copy_(a)`` (64 MiB: long enough to keep the link busy, short enough that the
loop looks at its deadline every few milliseconds)."""


def copy_sources(dst: int, p: int, gpus: int, ranks: Sequence[int] = (),
                 first: int | None = None) -> tuple[int, ...]:
    """Source GPUs of ``p`` copy streams into GPU ``dst`` on a host of ``gpus`` GPUs.

    Distinct where possible (module docstring): ``first`` (if given and not ``dst``), then the
    GPUs that are not in ``ranks``, then those that are, each group in the order
    ``dst + 1, dst + 2, ... (mod gpus)``; repeated in that order when ``p`` exceeds them.

    Raises
    ------
    GpuError
        If ``dst`` or ``first`` is not a GPU of the host, ``p`` is negative, or a stream is asked
        for on a host with one GPU (nothing to copy from).
    """
    for name, value in (("gpus", gpus), ("p", p), ("dst", dst)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise GpuError(f"copy_sources: {name} must be an integer, got {value!r}")
    if gpus < 1 or not 0 <= dst < gpus:
        raise GpuError(f"copy_sources: dst must be a GPU index in 0..{gpus - 1}, got dst={dst}")
    if p < 0:
        raise GpuError(f"copy_sources: p must be >= 0, got p={p}")
    if p == 0:
        return ()
    if gpus < 2:
        raise GpuError(f"copy_sources: {p} copy stream(s) into GPU {dst} need another GPU to "
                       "copy from; this host has one")
    if first is not None and not (isinstance(first, int) and 0 <= first < gpus):
        raise GpuError(f"copy_sources: first must be a GPU index in 0..{gpus - 1}, got "
                       f"{first!r}")
    order = [(dst + k) % gpus for k in range(1, gpus)]
    busy = set(ranks)
    order = [g for g in order if g not in busy] + [g for g in order if g in busy]
    if first is not None and first != dst:
        order.remove(first)
        order.insert(0, first)
    return tuple(order[k % len(order)] for k in range(p))


class CopyStreams:
    """Copy-stream processes into GPUs (module docstring); ``with CopyStreams(...) as cs:``.

    Parameters
    ----------
    pairs : sequence of (src, dst)
        One process per pair, copying from GPU ``src`` into GPU ``dst``.
    duration_s : float
        Each process stops by itself after this long (the bound if its parent dies).
    copy_bytes : int
        Bytes per copy.
    timeout_s : float
        Limit on each process's start (CUDA context, buffers, first copies).
    """

    def __init__(self, pairs: Sequence[tuple[int, int]], *, duration_s: float,
                 copy_bytes: int = COPY_BYTES, timeout_s: float = 60.0) -> None:
        if not duration_s > 0:
            raise GpuError(f"CopyStreams: duration_s must be positive, got {duration_s!r}")
        self.pairs = [(int(s), int(d)) for s, d in pairs]
        for s, d in self.pairs:
            if s == d:
                raise GpuError(f"CopyStreams: a copy stream needs two GPUs, got src = dst = {s}")
        self.duration_s = float(duration_s)
        self.copy_bytes = int(copy_bytes)
        self.timeout_s = float(timeout_s)
        self._procs: list[subprocess.Popen[str]] = []
        self.reports: list[dict[str, Any]] = []

    @property
    def processes(self) -> tuple[subprocess.Popen[str], ...]:
        """The stream processes started and not yet stopped (none once :meth:`stop` returned)."""
        return tuple(self._procs)

    def start(self) -> CopyStreams:
        """Start every stream and return once each has copied (raises GpuError if one fails)."""
        env = {**os.environ, **MULTICAST_OFF}
        try:
            for s, d in self.pairs:
                self._procs.append(subprocess.Popen(
                    [sys.executable, "-m", "react.backends.gpu.copystream", "--src", str(s),
                     "--dst", str(d), "--duration-s", repr(self.duration_s),
                     "--bytes", str(self.copy_bytes)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
            deadline = time.monotonic() + self.timeout_s
            for (s, d), proc in zip(self.pairs, self._procs, strict=True):
                assert proc.stdout is not None
                ready = select.select([proc.stdout], [], [],
                                      max(0.0, deadline - time.monotonic()))[0]
                line = proc.stdout.readline() if ready else ""
                if '"ready"' not in line:
                    proc.kill()
                    err = (proc.communicate(timeout=10)[1] or "").strip()
                    raise GpuError(f"copy stream GPU {s} -> GPU {d} did not start within "
                                   f"{self.timeout_s:g} s: {err[-400:] or line or '(no output)'}")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> list[dict[str, Any]]:
        """Stop every stream (idempotent); the reports of those that had started."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                out, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            for line in (out or "").splitlines():
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                if isinstance(doc, dict) and doc.get("type") == "done":
                    self.reports.append(doc)
        self._procs = []
        return self.reports

    def __enter__(self) -> CopyStreams:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _stream(src: int, dst: int, nbytes: int, duration_s: float) -> dict[str, Any]:
    import signal

    from react.backends.gpu.cuda import import_cuda_torch

    torch = import_cuda_torch()
    if max(src, dst) >= torch.cuda.device_count():
        raise GpuError(f"copy stream GPU {src} -> GPU {dst}: this host has "
                       f"{torch.cuda.device_count()} GPU(s)")
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    a = torch.empty(nbytes // 4, dtype=torch.float32, device=f"cuda:{src}")
    b = torch.empty_like(a, device=f"cuda:{dst}")
    torch.cuda.set_device(src)
    copies = 0
    t0 = time.monotonic()
    deadline = t0 + duration_s
    while not stop["now"] and time.monotonic() < deadline:
        for _ in range(4):
            b.copy_(a)
        torch.cuda.synchronize(src)
        torch.cuda.synchronize(dst)
        if copies == 0:
            print(json.dumps({"type": "ready", "src": src, "dst": dst}), flush=True)
        copies += 4
    elapsed = time.monotonic() - t0
    return {"type": "done", "src": src, "dst": dst, "copies": copies,
            "bytes": copies * a.numel() * 4, "seconds": elapsed,
            "GBps": copies * a.numel() * 4 / elapsed / 1e9 if elapsed > 0 else 0.0}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m react.backends.gpu.copystream",
                                     description="Loop b.copy_(a) from one GPU into another "
                                                 "for a bounded time (congestion).")
    parser.add_argument("--src", type=int, required=True, help="source GPU index")
    parser.add_argument("--dst", type=int, required=True, help="target GPU index")
    parser.add_argument("--duration-s", type=float, required=True, help="stop after this long")
    parser.add_argument("--bytes", type=int, default=COPY_BYTES, help="bytes per copy")
    args = parser.parse_args(argv)
    for key, value in MULTICAST_OFF.items():
        os.environ.setdefault(key, value)
    try:
        if args.src == args.dst or min(args.src, args.dst) < 0:
            raise GpuError(f"copy stream: src and dst must be two GPU indices, got "
                           f"{args.src} and {args.dst}")
        if not args.duration_s > 0 or args.bytes < 4:
            raise GpuError(f"copy stream: duration_s must be > 0 and bytes >= 4, got "
                           f"{args.duration_s} and {args.bytes}")
        print(json.dumps(_stream(args.src, args.dst, args.bytes, args.duration_s)), flush=True)
    except GpuError as exc:
        print(f"copy stream: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
