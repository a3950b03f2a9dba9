"""Run a command as a child process and measure that command alone: wall time, CPU, peak RSS.

Two traps, both met by this project's CI:

- ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` is the largest peak of *every* child the
  process has waited for, so after a bigger child it reports that one.
- Even the usage of one reaped child (``os.wait4``) is not the command's own: on Linux ``exec``
  keeps the peak of the memory image it replaces, and a child spawned from a big process (a
  test session holding 650 MiB) starts as a copy of that image. Its ``ru_maxrss`` is then at
  least the parent's size at the time of the spawn.

So the command runs as the grandchild of a small reaper (a fresh Python that imports nothing),
whose own image, a few MiB, is all the command can inherit; the reaper waits for it with
``os.wait4`` and hands its usage back through a file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_REAPER = """\
import json, os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump([os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime,
               usage.ru_maxrss], out)
"""


@dataclass(frozen=True)
class ChildUsage:
    """What one command did and used."""

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

    Output goes through temporary files, so a chatty command never blocks on a full pipe.
    A command killed by the timeout reports ``timed_out`` and no usage (zeros).
    """
    if not cmd:
        raise ValueError("run_measured: the command is empty, expected a program and arguments")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout={timeout!r}: expected a positive number of seconds")
    with tempfile.TemporaryDirectory(prefix="react-usage-") as tmp:
        usage_file = Path(tmp) / "usage.json"
        out_file, err_file = Path(tmp) / "stdout", Path(tmp) / "stderr"
        with out_file.open("wb") as out, err_file.open("wb") as err:
            start = time.perf_counter()
            reaper = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _REAPER, str(usage_file), *cmd],
                cwd=cwd, stdout=out, stderr=err, start_new_session=True)
            timed_out = False
            try:
                reaper.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(reaper.pid, signal.SIGKILL)   # the reaper and the command
                reaper.wait()
            wall = time.perf_counter() - start
        stdout = out_file.read_text(errors="replace")
        stderr = err_file.read_text(errors="replace")
        if timed_out or not usage_file.exists():
            return ChildUsage(reaper.returncode if not timed_out else -signal.SIGKILL,
                              stdout, stderr, wall, 0.0, 0, timed_out)
        returncode, cpu, maxrss_kib = json.loads(usage_file.read_text())
    return ChildUsage(returncode, stdout, stderr, wall, float(cpu), int(maxrss_kib) * 1024,
                      timed_out=False)
