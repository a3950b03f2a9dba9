"""The parent's side of the ns-3 child process: start it, ask it things, survive its crashes.

ns-3 assertions abort the process, and a packet-level run can take minutes, so ns-3 never runs
in the caller's process: :class:`Ns3Process` starts ``python -m react.backends.ns3.child`` in an
empty temporary directory (``from ns import ns`` scans the current directory for libraries),
exchanges one JSON line per request with it, bounds every wait by a timeout, and turns an abort,
a Python error inside the child or a timeout into one :class:`~react.backends.ns3.errors.Ns3Error`
that names what was running and quotes the end of the child's output.

Starting a child costs the ns-3 import (8-16 s on an idle machine, a minute under load), so one
child can serve many runs: :func:`shared_child` keeps one alive for a block of code (a sweep, a
cross-validation, a test module), and each run rebuilds its world inside it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from react.backends.ns3.errors import Ns3CrashError, Ns3Error, Ns3TimeoutError

__all__ = ["IMPORT_TIMEOUT_S", "Ns3Process", "current_shared", "shared_child"]

IMPORT_TIMEOUT_S = 600.0
"""Bound on the child's start (the ns-3 import and the C++ helper's compilation)."""

_PROJECT_ROOT = str(Path(__file__).resolve().parents[3])
_TAIL_LINES = 12
# What ns-3 prints before it aborts (NS_ASSERT, NS_ABORT, NS_FATAL_ERROR) and what cling's
# crash handler prints when it catches the abort (it then exits with a status of its own).
_ABORT_MARKS = ("assert failed.", "aborted. cond=", "NS_FATAL", "*** Break *** abort")


class Ns3Process:
    """One ns-3 child process (module docstring).

    Parameters
    ----------
    argv : sequence of str, optional
        The child's command line; by default this interpreter running
        :mod:`react.backends.ns3.child`. Tests substitute a child that misbehaves.
    start_timeout_s : float
        Bound on the child's start-up (the ns-3 import).
    """

    def __init__(self, argv: Sequence[str] | None = None, *,
                 start_timeout_s: float = IMPORT_TIMEOUT_S) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="react-ns3-")
        workdir = Path(self._dir.name)
        self._stderr_path = workdir / "child-output.txt"
        self._stderr = open(self._stderr_path, "wb")  # noqa: SIM115 (closed in close())
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PROJECT_ROOT, env.get("PYTHONPATH", "")) if p)
        # ns-3's loader globs every PATH entry for libraries; the child needs none of them.
        env["PATH"] = os.defpath
        env["CPPYY_CRASH_QUIET"] = "1"  # no debugger backtrace from cling when ns-3 aborts
        cmd = list(argv) if argv is not None else [sys.executable, "-m",
                                                   "react.backends.ns3.child"]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, cwd=workdir, env=env)
        self._buffer = b""
        self.pid = self._proc.pid
        self.closed = False
        hello = self._reply("starting ns-3 (importing it)", start_timeout_s)
        self.import_s = float(hello.get("import_s", 0.0))

    def call(self, request: dict[str, Any], *, what: str, timeout_s: float) -> dict[str, Any]:
        """Send ``request`` and return the child's reply; ``what`` names it in errors."""
        if self.closed:
            raise Ns3Error(f"ns-3 child process: {what}: the child was already closed")
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write((json.dumps(request) + "\n").encode("utf-8"))
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._fail(what, "")  # it died before we spoke
        return self._reply(what, timeout_s)

    def _reply(self, what: str, timeout_s: float) -> dict[str, Any]:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                raise Ns3TimeoutError(
                    f"ns-3 child process: {what}: no answer within {timeout_s:g} s; the child "
                    f"was stopped{self._tail()}")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                self._fail(what, "")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise Ns3Error(f"ns-3 child process: {what}: {reply.get('error')}{self._tail()}")
        return reply

    def _fail(self, what: str, detail: str) -> None:
        try:
            code = self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._kill()
            code = self._proc.returncode
        self.closed = True
        output = self._output()
        if code is not None and code < 0:
            try:
                how = f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        if code == -signal.SIGABRT or any(mark in output for mark in _ABORT_MARKS):
            how += " (an ns-3 assertion or fatal error aborted it)"
        raise Ns3CrashError(f"ns-3 child process: {what}: the child {how}{detail}{self._tail()}")

    def _output(self) -> str:
        try:
            self._stderr.flush()
            return self._stderr_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def _tail(self) -> str:
        lines = []
        for line in self._output().splitlines():
            if "*** Break ***" in line:
                break  # cling's crash report follows: a debugger's backtrace, no news
            if line.strip() and "runStaticInitializersOnce" not in line:  # cling start-up noise
                lines.append(line)
        if not lines:
            return ""
        return "; its last output:\n  " + "\n  ".join(lines[-_TAIL_LINES:])

    def _kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self.closed = True

    def close(self) -> None:
        """Ask the child to quit (kill it after 10 s) and remove its directory; idempotent."""
        if self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(b'{"op": "quit"}\n')
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._kill()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        self._stderr.close()
        self._dir.cleanup()
        self.closed = True

    def __enter__(self) -> Ns3Process:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED: list[Ns3Process | None] = []


@contextmanager
def shared_child() -> Iterator[None]:
    """Keep one ns-3 child alive for the block: every ns-3 run inside it reuses it.

    Each run still builds a fresh world (time 0, new nodes), so sharing changes no result; it
    only saves the ns-3 import per run. A child that crashed is replaced at the next run.
    """
    _SHARED.append(None)  # started lazily by the first run
    try:
        yield
    finally:
        child = _SHARED.pop()
        if child is not None:
            child.close()


def current_shared() -> Ns3Process | None:
    """The shared child to use (started now if the block has none yet), or None outside one."""
    if not _SHARED:
        return None
    child = _SHARED[-1]
    if child is None or child.closed:
        child = Ns3Process()
        _SHARED[-1] = child
    return child
