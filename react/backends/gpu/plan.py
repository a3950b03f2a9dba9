"""One rank's posting order on NCCL: Algorithm 2's steps as grouped p2p launches, no I/O.

NCCL matches point-to-point operations between two ranks of one communicator by call order
(tags are ignored), and a lone blocking send to a peer whose own send comes first deadlocks. So
a step of a chunk graph is posted as NCCL groups (``batch_isend_irecv``: a group's sends and
receives progress together), and every rank posts its groups in one order all ranks agree on:
by ``(step, chunk graph, direction order)``. The *direction* of a flow ``u -> v`` is 0 when
``u < v`` and 1 otherwise; a step's operations of one direction form one group, so a rank that
sends to and receives from the same peer in one step (every step at two ranks) posts the two
as separate groups, one after the other on its graph's stream, and each flow's completion is
its own, not the slower direction's (CUDA events time each group, :mod:`.eventclock`). Even
graphs post direction 0 first, odd graphs direction 1 first, so while graph 0 moves data one
way graph 1 moves it the other and both directions of every link stay busy. A chunk graph runs
on one "lane" (an NCCL communicator with its own stream; graph ``g`` on lane ``g mod lanes``),
so graphs on different lanes overlap; graphs that share a lane interleave in posting order.
Within a lane the ``k``-th operation between two ranks is the same flow at both ends, because
both walk the same flows in the same order; a group waits only on groups earlier in that order
(on its graph's stream), so none waits forever.

A receive lands in a staging buffer and is applied once every group of its step of its graph
has finished (``reduce`` adds, ``copy`` overwrites, in pattern flow order: a send of the same
step may still read what it overwrites), except a ``copy`` of one contiguous range that no other
operation of its step touches: that one lands straight in the buffer (``direct``).
"""

from __future__ import annotations

from dataclasses import dataclass

from react.model.pattern import Pattern
from react.runtime.schedule import ScheduleError, chunk_bounds, flow_ranges, rank_program

__all__ = ["GpuGroup", "GpuOp", "GpuPlan", "gpu_plan", "posting_key"]


@dataclass(frozen=True, slots=True)
class GpuOp:
    """One flow at this rank: its index, the peer, the buffer ranges it carries."""

    flow_index: int
    peer: int
    ranges: tuple[tuple[int, int], ...]
    size: int  # elements
    reduce: bool = False  # receives only: add instead of overwrite
    direct: bool = False  # receives only: lands straight in the buffer


@dataclass(frozen=True, slots=True)
class GpuGroup:
    """One direction of one step of one chunk graph at this rank: one NCCL group on ``lane``."""

    graph: int
    step: int
    lane: int
    sends: tuple[GpuOp, ...]
    recvs: tuple[GpuOp, ...]  # in pattern flow order: the order they are applied in
    direction: int = 0  # 0: flows u -> v with u < v; 1: u > v


@dataclass(frozen=True, slots=True)
class GpuPlan:
    """Every group of one rank in posting order, for a buffer of ``count`` elements."""

    rank: int
    count: int
    lanes: int
    graphs: tuple[int, ...]
    groups: tuple[GpuGroup, ...]


def gpu_plan(pattern: Pattern, rank: int, count: int, lanes: int) -> GpuPlan:
    """The plan of ``rank`` for ``pattern`` (assumed verified) over ``count`` elements.

    Raises
    ------
    ScheduleError
        If ``rank`` is not in the pattern or ``lanes`` is not a positive integer.
    """
    if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
        raise ScheduleError(f"gpu_plan: lanes must be a positive integer, got {lanes!r}")
    bounds = chunk_bounds(pattern, count)
    flows = pattern.flows
    groups = []
    for program in rank_program(pattern, rank):
        for ops in program.steps:
            chunks_of = {i: set(flows[i].chunks) for i in (*ops.sends, *ops.recvs)}

            def shared(i: int, _c=chunks_of) -> bool:
                return any(_c[i] & _c[j] for j in _c if j != i)

            sends = []
            for i in ops.sends:
                ranges = flow_ranges(flows[i].chunks, bounds)
                sends.append(GpuOp(i, flows[i].dst, ranges, _size(ranges)))
            recvs = []
            for i in ops.recvs:
                ranges = flow_ranges(flows[i].chunks, bounds)
                reduce = flows[i].op == "reduce"
                direct = not reduce and len(ranges) == 1 and not shared(i)
                recvs.append(GpuOp(i, flows[i].src, ranges, _size(ranges), reduce, direct))
            for d in (0, 1):
                ds = tuple(o for o in sends if (rank > o.peer) == bool(d))
                dr = tuple(o for o in recvs if (o.peer > rank) == bool(d))
                if ds or dr:
                    groups.append(GpuGroup(program.graph, ops.step, program.graph % lanes,
                                           ds, dr, d))
    groups.sort(key=posting_key)
    graphs = tuple(sorted({g.graph for g in groups}))
    return GpuPlan(rank, int(count), lanes, graphs, tuple(groups))


def posting_key(group: GpuGroup) -> tuple[int, int, int]:
    """The order every rank posts its groups in: step, graph, then the graph's direction order."""
    return (group.step, group.graph, group.direction ^ (group.graph & 1))


def _size(ranges: tuple[tuple[int, int], ...]) -> int:
    return sum(hi - lo for lo, hi in ranges)
