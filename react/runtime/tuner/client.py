"""RTuner on a rank: reports its timings, names the pattern of each epoch (protocol in
:mod:`react.runtime.tuner`)."""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from typing import Any

from react.model.errors import PatternError, ReactError
from react.model.pattern import Pattern
from react.model.verify import verify
from react.runtime.channel import (
    MAX_MESSAGE_BYTES,
    Channel,
    ChannelError,
    ChannelTimeout,
    MessageError,
    connect,
)
from react.runtime.clock import clock_id, now_s
from react.runtime.timings import RankEpochTimings
from react.runtime.tuner.messages import (
    _POLL_S,
    PROTOCOL_VERSION,
    _int,
    _number,
    pattern_fingerprint,
)

log = logging.getLogger(__name__)


# -- the rank side -----------------------------------------------------------------------------
class TunerClient:
    """A rank's end of the tuner (module docstring): reports timings, names each epoch's pattern.

    Never raises for what the leader or the channel does and never blocks longer than
    ``timeout_s``; on failure it freezes on its current pattern (:attr:`failure` says why).

    Parameters
    ----------
    rank : int
        This rank's id in the pattern.
    leader_address : (str, int)
        Where the leader listens.
    timeout_s : float
        Limit of connecting, of the handshake, and of any wait for the leader's answer.
    max_message_bytes : int
        Size limit of one control message.
    clock : callable
        The clock the rank stamps its timings with (default :func:`react.runtime.clock.now_s`);
        the leader's offset estimate refers to it. With the default the rank also tells the
        leader its :func:`~react.runtime.clock.clock_id`, so a rank on the leader's machine gets
        offset 0 instead of an estimate.

    Notes
    -----
    Every epoch, numbered 0, 1, 2, ... without gaps, is asked for and reported once, in order
    (the leader merges epoch ``e`` when every rank reported it)::

        with TunerClient(rank, (leader_ip, port), timeout_s=30) as tuner:
            pattern = initial
            for epoch in range(epochs):
                pattern = tuner.pattern_for(epoch, pattern)
                tuner.report(collective.run(pattern, buffer, epoch))
    """

    def __init__(
        self,
        rank: int,
        leader_address: tuple[str, int],
        *,
        timeout_s: float = 30.0,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        clock: Any = now_s,
    ) -> None:
        if not (isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0):
            raise ReactError(f"TunerClient: rank must be a non-negative integer, got {rank!r}")
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise ReactError(f"TunerClient: timeout_s must be positive, got {timeout_s!r}")
        if not (isinstance(leader_address, (tuple, list)) and len(leader_address) == 2
                and isinstance(leader_address[0], str) and isinstance(leader_address[1], int)):
            raise ReactError(f"TunerClient: leader_address must be (host, port), got "
                             f"{leader_address!r}")
        self.rank = rank
        self.timeout_s = float(timeout_s)
        self.failure: str | None = None
        self.history: list[tuple[int, str]] = []
        self.offset_s: float | None = None
        self.waited_epochs = 0
        self.waited_s = 0.0
        self.report_s = 0.0
        self.epochs = 0
        self._clock = clock
        self._cond = threading.Condition()
        self._known_through: float = -1
        self._delay = 0
        self._switches: dict[int, tuple[Pattern, str]] = {}
        self._reference: Pattern | None = None
        self._asked = -1
        self._last: tuple[Pattern, str] | None = None
        self._ran: dict[int, tuple[str, float]] = {}
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closing = False
        self._channel: Channel | None = None
        self._threads: list[threading.Thread] = []
        try:
            self._channel = connect(leader_address, timeout_s=self.timeout_s,
                                    max_message_bytes=max_message_bytes)
            self._handshake()
        except (ChannelError, MessageError, PatternError) as exc:
            self._freeze(f"no tuner: {exc}")
            if self._channel is not None:
                self._channel.close()
            self._channel = None
            return
        for target, name in ((self._read, "reader"), (self._write, "writer")):
            t = threading.Thread(target=target, daemon=True, name=f"tuner-rank{rank}-{name}")
            t.start()
            self._threads.append(t)

    def _handshake(self) -> None:
        channel = self._channel
        assert channel is not None
        deadline = time.monotonic() + self.timeout_s
        channel.send({"type": "hello", "rank": self.rank, "version": PROTOCOL_VERSION,
                      "clock": clock_id() if self._clock is now_s else None})
        while True:
            message = channel.recv(max(0.0, deadline - time.monotonic()))
            kind = message["type"]
            if kind == "ping":
                channel.send({"type": "pong", "seq": message.get("seq"),
                              "t_rank_s": self._clock()})
            elif kind == "welcome":
                break
            elif kind == "error":
                raise ChannelError(f"the leader refused rank {self.rank}: "
                                   f"{message.get('reason')!r}")
            else:
                raise MessageError(f"expected ping or welcome, got {kind!r}")
        delay = _int(message, "apply_delay_epochs")
        assert delay is not None
        self._delay = delay
        self.offset_s = _number(message, "offset_s")
        reference = Pattern.from_dict(message.get("pattern"))  # type: ignore[arg-type]
        verify(reference)
        self._reference = reference
        self._set_lease(_int(message, "next_decision_epoch", nullable=True))

    def _set_lease(self, next_decision: int | None) -> None:
        # decisions on epochs >= next_decision switch at > next_decision + delay at the earliest
        known = math.inf if next_decision is None else next_decision + self._delay
        with self._cond:
            self._known_through = max(self._known_through, known)
            self._cond.notify_all()

    def _freeze(self, reason: str, *, level: int = logging.WARNING) -> None:
        with self._cond:
            if self.failure is None:
                self.failure = reason
                log.log(level, "tuner rank %d: no longer waits for the tuner, keeps its "
                        "pattern: %s", self.rank, reason)
            self._known_through = math.inf
            self._cond.notify_all()

    # -- the job's calls -----------------------------------------------------------------------
    def pattern_for(self, epoch: int, current: Pattern) -> Pattern:
        """The pattern to run at ``epoch`` (asked in increasing order), given the ``current`` one.

        Blocks only while the leader's answer that could switch at or before ``epoch`` is
        missing (module docstring), at most ``timeout_s``; then freezes on ``current``.
        """
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch <= self._asked:
            raise ReactError(f"TunerClient.pattern_for: epochs must be asked in increasing "
                             f"order; got {epoch!r} after {self._asked}")
        last = self._last
        if last is not None and last[0] is current:
            current_fp = last[1]
        else:
            current_fp = pattern_fingerprint(current)
        if self._asked < 0 and self._reference is not None and (
            current_fp != pattern_fingerprint(self._reference)
        ):
            reason = (f"the job's pattern {current_fp} is not the leader's "
                      f"{pattern_fingerprint(self._reference)}")
            self._outbox.put({"type": "reject", "epoch": epoch, "reason": reason})
            self._freeze(reason)
        start = time.perf_counter()
        waited = False
        with self._cond:
            while self.failure is None and epoch > self._known_through:
                waited = True
                remaining = self.timeout_s - (time.perf_counter() - start)
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            due = sorted(e for e in self._switches if e <= epoch)
            chosen = (current, current_fp)
            for e in due:
                chosen = self._switches.pop(e)
            self._asked = epoch
        if waited and self.failure is None and epoch > self._known_through:
            self._freeze(f"no answer from the leader for epoch {epoch} within "
                         f"{self.timeout_s} s")
        wait_s = time.perf_counter() - start if waited else 0.0
        if waited:
            self.waited_epochs += 1
            self.waited_s += wait_s
        self._last = chosen
        self._ran[epoch] = (chosen[1], wait_s)
        self.history.append((epoch, chosen[1]))
        log.debug("tuner rank %d: epoch %d runs pattern %s", self.rank, epoch, chosen[1])
        return chosen[0]

    def report(self, timings: RankEpochTimings) -> None:
        """Hand one epoch's timings to the background thread; returns at once."""
        start = time.perf_counter()
        if timings.rank != self.rank or timings.epoch not in self._ran:
            raise ReactError(f"TunerClient.report: expected timings of rank {self.rank} for an "
                             f"epoch started with pattern_for (open: {sorted(self._ran)}), got "
                             f"rank {timings.rank} epoch {timings.epoch}")
        fingerprint, waited = self._ran.pop(timings.epoch)
        self.epochs += 1
        if self._channel is not None:
            self._outbox.put((timings, fingerprint, waited))
        self.report_s += time.perf_counter() - start

    def close(self) -> None:
        """Say bye, flush the reports, close the connection and join the threads (bounded)."""
        if self._closing:
            return
        self._closing = True  # from now on a closed connection is expected, not a failure
        if self._channel is not None:
            self._outbox.put({
                "type": "bye", "epochs": self.epochs, "waited_epochs": self.waited_epochs,
                "waited_s": self.waited_s, "report_s": self.report_s, "failure": self.failure,
            })
            self._outbox.put(None)
            if self._threads:
                self._threads[1].join(timeout=self.timeout_s)
        if self._channel is not None:
            self._channel.close()
        for t in self._threads:
            t.join(timeout=self.timeout_s)

    def __enter__(self) -> TunerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- background threads --------------------------------------------------------------------
    def _write(self) -> None:
        channel = self._channel
        assert channel is not None
        while True:
            item = self._outbox.get()
            if item is None:
                return
            if isinstance(item, tuple):
                timings, fingerprint, waited = item
                item = {"type": "timings", "timings": timings.to_dict(), "pattern": fingerprint,
                        "waited_s": waited}
            try:
                channel.send(item)
            except (ChannelError, MessageError) as exc:
                if not self._closing:
                    self._freeze(f"lost the leader: {exc}")
                return

    def _read(self) -> None:
        channel = self._channel
        assert channel is not None
        while True:
            try:
                message = channel.recv(_POLL_S)
            except ChannelTimeout:
                if self._closing:
                    return
                continue
            except (ChannelError, MessageError) as exc:
                if not self._closing:
                    self._freeze(f"lost the leader: {exc}")
                    channel.close()
                return
            try:
                self._handle(message)
            except MessageError as exc:
                self._freeze(f"the leader sent a malformed {message['type']!r} message: {exc}")
                channel.close()
                return

    def _handle(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "keep":
            _int(message, "through_epoch")
            self._set_lease(_int(message, "next_decision_epoch", nullable=True))
        elif kind == "switch":
            epoch = _int(message, "epoch")
            assert epoch is not None
            checked = self._check_switch(message.get("pattern"))
            problem = checked if isinstance(checked, str) else None
            if not isinstance(checked, str):
                fingerprint = pattern_fingerprint(checked)
                with self._cond:  # checked and scheduled at once: pattern_for cannot pass it
                    if epoch > self._asked:
                        self._switches[epoch] = (checked, fingerprint)
                    else:
                        problem = f"it arrived late: this rank already ran epoch {self._asked}"
            if problem is not None:
                self._outbox.put({"type": "reject", "epoch": epoch, "reason": problem})
                self._freeze(f"rejected the switch at epoch {epoch}: {problem}")
                return
            self._set_lease(_int(message, "next_decision_epoch", nullable=True))
            log.info("tuner rank %d: switching to pattern %s at epoch %d", self.rank,
                     fingerprint, epoch)
        elif kind == "stop":
            self._freeze(f"the leader stopped tuning: {message.get('reason')!r}",
                         level=logging.INFO)
        elif kind == "ping":
            self._outbox.put({"type": "pong", "seq": message.get("seq"),
                              "t_rank_s": self._clock()})
        else:
            raise MessageError(f"unexpected message type {kind!r}")

    def _check_switch(self, data: Any) -> Pattern | str:
        """The switch's pattern if this rank may use it, else why not."""
        try:
            pattern = Pattern.from_dict(data)
            verify(pattern)
        except PatternError as exc:
            return f"unusable pattern: {exc}"
        ref = self._reference
        assert ref is not None
        if (pattern.kind, pattern.ranks, pattern.chunks, pattern.root) != (
            ref.kind, ref.ranks, ref.chunks, ref.root
        ):
            return (f"the pattern is a {pattern.kind} over ranks {list(pattern.ranks)} with "
                    f"{len(pattern.chunks)} chunks, not the job's {ref.kind} over "
                    f"{list(ref.ranks)} with {len(ref.chunks)} chunks")
        return pattern


