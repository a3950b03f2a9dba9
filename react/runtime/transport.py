"""The point-to-point interface RCollective runs over (two implementations share all the rest).

Shaped after ``torch.distributed.isend``/``irecv``: post an operation, get a handle, wait on it.
A transport never interprets the bytes and never decides an order: RCollective posts each step's
sends and receives (paper Algorithm 2) and waits on them. Tags tell apart the messages of one
pair of ranks; within one tag and pair, messages arrive in the order they were sent.

Implementations: :class:`react.runtime.socket_transport.SocketTransport` (plain TCP sockets, base
packages only; the emulator's default) and :class:`react.runtime.torch_transport.TorchTransport`
(``torch.distributed`` on Gloo or NCCL; optional extra ``[torch]``).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from react.model.errors import ReactError


class TransportError(ReactError, RuntimeError):
    """A transport that cannot be set up (port taken, peer unreachable) or a failed transfer."""


class Pending(Protocol):
    """A posted operation."""

    started_s: float | None
    """Send only, where the transport knows it: when bytes started to leave (both ends ready)."""

    # Optional: ``done_s``, when the operation completed (receive: the last byte landed), stamped
    # by the transport where it can; RCollective falls back to when ``wait`` returned.

    def wait(self, timeout_s: float | None = None) -> None:
        """Block until done; raise :class:`react.model.errors.ReactError` on failure or timeout."""
        ...


class Transport(Protocol):
    """Point-to-point messages between the ranks of one job."""

    rank: int
    world_size: int

    def isend(self, peer: int, tag: int, data: np.ndarray) -> Pending:
        """Send ``data`` (contiguous; not modified until the handle is done) to ``peer``."""
        ...

    def irecv(self, peer: int, tag: int, out: np.ndarray) -> Pending:
        """Receive the matching message from ``peer`` into ``out`` (its exact size)."""
        ...

    def close(self) -> None:
        """Release sockets, threads, process groups; idempotent."""
        ...
