"""A point-to-point transport over ``torch.distributed`` ``isend``/``irecv`` (paper prototype).

Gloo on CPU here; NCCL on GPUs later (the GPU issue). torch is an optional extra (``[torch]``),
imported only when this transport is built; without it the constructor raises
:class:`~react.runtime.transport.TransportError` saying how to install it.

Messages are the caller's numpy arrays shared with torch tensors (``torch.from_numpy``, no copy).
Tags are RCollective's ``flow_tag(epoch, flow)`` (31 bits, Gloo's limit), unique per live message.
Gloo does not say when a send's bytes started to leave, so sends report ``started_s = None``
(the flow's start is then the later of the two posts). Gloo works offer no completion callback,
so each receive is waited on by a pooled thread that stamps ``done_s`` when it completes: a
receive that lands before an earlier-posted one is still stamped at its own completion.

Gloo binds the interface named by ``GLOO_SOCKET_IFNAME`` (``lo`` on loopback; the namespace's
interface in the emulator), or it may pick loopback in a namespace and hang for its timeout.
"""

from __future__ import annotations

import datetime
import importlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from react.runtime.clock import now_s
from react.runtime.transport import TransportError

__all__ = ["TorchTransport", "import_torch", "init_torch_group"]


def import_torch() -> Any:
    """``torch`` itself, or :class:`TransportError` saying it is missing and how to get it."""
    try:
        torch = importlib.import_module("torch")
        importlib.import_module("torch.distributed")
    except ImportError as exc:
        raise TransportError(
            f"the torch transport needs PyTorch, which is not importable ({exc}); install it "
            "with `pip install 'react[torch]'` or use the socket transport"
        ) from None
    if not torch.distributed.is_available():
        raise TransportError("the torch transport needs torch.distributed, which this torch "
                             "build does not provide")
    return torch


def init_torch_group(
    rank: int,
    world_size: int,
    master: tuple[str, int],
    *,
    backend: str = "gloo",
    timeout_s: float = 60.0,
) -> None:
    """Initialise torch's default process group over TCP rendezvous at ``master`` (host, port).

    Rank 0 listens at ``master``; every rank calls this. A port already taken raises
    :class:`TransportError` naming it.
    """
    torch = import_torch()
    host, port = master
    try:
        torch.distributed.init_process_group(
            backend, init_method=f"tcp://{host}:{port}", rank=rank, world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    except (RuntimeError, ValueError) as exc:
        text = str(exc)
        if "address already in use" in text.lower() or "EADDRINUSE" in text:
            raise TransportError(
                f"init_torch_group: rank {rank} cannot listen on {host}:{port}: address already "
                "in use"
            ) from None
        raise TransportError(f"init_torch_group: rank {rank} of {world_size} at {host}:{port}: "
                             f"{text.splitlines()[0] if text else exc!r}") from None


class _SendHandle:
    __slots__ = ("started_s", "_keep", "_what", "_work")

    def __init__(self, work: Any, keep: Any, what: str) -> None:
        self.started_s: float | None = None
        self._work = work
        self._keep = keep  # the tensor must live until the work is done
        self._what = what

    def wait(self, timeout_s: float | None = None) -> None:
        try:
            if timeout_s is None:
                self._work.wait()
            else:
                self._work.wait(timeout=datetime.timedelta(seconds=timeout_s))
        except RuntimeError as exc:
            raise TransportError(f"{self._what}: {str(exc).splitlines()[0]}") from None


class _RecvHandle:
    __slots__ = ("done_s", "started_s", "_error", "_event", "_keep", "_what")

    def __init__(self, keep: Any, what: str) -> None:
        self.started_s: float | None = None
        self.done_s: float | None = None
        self._error: str | None = None
        self._event = threading.Event()
        self._keep = keep
        self._what = what

    def _watch(self, work: Any, limit_s: float) -> None:
        try:
            work.wait(timeout=datetime.timedelta(seconds=limit_s))
            self.done_s = now_s()
        except RuntimeError as exc:
            self._error = str(exc).splitlines()[0] if str(exc) else repr(exc)
        finally:
            self._event.set()

    def wait(self, timeout_s: float | None = None) -> None:
        if not self._event.wait(timeout_s):
            raise TransportError(f"{self._what}: not done within {timeout_s} s")
        if self._error is not None:
            raise TransportError(f"{self._what}: {self._error}")


class TorchTransport:
    """Point-to-point messages over an initialised ``torch.distributed`` process group.

    Parameters
    ----------
    group : ProcessGroup, optional
        The group to use (default: the default group); ranks are ranks of this group.
    timeout_s : float
        Longest a receive is watched before it is reported failed.
    owns_group : bool
        Destroy the default process group on :meth:`close` (set when this transport made it).
    """

    def __init__(self, group: Any = None, *, timeout_s: float = 60.0,
                 owns_group: bool = False) -> None:
        torch = import_torch()
        dist = torch.distributed
        if not dist.is_initialized():
            raise TransportError(
                "TorchTransport: torch.distributed is not initialised; call init_torch_group "
                "(or torch.distributed.init_process_group) first"
            )
        self._torch = torch
        self._dist = dist
        self._group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.timeout_s = float(timeout_s)
        self._owns_group = owns_group
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="rct-torch-recv")
        self._closed = False

    def _global(self, peer: int, what: str) -> int:
        if not isinstance(peer, (int, np.integer)) or not 0 <= peer < self.world_size or (
            peer == self.rank
        ):
            raise TransportError(
                f"rank {self.rank}: {what}: peer must be another rank in "
                f"0..{self.world_size - 1}, got {peer!r}"
            )
        if self._group is None:
            return int(peer)
        return int(self._dist.get_global_rank(self._group, int(peer)))

    def _tensor(self, array: np.ndarray, what: str) -> Any:
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
            raise TransportError(f"{what}: expected a C-contiguous numpy array, got {array!r:.80}")
        return self._torch.from_numpy(array)

    def isend(self, peer: int, tag: int, data: np.ndarray) -> _SendHandle:
        dst = self._global(peer, "isend")
        tensor = self._tensor(data, "isend")
        what = f"rank {self.rank}: send to rank {peer}, tag {tag}"
        try:
            work = self._dist.isend(tensor, dst, group=self._group, tag=tag)
        except RuntimeError as exc:
            raise TransportError(f"{what}: {str(exc).splitlines()[0]}") from None
        return _SendHandle(work, tensor, what)

    def irecv(self, peer: int, tag: int, out: np.ndarray) -> _RecvHandle:
        src = self._global(peer, "irecv")
        tensor = self._tensor(out, "irecv")
        what = f"rank {self.rank}: receive from rank {peer}, tag {tag}"
        try:
            work = self._dist.irecv(tensor, src, group=self._group, tag=tag)
        except RuntimeError as exc:
            raise TransportError(f"{what}: {str(exc).splitlines()[0]}") from None
        handle = _RecvHandle(tensor, what)
        self._pool.submit(handle._watch, work, self.timeout_s)
        return handle

    def close(self) -> None:
        """Stop the receive watchers; destroy the process group if this transport owns it."""
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._owns_group and self._dist.is_initialized():
            self._dist.destroy_process_group()

    def __enter__(self) -> TorchTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
