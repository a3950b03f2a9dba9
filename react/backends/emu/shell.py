"""Running ``ip``, ``tc`` and friends: always with a timeout, failures as one readable EmuError.

Batches (``ip -batch -``, ``tc -batch -``) keep a build to a few dozen short processes instead of
hundreds. :func:`require` checks root and the tools once, before anything is created.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence

from react.backends.emu.errors import EmuError

COMMAND_TIMEOUT_S = 30.0
"""Longest any single ``ip``/``tc`` process may run (a batch for a large fabric takes < 1 s)."""

TOOLS = ("ip", "tc")


def is_root() -> bool:
    """Whether this process may create namespaces (effective uid 0)."""
    return os.geteuid() == 0


def missing_tools() -> list[str]:
    """The tools of :data:`TOOLS` not found on ``PATH``."""
    return [t for t in TOOLS if shutil.which(t) is None]


def require() -> None:
    """Raise :class:`EmuError` unless this process is root and ``ip`` and ``tc`` exist."""
    if not is_root():
        raise EmuError(
            "the emulator needs root (network namespaces, veth links and tc qdiscs); "
            f"running as uid {os.geteuid()}. Run as root, or use the simulator backend"
        )
    missing = missing_tools()
    if missing:
        raise EmuError(
            f"the emulator needs iproute2; not found on PATH: {', '.join(missing)} "
            "(install the 'iproute2' package)"
        )


def run(argv: Sequence[str], *, stdin: str | None = None,
        timeout_s: float = COMMAND_TIMEOUT_S, check: bool = True) -> str:
    """Run ``argv`` and return its stdout; raise :class:`EmuError` quoting stderr on failure."""
    try:
        done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise EmuError(f"command not found: {argv[0]!r} (install iproute2)") from None
    except subprocess.TimeoutExpired:
        raise EmuError(f"command timed out after {timeout_s:g} s: {' '.join(argv)}") from None
    if check and done.returncode != 0:
        raise EmuError(
            f"command failed (exit {done.returncode}): {' '.join(argv)}: "
            f"{done.stderr.strip() or done.stdout.strip()}"
        )
    return done.stdout


def batch(tool: str, lines: Iterable[str], *, netns: str | None = None) -> None:
    """Run ``tool [-n netns] -batch -`` on ``lines``; nothing to do when there are none."""
    text = "\n".join(lines)
    if not text:
        return
    argv = [tool] + (["-n", netns] if netns else []) + ["-batch", "-"]
    run(argv, stdin=text + "\n")
