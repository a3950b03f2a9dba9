"""Background traffic: a sender in one host namespace, a sink in another, both bounded.

This file is also a standalone script (the standard library, plus numpy for on/off periods),
so it needs nothing installed in the namespace; :class:`~react.backends.emu.network.EmuNetwork`
runs it with ``ip netns exec``::

    python3 traffic.py sink --port P --duration-s D [--expect-bytes N] [--ack-bytes S]
    python3 traffic.py send --kind long_lived --dst IP --port P --duration-s D --max-bytes B
    python3 traffic.py send --kind periodic_bulk ... --size-bytes S --period-s T
    python3 traffic.py send --kind poisson_on_off ... --mean-on-s A --mean-off-s B --seed X

Kinds follow flowsim's (:mod:`flowsim.traffic`), each on one TCP connection, so one ECMP path,
as flowsim keeps one port per source:

- ``long_lived``: sends as fast as the network allows;
- ``periodic_bulk``: ``size_bytes`` due every ``period_s``; a transfer starts at the later of its
  due time and the previous one's delivery (the sink acks each ``size_bytes``);
- ``poisson_on_off``: exponential off and on periods (off first), drawn with
  ``numpy.random.default_rng(seed)`` in flowsim's order and laid out from the start; sends
  during on periods through a small send buffer, so little data outlives a period.

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
KINDS = ("long_lived", "periodic_bulk", "poisson_on_off")
ON_OFF_SNDBUF_BYTES = 128 * 1024
SCRIPT = os.path.abspath(__file__)
SINK_READY_S = 10.0
"""How long a sink may take to start listening."""


def sink_argv(port: int, duration_s: float, expect_bytes: int | None = None,
              ack_bytes: int | None = None) -> list[str]:
    """Command line of a sink (run it inside the destination namespace)."""
    argv = [sys.executable, SCRIPT, "sink", "--port", str(port), "--duration-s", repr(duration_s)]
    if expect_bytes is not None:
        argv += ["--expect-bytes", str(expect_bytes)]
    if ack_bytes is not None:
        argv += ["--ack-bytes", str(ack_bytes)]
    return argv


def sender_argv(kind: str, dst_ip: str, port: int, *, duration_s: float, max_bytes: int,
                size_bytes: int | None = None, period_s: float | None = None,
                mean_on_s: float | None = None, mean_off_s: float | None = None,
                seed: int | None = None, src_port: int | None = None,
                start_at_s: float | None = None) -> list[str]:
    """Command line of a sender (run it inside the source namespace)."""
    argv = [sys.executable, SCRIPT, "send", "--kind", kind, "--dst", dst_ip, "--port", str(port),
            "--duration-s", repr(duration_s), "--max-bytes", str(max_bytes)]
    for flag, value in (("--size-bytes", size_bytes), ("--period-s", period_s),
                        ("--mean-on-s", mean_on_s), ("--mean-off-s", mean_off_s),
                        ("--seed", seed), ("--src-port", src_port), ("--start-at-s", start_at_s)):
        if value is not None:
            argv += [flag, repr(value)]
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
    got: dict[socket.socket, int] = {}  # bytes per connection, for the acks
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
                got[conn] = 0
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
                del got[peer]
                continue
            now = time.monotonic()
            first_s = now if first_s is None else first_s
            last_s = now
            total += n
            if args.ack_bytes:
                # one byte back per whole transfer received: the sender's "delivered" signal
                before, got[peer] = got[peer], got[peer] + n
                acks = got[peer] // args.ack_bytes - before // args.ack_bytes
                if acks:
                    try:
                        peer.send(b"\x01" * acks)
                    except OSError:
                        pass
    _report(role="sink", bytes=total, connections=conns, first_s=first_s, last_s=last_s)
    return 0


def _connect(args: argparse.Namespace, deadline: float) -> socket.socket | None:
    # the sink may still be starting: retry briefly, never past the deadline
    while time.monotonic() < deadline:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if args.src_port is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("0.0.0.0", args.src_port))
        if args.kind == "poisson_on_off":
            # a small send buffer, so that little queued data outlives an on period
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, ON_OFF_SNDBUF_BYTES)
        sock.settimeout(max(0.05, min(1.0, deadline - time.monotonic())))
        try:
            sock.connect((args.dst, args.port))
            return sock
        except OSError:
            sock.close()
            time.sleep(0.05)
    return None


def _send_some(sock: socket.socket, nbytes: int, until: float) -> int:
    data = memoryview(bytes(CHUNK_BYTES))
    sent = 0
    while sent < nbytes:
        left = until - time.monotonic()
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


def _wait_ack(sock: socket.socket, deadline: float) -> bool:
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(min(left, 1.0))
        try:
            return sock.recv(1) == b"\x01"
        except TimeoutError:
            continue
        except OSError:
            return False
    return False


def _sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.monotonic()))


def _send(args: argparse.Namespace) -> int:
    if args.start_at_s is not None:
        _sleep_until(min(args.start_at_s, time.monotonic() + 10.0))
    start = time.monotonic()
    deadline = start + args.duration_s
    sent, transfers = 0, 0
    sock = _connect(args, deadline)
    connect_s = time.monotonic() if sock is not None else None
    if sock is not None:
        if args.kind == "long_lived":
            sent = _send_some(sock, args.max_bytes, deadline)
        elif args.kind == "periodic_bulk":
            # transfer i is due at start + i * period, and starts no earlier than the delivery
            # of transfer i - 1 (flowsim's periodic_bulk without overlap), on one connection
            while sent < args.max_bytes:
                due = start + transfers * args.period_s
                if due >= deadline:
                    break
                _sleep_until(due)
                want = min(args.size_bytes, args.max_bytes - sent)
                sent += _send_some(sock, want, deadline)
                transfers += 1
                if want < args.size_bytes or not _wait_ack(sock, deadline):
                    break
        else:  # poisson_on_off, drawing its periods as flowsim's does: off, on, off, on, ...
            import numpy as np

            rng = np.random.default_rng(args.seed)
            t = start  # periods laid out from the start, so that delays do not accumulate
            while sent < args.max_bytes:
                t += float(rng.exponential(args.mean_off_s))
                if t >= deadline:
                    break
                _sleep_until(t)
                t = min(deadline, t + float(rng.exponential(args.mean_on_s)))
                sent += _send_some(sock, args.max_bytes - sent, t)
                transfers += 1
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        sock.close()
    _report(role="send", kind=args.kind, bytes=sent, transfers=transfers, start_s=start,
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
    sink.add_argument("--ack-bytes", type=_positive(int))
    send = sub.add_parser("send")
    send.add_argument("--kind", choices=KINDS, required=True)
    send.add_argument("--dst", required=True)
    send.add_argument("--port", type=int, required=True)
    send.add_argument("--duration-s", type=_positive(float), required=True)
    send.add_argument("--max-bytes", type=_positive(int), required=True)
    send.add_argument("--size-bytes", type=_positive(int))
    send.add_argument("--period-s", type=_positive(float))
    send.add_argument("--mean-on-s", type=_positive(float))
    send.add_argument("--mean-off-s", type=_positive(float))
    send.add_argument("--seed", type=int, default=0)
    send.add_argument("--src-port", type=int)
    send.add_argument("--start-at-s", type=float, help="monotonic time to start at (at most "
                      "10 s ahead), so that several senders start together")
    args = parser.parse_args(argv)
    if args.role == "send":
        for kind, needs in (("periodic_bulk", ("size_bytes", "period_s")),
                            ("poisson_on_off", ("mean_on_s", "mean_off_s"))):
            if args.kind == kind and any(getattr(args, n) is None for n in needs):
                parser.error(f"{kind} needs " + " and ".join(
                    "--" + n.replace("_", "-") for n in needs))
    signal.alarm(int(args.duration_s + GRACE_S) + 1)  # the last bound: die whatever happens
    return _sink(args) if args.role == "sink" else _send(args)


if __name__ == "__main__":
    sys.exit(main())
