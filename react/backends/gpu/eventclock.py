"""CUDA event times -> the host clock's :class:`~react.runtime.timings.RankEpochTimings`.

A CUDA event's time is only meaningful relative to another event of the same device
(``elapsed_time``). Each epoch therefore records one *anchor* event on a stream that runs nothing
else (:func:`stamp_anchor`), waits until the GPU has passed it and then samples the host clock
(:func:`react.runtime.clock.now_s`, CLOCK_MONOTONIC), so the anchor's GPU time is that host
instant within the wait's wake-up latency (microseconds). Sampling right after the record call
instead gave merged flows of zero time on 2 H200s under a copy stream (49 and 90 of 2,400 at
p = 1, 2; 1 and 0 this way: docs/results/gpu.md); which side was late, the event or the host's
sample, was not established. Every other event of the epoch is placed on the host clock as
``anchor_host_s + elapsed_ms(anchor, event) / 1000``; ranks on one host then compare directly,
and ranks on several hosts are shifted by the tuner's clock offsets as on the emulator
(:func:`react.runtime.timings.merge_epoch`, ``offsets_s``).

What is stamped, per NCCL group (one direction of one step of one chunk graph, :mod:`.plan`):
``ready`` when the group's stream reached the step (the previous step's receives applied; for the
sender, its payload staged), ``done`` when the stream saw the group complete. Where ``ready`` is
recorded is a choice (:data:`STAMPS`): ``"post"`` (default) before the host posts the group,
``"launch"`` after the posting call returned. While posting is host-bound (about 0.1 ms of
Python per group on 2 H200s) the first leads the NCCL kernel by up to that, the second lags its
launch by the call's bookkeeping after it; docs/results/gpu.md has why this matters. A send's
``post_s`` is its group's ``ready``; a receive's ``post_s`` is its group's ``ready`` and its
``end_s`` its group's ``done``: NCCL reports one completion per group, so a receive is stamped
when the last operation of its group finished (exact when a rank receives one flow per direction
and step of a graph, as in rings and trees at two ranks, where a step's send and receive are
separate groups).
The merge then starts a flow when both ends were ready and ends it when its data had landed, as for
the other transports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from react.backends.gpu.cuda import GpuError
from react.runtime.clock import now_s
from react.runtime.timings import RankEpochTimings, RecvTiming, SendTiming

__all__ = ["STAMPS", "GroupStamps", "check_stamp", "stamp_anchor", "to_rank_timings"]

STAMPS = ("post", "launch")
"""Where a group's ``ready`` event is recorded (module docstring)."""


def check_stamp(stamp: object) -> str:
    """``stamp`` if it is one of :data:`STAMPS`, else a GpuError naming it."""
    if stamp not in STAMPS:
        raise GpuError(f"stamp must be one of {list(STAMPS)}, got {stamp!r}")
    return str(stamp)


def stamp_anchor(event: Any, stream: Any) -> float:
    """Record ``event`` on ``stream`` (idle), wait until the GPU passed it; the host time then."""
    event.record(stream)
    event.synchronize()
    return now_s()


@dataclass(frozen=True, slots=True)
class GroupStamps:
    """One NCCL group's flows and its two event times, in ms after the epoch's anchor."""

    send_flows: tuple[int, ...]
    recv_flows: tuple[int, ...]
    ready_ms: float
    done_ms: float


def to_rank_timings(
    rank: int,
    epoch: int,
    anchor_host_s: float,
    enter_ms: float,
    exit_ms: float,
    groups: Sequence[GroupStamps],
) -> RankEpochTimings:
    """One rank's epoch on the host clock (module docstring); flows sorted by index."""

    def host(ms: float) -> float:
        return anchor_host_s + ms / 1e3

    sends = [SendTiming(i, host(g.ready_ms)) for g in groups for i in g.send_flows]
    recvs = [RecvTiming(i, host(g.ready_ms), host(max(g.done_ms, g.ready_ms)))
             for g in groups for i in g.recv_flows]
    sends.sort(key=lambda s: s.flow_index)
    recvs.sort(key=lambda r: r.flow_index)
    return RankEpochTimings(rank, epoch, host(enter_ms), host(max(exit_ms, enter_ms)),
                            tuple(sends), tuple(recvs))
