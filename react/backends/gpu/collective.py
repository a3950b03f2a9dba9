"""RCollective on NCCL: Algorithm 2 as stream and event waits, every flow timed by CUDA events.

One CUDA stream per chunk graph. A collective records an event on the caller's current stream (the
buffer is ready there), makes every graph stream wait on it, then posts every group of the rank's
plan (:mod:`.plan`: one NCCL group per direction of a step of a chunk graph, in the order every
rank agrees on) from this one host thread: on the graph's stream it stages the payloads of
multi-range sends, launches the group with ``batch_isend_irecv`` on the graph's lane (an NCCL
communicator of its own) and makes the stream wait for it (``Work.wait`` blocks the stream, not the
host); once every group of the step is done it applies the step's receives as stream-ordered adds
or copies. Finally the caller's stream waits on every graph stream. Nothing in
:meth:`GpuCollective.run` waits on the GPU: it returns a :class:`GpuEpoch` at once, and only
:meth:`GpuEpoch.timings` (or ``wait``) blocks the host.

With ``graph=True`` the whole posting of a pattern on a buffer is captured once as a CUDA graph
(after one eager epoch) and replayed on the caller's stream from then on, so the host no longer
posts each group (docs/results/gpu.md).

Timing (``timing=True``): per epoch an anchor event (on an idle stream, with a host clock sample,
:mod:`.eventclock`), an enter and an exit event on the caller's stream, and a ready and a done
event around each group, all created once per pattern and reused: ``event_sets`` sets, used in
turn, so the timings of an epoch must be read before ``event_sets`` more epochs ran, or the set's
next use reads them first (waiting for that older epoch to finish on the GPU)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from react.backends.gpu.cuda import GpuError, import_cuda_torch
from react.backends.gpu.eventclock import (
    GroupStamps,
    check_stamp,
    stamp_anchor,
    to_rank_timings,
)
from react.backends.gpu.plan import GpuPlan, gpu_plan
from react.model.pattern import Pattern
from react.model.verify import verify
from react.runtime.collective import CollectiveError
from react.runtime.schedule import ScheduleError
from react.runtime.timings import RankEpochTimings

__all__ = ["EpochEvents", "GpuCollective", "GpuEpoch"]


@dataclass(slots=True)
class EpochEvents:
    """One reusable set of CUDA timing events for one plan, what a :class:`GpuEpoch` reads.

    ``anchor`` is stamped on the host clock; ``enter`` and ``exit`` bound the collective;
    ``ready[k]`` and ``done[k]`` bound the plan's group ``k``; ``owner`` is the posted epoch whose
    times the events hold (a set is reused once its owner's timings are read). Public so that a
    test can hand a :class:`GpuEpoch` stand-in events.
    """

    anchor: Any
    enter: Any
    exit: Any
    ready: list[Any]
    done: list[Any]
    owner: GpuEpoch | None = None


@dataclass(slots=True)
class _Prepared:
    """A plan with its buffers, streams and events (cached per pattern, size and dtype)."""

    pattern: Pattern
    plan: GpuPlan
    recv_stage: dict[int, Any]  # flow index -> staging tensor (non-direct receives)
    send_stage: dict[int, Any]  # flow index -> staging tensor (multi-range sends)
    event_sets: list[EpochEvents]
    calls: int = 0
    # graph mode: the buffers (data pointers) run eagerly once, and the captured graphs by
    # (buffer pointer, event set)
    warmed: set[int] = field(default_factory=set)
    graphs: dict[tuple[int, int], Any] = field(default_factory=dict)


class GpuEpoch:
    """A posted collective: its timings once the GPU has run it."""

    def __init__(self, rank: int, epoch: int, plan: GpuPlan, events: EpochEvents | None,
                 anchor_host_s: float, exit_sync: Any) -> None:
        self.rank = rank
        self.epoch = epoch
        self._plan = plan
        self._events = events
        self._anchor_host_s = anchor_host_s
        self._exit_sync = exit_sync
        self._timings: RankEpochTimings | None = None

    def done(self) -> bool:
        """Whether the GPU finished this collective (never blocks)."""
        return self._timings is not None or bool(self._exit_sync.query())

    def wait(self, timeout_s: float | None = None) -> None:
        """Block the host until the GPU finished it.

        Without ``timeout_s`` this blocks on the exit event (no polling delay); NCCL's watchdog
        bounds it, aborting an operation that exceeds the process group's timeout. With
        ``timeout_s`` it polls and raises :class:`CollectiveError` past the limit.
        """
        if self.done():
            return
        if timeout_s is None:
            self._exit_sync.synchronize()
            return
        deadline = time.monotonic() + timeout_s
        while not self.done():
            if time.monotonic() > deadline:
                raise CollectiveError(f"rank {self.rank}, epoch {self.epoch}: the GPU did not "
                                      f"finish the collective within {timeout_s} s")
            time.sleep(20e-6)

    def timings(self, timeout_s: float | None = None) -> RankEpochTimings | None:
        """This rank's :class:`RankEpochTimings` on the host clock (None if timing was off)."""
        if self._timings is not None or self._events is None:
            return self._timings
        self.wait(timeout_s)
        ev = self._events
        a = ev.anchor
        # the anchor runs on its own stream, so the exit's completion does not imply its own;
        # reading a time before both completed raises (seen under copy-stream congestion)
        a.synchronize()
        ev.exit.synchronize()
        stamps = [
            GroupStamps(tuple(o.flow_index for o in g.sends), tuple(o.flow_index for o in g.recvs),
                        a.elapsed_time(ev.ready[k]), a.elapsed_time(ev.done[k]))
            for k, g in enumerate(self._plan.groups)
        ]
        self._timings = to_rank_timings(self.rank, self.epoch, self._anchor_host_s,
                                        a.elapsed_time(ev.enter), a.elapsed_time(ev.exit), stamps)
        if ev.owner is self:
            ev.owner = None
        return self._timings


class GpuCollective:
    """Runs verified patterns on this rank's GPU over NCCL; every rank makes the same calls.

    Parameters
    ----------
    lanes : int
        NCCL communicators made for chunk graphs (graph ``g`` on lane ``g mod lanes``); made here,
        by every rank, off the critical path.
    timing : bool
        Time every flow with CUDA events (:mod:`.eventclock`).
    event_sets : int
        Timing event sets per pattern, used in turn (module docstring).
    stamp : str
        Where each group's ``ready`` event is recorded: ``"post"`` (before the host posts it) or
        ``"launch"`` (after the posting call returned); :mod:`.eventclock`.
    graph : bool
        Post each prepared pattern as a CUDA graph: the first epoch on a buffer runs eagerly
        (the warm-up NCCL needs before a capture), the next captures the posting (one graph per
        event set, its timing events recorded inside it) and every later one replays it, so
        the host no longer posts each group. The buffer must be the same tensor (data pointer)
        from epoch to epoch; a new one is warmed up and captured again. Off by default:
        docs/results/gpu.md says what has been measured of it.
    connect_all : bool
        Connect every ordered rank pair on every lane here, with one small exchange each: NCCL
        sets up a pair's point-to-point connection on its first transfer (about a hundred
        milliseconds, docs/results/gpu.md), so without this the first epoch of a pattern that
        pairs ranks differently would pay it. With it a pattern switch needs no new
        communicator and no new connection.

    Notes
    -----
    Every NCCL operation is bounded by the process group's timeout
    (:func:`.cuda.init_gpu_world`): NCCL's watchdog aborts it and the process ends with the
    error, so no rank hangs. :meth:`GpuEpoch.wait` also takes its own host-side limit.
    """

    def __init__(self, *, lanes: int = 4, timing: bool = True, event_sets: int = 4,
                 connect_all: bool = True, stamp: str = "post", graph: bool = False) -> None:
        self.stamp = check_stamp(stamp)
        torch = import_cuda_torch()
        dist = torch.distributed
        if not dist.is_initialized() or "nccl" not in str(dist.get_backend()):
            raise GpuError("GpuCollective needs an initialised NCCL process group "
                           "(call react.backends.gpu.init_gpu_world first)")
        for name, value in (("lanes", lanes), ("event_sets", event_sets)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise GpuError(f"GpuCollective: {name} must be a positive integer, got {value!r}")
        self._torch = torch
        self._dist = dist
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.timing = bool(timing)
        self.graph = bool(graph)
        self.event_sets = event_sets
        self.device = torch.device("cuda", torch.cuda.current_device())
        ranks = list(range(self.world_size))
        self._lanes = [dist.new_group(ranks, backend="nccl") for _ in range(lanes)]
        warm = torch.zeros(1, device=self.device)
        for group in self._lanes:  # the first operation on a group must involve every rank
            dist.all_reduce(warm, group=group)
        n, me = self.world_size, self.rank
        if connect_all and n > 1:
            into = torch.zeros(1, device=self.device)
            for group in self._lanes:
                for shift in range(1, n):
                    ops = [dist.P2POp(dist.isend, warm, (me + shift) % n, group=group),
                           dist.P2POp(dist.irecv, into, (me - shift) % n, group=group)]
                    for work in dist.batch_isend_irecv(ops):
                        work.wait()
        torch.cuda.synchronize(self.device)
        self._streams: dict[int, Any] = {}
        self._clock_stream = torch.cuda.Stream(self.device)
        self._enter_sync = torch.cuda.Event()
        self._graph_sync: dict[int, Any] = {}
        self._capture_stream = torch.cuda.Stream(self.device)  # graph mode's captures
        self._prepared: dict[tuple[int, int, Any], _Prepared] = {}

    @property
    def lanes(self) -> int:
        return len(self._lanes)

    # -- one collective ---------------------------------------------------------------------
    def run(self, pattern: Pattern, buffer: Any, epoch: int) -> GpuEpoch:
        """Post ``pattern`` in place on ``buffer`` (a 1-D contiguous CUDA tensor) as ``epoch``.

        Returns at once; the result is in ``buffer`` once the caller's current stream reaches
        this point (ordered after the collective, as NCCL's own collectives are).

        Raises
        ------
        PatternError
            If the pattern does not implement its collective.
        ScheduleError
            If the buffer or epoch is unusable, or the pattern's ranks do not fit the world.
        CollectiveError
            If NCCL refuses a launch.
        """
        torch = self._torch
        prep = self._prepare(pattern, buffer, epoch)
        plan = prep.plan
        events = None
        slot = prep.calls % self.event_sets if self.timing else 0
        if self.timing:
            events = prep.event_sets[slot]
            if events.owner is not None:  # read the older epoch before its events are reused
                events.owner.timings()
        prep.calls += 1
        caller = torch.cuda.current_stream(self.device)
        anchor_host_s = 0.0
        if events is not None:
            anchor_host_s = stamp_anchor(events.anchor, self._clock_stream)
        graph = self._graph_for(prep, buffer, epoch, events, slot) if self.graph else None
        if graph is not None:
            graph.replay()  # on the caller's stream, after what it queued before
        else:
            self._post(prep, buffer, epoch, events, caller)
            if self.graph:
                prep.warmed.add(buffer.data_ptr())
        exit_sync = torch.cuda.Event()
        exit_sync.record(caller)
        result = GpuEpoch(self.rank, epoch, plan, events, anchor_host_s, exit_sync)
        if events is not None:
            events.owner = result
        return result

    def _graph_for(self, prep: _Prepared, buffer: Any, epoch: int, events: EpochEvents | None,
                   slot: int) -> Any:
        """The captured posting of ``prep`` on ``buffer`` with event set ``slot``, captured now
        if the buffer was warmed up; None while it was not (the caller posts eagerly)."""
        key = (buffer.data_ptr(), slot)
        graph = prep.graphs.get(key)
        if graph is not None or key[0] not in prep.warmed:
            return graph
        torch = self._torch
        graph = torch.cuda.CUDAGraph()
        capture = self._capture_stream
        capture.wait_stream(torch.cuda.current_stream(self.device))
        try:
            # thread_local: CUDA calls of other threads (NCCL's watchdog polling its events)
            # during the capture do not invalidate it, as they would in the global mode
            with torch.cuda.graph(graph, stream=capture, capture_error_mode="thread_local"):
                self._post(prep, buffer, epoch, events, capture)
        except RuntimeError as exc:
            first = str(exc).splitlines()[0] if str(exc) else repr(exc)
            raise CollectiveError(f"rank {self.rank}, epoch {epoch}: capturing the pattern as a "
                                  f"CUDA graph failed: {first}") from None
        prep.graphs[key] = graph
        return graph

    def _post(self, prep: _Prepared, buffer: Any, epoch: int, events: EpochEvents | None,
              caller: Any) -> None:
        """Post every group of ``prep`` on ``buffer``, ordered after ``caller``'s work and
        joined back into it (eagerly, or into a graph being captured on ``caller``)."""
        plan = prep.plan
        if events is not None:
            events.enter.record(caller)
        self._enter_sync.record(caller)
        streams = {g: self._stream(g) for g in plan.graphs}
        for s in streams.values():
            s.wait_event(self._enter_sync)
        try:
            k = 0
            groups = plan.groups
            while k < len(groups):  # one block: the groups of one step of one graph
                end = k + 1
                while end < len(groups) and (groups[end].step, groups[end].graph) == (
                        groups[k].step, groups[k].graph):
                    end += 1
                stream = streams[groups[k].graph]
                for j in range(k, end):
                    self._launch(groups[j], j, buffer, stream, prep, events)
                for j in range(k, end):  # after every group: a send may read what is applied
                    self._apply(groups[j], buffer, stream, prep)
                k = end
        except RuntimeError as exc:
            raise CollectiveError(f"rank {self.rank}, epoch {epoch}: NCCL refused a launch: "
                                  f"{str(exc).splitlines()[0] if str(exc) else exc!r}") from None
        for g, s in streams.items():
            done = self._graph_sync[g]
            done.record(s)
            caller.wait_event(done)
        if events is not None:  # before exit_sync: done() must imply every event completed
            events.exit.record(caller)

    def _launch(self, group, k: int, buffer: Any, stream: Any, prep: _Prepared,
                events: EpochEvents | None) -> None:
        torch, dist = self._torch, self._dist
        lane = self._lanes[group.lane]
        with torch.cuda.stream(stream):
            ops = []
            for op in group.sends:
                if op.size == 0:
                    continue
                if len(op.ranges) == 1:
                    lo, hi = op.ranges[0]
                    payload = buffer[lo:hi]
                else:
                    payload = prep.send_stage[op.flow_index]
                    torch.cat([buffer[lo:hi] for lo, hi in op.ranges], out=payload)
                ops.append(dist.P2POp(dist.isend, payload, op.peer, group=lane))
            for op in group.recvs:
                if op.size == 0:
                    continue
                if op.direct:
                    lo, hi = op.ranges[0]
                    target = buffer[lo:hi]
                else:
                    target = prep.recv_stage[op.flow_index]
                ops.append(dist.P2POp(dist.irecv, target, op.peer, group=lane))
            early = self.stamp == "post"
            if events is not None and early:
                events.ready[k].record(stream)
            works = dist.batch_isend_irecv(ops) if ops else []
            if events is not None and not early:
                events.ready[k].record(stream)
            for work in works:
                work.wait()  # the stream waits for NCCL; the host does not
            if events is not None:
                events.done[k].record(stream)

    def _apply(self, group, buffer: Any, stream: Any, prep: _Prepared) -> None:
        with self._torch.cuda.stream(stream):
            for op in group.recvs:
                if op.direct or op.size == 0:
                    continue
                data = prep.recv_stage[op.flow_index]
                offset = 0
                for lo, hi in op.ranges:
                    part = data[offset:offset + hi - lo]
                    if op.reduce:
                        buffer[lo:hi].add_(part)
                    else:
                        buffer[lo:hi].copy_(part)
                    offset += hi - lo

    def _stream(self, graph: int) -> Any:
        stream = self._streams.get(graph)
        if stream is None:
            stream = self._streams[graph] = self._torch.cuda.Stream(self.device)
            self._graph_sync[graph] = self._torch.cuda.Event()
        return stream

    # -- preparation --------------------------------------------------------------------------
    def _prepare(self, pattern: Pattern, buffer: Any, epoch: int) -> _Prepared:
        torch = self._torch
        if not isinstance(pattern, Pattern):
            raise ScheduleError(f"GpuCollective.run: expected a Pattern, got "
                                f"{type(pattern).__name__}")
        if not isinstance(buffer, torch.Tensor) or buffer.dim() != 1 or not buffer.is_cuda:
            raise ScheduleError(
                f"GpuCollective.run: buffer must be a one-dimensional CUDA tensor, got "
                f"{type(buffer).__name__} {getattr(buffer, 'shape', '')} on "
                f"{getattr(buffer, 'device', '?')}")
        if buffer.device != self.device or not buffer.is_contiguous():
            raise ScheduleError(f"GpuCollective.run: buffer must be contiguous on {self.device}, "
                                f"got {buffer.device}")
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise ScheduleError(f"GpuCollective.run: epoch must be an integer >= 0, got {epoch!r}")
        key = (id(pattern), buffer.numel(), buffer.dtype)
        prep = self._prepared.get(key)
        if prep is not None and prep.pattern is pattern:
            return prep
        verify(pattern)  # raises PatternError before anything is posted
        bad = [r for r in pattern.ranks if not 0 <= r < self.world_size]
        if bad or len(pattern.ranks) != self.world_size:
            raise ScheduleError(f"GpuCollective.run: the pattern's ranks {list(pattern.ranks)} "
                                f"must be the world 0..{self.world_size - 1}")
        plan = gpu_plan(pattern, self.rank, buffer.numel(), self.lanes)
        make = dict(device=self.device, dtype=buffer.dtype)
        recv_stage = {op.flow_index: torch.empty(op.size, **make)
                      for g in plan.groups for op in g.recvs if not op.direct and op.size}
        send_stage = {op.flow_index: torch.empty(op.size, **make)
                      for g in plan.groups for op in g.sends if len(op.ranges) > 1}
        sets = []
        if self.timing:
            def ev():
                if self.graph:  # recorded inside a captured graph as nodes of their own
                    return torch.cuda.Event(enable_timing=True, external=True)
                return torch.cuda.Event(enable_timing=True)

            sets = [EpochEvents(ev(), ev(), ev(), [ev() for _ in plan.groups],
                            [ev() for _ in plan.groups]) for _ in range(self.event_sets)]
        if len(self._prepared) >= 16:
            self._prepared.clear()
        prep = self._prepared[key] = _Prepared(pattern, plan, recv_stage, send_stage, sets)
        return prep

    def close(self) -> None:
        """Wait for posted work and drop the lanes' communicators (every rank calls this)."""
        if not self._lanes:
            return
        self._torch.cuda.synchronize(self.device)
        for group in self._lanes:
            self._dist.destroy_process_group(group)
        self._lanes = []
        self._prepared.clear()
