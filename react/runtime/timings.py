"""What one rank measured in one epoch, and the merge of all ranks into one EpochResult.

A flow ``u -> v`` is observed at both ends. The sender knows when it posted the send
(``post_s``) and, where the transport can tell, when bytes actually started to leave
(``started_s``: the socket transport waits for the receiver's clear-to-send, so that is when
both ends had reached the step). The receiver knows when it posted the receive and when the last
byte landed in its buffer (``end_s``). A send's own completion means nothing (the data may only
have reached a socket buffer), so the flow's end is always the receiver's.

Merged (:func:`merge_epoch`): a flow starts when both ends were ready,
``max(sender started_s or post_s, receiver post_s)``, and ends at the receiver's ``end_s``.
Each rank's stamps are first mapped onto the leader's clock by adding that rank's offset (0 on
one host).

When an epoch starts: ranks are not synchronised between epochs (there is no barrier, as in a
training loop), so a rank that finished epoch ``e - 1`` early enters epoch ``e`` while its peers
still finish ``e - 1``. Counting from that early entry would count the tail of ``e - 1`` twice.
An epoch therefore starts when the previous one ended on every rank (``not_before_s``), or when
the first rank entered it if that is later, and ends when the last rank left it; the epochs'
times then add up to the job's wall time, as flowsim's back-to-back epochs do. Flow times are
seconds from that start; a flow that began while the previous epoch was still finishing has a
negative ``start_s`` (its FCT is what it was).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from react.model.errors import ReactError
from react.model.observation import EpochResult, FlowTiming
from react.model.pattern import Pattern


class TimingError(ReactError, ValueError):
    """Rank timings that cannot be merged (missing ranks or flows, malformed records)."""


@dataclass(frozen=True, slots=True)
class SendTiming:
    flow_index: int
    post_s: float
    started_s: float | None = None


@dataclass(frozen=True, slots=True)
class RecvTiming:
    flow_index: int
    post_s: float
    end_s: float


@dataclass(frozen=True, slots=True)
class RankEpochTimings:
    """One rank's view of one epoch: when it entered and left the collective, and its flows."""

    rank: int
    epoch: int
    start_s: float
    end_s: float
    sends: tuple[SendTiming, ...]
    recvs: tuple[RecvTiming, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "epoch": self.epoch, "start_s": self.start_s, "end_s": self.end_s,
            "sends": [[s.flow_index, s.post_s, s.started_s] for s in self.sends],
            "recvs": [[r.flow_index, r.post_s, r.end_s] for r in self.recvs],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RankEpochTimings:
        """Parse a record received from the wire; any malformed field raises TimingError."""
        try:
            sends = tuple(
                SendTiming(_index(i), _time(p), None if s is None else _time(s))
                for i, p, s in data["sends"]
            )
            recvs = tuple(RecvTiming(_index(i), _time(p), _time(e)) for i, p, e in data["recvs"])
            return cls(_index(data["rank"]), _index(data["epoch"]), _time(data["start_s"]),
                       _time(data["end_s"]), sends, recvs)
        except TimingError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise TimingError(f"malformed rank timings ({exc!r})") from None


def _index(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TimingError(f"expected a non-negative integer, got {value!r}")
    return value


def _time(value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
        raise TimingError(f"expected a time in seconds, got {value!r}")
    return float(value)


def merge_epoch(
    pattern: Pattern,
    ranks: Sequence[RankEpochTimings],
    message_bytes: float,
    *,
    offsets_s: Mapping[int, float] | None = None,
    flow_bytes: Sequence[float] | None = None,
    not_before_s: float | None = None,
) -> EpochResult:
    """Every rank's timings of one epoch -> the epoch's :class:`EpochResult` (module docstring).

    Parameters
    ----------
    pattern : Pattern
        The pattern the epoch ran.
    ranks : sequence of RankEpochTimings
        One record per rank of the pattern, all of the same epoch.
    message_bytes : float
        The collective's message size.
    offsets_s : mapping, optional
        ``rank -> seconds`` added to that rank's stamps to put them on the leader's clock.
    flow_bytes : sequence of float, optional
        Bytes each flow really carried (a buffer of whole elements); default: its chunks'
        fraction of ``message_bytes``.
    not_before_s : float, optional
        When the previous epoch ended on every rank (leader's clock): the epoch starts no
        earlier (module docstring). See :func:`epoch_end_s`.
    """
    by_rank = {r.rank: r for r in ranks}
    missing = [r for r in pattern.ranks if r not in by_rank]
    if missing or len(by_rank) != len(ranks):
        raise TimingError(f"merge_epoch: expected one record per rank {list(pattern.ranks)}, "
                          f"got ranks {[r.rank for r in ranks]}")
    epochs = {r.epoch for r in ranks}
    if len(epochs) != 1:
        raise TimingError(f"merge_epoch: records of several epochs {sorted(epochs)}")
    offsets = offsets_s or {}
    flows = pattern.flows
    send_at: list[float | None] = [None] * len(flows)
    recv_post: list[float | None] = [None] * len(flows)
    recv_end: list[float | None] = [None] * len(flows)
    for rec in ranks:
        shift = float(offsets.get(rec.rank, 0.0))
        for s in rec.sends:
            _check_flow(pattern, s.flow_index, rec.rank, "src")
            send_at[s.flow_index] = (s.started_s if s.started_s is not None else s.post_s) + shift
        for r in rec.recvs:
            _check_flow(pattern, r.flow_index, rec.rank, "dst")
            recv_post[r.flow_index] = r.post_s + shift
            recv_end[r.flow_index] = r.end_s + shift
    t0 = min(r.start_s + float(offsets.get(r.rank, 0.0)) for r in ranks)
    if not_before_s is not None:
        t0 = max(t0, float(not_before_s))
    t_end = epoch_end_s(ranks, offsets)
    timings = []
    for i, flow in enumerate(flows):
        a, b, e = send_at[i], recv_post[i], recv_end[i]
        if a is None or b is None or e is None:
            raise TimingError(f"merge_epoch: flow {i} ({flow.src} -> {flow.dst} at step "
                              f"{flow.step}) was not reported by both ends")
        size = pattern.flow_bytes(flow, message_bytes) if flow_bytes is None else flow_bytes[i]
        start = max(a, b)
        timings.append(FlowTiming(flow, start - t0, max(e, start) - t0, float(size)))
    finish = max([t_end, *(t.end_s + t0 for t in timings)])
    return EpochResult(next(iter(epochs)), finish - t0, tuple(timings), float(message_bytes))


def epoch_end_s(ranks: Sequence[RankEpochTimings], offsets_s: Mapping[int, float] | None = None
                ) -> float:
    """When the epoch ended on every rank, on the leader's clock (the next one's start bound)."""
    offsets = offsets_s or {}
    return max(r.end_s + float(offsets.get(r.rank, 0.0)) for r in ranks)


def _check_flow(pattern: Pattern, index: int, rank: int, end: str) -> None:
    if index >= len(pattern.flows):
        raise TimingError(f"rank {rank} reported flow {index}; the pattern has "
                          f"{len(pattern.flows)} flows")
    if getattr(pattern.flows[index], end) != rank:
        raise TimingError(f"rank {rank} reported flow {index} as its {end}, but that flow is "
                          f"{pattern.flows[index].src} -> {pattern.flows[index].dst}")
