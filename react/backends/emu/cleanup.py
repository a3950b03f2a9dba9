"""Teardown that always runs, and ``clean()`` for what a crashed run left behind.

Live networks (and the run's scratch folder, :class:`ScratchDir`) register here. The first one
installs an ``atexit`` hook and SIGINT/SIGTERM
handlers (main thread only) that close every live network and then hand the signal on to the
handler that was there before (the default one kills the process with the same signal, so
``with`` blocks do not unwind: whatever must go on a signal registers here). A run
killed with SIGKILL cannot clean up: :func:`clean` finds its namespaces by prefix, kills the
processes still inside them and deletes them. Kill a crashed run's whole process group, not
only its Python process, or an ``ip`` child may still be adding a namespace while you clean.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol

from react.backends.emu import shell
from react.backends.emu.errors import EmuError
from react.backends.emu.names import PROJECT_PREFIX, belongs, check_prefix

NETNS_DIR = "/run/netns"


class _Closable(Protocol):
    def close(self) -> None: ...


_live: dict[int, _Closable] = {}
_lock = threading.Lock()
_previous: dict[int, Any] = {}
_installed = False


def list_namespaces() -> list[str]:
    """Names of every named network namespace on the machine (``ip netns list``)."""
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def delete_namespaces(names: list[str]) -> None:
    """Kill every process inside ``names``, then delete them (missing ones are ignored)."""
    if not names:
        return
    pids = shell.run(["ip", "-force", "-batch", "-"],
                     stdin="".join(f"netns pids {n}\n" for n in names), check=False)
    for pid in {int(p) for p in pids.split() if p.isdigit()}:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shell.run(["ip", "-force", "-batch", "-"],
              stdin="".join(f"netns del {n}\n" for n in names), check=False)
    left = set(list_namespaces()) & set(names)
    if left:
        raise EmuError(f"could not delete namespaces {sorted(left)}; retry 'react emu clean'")


def clean(prefix: str | None = None) -> list[str]:
    """Remove every namespace of run ``prefix`` (of every run of the project when ``None``).

    Parameters
    ----------
    prefix : str, optional
        A run prefix (``rct`` + letters/digits, as :attr:`EmuNetwork.prefix`). ``None`` removes
        every namespace whose name starts with ``rct<tag>-``: also those of runs still alive.

    Returns
    -------
    list of str
        The namespaces removed, sorted.
    """
    if prefix is not None:
        check_prefix(prefix)
    names = [n for n in list_namespaces() if belongs(n, prefix)]
    if names:
        if not shell.is_root():
            raise EmuError(f"removing {len(names)} namespaces ({names[0]}, ...) needs root")
        delete_namespaces(names)
    return names


def register(net: _Closable) -> None:
    """Close ``net`` at exit or on SIGINT/SIGTERM unless it was closed before."""
    with _lock:
        _live[id(net)] = net
    _install()


def unregister(net: _Closable) -> None:
    with _lock:
        _live.pop(id(net), None)


def close_all() -> None:
    """Close every live network (errors are swallowed: this runs at exit or in a handler)."""
    with _lock:
        nets = list(_live.values())
    for net in nets:
        try:
            net.close()
        except Exception:  # noqa: BLE001 - best effort; clean() removes what is left
            pass


class ScratchDir:
    """A temporary folder removed on close, at exit and on SIGINT/SIGTERM (a context manager).

    ``tempfile.TemporaryDirectory`` is removed only when its ``with`` block unwinds, which a
    signal's default action never lets happen.
    """

    def __init__(self, prefix: str) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        register(self)

    def close(self) -> None:
        unregister(self)
        shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        self.close()


def _on_signal(signum: int, frame: Any) -> None:
    close_all()
    prev = _previous.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)
    elif prev != signal.SIG_IGN:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(close_all)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread; atexit still runs
    for sig in (signal.SIGINT, signal.SIGTERM):
        _previous[sig] = signal.getsignal(sig)
        signal.signal(sig, _on_signal)


__all__ = ["PROJECT_PREFIX", "ScratchDir", "clean", "close_all", "list_namespaces", "register",
           "unregister"]
