"""Run a command as a child process and measure that child alone: wall time, CPU time, peak RSS.

``resource.getrusage(RUSAGE_CHILDREN)`` is what one reaches for first, but its ``ru_maxrss`` is
the largest peak of *every* child the process has waited for: in a test session or a benchmark
that ran a bigger child before, the number belongs to that other child (CI once failed on exactly
this). ``os.wait4`` returns the resource usage of the one child it reaps, which is what the
memory test and the what-if benchmark need.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ChildUsage:
    """What one child process did and used."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float          # user + system
    peak_rss_bytes: int
    timed_out: bool


def run_measured(cmd: Sequence[str], *, cwd: str | Path | None = None,
                 timeout: float | None = None) -> ChildUsage:
    """Run ``cmd`` to its end (killed after ``timeout`` seconds) and return its own usage.

    Output goes through temporary files, so a chatty child never blocks on a full pipe while
    this process waits for it.
    """
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout={timeout!r}: expected a positive number of seconds")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=cwd, stdout=out, stderr=err)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout, kill) if timeout is not None else None
        if timer is not None:
            timer.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            if timer is not None:
                timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)   # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return ChildUsage(
            returncode=proc.returncode,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
            wall_s=wall,
            cpu_s=usage.ru_utime + usage.ru_stime,
            peak_rss_bytes=usage.ru_maxrss * 1024,   # Linux reports KiB
            timed_out=killed.is_set(),
        )
