"""RTuner's leader: gathers every rank's timings, runs the controller, answers every batch
(protocol in :mod:`react.runtime.tuner`); and its command line."""

from __future__ import annotations

import argparse
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
from typing import Any

from react.control.controller import Controller, ControllerConfig, Decision
from react.control.loop import TuningLoop
from react.model.errors import ReactError
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
)

log = logging.getLogger(__name__)


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

