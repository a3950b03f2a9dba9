"""RTuner's leader: gathers every rank's timings, runs the controller, answers every batch
(protocol in :mod:`react.runtime.tuner`; its process and spec file in
:mod:`react.runtime.tuner.command`).

:class:`TunerLeader` serves the ranks; what it does to one epoch's timings (sizes by chunk set,
each epoch not before the previous one's end) is :class:`EpochMerger`'s, and a rank's clock offset
at connection is :func:`estimate_offset`'s.
"""

from __future__ import annotations

import logging
import math
import queue
import select
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from react.control.controller import Decision
from react.control.loop import TuningLoop
from react.model.errors import ReactError
from react.model.observation import EpochResult
from react.model.pattern import Pattern
from react.model.verify import verify
from react.runtime.channel import (
    MAX_MESSAGE_BYTES,
    Channel,
    ChannelError,
    ChannelTimeout,
    MessageError,
    encode,
    listen,
)
from react.runtime.clock import clock_id, now_s
from react.runtime.timings import RankEpochTimings, TimingError, epoch_end_s, merge_epoch
from react.runtime.tuner.messages import (
    _POLL_S,
    PINGS,
    PROTOCOL_VERSION,
    RESULT_FORMAT,
    _decision_summary,
    _finite,
    _int,
    _number,
    _result_to_dict,
    _swap_to_dict,
    pattern_fingerprint,
    report_to_dict,
)

__all__ = ["EpochMerger", "TunerLeader", "estimate_offset"]

log = logging.getLogger(__name__)


class EpochMerger:
    """Turns every rank's timings of one epoch into its :class:`EpochResult`, epochs in order.

    ``flow_bytes`` (optional) are the bytes each flow of ``first`` really carries; they go with
    the flow's chunk set to later patterns (swaps relabel ranks, the chunks stay), and a chunk
    set never seen is sized by its fraction of ``message_bytes``. Each epoch starts no earlier
    than the previous one ended (:func:`~react.runtime.timings.merge_epoch`'s ``not_before_s``).
    """

    def __init__(self, first: Pattern, message_bytes: float,
                 flow_bytes: Sequence[float] | None, offsets_s: dict[int, float]) -> None:
        if flow_bytes is not None and len(flow_bytes) != len(first.flows):
            raise ReactError(f"TunerLeader: flow_bytes has {len(flow_bytes)} entries; the "
                             f"pattern has {len(first.flows)} flows")
        self.first = first
        self.message_bytes = message_bytes
        self.offsets_s = offsets_s  # filled by the handshakes, read at every merge
        self._flow_sizes = None if flow_bytes is None else [float(b) for b in flow_bytes]
        self._chunk_bytes = (
            None if flow_bytes is None
            else {f.chunks: float(b) for f, b in zip(first.flows, flow_bytes, strict=True)}
        )
        self._previous_end_s: float | None = None  # the last merged epoch's end (timings.py)

    def merge(self, pattern: Pattern, ranks: Sequence[RankEpochTimings]) -> EpochResult:
        """The epoch ``ranks`` ran with ``pattern``; raises TimingError if they do not merge."""
        result = merge_epoch(pattern, ranks, self.message_bytes, offsets_s=self.offsets_s,
                             flow_bytes=self._flow_bytes(pattern),
                             not_before_s=self._previous_end_s)
        self._previous_end_s = epoch_end_s(ranks, self.offsets_s)
        return result

    def _flow_bytes(self, pattern: Pattern) -> list[float] | None:
        sizes = self._chunk_bytes
        if sizes is None or pattern is self.first:
            return self._flow_sizes
        # sizes go with chunk sets (swaps relabel ranks); an unseen set: its fraction
        return [sizes.get(f.chunks, pattern.flow_bytes(f, self.message_bytes))
                for f in pattern.flows]


def estimate_offset(channel: Channel, rank: int, deadline: float) -> tuple[float, float]:
    """``(round trip, offset)`` of ``rank``'s clock from ``PINGS`` pings (NTP, the fastest
    round trip's sample; protocol in :mod:`react.runtime.tuner`)."""
    best = (math.inf, 0.0)
    for seq in range(PINGS):
        t0 = now_s()
        channel.send({"type": "ping", "seq": seq})
        pong = channel.recv(max(0.0, deadline - time.monotonic()))
        t1 = now_s()
        if pong["type"] != "pong" or pong.get("seq") != seq:
            raise MessageError(f"rank {rank}: expected pong {seq}, got {pong!r:.80}")
        best = min(best, (t1 - t0, (t0 + t1) / 2 - _number(pong, "t_rank_s")))
    return best


# -- the leader --------------------------------------------------------------------------------
class TunerLeader:
    """The tuner's leader: collects every rank's timings, runs the controller, answers batches.

    Parameters
    ----------
    pattern : Pattern
        The job's pattern at epoch 0; must verify.
    world_size : int
        Number of ranks (= ``pattern.n``); one connection each.
    controller : optional
        Any controller with the policy interface (:mod:`react.control.policies`: REACT, or one
        :func:`~react.control.policies.make_controller` guarded), starting from ``pattern``;
        without one the leader only collects.
    apply_delay_epochs : int
        Epochs between a decision's batch and the switch (§6.3; 5).
    batch_epochs : int, optional
        Must equal the controller's ``batch_epochs`` if given (the controller's is used).
    message_bytes : float
        The collective's message size (for sizes and algorithm bandwidth).
    flow_bytes : sequence of float, optional
        Bytes each flow of ``pattern`` really carries (whole elements); carried over to later
        patterns by the flow's chunks. Default: each flow's fraction of ``message_bytes``.
    host, port : str, int
        Where to listen; ``port=0`` picks a free port (read :attr:`address`).
    timeout_s : float
        Limit of every wait: all ranks connecting, a handshake, a silence of every rank.
    max_message_bytes : int
        Size limit of one control message.
    """

    def __init__(
        self,
        pattern: Pattern,
        world_size: int,
        *,
        controller: Any = None,
        apply_delay_epochs: int = 5,
        batch_epochs: int | None = None,
        message_bytes: float,
        flow_bytes: Sequence[float] | None = None,
        host: str = "0.0.0.0",
        port: int = 0,
        timeout_s: float = 30.0,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        on_epoch: Callable[[int], None] | None = None,
    ) -> None:
        verify(pattern)
        if world_size != pattern.n:
            raise ReactError(f"TunerLeader: world_size must equal the pattern's {pattern.n} "
                             f"ranks, got world_size={world_size!r}")
        if not (isinstance(message_bytes, (int, float)) and message_bytes > 0):
            raise ReactError(f"TunerLeader: message_bytes must be a positive number, got "
                             f"{message_bytes!r}")
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise ReactError(f"TunerLeader: timeout_s must be positive, got {timeout_s!r}")
        if not isinstance(host, str):
            raise ReactError(f"TunerLeader: host must be an address string, got {host!r}")
        if not (isinstance(port, int) and not isinstance(port, bool) and 0 <= port <= 65535):
            raise ReactError(f"TunerLeader: port must be an integer in 0..65535, got {port!r}")
        if not (isinstance(max_message_bytes, int) and max_message_bytes >= 64):
            raise ReactError(f"TunerLeader: max_message_bytes must be an integer >= 64, got "
                             f"{max_message_bytes!r}")
        if controller is not None and batch_epochs is not None and (
            batch_epochs != controller.config.batch_epochs
        ):
            raise ReactError(f"TunerLeader: batch_epochs={batch_epochs!r} differs from the "
                             f"controller's {controller.config.batch_epochs}")
        self.offsets_s: dict[int, float] = {}
        self._merger = EpochMerger(pattern, float(message_bytes), flow_bytes, self.offsets_s)
        self.loop = TuningLoop(pattern, controller, apply_delay_epochs)
        self.on_epoch = on_epoch
        self.world_size = world_size
        self.message_bytes = float(message_bytes)
        self.timeout_s = float(timeout_s)
        self.max_message_bytes = max_message_bytes
        self.batch_epochs = None if controller is None else controller.config.batch_epochs
        self.apply_delay_epochs = apply_delay_epochs
        self._patterns: list[Pattern] = [pattern]
        self._index = {pattern_fingerprint(pattern): 0}
        self._listener = listen(host, port)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._channels: dict[int, Channel] = {}
        self._inbox: queue.SimpleQueue[tuple[int, dict[str, Any] | Exception]] = (
            queue.SimpleQueue()
        )
        self._tuning = controller is not None
        self._merging = True
        self._next_epoch = 0
        self._next_decision = None if controller is None else controller.config.batch_epochs - 1
        self._pending: dict[int, dict[int, tuple[RankEpochTimings, str, float]]] = {}
        self._arrived_s: dict[int, float] = {}
        self._batch_merge_s = 0.0
        self._epochs: list[dict[str, Any]] = []
        self._decisions: list[dict[str, Any]] = []
        self.rtt_s: dict[int, float] = {}
        self._byes: dict[int, dict[str, Any]] = {}
        self._gone: set[int] = set()
        self.events: list[str] = []
        self._closed = False

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Serve the job to its end (every rank said bye or is gone); return the result document.

        Never raises for what the ranks do: failures end up in the document's ``events``.
        """
        threads: list[threading.Thread] = []
        try:
            if self._accept_all():
                for rank, channel in self._channels.items():
                    t = threading.Thread(target=self._read, args=(rank, channel), daemon=True,
                                         name=f"tuner-leader-rank{rank}")
                    t.start()
                    threads.append(t)
                self._serve()
        finally:
            self.close()
            for t in threads:
                t.join(timeout=2 * _POLL_S + 1.0)
        return self._document()

    def close(self) -> None:
        """Close the listening socket and every connection (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._listener.close()
        for channel in self._channels.values():
            channel.close()

    def _event(self, text: str) -> None:
        log.warning("tuner leader: %s", text)
        self.events.append(text)

    def _accept_all(self) -> bool:
        deadline = time.monotonic() + self.timeout_s
        while len(self._channels) < self.world_size:
            remaining = deadline - time.monotonic()
            ready = select.select([self._listener], [], [], max(0.0, remaining))[0]
            if not ready:
                self._event(f"only ranks {sorted(self._channels)} of {self.world_size} "
                            f"connected within {self.timeout_s} s; not tuning")
                self._broadcast({"type": "stop", "reason": "not every rank connected"})
                return False
            sock, peer = self._listener.accept()
            channel = Channel(sock, timeout_s=self.timeout_s,
                              max_message_bytes=self.max_message_bytes,
                              peer=f"rank at {peer[0]}:{peer[1]}")
            try:
                self._handshake(channel, deadline)
            except (ChannelError, MessageError) as exc:
                self._event(f"refused a connection from {peer[0]}:{peer[1]}: {exc}")
                channel.close()
        return True

    def _handshake(self, channel: Channel, deadline: float) -> None:
        hello = channel.recv(max(0.0, deadline - time.monotonic()))
        if hello["type"] != "hello":
            raise MessageError(f"expected a hello, got {hello['type']!r}")
        rank = _int(hello, "rank")
        problem = None
        if hello.get("version") != PROTOCOL_VERSION:
            problem = f"protocol version {hello.get('version')!r}, expected {PROTOCOL_VERSION}"
        elif rank not in self.loop.pattern.ranks:
            problem = f"rank {rank} is not a rank of the pattern {list(self.loop.pattern.ranks)}"
        elif rank in self._channels:
            problem = f"rank {rank} connected twice"
        if problem is not None:
            try:
                channel.send({"type": "error", "reason": problem})
            except ChannelError:
                pass  # refused either way
            raise MessageError(problem)
        assert rank is not None
        channel.peer = f"rank {rank}"
        best = estimate_offset(channel, rank, deadline)
        if hello.get("clock") is not None and hello.get("clock") == clock_id():
            best = (best[0], 0.0)  # the same clock: nothing to estimate (react.runtime.clock)
        self.rtt_s[rank], self.offsets_s[rank] = best
        channel.send({
            "type": "welcome", "batch_epochs": self.batch_epochs,
            "apply_delay_epochs": self.apply_delay_epochs,
            "next_decision_epoch": self._next_decision,
            "pattern": self.loop.pattern.to_dict(), "offset_s": best[1],
        })
        self._channels[rank] = channel

    def _read(self, rank: int, channel: Channel) -> None:
        while True:
            try:
                message = channel.recv(_POLL_S)
            except ChannelTimeout:
                if self._closed:
                    return
                continue
            except (ChannelError, MessageError) as exc:
                self._inbox.put((rank, exc))
                return
            self._inbox.put((rank, message))
            if message["type"] == "bye":
                return

    def _serve(self) -> None:
        while len(self._byes) + len(self._gone) < self.world_size:
            try:
                rank, message = self._inbox.get(timeout=self.timeout_s)
            except queue.Empty:
                self._event(f"no message from any rank for {self.timeout_s} s; giving up")
                self._stop_tuning("the leader heard nothing for too long")
                return
            if isinstance(message, Exception):
                self._gone.add(rank)
                self._channels[rank].close()
                self._event(f"lost rank {rank}: {message}")
                self._stop_tuning(f"rank {rank} was lost")
                continue
            try:
                self._dispatch(rank, message)
            except (MessageError, TimingError) as exc:
                self._gone.add(rank)
                self._channels[rank].close()
                self._event(f"rank {rank} sent a bad {message['type']!r} message: {exc}")
                self._stop_tuning(f"rank {rank} sent a bad message")

    def _dispatch(self, rank: int, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "timings":
            timings = RankEpochTimings.from_dict(message.get("timings"))  # type: ignore[arg-type]
            fingerprint = message.get("pattern")
            if timings.rank != rank or timings.epoch < self._next_epoch or (
                timings.epoch in self._pending and rank in self._pending[timings.epoch]
            ):
                raise MessageError(f"timings of rank {timings.rank} epoch {timings.epoch} on "
                                   f"the connection of rank {rank} (next epoch to merge "
                                   f"{self._next_epoch})")
            if not isinstance(fingerprint, str):
                raise MessageError(f"timings without a pattern fingerprint: {fingerprint!r}")
            waited = _number(message, "waited_s")
            self._pending.setdefault(timings.epoch, {})[rank] = (timings, fingerprint, waited)
            if len(self._pending[timings.epoch]) == self.world_size:
                self._arrived_s[timings.epoch] = time.perf_counter()
            self._advance()
        elif kind == "reject":
            self._event(f"rank {rank} rejected the switch at epoch {message.get('epoch')!r}: "
                        f"{message.get('reason')!r}")
            self._stop_tuning(f"rank {rank} rejected a switch")
        elif kind == "bye":
            self._byes[rank] = {k: message.get(k) for k in
                                ("epochs", "waited_epochs", "waited_s", "report_s", "failure")}
        else:
            raise MessageError(f"unexpected message type {kind!r}")

    def _advance(self) -> None:
        while self._merging and len(self._pending.get(self._next_epoch, ())) == self.world_size:
            epoch = self._next_epoch
            self._next_epoch += 1
            self._process(epoch, self._pending.pop(epoch))

    def _process(self, epoch: int, records: dict[int, tuple[RankEpochTimings, str, float]]) -> None:
        arrived_s = self._arrived_s.pop(epoch, time.perf_counter())
        ran = {rank: fp for rank, (_, fp, _) in records.items()}
        if len(set(ran.values())) != 1:
            groups: dict[str, list[int]] = {}
            for rank, fp in sorted(ran.items()):
                groups.setdefault(fp, []).append(rank)
            self._event(f"diverged: at epoch {epoch} the ranks ran different patterns "
                        f"(fingerprint -> ranks: {groups}); merging stops")
            self._merging = False
            self._stop_tuning("ranks diverged")
            return
        fingerprint = next(iter(ran.values()))
        index = self._index.get(fingerprint)
        if index is None:
            self._event(f"epoch {epoch} ran a pattern the leader never sent ({fingerprint}); "
                        "merging stops")
            self._merging = False
            self._stop_tuning("ranks ran an unknown pattern")
            return
        pattern = self._patterns[index]
        # equal, not identical: a policy may decide a new object equal to a pattern already sent
        if self._tuning and self.loop.pattern_for(epoch) != pattern:
            self._event(f"epoch {epoch} ran pattern {index}, not the tuning loop's; "
                        "tuning stops")
            self._stop_tuning("ranks did not run the agreed pattern")
        start = time.perf_counter()
        try:
            result = self._merger.merge(pattern, [r for r, _, _ in records.values()])
        except TimingError as exc:
            self._event(f"epoch {epoch} cannot be merged: {exc}; merging stops")
            self._merging = False
            self._stop_tuning("rank timings could not be merged")
            return
        merge_s = time.perf_counter() - start
        row = _result_to_dict(result)
        row.update(pattern=index, waited_s=max(w for _, _, w in records.values()),
                   merge_s=merge_s)
        self._epochs.append(row)
        if self.on_epoch is not None:
            self.on_epoch(epoch)
        if self._tuning:
            self._batch_merge_s += merge_s
            start = time.perf_counter()
            decision = self.loop.record(epoch, result)
            decide_s = time.perf_counter() - start
            if decision is not None:
                self._answer(epoch, decision, decide_s, arrived_s)

    def _answer(self, epoch: int, decision: Decision, decide_s: float, arrived_s: float) -> None:
        start = time.perf_counter()
        switch = self.loop.pending
        assert self.batch_epochs is not None
        if switch is not None:
            self._next_decision = switch.epoch + self.batch_epochs - 1
            fingerprint = pattern_fingerprint(switch.pattern)
            if fingerprint not in self._index:
                self._index[fingerprint] = len(self._patterns)
                self._patterns.append(switch.pattern)
            message = {"type": "switch", "epoch": switch.epoch, "pattern": switch.pattern.to_dict()}
        else:
            self._next_decision = epoch + self.batch_epochs
            message = {"type": "keep"}
        message.update(through_epoch=epoch, next_decision_epoch=self._next_decision,
                       decision=_decision_summary(decision))
        self._broadcast(message)
        send_s = time.perf_counter() - start
        self._decisions.append({
            "batch": decision.batch, "after_epoch": epoch, "action": decision.action,
            "reason": decision.reason,
            "pattern": self._index[pattern_fingerprint(decision.pattern)],
            "switch_epoch": None if switch is None else switch.epoch,
            "swaps": [_swap_to_dict(s) for s in decision.swaps],
            "estimated_gain": _finite(decision.estimated_gain),
            "observed_gain": _finite(decision.observed_gain),
            "mean_time_s": _finite(decision.mean_time_s),
            "report": report_to_dict(decision.report),
            "merge_s": self._batch_merge_s, "decide_s": decide_s, "send_s": send_s,
            "overhead_s": self._batch_merge_s + decide_s + send_s,
            "latency_s": time.perf_counter() - arrived_s,
        })
        self._batch_merge_s = 0.0

    def _stop_tuning(self, reason: str) -> None:
        if not self._tuning:
            return
        self._tuning = False
        self._next_decision = None
        self._broadcast({"type": "stop", "reason": reason})

    def _broadcast(self, message: dict[str, Any]) -> None:
        data = encode(message, max_message_bytes=self.max_message_bytes)
        for rank, channel in self._channels.items():
            if rank in self._gone or rank in self._byes:
                continue
            try:
                channel.send_encoded(data)
            except ChannelError as exc:
                # its reader thread reports the loss; the others must still get the message
                log.warning("tuner leader: %s", exc)

    def _document(self) -> dict[str, Any]:
        waited = sum(1 for row in self._epochs if row["waited_s"] > 0)
        return {
            "format": RESULT_FORMAT,
            "complete": (len(self._byes) == self.world_size and self._merging
                         and not self._pending),
            "world_size": self.world_size,
            "message_bytes": self.message_bytes,
            "batch_epochs": self.batch_epochs,
            "apply_delay_epochs": self.apply_delay_epochs,
            "patterns": [p.to_dict() for p in self._patterns],
            "fingerprints": [pattern_fingerprint(p) for p in self._patterns],
            "epochs": self._epochs,
            "decisions": self._decisions,
            "offsets_s": {str(r): o for r, o in sorted(self.offsets_s.items())},
            "rtt_s": {str(r): o for r, o in sorted(self.rtt_s.items())},
            "epochs_waited": waited,
            "ranks": {str(r): b for r, b in sorted(self._byes.items())},
            "events": list(self.events),
        }
