"""The tuner's control channel: newline-delimited JSON objects over one TCP connection.

The channel carries small control messages between the tuner's leader and each rank (timings
in, patterns out; the message types are :mod:`react.runtime.tuner`'s). It is separate from the
data path (paper §6.3: the prototype used a second NIC). What crosses it is data only: every
message is one JSON object on one line, encoded as UTF-8, at most ``max_message_bytes`` long
(newline included); a received line is parsed with :func:`json.loads`, never unpickled, and
nothing received is ever executed. ``NaN``/``Infinity`` are refused both ways, so every message
is standard JSON that any language can read.

Failures are of two kinds, both :class:`~react.model.errors.ReactError`:

- :class:`ChannelError` (also a :class:`ConnectionError`): the peer closed, the socket failed, or
  (:class:`ChannelTimeout`) nothing complete arrived in time;
- :class:`MessageError` (also a :class:`ValueError`): a line that is too long, not JSON, not an
  object, or without a string ``"type"``. The stream cannot be trusted after one (an oversize
  line is not read to its end), so callers close the channel.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

from react.model.errors import ReactError

__all__ = [
    "MAX_MESSAGE_BYTES",
    "Channel",
    "ChannelError",
    "ChannelTimeout",
    "MessageError",
    "connect",
    "decode",
    "encode",
    "listen",
]

MAX_MESSAGE_BYTES = 8 * 1024 * 1024
"""Default size limit of one message (a 64-rank ring pattern is about 0.3 MB of JSON)."""

_READ_BYTES = 64 * 1024


class ChannelError(ReactError, ConnectionError):
    """The control connection is gone: closed by the peer, failed, or not reachable."""


class ChannelTimeout(ChannelError, TimeoutError):
    """No complete message arrived within the time allowed."""


class MessageError(ReactError, ValueError):
    """A received (or to-be-sent) line that is not an acceptable message."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def encode(message: Mapping[str, Any], *, max_message_bytes: int = MAX_MESSAGE_BYTES) -> bytes:
    """One message as a JSON line; raise :class:`MessageError` if it cannot be sent as one."""
    if not isinstance(message, Mapping) or not isinstance(message.get("type"), str):
        raise MessageError(f"a message must be a mapping with a string 'type', got {message!r:.80}")
    try:
        data = json.dumps(message, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise MessageError(f"message {message['type']!r} is not plain JSON ({exc})") from None
    if len(data) + 1 > max_message_bytes:
        raise MessageError(f"message {message['type']!r} is {len(data) + 1} bytes; the channel "
                           f"limit is {max_message_bytes}")
    return data + b"\n"


def decode(line: bytes, *, max_message_bytes: int = MAX_MESSAGE_BYTES) -> dict[str, Any]:
    """Parse one received line (without its newline) into a message; strict (module docstring)."""
    if len(line) + 1 > max_message_bytes:
        raise MessageError(f"received a {len(line) + 1}-byte line; the channel limit is "
                           f"{max_message_bytes}")
    try:
        message = json.loads(line.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MessageError(f"received a line that is not JSON ({exc}): {line[:80]!r}") from None
    if not isinstance(message, dict):
        raise MessageError(f"expected a JSON object, got {type(message).__name__}: {line[:80]!r}")
    if not isinstance(message.get("type"), str):
        raise MessageError(f"message without a string 'type': {line[:80]!r}")
    return message


class Channel:
    """One end of a control connection; ``send`` is thread-safe, ``recv`` has one reader.

    Parameters
    ----------
    sock : socket.socket
        A connected TCP socket; the channel owns it from now on.
    timeout_s : float
        Limit of one :meth:`send` (a peer that stops reading cannot block a sender for longer).
    max_message_bytes : int
        Size limit of one message, both ways.
    peer : str
        A label for error messages (``"rank 3"``, ``"leader 10.0.0.1:5000"``).
    """

    def __init__(self, sock: socket.socket, *, timeout_s: float = 30.0,
                 max_message_bytes: int = MAX_MESSAGE_BYTES, peer: str = "peer") -> None:
        if not (isinstance(max_message_bytes, int) and max_message_bytes >= 64):
            raise ReactError(f"Channel: max_message_bytes must be an integer >= 64, got "
                             f"{max_message_bytes!r}")
        self.peer = peer
        self.max_message_bytes = max_message_bytes
        self._sock = sock
        self._sock.settimeout(timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # not TCP (a socketpair in tests): nothing to tune
            pass
        self._buffer = bytearray()
        self._send_lock = threading.Lock()
        self._closed = False

    def send(self, message: Mapping[str, Any]) -> None:
        """Send one message (see :func:`encode`); raise :class:`ChannelError` if it cannot go."""
        self.send_encoded(encode(message, max_message_bytes=self.max_message_bytes))

    def send_encoded(self, data: bytes) -> None:
        """Send a line made by :func:`encode` (a broadcast encodes once for every peer)."""
        with self._send_lock:
            if self._closed:
                raise ChannelError(f"channel to {self.peer} is closed")
            try:
                self._sock.sendall(data)
            except OSError as exc:
                raise ChannelError(f"sending to {self.peer} failed ({exc})") from None

    def recv(self, timeout_s: float | None = None) -> dict[str, Any]:
        """The next message; wait at most ``timeout_s`` (None: forever) for it to arrive whole."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return decode(line, max_message_bytes=self.max_message_bytes)
            if len(self._buffer) + 1 > self.max_message_bytes:
                size = len(self._buffer)
                self._buffer.clear()
                raise MessageError(f"{self.peer} sent more than {size} bytes without a newline; "
                                   f"the channel limit is {self.max_message_bytes}")
            if self._closed:
                raise ChannelError(f"channel to {self.peer} is closed")
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                ready, _, _ = select.select([self._sock], [], [], wait)
            except (OSError, ValueError) as exc:
                raise ChannelError(f"channel to {self.peer} failed ({exc})") from None
            if not ready:
                raise ChannelTimeout(f"no message from {self.peer} within {timeout_s} s")
            try:
                data = self._sock.recv(_READ_BYTES)
            except OSError as exc:
                raise ChannelError(f"receiving from {self.peer} failed ({exc})") from None
            if not data:
                raise ChannelError(f"{self.peer} closed the connection")
            self._buffer += data

    def close(self) -> None:
        """Close the connection (idempotent); a blocked :meth:`recv` returns with an error."""
        with self._send_lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()


def listen(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A listening TCP socket; ``port=0`` picks a free one. A taken port is a ChannelError."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise ChannelError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    return sock


def connect(address: tuple[str, int], *, timeout_s: float = 30.0,
            max_message_bytes: int = MAX_MESSAGE_BYTES) -> Channel:
    """Connect to a listening channel at ``(host, port)`` within ``timeout_s``."""
    host, port = address
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as exc:
        raise ChannelError(f"cannot connect to the tuner at {host}:{port} "
                           f"({exc.strerror or exc})") from None
    return Channel(sock, timeout_s=timeout_s, max_message_bytes=max_message_bytes,
                   peer=f"{host}:{port}")
