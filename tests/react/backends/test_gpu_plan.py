"""The GPU backend's CPU-side parts: posting order, direct receives, event clock, errors.

These run without a GPU: the NCCL matching and deadlock properties of the posting order are
checked by simulating NCCL's rules (per-communicator call-order matching, in-order streams) on
every generator; the plan's receive handling by executing it in numpy against the collective's
meaning; the event clock against hand-computed stamps.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from react.backends.gpu.cuda import GpuError, ranks_from_env
from react.backends.gpu.eventclock import GroupStamps, to_rank_timings
from react.backends.gpu.plan import gpu_plan
from react.patterns import GENERATORS
from react.runtime.reference import expected_output, initial_buffer
from react.runtime.schedule import ScheduleError
from react.runtime.timings import RankEpochTimings, merge_epoch


def _cases():
    for name in sorted(GENERATORS):
        for n in (2, 3, 4, 5, 8):
            try:
                pattern = GENERATORS[name](n)
            except Exception:
                continue
            yield pytest.param(pattern, id=f"{name}-{n}")


CASES = list(_cases())


@pytest.mark.parametrize("pattern", CASES)
@pytest.mark.parametrize("lanes", [1, 2, 4])
def test_every_flow_once_and_call_order_matches_on_every_lane(pattern, lanes):
    plans = {r: gpu_plan(pattern, r, 997, lanes) for r in pattern.ranks}
    sent = sorted(op.flow_index for p in plans.values() for g in p.groups for op in g.sends)
    got = sorted(op.flow_index for p in plans.values() for g in p.groups for op in g.recvs)
    assert sent == got == list(range(len(pattern.flows)))
    for lane in range(lanes):
        for u in pattern.ranks:
            for v in pattern.ranks:
                out = [op.flow_index for g in plans[u].groups if g.lane == lane
                       for op in g.sends if op.peer == v]
                into = [op.flow_index for g in plans[v].groups if g.lane == lane
                        for op in g.recvs if op.peer == u]
                assert out == into, (lane, u, v)


@pytest.mark.parametrize("pattern", CASES)
@pytest.mark.parametrize("lanes", [1, 2, 3])
def test_posting_order_cannot_deadlock_under_nccls_rules(pattern, lanes):
    # A group is launched when it heads its lane's in-order stream on its rank and its chunk
    # graph's previous group finished; it runs until it finishes. One of its operations is done
    # once the peer's group holding the matching operation has been launched too; the group
    # finishes when all of its operations are done. Everything must finish.
    plans = {r: gpu_plan(pattern, r, 997, lanes) for r in pattern.ranks}
    queues = {(r, ln): [g for g in p.groups if g.lane == ln]
              for r, p in plans.items() for ln in range(lanes)}
    # (A group is one direction of one step: "previous" means every direction of earlier steps.)
    finished: set[tuple[int, int, int, int]] = set()  # (rank, graph, step, direction)
    launched: set[tuple[int, int, int, int]] = set()
    where = {}
    for r, p in plans.items():
        for g in p.groups:
            for op in (*g.sends, *g.recvs):
                where[(r, op.flow_index)] = (r, g.graph, g.step, g.direction)

    def key(r, g):
        return (r, g.graph, g.step, g.direction)

    def prev_done(r, g):
        earlier = [x for x in plans[r].groups if x.graph == g.graph and x.step < g.step]
        return all(key(r, x) in finished for x in earlier)

    progress = True
    while progress:
        progress = False
        for (r, _), q in queues.items():
            if q and prev_done(r, q[0]) and key(r, q[0]) not in launched:
                launched.add(key(r, q[0]))
                progress = True
        for (r, _), q in queues.items():
            if not q or key(r, q[0]) not in launched:
                continue
            g = q[0]
            if all(where[(op.peer, op.flow_index)] in launched for op in (*g.sends, *g.recvs)):
                finished.add(key(r, g))
                q.pop(0)
                progress = True
    assert all(not q for q in queues.values()), "deadlock"


def _execute(pattern, inputs, count, lanes):
    """Run every rank's plan in numpy in lockstep by step (staging and direct as planned)."""
    plans = {r: gpu_plan(pattern, r, count, lanes) for r in pattern.ranks}
    bufs = {r: initial_buffer(pattern, inputs[i], r) for i, r in enumerate(pattern.ranks)}
    for step in sorted({g.step for p in plans.values() for g in p.groups}):
        payload = {}
        for r, p in plans.items():
            for g in p.groups:
                if g.step == step:
                    for op in g.sends:
                        payload[op.flow_index] = np.concatenate(
                            [bufs[r][lo:hi] for lo, hi in op.ranges] or [bufs[r][:0]])
        for r, p in plans.items():
            for g in p.groups:
                if g.step != step:
                    continue
                for op in g.recvs:
                    data, off = payload[op.flow_index], 0
                    assert data.size == op.size
                    for lo, hi in op.ranges:
                        if op.reduce:
                            bufs[r][lo:hi] += data[off:off + hi - lo]
                        else:
                            bufs[r][lo:hi] = data[off:off + hi - lo]
                        off += hi - lo
    return bufs


@pytest.mark.parametrize("pattern", CASES)
def test_plan_executed_in_numpy_gives_the_collectives_meaning(pattern):
    count = 1001
    inputs = [np.random.default_rng(r).integers(-50, 50, count) for r in pattern.ranks]
    bufs = _execute(pattern, inputs, count, lanes=2)
    for r in pattern.ranks:
        want, defined = expected_output(pattern, inputs, r)
        assert np.array_equal(bufs[r][defined], want[defined])


@pytest.mark.parametrize("pattern", CASES)
def test_direct_receives_are_lone_single_range_copies(pattern):
    for r in pattern.ranks:
        for g in gpu_plan(pattern, r, 500, 2).groups:
            for op in g.recvs:
                if not op.direct:
                    continue
                assert not op.reduce and len(op.ranges) == 1
                mine = set(pattern.flows[op.flow_index].chunks)
                step = [x for x in gpu_plan(pattern, r, 500, 2).groups
                        if (x.graph, x.step) == (g.graph, g.step)]  # both directions
                others = [o for x in step for o in (*x.sends, *x.recvs)
                          if o.flow_index != op.flow_index]
                assert all(not mine & set(pattern.flows[o.flow_index].chunks) for o in others)


def test_groups_are_posted_by_step_graph_direction_and_lanes_wrap():
    pattern = GENERATORS["allreduce_ring"](4)
    plan = gpu_plan(pattern, 1, 64, 3)
    keys = [(g.step, g.graph, g.direction ^ (g.graph % 2)) for g in plan.groups]
    assert keys == sorted(keys)
    assert all(g.lane == g.graph % 3 for g in plan.groups)
    # a group holds one direction: rank 1 sends up to 2 (0) and receives up from 0 (0)
    for g in plan.groups:
        assert all((1 > op.peer) == bool(g.direction) for op in g.sends)
        assert all((op.peer > 1) == bool(g.direction) for op in g.recvs)
    # at two ranks a group never holds both a send and a receive: rank 0 sends up (0) and
    # receives down (1), so every flow of rank 0 is a group of its own; an odd graph posts its
    # direction 1 first, so the two graphs move data in opposite directions at once
    two_ranks = GENERATORS["allreduce_double_binary_tree"](2)
    two = gpu_plan(two_ranks, 0, 64, 4)
    assert all(len(g.sends) + len(g.recvs) == 1 for g in two.groups)
    assert len(two.groups) == len(two_ranks.flows)
    for a, b in zip(two.groups, two.groups[1:], strict=False):
        if (a.step, a.graph) == (b.step, b.graph):
            assert [a.direction, b.direction] == ([0, 1] if a.graph % 2 == 0 else [1, 0])
    with pytest.raises(ScheduleError, match="lanes"):
        gpu_plan(pattern, 1, 64, 0)
    with pytest.raises(ScheduleError, match="rank 9"):
        gpu_plan(pattern, 9, 64, 1)


def test_event_times_are_placed_on_the_host_clock_and_merge():
    pattern = GENERATORS["allreduce_ring"](2)  # flows 0..3; see the plan test above
    plan0 = gpu_plan(pattern, 0, 8, 2)
    plan1 = gpu_plan(pattern, 1, 8, 2)

    def stamps(plan, times):
        return [GroupStamps(tuple(o.flow_index for o in g.sends),
                            tuple(o.flow_index for o in g.recvs), *t)
                for g, t in zip(plan.groups, times, strict=True)]

    # rank 0: anchor at host 100 s; rank 1: anchor at host 100.0005 s.
    r0 = to_rank_timings(0, 3, 100.0, 0.1, 5.0,
                         stamps(plan0, [(0.2, 1.0), (0.2, 1.5), (1.6, 3.0), (1.6, 4.0)]))
    r1 = to_rank_timings(1, 3, 100.0005, 0.0, 4.5,
                         stamps(plan1, [(0.3, 0.9), (0.3, 1.4), (1.5, 3.5), (1.5, 2.5)]))
    assert r0.start_s == pytest.approx(100.0001) and r0.end_s == pytest.approx(100.005)
    assert isinstance(r0, RankEpochTimings) and len(r0.sends) == len(r0.recvs) == 2
    result = merge_epoch(pattern, [r0, r1], 64.0)
    t0 = 100.0001  # the earliest entry (rank 0)
    by_index = {pattern.flows.index(t.flow): t for t in result.flows}
    for i, flow in enumerate(pattern.flows):
        send_rec = (r0 if flow.src == 0 else r1).sends
        recv_rec = (r0 if flow.dst == 0 else r1).recvs
        s = next(x for x in send_rec if x.flow_index == i)
        v = next(x for x in recv_rec if x.flow_index == i)
        assert by_index[i].start_s == pytest.approx(max(s.post_s, v.post_s) - t0)
        assert by_index[i].end_s == pytest.approx(v.end_s - t0)
    assert result.collective_time_s == pytest.approx(100.005 - t0)


class _LateEvent:
    """A CUDA event stand-in that completes only when synchronised, as a slow stream's does."""

    def __init__(self, ms: float) -> None:
        self.ms, self.completed = ms, False

    def synchronize(self) -> None:
        self.completed = True

    def query(self) -> bool:
        return self.completed

    def elapsed_time(self, other: _LateEvent) -> float:
        if not (self.completed and other.completed):  # what torch raises
            raise RuntimeError("Both events must be completed before calculating elapsed time.")
        return other.ms - self.ms


def test_timings_wait_for_events_that_complete_after_the_epochs_end_marker():
    # Seen on 2 H200s under a copy stream: the epoch's end marker had completed while the
    # anchor (its own stream) or the exit event had not, and reading the times raised.
    from react.backends.gpu.collective import EpochEvents, GpuEpoch

    plan = gpu_plan(GENERATORS["allreduce_ring"](2), 0, 8, 2)
    k = len(plan.groups)
    events = EpochEvents(_LateEvent(0.0), _LateEvent(0.1), _LateEvent(5.0),
                     [_LateEvent(0.2 + j) for j in range(k)],
                     [_LateEvent(0.9 + j) for j in range(k)])
    for e in (*events.ready, *events.done, events.enter):
        e.completed = True  # on the graph streams, before the exit
    end_marker = _LateEvent(5.0)
    end_marker.completed = True
    timings = GpuEpoch(0, 7, plan, events, 100.0, end_marker).timings()
    assert timings.start_s == pytest.approx(100.0001)
    assert timings.end_s == pytest.approx(100.005)


def test_ranks_from_env_names_what_is_missing_or_wrong():
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "h",
           "MASTER_PORT": "1"}
    assert ranks_from_env(env) == (1, 2, 1, 2)
    with pytest.raises(GpuError, match="MASTER_PORT"):
        ranks_from_env({k: v for k, v in env.items() if k != "MASTER_PORT"})
    with pytest.raises(GpuError, match="RANK=2"):
        ranks_from_env({**env, "RANK": "2"})
    with pytest.raises(GpuError, match="integers"):
        ranks_from_env({**env, "RANK": "one"})


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_without_cuda_the_error_says_so():
    import torch

    from react.backends.gpu.cuda import import_cuda_torch

    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    with pytest.raises(GpuError, match="needs a CUDA device"):
        import_cuda_torch()
