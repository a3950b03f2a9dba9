"""Background traffic: a sender in one host namespace, a sink in another, both bounded.

This file is also a standalone script (standard library only, so it starts in ~20 ms and needs
nothing installed in the namespace); :class:`~react.backends.emu.network.EmuNetwork` runs it with
``ip netns exec``::

    python3 traffic.py sink --port P --duration-s D [--expect-bytes N]
    python3 traffic.py send --kind long_lived --dst IP --port P --duration-s D --max-bytes B
    python3 traffic.py send --kind periodic_bulk ... --size-bytes S --period-s T

Kinds (the simulator's background kinds):

- ``long_lived``: one TCP connection sending as fast as the network allows;
- ``periodic_bulk``: every ``period_s`` a new connection (a new source port, hence possibly a new
  ECMP path) sends ``size_bytes`` and closes.

Every loop is bounded twice: it stops at ``duration_s`` or after ``max_bytes`` (sender) or
``expect_bytes`` (sink), and ``signal.alarm`` kills the process :data:`GRACE_S` later whatever
happens. The sink prints ``ready`` once listening and, like the sender, one JSON line on exit
with bytes, times on the shared monotonic clock, and its own CPU seconds (user + system).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

GRACE_S = 5.0
"""Seconds past its duration after which a sender or sink is killed by its own alarm."""

CHUNK_BYTES = 256 * 1024
SCRIPT = os.path.abspath(__file__)
SINK_READY_S = 10.0
"""How long a sink may take to start listening."""


def sink_argv(port: int, duration_s: float, expect_bytes: int | None = None) -> list[str]:
    """Command line of a sink (run it inside the destination namespace)."""
    argv = [sys.executable, SCRIPT, "sink", "--port", str(port), "--duration-s", repr(duration_s)]
    if expect_bytes is not None:
        argv += ["--expect-bytes", str(expect_bytes)]
    return argv


def sender_argv(kind: str, dst_ip: str, port: int, *, duration_s: float, max_bytes: int,
                size_bytes: int | None = None, period_s: float | None = None,
                src_port: int | None = None) -> list[str]:
    """Command line of a sender (run it inside the source namespace)."""
    argv = [sys.executable, SCRIPT, "send", "--kind", kind, "--dst", dst_ip, "--port", str(port),
            "--duration-s", repr(duration_s), "--max-bytes", str(max_bytes)]
    if size_bytes is not None:
        argv += ["--size-bytes", str(size_bytes)]
    if period_s is not None:
        argv += ["--period-s", repr(period_s)]
    if src_port is not None:
        argv += ["--src-port", str(src_port)]
    return argv


def wait_ready(proc: subprocess.Popen, what: str) -> None:
    """Wait until a sink started with ``text=True`` pipes prints ``ready``; raise EmuError
    (its stderr quoted) if it does not within :data:`SINK_READY_S`."""
    from react.backends.emu.errors import EmuError  # only when imported, never in the script

    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], SINK_READY_S)
    line = proc.stdout.readline() if ready else ""
    if line.strip() != "ready":
        if proc.poll() is None:
            proc.kill()
        try:
            proc.wait(timeout=2.0)
            err = proc.stderr.read().strip() if proc.stderr else ""
        except subprocess.TimeoutExpired:
            err = ""
        raise EmuError(f"{what} did not start within {SINK_READY_S:g} s: "
                       f"{err or line.strip() or 'no output'}")


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _report(**fields: object) -> None:
    fields["cpu_s"] = _cpu_s()
    print(json.dumps(fields), flush=True)


def _sink(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.duration_s
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("0.0.0.0", args.port))
    except OSError as exc:
        print(f"sink: cannot listen on port {args.port}: {exc}", file=sys.stderr, flush=True)
        return 3
    server.listen(64)
    server.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(server, selectors.EVENT_READ, None)
    print("ready", flush=True)
    buf = bytearray(CHUNK_BYTES)
    total, conns, first_s, last_s = 0, 0, None, None
    while total < (args.expect_bytes or float("inf")):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for key, _ in sel.select(timeout=min(left, 0.5)):
            if key.data is None:
                try:
                    conn, _addr = server.accept()
                except BlockingIOError:
                    continue
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ, conns)
                conns += 1
                continue
            peer = key.fileobj
            assert isinstance(peer, socket.socket)
            try:
                n = peer.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                n = 0
            if n == 0:
                sel.unregister(peer)
                peer.close()
                continue
            now = time.monotonic()
            first_s = now if first_s is None else first_s
            last_s = now
            total += n
    _report(role="sink", bytes=total, connections=conns, first_s=first_s, last_s=last_s)
    return 0


def _connect(args: argparse.Namespace, deadline: float) -> socket.socket | None:
    # the sink may still be starting: retry briefly, never past the deadline
    while time.monotonic() < deadline:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if args.src_port is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("0.0.0.0", args.src_port))
        sock.settimeout(max(0.05, min(1.0, deadline - time.monotonic())))
        try:
            sock.connect((args.dst, args.port))
            return sock
        except OSError:
            sock.close()
            time.sleep(0.05)
    return None


def _send_some(sock: socket.socket, nbytes: int, deadline: float) -> int:
    data = memoryview(bytes(CHUNK_BYTES))
    sent = 0
    while sent < nbytes:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(min(left, 1.0))
        try:
            sent += sock.send(data[: min(CHUNK_BYTES, nbytes - sent)])
        except TimeoutError:
            continue
        except OSError:
            break
    return sent


def _send(args: argparse.Namespace) -> int:
    start = time.monotonic()
    deadline = start + args.duration_s
    total, conns, connect_s = 0, 0, None
    while total < args.max_bytes and time.monotonic() < deadline:
        period_start = time.monotonic()
        sock = _connect(args, deadline)
        if sock is None:
            break
        conns += 1
        connect_s = time.monotonic() if connect_s is None else connect_s
        want = args.max_bytes - total
        if args.kind == "periodic_bulk":
            want = min(want, args.size_bytes)
        total += _send_some(sock, want, deadline)
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        sock.close()
        if args.kind == "long_lived":
            break
        time.sleep(max(0.0, min(period_start + args.period_s, deadline) - time.monotonic()))
    _report(role="send", kind=args.kind, bytes=total, connections=conns, start_s=start,
            connect_s=connect_s, end_s=time.monotonic())
    return 0


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return value
    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="traffic.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="role", required=True)
    sink = sub.add_parser("sink")
    sink.add_argument("--port", type=int, required=True)
    sink.add_argument("--duration-s", type=_positive(float), required=True)
    sink.add_argument("--expect-bytes", type=_positive(int))
    send = sub.add_parser("send")
    send.add_argument("--kind", choices=("long_lived", "periodic_bulk"), required=True)
    send.add_argument("--dst", required=True)
    send.add_argument("--port", type=int, required=True)
    send.add_argument("--duration-s", type=_positive(float), required=True)
    send.add_argument("--max-bytes", type=_positive(int), required=True)
    send.add_argument("--size-bytes", type=_positive(int))
    send.add_argument("--period-s", type=_positive(float))
    send.add_argument("--src-port", type=int)
    args = parser.parse_args(argv)
    if args.role == "send" and args.kind == "periodic_bulk" and (
        args.size_bytes is None or args.period_s is None
    ):
        parser.error("periodic_bulk needs --size-bytes and --period-s")
    signal.alarm(int(args.duration_s + GRACE_S) + 1)  # the last bound: die whatever happens
    return _sink(args) if args.role == "sink" else _send(args)


if __name__ == "__main__":
    sys.exit(main())
