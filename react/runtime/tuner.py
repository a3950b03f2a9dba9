"""RTuner (paper §6.2-6.3): the REACT controller run by a leader, fed by every rank, over TCP.

The leader (:class:`TunerLeader`, its own process: ``python -m react.runtime.tuner --spec
SPEC.json --out RESULT.json``) accepts one control connection per rank
(:mod:`react.runtime.channel`), estimates each rank's clock offset, merges every epoch's
:class:`~react.runtime.timings.RankEpochTimings` into an
:class:`~react.backends.base.EpochResult` (:func:`~react.runtime.timings.merge_epoch`, with the
pattern that epoch ran) and hands it to a :class:`~react.tuning.TuningLoop`, the same closed loop
the simulator's jobs use. Each rank runs a :class:`TunerClient`: :meth:`TunerClient.report` hands
an epoch's timings to a background thread and returns at once; :meth:`TunerClient.pattern_for`
names the pattern an epoch runs.

When a pattern change takes effect, and why nobody waits (§6.3)
    A decision taken on the result of epoch ``e`` switches every rank at epoch
    ``E = e + 1 + apply_delay_epochs`` (default 5). The leader answers every batch: ``switch``
    (new pattern and ``E``) or ``keep``, and each answer says after which epoch the next decision
    can come (``next_decision_epoch``, ``n``). A rank therefore knows its pattern for every epoch
    up to ``n + apply_delay_epochs``; :meth:`TunerClient.pattern_for` blocks only for a later
    epoch (the leader is more than the delay behind), and counts and times such waits. With
    reports sent as soon as each epoch ends and the delay of 5 epochs, the answer arrives while
    the ranks run the 5 epochs in between, so no rank waits.

Failures: the job always finishes
    Every wait is bounded by ``timeout_s``. On any failure a rank *freezes*: it logs the reason
    once (:attr:`TunerClient.failure`), never waits for the leader again and keeps its current
    pattern; a switch it had already accepted still takes effect at its epoch (and so does a
    valid one arriving in time over a channel that still works, after a timeout: that keeps it
    with its peers). Causes: the leader's connection fails (EOF when the leader process dies, a
    socket error, a malformed or oversize message), no answer within ``timeout_s``, a ``stop``
    from the leader, or a switch it rejects.
    A received pattern is used only if it parses, passes :func:`react.verify.verify`, implements
    the same collective (kind, ranks, chunks, root) as the job's pattern and switches at an epoch
    the rank has not run yet; otherwise the rank logs why, sends ``reject`` and freezes. The
    leader, on a ``reject``, a lost rank or a timing record it cannot merge, stops tuning (sends
    ``stop`` to every rank; a switch already sent still happens where it was accepted) and goes
    on collecting what it can, merging each epoch with the pattern its ranks report.

Where ranks may disagree, and how it shows
    Every rank receives the same bytes and runs the same deterministic checks, so a rejection
    of the pattern itself happens on every rank or on none. What can split the ranks is the
    leader dying in the middle of broadcasting a switch (some ranks got it, others not), or a
    switch that reaches one rank too late (it timed out waiting, ran on, and rejects it while
    its peers switch). Such ranks run different patterns from epoch ``E`` on
    (RCollective then fails or times out: the patterns do not match). It is detectable: every
    ``timings`` report carries the fingerprint (:func:`pattern_fingerprint`) of the pattern the
    rank ran, the leader records ``diverged`` in the result when the fingerprints of one epoch
    differ, and each client keeps ``(epoch, fingerprint)`` in :attr:`TunerClient.history`.

Wire protocol (newline-delimited JSON objects, :mod:`react.runtime.channel`)
    rank -> leader:
        ``{"type": "hello", "rank": r, "version": 1}``;
        ``{"type": "pong", "seq": k, "t_rank_s": t}`` (answer to a ping, the rank's clock);
        ``{"type": "timings", "timings": RankEpochTimings.to_dict(), "pattern": fingerprint,
        "waited_s": w}`` (one per epoch);
        ``{"type": "reject", "epoch": E, "reason": text}``;
        ``{"type": "bye", "epochs": k, "waited_epochs": m, "waited_s": s, "report_s": s,
        "failure": text | null}``.
    leader -> rank:
        ``{"type": "ping", "seq": k}`` (``PINGS`` times at connection);
        ``{"type": "welcome", "batch_epochs": B | null, "apply_delay_epochs": d,
        "next_decision_epoch": n | null, "pattern": Pattern.to_dict(), "offset_s": o}``;
        ``{"type": "keep", "through_epoch": e, "next_decision_epoch": n | null, "decision": D}``;
        ``{"type": "switch", "epoch": E, "through_epoch": e, "next_decision_epoch": n,
        "pattern": Pattern.to_dict(), "decision": D}``;
        ``{"type": "stop", "reason": text}``; ``{"type": "error", "reason": text}`` (hello refused).
    ``D`` is ``{"batch", "action", "reason", "swaps"}``; ``null`` for ``next_decision_epoch``
    means no decision will ever come (no controller, or tuning stopped).

Clock offsets
    At connection the leader pings the rank ``PINGS`` times; with ``t0``/``t1`` the leader's
    clock when a ping left and its pong came back and ``t`` the rank's stamp in the pong, the
    sample with the smallest round trip gives ``offset = (t0 + t1) / 2 - t`` (NTP), added to every
    stamp of that rank before merging. On one host it is a few microseconds.

Result file (``--out``, :meth:`TunerLeader.run` returns the same document)
    ``{"format": "react-tuner-result/1", "complete": bool, "world_size": n,
    "message_bytes": m, "batch_epochs": B | null, "apply_delay_epochs": d,
    "patterns": [Pattern.to_dict(), ...]`` (each pattern the job ran, once; index 0 the initial),
    ``"fingerprints": [...]`` (same order), ``"epochs": [{"epoch": e, "pattern": i,
    "collective_time_s": t, "message_bytes": m, "flows": [[start_s, end_s, size_bytes], ...]``
    (in the pattern's flow order), ``"waited_s": w`` (longest wait of any rank for this epoch),
    ``"merge_s": s}, ...]``, ``"decisions": [{"batch", "after_epoch", "action", "reason",
    "pattern": i, "switch_epoch": E | null, "swaps": [{"kind", ...fields}], "estimated_gain",
    "observed_gain", "mean_time_s", "merge_s", "decide_s", "send_s", "overhead_s",
    "latency_s"}, ...]`` (``overhead_s`` = merge + decide + send: the leader's work per batch;
    ``latency_s``: from the batch's last report arriving to the answer sent), ``"offsets_s":
    {"r": s}``, ``"rtt_s": {"r": s}``, ``"epochs_waited": k`` (epochs in which any rank waited),
    ``"ranks": {"r": bye fields}``, ``"events": [text, ...]}`` (rejections, failures,
    divergence). Non-finite numbers are written as ``null``. :func:`read_result` reads it back.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from react.backends.base import EpochResult, FlowTiming
from react.controller import Controller, ControllerConfig, Decision
from react.errors import PatternError, ReactError
from react.pattern import Pattern
from react.runtime.channel import (
    MAX_MESSAGE_BYTES,
    Channel,
    ChannelError,
    ChannelTimeout,
    MessageError,
    connect,
    encode,
    listen,
)
from react.runtime.clock import now_s
from react.runtime.timings import RankEpochTimings, TimingError, epoch_end_s, merge_epoch
from react.transforms import ChunkLocalSwap, GlobalSwap, PositionSwap, Swap
from react.tuning import TuningLoop
from react.verify import verify

__all__ = [
    "PINGS",
    "RESULT_FORMAT",
    "TunerClient",
    "TunerLeader",
    "leader_from_spec",
    "main",
    "pattern_fingerprint",
    "read_result",
    "spawn_leader",
]

log = logging.getLogger(__name__)

RESULT_FORMAT = "react-tuner-result/1"
PROTOCOL_VERSION = 1
PINGS = 16
"""Clock-offset samples per rank at connection (the one with the shortest round trip counts)."""

_POLL_S = 0.2  # how often background threads look up from a blocking read to check for close
_SWAPS = {cls.kind: cls for cls in (GlobalSwap, ChunkLocalSwap, PositionSwap)}


def pattern_fingerprint(pattern: Pattern) -> str:
    """A short stable digest of a pattern's JSON: equal patterns, equal fingerprints."""
    cached = pattern._cache.get("fingerprint")
    if cached is None:
        cached = hashlib.sha256(pattern.to_json().encode("utf-8")).hexdigest()[:16]
        pattern._cache["fingerprint"] = cached
    return str(cached)


# -- JSON records ------------------------------------------------------------------------------
def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _swap_to_dict(swap: Swap) -> dict[str, Any]:
    return {"kind": swap.kind, **{f.name: getattr(swap, f.name) for f in fields(swap)}}


def _swap_from_dict(data: Mapping[str, Any]) -> Swap:
    cls = _SWAPS.get(data.get("kind"))  # type: ignore[arg-type]
    if cls is None:
        raise ReactError(f"unknown swap kind {data.get('kind')!r}; expected one of "
                         f"{sorted(_SWAPS)}")
    names = [f.name for f in fields(cls)]
    return cls(**{n: data[n] for n in names})  # type: ignore[return-value]


def _decision_summary(d: Decision) -> dict[str, Any]:
    return {"batch": d.batch, "action": d.action, "reason": d.reason,
            "swaps": [_swap_to_dict(s) for s in d.swaps]}


def _result_to_dict(result: EpochResult) -> dict[str, Any]:
    return {"epoch": result.epoch, "collective_time_s": result.collective_time_s,
            "message_bytes": result.message_bytes,
            "flows": [[t.start_s, t.end_s, t.size_bytes] for t in result.flows]}


def _result_from_dict(data: Mapping[str, Any], pattern: Pattern) -> EpochResult:
    rows = data["flows"]
    if len(rows) != len(pattern.flows):
        raise ReactError(f"epoch {data.get('epoch')!r}: {len(rows)} flow timings for a pattern "
                         f"of {len(pattern.flows)} flows")
    flows = tuple(FlowTiming(f, float(a), float(b), float(s))
                  for f, (a, b, s) in zip(pattern.flows, rows, strict=True))
    return EpochResult(int(data["epoch"]), float(data["collective_time_s"]), flows,
                       float(data["message_bytes"]))


def read_result(
    path: str | os.PathLike[str],
) -> tuple[list[EpochResult], list[Pattern], list[Decision]]:
    """Read a leader's result file: every epoch's result, the pattern each ran, the decisions.

    The three lists are what :class:`react.jobs.JobRun` holds (``results``, ``patterns`` one per
    epoch, ``decisions``), so ``JobRun(name, *read_result(path))`` reports like a simulated job.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ReactError(f"read_result: cannot read {os.fspath(path)!r} ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != RESULT_FORMAT:
        raise ReactError(f"read_result: {os.fspath(path)!r} is not a tuner result (expected "
                         f"format {RESULT_FORMAT!r})")
    try:
        patterns = [Pattern.from_dict(p) for p in doc["patterns"]]
        results, ran = [], []
        for row in doc["epochs"]:
            pattern = patterns[row["pattern"]]
            results.append(_result_from_dict(row, pattern))
            ran.append(pattern)
        decisions = [
            Decision(
                batch=int(d["batch"]), action=d["action"], pattern=patterns[d["pattern"]],
                reason=str(d["reason"]), swaps=tuple(_swap_from_dict(s) for s in d["swaps"]),
                estimated_gain=d["estimated_gain"], observed_gain=d["observed_gain"],
                mean_time_s=math.nan if d["mean_time_s"] is None else float(d["mean_time_s"]),
            )
            for d in doc["decisions"]
        ]
    except ReactError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ReactError(f"read_result: malformed tuner result {os.fspath(path)!r} "
                         f"({exc!r})") from None
    return results, ran, decisions


def _int(message: Mapping[str, Any], key: str, *, nullable: bool = False) -> int | None:
    value = message.get(key)
    if value is None and nullable:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MessageError(f"{message.get('type')!r} message: {key} must be a non-negative "
                           f"integer, got {value!r}")
    return value


def _number(message: Mapping[str, Any], key: str) -> float:
    value = message.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise MessageError(f"{message.get('type')!r} message: {key} must be a number, got "
                           f"{value!r}")
    return float(value)


# -- the leader --------------------------------------------------------------------------------
class TunerLeader:
    """The tuner's leader: collects every rank's timings, runs the controller, answers batches.

    Parameters
    ----------
    pattern : Pattern
        The job's pattern at epoch 0; must verify.
    world_size : int
        Number of ranks (= ``pattern.n``); one connection each.
    controller : Controller, optional
        REACT, starting from ``pattern``; without one the leader only collects.
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
        controller: Controller | None = None,
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
        if flow_bytes is not None and len(flow_bytes) != len(pattern.flows):
            raise ReactError(f"TunerLeader: flow_bytes has {len(flow_bytes)} entries; the "
                             f"pattern has {len(pattern.flows)} flows")
        self.loop = TuningLoop(pattern, controller, apply_delay_epochs)
        self.on_epoch = on_epoch
        self.world_size = world_size
        self.message_bytes = float(message_bytes)
        self.timeout_s = float(timeout_s)
        self.max_message_bytes = max_message_bytes
        self.batch_epochs = controller.config.batch_epochs if controller else None
        self.apply_delay_epochs = apply_delay_epochs
        self._flow_sizes = None if flow_bytes is None else [float(b) for b in flow_bytes]
        self._chunk_bytes = (
            None if flow_bytes is None
            else {f.chunks: float(b) for f, b in zip(pattern.flows, flow_bytes, strict=True)}
        )
        self._patterns: list[Pattern] = [pattern]
        self._previous_end_s: float | None = None  # the last merged epoch's end (timings.py)
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
        self.offsets_s: dict[int, float] = {}
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
        best = (math.inf, 0.0)
        for seq in range(PINGS):
            t0 = now_s()
            channel.send({"type": "ping", "seq": seq})
            pong = channel.recv(max(0.0, deadline - time.monotonic()))
            t1 = now_s()
            if pong["type"] != "pong" or pong.get("seq") != seq:
                raise MessageError(f"rank {rank}: expected pong {seq}, got {pong!r:.80}")
            best = min(best, (t1 - t0, (t0 + t1) / 2 - _number(pong, "t_rank_s")))
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
        if self._tuning and self.loop.pattern_for(epoch) is not pattern:
            self._event(f"epoch {epoch} ran pattern {index}, not the tuning loop's; "
                        "tuning stops")
            self._stop_tuning("ranks did not run the agreed pattern")
        start = time.perf_counter()
        try:
            ranks = [r for r, _, _ in records.values()]
            result = merge_epoch(pattern, ranks, self.message_bytes, offsets_s=self.offsets_s,
                                 flow_bytes=self._flow_bytes(pattern),
                                 not_before_s=self._previous_end_s)
            self._previous_end_s = epoch_end_s(ranks, self.offsets_s)
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

    def _flow_bytes(self, pattern: Pattern) -> list[float] | None:
        sizes = self._chunk_bytes
        if sizes is None or pattern is self._patterns[0]:
            return self._flow_sizes
        # sizes go with chunk sets (swaps relabel ranks); an unseen set: its fraction
        return [sizes.get(f.chunks, pattern.flow_bytes(f, self.message_bytes))
                for f in pattern.flows]

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
        the leader's offset estimate refers to it.

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
        channel.send({"type": "hello", "rank": self.rank, "version": PROTOCOL_VERSION})
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


# -- the command line --------------------------------------------------------------------------
_SPEC_KEYS = {"pattern", "world_size", "message_bytes", "flow_bytes", "react", "batch_epochs",
              "apply_delay_epochs", "host", "port", "timeout_s", "max_message_bytes"}


def leader_from_spec(spec: Mapping[str, Any]) -> TunerLeader:
    """Build a leader from a spec mapping (keys: see ``python -m react.runtime.tuner --help``)."""
    if not isinstance(spec, Mapping):
        raise ReactError(f"tuner spec: expected a JSON object, got {type(spec).__name__}")
    unknown = sorted(set(spec) - _SPEC_KEYS)
    if unknown:
        raise ReactError(f"tuner spec: unknown key(s) {unknown}; expected some of "
                         f"{sorted(_SPEC_KEYS)}")
    for key in ("pattern", "message_bytes"):
        if key not in spec:
            raise ReactError(f"tuner spec: missing key {key!r}")
    pattern = Pattern.from_dict(spec["pattern"])
    react = spec.get("react")
    controller = None
    if react not in (None, False):
        if react is True:
            react = {}
        if not isinstance(react, Mapping):
            raise ReactError(f"tuner spec: react must be true, false, null or a table of "
                             f"controller parameters, got {react!r}")
        params = {"batch_epochs": spec.get("batch_epochs", 6), **react}
        controller = Controller(pattern, ControllerConfig.from_mapping(params,
                                                                       where="tuner spec react"))
    return TunerLeader(
        pattern, spec.get("world_size", pattern.n), controller=controller,
        apply_delay_epochs=spec.get("apply_delay_epochs", 5),
        message_bytes=spec["message_bytes"], flow_bytes=spec.get("flow_bytes"),
        host=spec.get("host", "0.0.0.0"), port=spec.get("port", 0),
        timeout_s=spec.get("timeout_s", 30.0),
        max_message_bytes=spec.get("max_message_bytes", MAX_MESSAGE_BYTES),
    )


def spawn_leader(
    spec_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    popen: Callable[..., subprocess.Popen[str]] = subprocess.Popen,
    timeout_s: float = 30.0,
) -> tuple[subprocess.Popen[str], tuple[str, int]]:
    """Start ``python -m react.runtime.tuner`` and read the address it listens on.

    ``popen`` runs the command (e.g. ``lambda argv, **kw: network.popen("h0", argv, **kw)`` to
    start it inside an emulated host); it gets ``stdout=PIPE, text=True``. Returns the process
    and ``(host, port)`` as the leader printed them (``0.0.0.0`` when it listens on every
    address: use the host's IP). The caller waits for or kills the process.

    Raises
    ------
    ReactError
        If the leader exits or prints nothing within ``timeout_s`` (its stderr in the message).
    """
    argv = [sys.executable, "-m", "react.runtime.tuner", "--spec", os.fspath(spec_path),
            "--out", os.fspath(out_path)]
    proc = popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    ready = select.select([proc.stdout], [], [], timeout_s)[0]
    line = proc.stdout.readline() if ready else ""
    try:
        message = json.loads(line)
        address = (str(message["host"]), int(message["port"]))
    except (ValueError, TypeError, KeyError):
        proc.kill()
        _, err = proc.communicate(timeout=timeout_s)
        raise ReactError(f"the tuner leader did not start within {timeout_s} s "
                         f"(printed {line!r}; stderr: {(err or '').strip()[-500:]!r})") from None
    return proc, address


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m react.runtime.tuner --spec SPEC.json --out RESULT.json``.

    Prints ``{"type": "listening", "host": h, "port": p}`` as one line on stdout once it
    listens, then ``{"type": "epoch", "epoch": e}`` as each epoch is merged (progress); serves
    the job, writes the result. Exit status: 0 when every rank finished and
    every epoch merged, 3 when the result is partial (see its ``events``), 2 on a bad spec.
    """
    parser = argparse.ArgumentParser(
        prog="python -m react.runtime.tuner",
        description="RTuner's leader. Spec keys: pattern (Pattern.to_dict), message_bytes; "
                    "optional world_size, flow_bytes, react (true or a table of controller "
                    "parameters; absent: collect only), batch_epochs (6), apply_delay_epochs "
                    "(5), host (0.0.0.0), port (0: any), timeout_s (30), max_message_bytes.",
    )
    parser.add_argument("--spec", required=True, help="the job's spec (JSON)")
    parser.add_argument("--out", required=True, help="where to write the result (JSON)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        with open(args.spec, encoding="utf-8") as fh:
            spec = json.load(fh)
        leader = leader_from_spec(spec)
    except (OSError, ValueError, ReactError) as exc:
        print(f"error: tuner spec {args.spec!r}: {exc}", file=sys.stderr)
        return 2
    host, port = leader.address
    print(json.dumps({"type": "listening", "host": host, "port": port}), flush=True)
    leader.on_epoch = lambda epoch: print(json.dumps({"type": "epoch", "epoch": epoch}),
                                          flush=True)
    doc = leader.run()
    tmp = f"{args.out}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, allow_nan=False)
        fh.write("\n")
    os.replace(tmp, args.out)
    return 0 if doc["complete"] else 3


if __name__ == "__main__":
    sys.exit(main())
