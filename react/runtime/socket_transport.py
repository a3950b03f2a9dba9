"""A point-to-point transport over plain TCP sockets: numpy buffers in, numpy buffers out.

Needs nothing beyond the base packages and starts in milliseconds, so it is the emulator's
default. Every ordered pair of ranks ``u -> v`` has ``connections`` TCP connections opened by
``u`` (distinct source ports); each message picks one with a seeded RNG, so under ECMP with L4
hashing the messages of one pair spread over paths as the design assumes.

Wire format (all integers little-endian):

- hello, once per connection, connector -> acceptor: ``b"RCH1"``, u32 source rank, u32
  destination rank, u32 connection index (16 bytes);
- clear-to-send, receiver -> sender, on connection 0 of the pair (its reverse direction):
  ``b"RCC1"``, u64 tag, u64 receive id, u64 byte count (28 bytes);
- data, sender -> receiver, on the connection the RNG picked: ``b"RCD1"``, u64 tag, u64 receive
  id, u64 byte count, then exactly that many payload bytes.

A receive is posted first: it gets the next receive id of its peer and sends a clear-to-send.
A send waits for the clear-to-send of its (peer, tag) (first come first matched, so messages of
one tag arrive in order); only then do bytes leave, so a transfer runs only when both ends
reached it, and ``started_s`` of the send stamps that moment. The receiving side's reader thread
(one per connection) reads the payload straight into the posted buffer (``recv_into``) and stamps
``done_s`` when the last byte landed. No pickle, nothing but sizes and ids on the wire.

Threads per rank: one data reader per incoming connection, one clear-to-send reader per peer
(it also writes the matched data itself when there is one connection per pair and it is idle),
one writer per outgoing connection (data matched in ``isend``, which never blocks). A connection
that breaks fails only the operations that needed it; a peer's clean close first delivers
everything it sent.
"""

from __future__ import annotations

import errno
import random
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from queue import SimpleQueue

import numpy as np

from react.runtime.clock import now_s
from react.runtime.transport import TransportError

__all__ = ["SocketTransport", "TransportError"]

_HELLO = struct.Struct("<4sIII")
_FRAME = struct.Struct("<4sQQQ")
_HELLO_MAGIC = b"RCH1"
_CTS_MAGIC = b"RCC1"
_DATA_MAGIC = b"RCD1"
_WAITALL = getattr(socket, "MSG_WAITALL", 0)


class _Handle:
    """A posted send or receive; ``wait`` raises :class:`TransportError` on failure/timeout."""

    __slots__ = ("done_s", "started_s", "_error", "_event", "_what")

    def __init__(self, what: str) -> None:
        self.started_s: float | None = None
        self.done_s: float | None = None
        self._error: str | None = None
        self._event = threading.Event()
        self._what = what

    def wait(self, timeout_s: float | None = None) -> None:
        if not self._event.wait(timeout_s):
            raise TransportError(f"{self._what}: not done within {timeout_s} s")
        if self._error is not None:
            raise TransportError(f"{self._what}: {self._error}")

    def _finish(self, error: str | None = None) -> None:
        if not self._event.is_set():
            self._error = error
            if error is None:
                self.done_s = now_s()
            self._event.set()


@dataclass(slots=True)
class _Send:
    peer: int
    tag: int
    data: memoryview
    handle: _Handle


@dataclass(slots=True)
class _Recv:
    view: memoryview
    handle: _Handle


class SocketTransport:
    """Full mesh of TCP connections between ``len(addresses)`` ranks (module docstring).

    Parameters
    ----------
    rank : int
        This rank; it listens on ``addresses[rank]``.
    addresses : sequence of (host, port)
        Every rank's listening address, indexed by rank.
    connections : int
        TCP connections per ordered pair of ranks (distinct source ports, ECMP).
    seed : int
        Seeds the per-message choice of connection (with the rank).
    timeout_s : float
        Longest wait while connecting to the peers.

    Raises
    ------
    TransportError
        If the address is taken or not local, or a peer cannot be reached within ``timeout_s``.
    """

    def __init__(
        self,
        rank: int,
        addresses: Sequence[tuple[str, int]],
        *,
        connections: int = 1,
        seed: int = 0,
        timeout_s: float = 30.0,
    ) -> None:
        addresses = [_check_address(i, a) for i, a in enumerate(addresses)]
        world = len(addresses)
        if world < 1:
            raise TransportError("SocketTransport: addresses is empty; expected one per rank")
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < world:
            raise TransportError(f"SocketTransport: rank must be in 0..{world - 1}, got {rank!r}")
        if not isinstance(connections, int) or isinstance(connections, bool) or connections < 1:
            raise TransportError(
                f"SocketTransport: connections must be an integer >= 1, got {connections!r}"
            )
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise TransportError(f"SocketTransport: timeout_s must be positive, got {timeout_s!r}")
        self.rank = rank
        self.world_size = world
        self.connections = connections
        self.addresses = tuple(addresses)
        self._rng = random.Random(seed * 1_000_003 + rank)
        self._lock = threading.Lock()
        self._closing = False
        # A peer's sends die with connection 0's reverse direction (no more clear-to-sends);
        # its receives die when every data connection from it closed (each reader drains its
        # connection first, so nothing sent before the peer closed is lost) or one broke.
        self._send_dead: dict[int, str] = {}
        self._recv_dead: dict[int, str] = {}
        self._live_readers = dict.fromkeys(range(world), connections)
        self._cts: dict[tuple[int, int], deque[tuple[int, int]]] = {}
        self._sends: dict[tuple[int, int], deque[_Send]] = {}
        self._recvs: dict[tuple[int, int], _Recv] = {}
        self._next_recv_id = [0] * world
        self._out: dict[int, list[socket.socket]] = {}
        self._in: dict[int, list[socket.socket]] = {}
        self._cts_locks = {p: threading.Lock() for p in range(world) if p != rank}
        self._queues: dict[tuple[int, int], SimpleQueue] = {}
        self._threads: list[threading.Thread] = []
        self._connect(float(timeout_s))
        self._start_threads()

    # -- the Transport interface -----------------------------------------------------------------
    def isend(self, peer: int, tag: int, data: np.ndarray) -> _Handle:
        self._check_peer(peer, "isend")
        view = _bytes_view(data, "isend")
        handle = _Handle(f"rank {self.rank}: send to rank {peer}, tag {tag}")
        with self._lock:
            self._raise_if_dead(peer, self._send_dead)
            self._sends.setdefault((peer, tag), deque()).append(_Send(peer, tag, view, handle))
            ready = self._match(peer, tag)
        for send, recv_id, k in ready:
            self._queues[(peer, k)].put((send, recv_id))  # isend never blocks
        return handle

    def irecv(self, peer: int, tag: int, out: np.ndarray) -> _Handle:
        self._check_peer(peer, "irecv")
        view = _bytes_view(out, "irecv")
        if view.readonly:
            raise TransportError(f"rank {self.rank}: irecv from rank {peer}: out is read-only")
        handle = _Handle(f"rank {self.rank}: receive from rank {peer}, tag {tag}")
        with self._lock:
            self._raise_if_dead(peer, self._recv_dead)
            recv_id = self._next_recv_id[peer]
            self._next_recv_id[peer] = recv_id + 1
            self._recvs[(peer, recv_id)] = _Recv(view, handle)
        frame = _FRAME.pack(_CTS_MAGIC, tag, recv_id, view.nbytes)
        try:
            with self._cts_locks[peer]:
                self._in[peer][0].sendall(frame)
        except OSError as exc:
            self._failed(peer, f"clear-to-send failed ({exc})", recvs=True)
        return handle

    def bytes_sent(self, peer: int) -> tuple[int, ...]:
        """Payload bytes written so far to ``peer`` on each of its connections (index order)."""
        self._check_peer(peer, "bytes_sent")
        return tuple(self._sent[id(s)] for s in self._out[peer])

    def source_ports(self, peer: int) -> tuple[int, ...]:
        """Local (source) port of each connection this rank opened to ``peer``."""
        self._check_peer(peer, "source_ports")
        return tuple(s.getsockname()[1] for s in self._out[peer])

    def close(self) -> None:
        """Shut every connection and stop the threads; idempotent."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
        for q in self._queues.values():
            q.put(None)
        for socks in (*self._out.values(), *self._in.values()):
            for s in socks:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        for t in self._threads:
            t.join(timeout=2.0)
        with self._lock:
            for peer in list(self._cts_locks):
                self._fail_locked(peer, "transport closed", sends=True, recvs=True)

    def __enter__(self) -> SocketTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- matching (sender side) ------------------------------------------------------------------
    def _match(self, peer: int, tag: int) -> list[tuple[_Send, int, int]]:
        # Caller holds the lock. Pair the oldest send of (peer, tag) with the oldest clear-to-send;
        # return (send, receive id, connection) of each pair, ready to write.
        ready: list[tuple[_Send, int, int]] = []
        sends = self._sends.get((peer, tag))
        ctss = self._cts.get((peer, tag))
        while sends and ctss:
            send = sends.popleft()
            recv_id, nbytes = ctss.popleft()
            if nbytes != send.data.nbytes:
                send.handle._finish(
                    f"rank {peer} posted a receive of {nbytes} bytes for tag {tag}, "
                    f"this send has {send.data.nbytes}"
                )
                continue
            k = self._rng.randrange(self.connections) if self.connections > 1 else 0
            ready.append((send, recv_id, k))
        if sends is not None and not sends:
            del self._sends[(peer, tag)]
        if ctss is not None and not ctss:
            del self._cts[(peer, tag)]
        return ready

    # -- threads ---------------------------------------------------------------------------------
    def _start_threads(self) -> None:
        self._write_locks = {id(s): threading.Lock() for socks in self._out.values() for s in socks}
        self._sent = dict.fromkeys(self._write_locks, 0)
        for peer, socks in self._out.items():
            for k, sock in enumerate(socks):
                q: SimpleQueue = SimpleQueue()
                self._queues[(peer, k)] = q
                self._spawn(self._writer, sock, peer, q, name=f"rct-w{self.rank}>{peer}.{k}")
            self._spawn(self._cts_reader, socks[0], peer, name=f"rct-c{self.rank}<{peer}")
        for peer, socks in self._in.items():
            for k, sock in enumerate(socks):
                self._spawn(self._data_reader, sock, peer, name=f"rct-r{self.rank}<{peer}.{k}")

    def _spawn(self, target, *args, name: str) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _writer(self, sock: socket.socket, peer: int, q: SimpleQueue) -> None:
        while True:
            item = q.get()
            if item is None:
                return
            send, recv_id = item
            lock = self._write_locks[id(sock)]
            with lock:
                if not self._write(sock, peer, send, recv_id):
                    break
        # The connection broke: whatever is still queued on it fails instead of waiting.
        while not q.empty():
            item = q.get()
            if item is not None:
                item[0].handle._finish(f"connection to rank {peer} failed earlier")

    def _write(self, sock: socket.socket, peer: int, send: _Send, recv_id: int) -> bool:
        # Caller holds the connection's write lock (frames never interleave).
        send.handle.started_s = now_s()
        try:
            _send_frame(sock, _FRAME.pack(_DATA_MAGIC, send.tag, recv_id, send.data.nbytes),
                        send.data)
        except OSError as exc:
            send.handle._finish(f"connection to rank {peer} failed ({exc})")
            self._failed(peer, f"connection failed while sending ({exc})", sends=True)
            return False
        self._sent[id(sock)] += send.data.nbytes  # one writer at a time per connection
        send.handle._finish()
        return True

    def _cts_reader(self, sock: socket.socket, peer: int) -> None:
        header = bytearray(_FRAME.size)
        try:
            while True:
                _recv_exact(sock, memoryview(header))
                magic, tag, recv_id, nbytes = _FRAME.unpack(header)
                if magic != _CTS_MAGIC:
                    raise _ProtocolError(f"expected a clear-to-send frame, got magic {magic!r}")
                with self._lock:
                    self._cts.setdefault((peer, tag), deque()).append((recv_id, nbytes))
                    ready = self._match(peer, tag)
                for send, rid, k in ready:
                    # With one connection, this thread writes itself when the connection is
                    # idle: one thread hand-off less per message. Never waits for the lock.
                    out = self._out[peer][k]
                    lock = self._write_locks[id(out)]
                    if self.connections == 1 and lock.acquire(blocking=False):
                        try:
                            self._write(out, peer, send, rid)
                        finally:
                            lock.release()
                    else:
                        self._queues[(peer, k)].put((send, rid))
        except (OSError, _ProtocolError) as exc:
            self._failed(peer, str(exc), sends=True)

    def _data_reader(self, sock: socket.socket, peer: int) -> None:
        header = bytearray(_FRAME.size)
        try:
            while True:
                _recv_exact(sock, memoryview(header))
                magic, tag, recv_id, nbytes = _FRAME.unpack(header)
                if magic != _DATA_MAGIC:
                    raise _ProtocolError(f"expected a data frame, got magic {magic!r}")
                with self._lock:
                    recv = self._recvs.pop((peer, recv_id), None)
                if recv is None:
                    raise _ProtocolError(f"data for unknown receive id {recv_id} (tag {tag})")
                if nbytes != recv.view.nbytes:
                    raise _ProtocolError(
                        f"data of {nbytes} bytes for a receive of {recv.view.nbytes} (tag {tag})"
                    )
                try:
                    _recv_exact(sock, recv.view)
                except (OSError, _ProtocolError) as exc:
                    recv.handle._finish(str(exc))
                    raise
                recv.handle._finish()
        except _Closed as exc:
            with self._lock:
                self._live_readers[peer] -= 1
                if self._live_readers[peer] == 0:
                    self._fail_locked(peer, str(exc), recvs=True)
        except (OSError, _ProtocolError) as exc:
            self._failed(peer, str(exc), recvs=True)

    # -- failures --------------------------------------------------------------------------------
    def _failed(self, peer: int, why: str, *, sends: bool = False, recvs: bool = False) -> None:
        with self._lock:
            if self._closing:
                why = "transport closed"
            self._fail_locked(peer, why, sends=sends, recvs=recvs)

    def _fail_locked(self, peer: int, why: str, *, sends: bool = False,
                     recvs: bool = False) -> None:
        message = f"connection with rank {peer} lost: {why}"
        if sends:
            self._send_dead.setdefault(peer, message)
            for key in [k for k in self._sends if k[0] == peer]:
                for send in self._sends.pop(key):
                    send.handle._finish(message)
        if recvs:
            self._recv_dead.setdefault(peer, message)
            for key in [k for k in self._recvs if k[0] == peer]:
                self._recvs.pop(key).handle._finish(message)

    def _raise_if_dead(self, peer: int, dead: dict[int, str]) -> None:
        if self._closing:
            raise TransportError(f"rank {self.rank}: transport is closed")
        if peer in dead:
            raise TransportError(f"rank {self.rank}: {dead[peer]}")

    def _check_peer(self, peer: int, what: str) -> None:
        if not isinstance(peer, (int, np.integer)) or not 0 <= peer < self.world_size or (
            peer == self.rank
        ):
            raise TransportError(
                f"rank {self.rank}: {what}: peer must be another rank in "
                f"0..{self.world_size - 1}, got {peer!r}"
            )

    # -- connection setup ------------------------------------------------------------------------
    def _connect(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        host, port = self.addresses[self.rank]
        listener = socket.socket(_family(host), socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind((host, port))
            except OSError as exc:
                reason = "address already in use" if exc.errno == errno.EADDRINUSE else str(exc)
                raise TransportError(
                    f"SocketTransport: rank {self.rank} cannot listen on {host}:{port}: {reason}"
                ) from None
            listener.listen(max(128, (self.world_size - 1) * self.connections))
            peers = [p for p in range(self.world_size) if p != self.rank]
            for peer in peers:
                self._out[peer] = [
                    self._dial(peer, k, deadline) for k in range(self.connections)
                ]
            expected = len(peers) * self.connections
            got: dict[int, list[socket.socket | None]] = {
                p: [None] * self.connections for p in peers
            }
            for _ in range(expected):
                listener.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    sock, _addr = listener.accept()
                except TimeoutError:
                    missing = sorted(p for p, s in got.items() if None in s)
                    raise TransportError(
                        f"SocketTransport: rank {self.rank} waited {timeout_s} s for connections "
                        f"from ranks {missing}"
                    ) from None
                src, k = self._read_hello(sock, deadline)
                if got[src][k] is not None:
                    sock.close()
                    raise TransportError(
                        f"SocketTransport: rank {self.rank} got connection {k} from rank {src} "
                        "twice"
                    )
                got[src][k] = sock
            self._in = {p: [s for s in socks if s is not None] for p, socks in got.items()}
        except BaseException:
            for socks in (*self._out.values(), *self._in.values()):
                for s in socks:
                    s.close()
            raise
        finally:
            listener.close()

    def _dial(self, peer: int, k: int, deadline: float) -> socket.socket:
        host, port = self.addresses[peer]
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TransportError(
                    f"SocketTransport: rank {self.rank} could not connect to rank {peer} at "
                    f"{host}:{port} in time"
                )
            try:
                sock = socket.create_connection((host, port), timeout=left)
                break
            except (ConnectionRefusedError, TimeoutError, ConnectionResetError):
                time.sleep(min(0.05, max(0.0, left)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(_HELLO.pack(_HELLO_MAGIC, self.rank, peer, k))
        sock.settimeout(None)
        return sock

    def _read_hello(self, sock: socket.socket, deadline: float) -> tuple[int, int]:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        data = bytearray(_HELLO.size)
        try:
            _recv_exact(sock, memoryview(data))
        except (OSError, _ProtocolError) as exc:
            sock.close()
            raise TransportError(
                f"SocketTransport: rank {self.rank}: a connection sent no hello ({exc})"
            ) from None
        magic, src, dst, k = _HELLO.unpack(data)
        if magic != _HELLO_MAGIC or dst != self.rank or src == self.rank or (
            not 0 <= src < self.world_size
        ) or not 0 <= k < self.connections:
            sock.close()
            raise TransportError(
                f"SocketTransport: rank {self.rank}: unexpected hello {bytes(data)!r} "
                f"(magic {magic!r}, from rank {src} to rank {dst}, connection {k})"
            )
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)
        return src, k


class _ProtocolError(Exception):
    """Bytes on a connection that do not follow the wire format (or an early EOF)."""


class _Closed(_ProtocolError):
    """The peer closed the connection between two frames (a clean end)."""


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    # MSG_WAITALL: the kernel fills the whole view in one call (the GIL released throughout)
    # instead of one Python round per segment; the loop only resumes after a signal or EOF.
    got, total = 0, view.nbytes
    while got < total:
        n = sock.recv_into(view[got:], total - got, _WAITALL)
        if n == 0:
            if got == 0 and total == _FRAME.size:
                raise _Closed("connection closed by the peer")
            raise _ProtocolError(f"connection closed after {got} of {total} bytes")
        got += n


def _send_frame(sock: socket.socket, header: bytes, payload: memoryview) -> None:
    # Header and payload in one system call: with TCP_NODELAY a separate header would leave as
    # its own tiny segment and wake the receiver twice.
    sent = sock.sendmsg([header, payload])
    if sent < len(header):
        sock.sendall(header[sent:])
        sent = len(header)
    if sent - len(header) < payload.nbytes:
        sock.sendall(payload[sent - len(header):])


def _bytes_view(array: np.ndarray, what: str) -> memoryview:
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
        raise TransportError(f"{what}: expected a C-contiguous numpy array, got {array!r:.80}")
    return memoryview(array).cast("B") if array.size else memoryview(b"")  # type: ignore[arg-type]


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _check_address(i: int, address: object) -> tuple[str, int]:
    host: object
    port: object
    try:
        host, port = address  # type: ignore[misc]
    except (TypeError, ValueError):
        raise TransportError(
            f"SocketTransport: addresses[{i}] must be (host, port), got {address!r}"
        ) from None
    if not isinstance(host, str) or not isinstance(port, int) or not 0 < port < 65536:
        raise TransportError(
            f"SocketTransport: addresses[{i}] must be (host, port 1..65535), got {address!r}"
        )
    return host, port
