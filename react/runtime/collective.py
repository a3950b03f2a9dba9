"""RCollective: one rank's execution of any verified pattern over a transport (paper Algorithm 2).

For each chunk graph independently (one thread each) and for each step in which this rank has
operations in it, in increasing order: post every send of the step (payload: the rank's current
values of the flow's chunks, i.e. its state after the previous step) and every receive, wait for
all of them, then apply the receives in pattern flow order (``reduce`` adds into the chunks,
``copy`` overwrites them). Every dependency of the TEN is honoured this way: a flow's payload is
read only after every earlier receive of its chunks was applied. The buffer is changed in place.

The buffer holds the collective's input as its kind defines it (react/model/verify.py): every rank's
whole message for AllReduce, ReduceScatter and Reduce; the owner's chunks for AllGather; the
root's message for Broadcast. Chunks a rank does not hold should be zero: a pattern may ``reduce``
into a chunk its receiver holds nothing of (the verifier allows it), which is then a plain copy.
Afterwards the ranks the kind names hold the result (sums, or gathered chunks); what the other
ranks' other chunks hold is unspecified.

Timing, all on :func:`react.runtime.clock.now_s` (CLOCK_MONOTONIC of this host):

- a send's ``post_s`` is when RCollective posted it; its ``started_s`` is the transport's stamp of
  when bytes started to leave (the socket transport: after the receiver's clear-to-send), or
  ``None`` where the transport cannot tell (Gloo);
- a receive's ``post_s`` is when it was posted; its ``end_s`` is when the last byte landed in
  RCollective's receive buffer, as stamped by the transport (``done_s``) or, where the transport
  does not stamp, when the wait on it returned (waits are taken in posting order, so a receive
  that finished before an earlier-posted one is stamped late by that one's remainder);
- the epoch's ``start_s`` is taken before the first operation is posted, ``end_s`` after every
  chunk graph's thread finished.

Namespaces on one host share the monotonic clock, so stamps of different ranks compare directly;
real clusters do not, and the tuner maps each rank's stamps onto the leader's clock with an
estimated offset (:func:`react.runtime.timings.merge_epoch`, ``offsets_s``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from react.model.errors import ReactError
from react.model.pattern import Pattern
from react.model.verify import verify
from react.runtime.clock import now_s
from react.runtime.schedule import (
    GraphProgram,
    ScheduleError,
    chunk_bounds,
    flow_ranges,
    flow_tag,
    rank_program,
)
from react.runtime.timings import RankEpochTimings, RecvTiming, SendTiming
from react.runtime.transport import Transport

__all__ = ["CollectiveError", "RCollective"]


class CollectiveError(ReactError, RuntimeError):
    """A collective that could not complete (a transport failed or timed out)."""


@dataclass(frozen=True, slots=True)
class _Plan:
    """A pattern made ready for one rank and one buffer size (cached per pattern object)."""

    programs: tuple[GraphProgram, ...]
    ranges: tuple[tuple[tuple[int, int], ...], ...]  # per flow index
    sizes: tuple[int, ...]  # elements per flow


class RCollective:
    """Runs patterns on one rank over ``transport``; every rank of the job runs the same calls.

    Parameters
    ----------
    transport : Transport
        This rank's point-to-point transport; ``transport.rank`` is the rank that runs.
    timeout_s : float
        Longest time one collective may take before :class:`CollectiveError` is raised.

    Notes
    -----
    A pattern is verified (:func:`react.model.verify.verify`) the first time it is run, before any
    byte is sent; an invalid one raises :class:`~react.model.errors.PatternError`.
    """

    def __init__(self, transport: Transport, *, timeout_s: float = 60.0) -> None:
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise CollectiveError(f"RCollective: timeout_s must be positive, got {timeout_s!r}")
        self.transport = transport
        self.timeout_s = float(timeout_s)
        self._plans: dict[int, tuple[Pattern, int, _Plan]] = {}

    def run(self, pattern: Pattern, buffer: np.ndarray, epoch: int) -> RankEpochTimings:
        """Execute ``pattern`` in place on ``buffer`` as ``epoch``; return this rank's timings.

        Parameters
        ----------
        pattern : Pattern
            A valid pattern whose ranks include this transport's rank and are below its world
            size.
        buffer : numpy.ndarray
            One-dimensional, C-contiguous, writable; the same length and dtype on every rank.
        epoch : int
            Non-negative; tells the messages of consecutive epochs apart.

        Raises
        ------
        PatternError
            If the pattern does not implement its collective.
        ScheduleError
            If the buffer or epoch is unusable, or the pattern does not fit the transport.
        CollectiveError
            If a transfer fails or the collective exceeds ``timeout_s``.
        """
        plan = self._plan(pattern, buffer, epoch)
        deadline = now_s() + self.timeout_s
        start_s = now_s()
        sends: list[SendTiming] = []
        recvs: list[RecvTiming] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def work(program: GraphProgram) -> None:
            try:
                s, r = self._run_graph(pattern, plan, program, buffer, epoch, deadline)
                with lock:
                    sends.extend(s)
                    recvs.extend(r)
            except BaseException as exc:  # re-raised in the caller's thread below
                with lock:
                    errors.append(exc)

        threads = [
            threading.Thread(target=work, args=(p,), name=f"rcoll-g{p.graph}", daemon=True)
            for p in plan.programs[1:]
        ]
        for t in threads:
            t.start()
        if plan.programs:
            work(plan.programs[0])
        for t in threads:
            t.join(max(0.0, deadline - now_s()) + 1.0)
        end_s = now_s()
        if any(t.is_alive() for t in threads):
            errors.append(CollectiveError(
                f"rank {self.transport.rank}, epoch {epoch}: a chunk graph did not finish within "
                f"{self.timeout_s} s"
            ))
        if errors:
            first = errors[0]
            if isinstance(first, ReactError):
                raise first
            raise CollectiveError(
                f"rank {self.transport.rank}, epoch {epoch}: {first!r}"
            ) from first
        sends.sort(key=lambda s: s.flow_index)
        recvs.sort(key=lambda r: r.flow_index)
        return RankEpochTimings(self.transport.rank, epoch, start_s, end_s, tuple(sends),
                                tuple(recvs))

    # -- one chunk graph -------------------------------------------------------------------------
    def _run_graph(
        self,
        pattern: Pattern,
        plan: _Plan,
        program: GraphProgram,
        buffer: np.ndarray,
        epoch: int,
        deadline: float,
    ) -> tuple[list[SendTiming], list[RecvTiming]]:
        transport = self.transport
        flows = pattern.flows
        sends: list[SendTiming] = []
        recvs: list[RecvTiming] = []
        for ops in program.steps:
            posted_recvs = []
            for i in ops.recvs:
                out = np.empty(plan.sizes[i], dtype=buffer.dtype)
                post = now_s()
                handle = None if out.size == 0 else self._post(
                    transport.irecv, flows[i].src, i, out, epoch, pattern)
                posted_recvs.append((i, out, post, handle))
            posted_sends = []
            for i in ops.sends:
                payload = _gather(buffer, plan.ranges[i])
                post = now_s()
                handle = None if payload.size == 0 else self._post(
                    transport.isend, flows[i].dst, i, payload, epoch, pattern)
                posted_sends.append((i, post, handle))
            for i, _out, post, handle in posted_recvs:
                if handle is not None:
                    self._wait(handle, deadline, epoch, i, pattern)
                    done = getattr(handle, "done_s", None)
                    end = now_s() if done is None else done
                else:
                    end = post
                recvs.append(RecvTiming(i, post, end))
            for i, post, handle in posted_sends:
                started = None
                if handle is not None:
                    self._wait(handle, deadline, epoch, i, pattern)
                    started = handle.started_s
                sends.append(SendTiming(i, post, started))
            for i, out, _, _ in posted_recvs:
                _apply(buffer, plan.ranges[i], out, flows[i].op == "reduce")
        return sends, recvs

    def _post(self, post, peer: int, index: int, array: np.ndarray, epoch: int,
              pattern: Pattern):
        try:
            return post(peer, flow_tag(epoch, index), array)
        except ReactError as exc:
            raise CollectiveError(f"{self._where(pattern, epoch, index)}: {exc}") from exc

    def _where(self, pattern: Pattern, epoch: int, index: int) -> str:
        flow = pattern.flows[index]
        return (f"rank {self.transport.rank}, epoch {epoch}, flow {index} "
                f"({flow.src} -> {flow.dst} at step {flow.step})")

    def _wait(self, handle, deadline: float, epoch: int, index: int, pattern: Pattern) -> None:
        left = deadline - now_s()
        where = self._where(pattern, epoch, index)
        if left <= 0:
            raise CollectiveError(f"{where}: collective exceeded timeout_s={self.timeout_s}")
        try:
            handle.wait(left)
        except ReactError as exc:
            raise CollectiveError(f"{where}: {exc}") from exc

    # -- preparation -----------------------------------------------------------------------------
    def _plan(self, pattern: Pattern, buffer: np.ndarray, epoch: int) -> _Plan:
        if not isinstance(pattern, Pattern):
            raise ScheduleError(
                f"RCollective.run: expected a Pattern, got {type(pattern).__name__}"
            )
        if not isinstance(buffer, np.ndarray) or buffer.ndim != 1:
            raise ScheduleError(
                f"RCollective.run: buffer must be a one-dimensional numpy array, got "
                f"{type(buffer).__name__} of shape {getattr(buffer, 'shape', None)}"
            )
        if not (buffer.flags.c_contiguous and buffer.flags.writeable):
            raise ScheduleError("RCollective.run: buffer must be C-contiguous and writable")
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise ScheduleError(f"RCollective.run: epoch must be an integer >= 0, got {epoch!r}")
        cached = self._plans.get(id(pattern))
        if cached is not None and cached[0] is pattern and cached[1] == buffer.size:
            return cached[2]
        verify(pattern)  # raises PatternError before any byte moves
        world = self.transport.world_size
        bad = [r for r in pattern.ranks if not 0 <= r < world]
        if bad:
            raise ScheduleError(
                f"RCollective.run: pattern ranks {bad} are outside the transport's world "
                f"0..{world - 1}"
            )
        bounds = chunk_bounds(pattern, buffer.size)
        ranges = tuple(flow_ranges(f.chunks, bounds) for f in pattern.flows)
        sizes = tuple(sum(hi - lo for lo, hi in r) for r in ranges)
        plan = _Plan(rank_program(pattern, self.transport.rank), ranges, sizes)
        if len(self._plans) >= 16:
            self._plans.clear()
        self._plans[id(pattern)] = (pattern, buffer.size, plan)
        return plan


def _gather(buffer: np.ndarray, ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    # One contiguous range is sent as a view: no other thread writes these chunks until the
    # send completes (their chunk graph's thread is the one waiting on it).
    if len(ranges) == 1:
        lo, hi = ranges[0]
        return buffer[lo:hi]
    if not ranges:
        return buffer[:0]
    return np.concatenate([buffer[lo:hi] for lo, hi in ranges])


def _apply(
    buffer: np.ndarray, ranges: tuple[tuple[int, int], ...], data: np.ndarray, reduce: bool
) -> None:
    offset = 0
    for lo, hi in ranges:
        part = data[offset : offset + hi - lo]
        if reduce:
            buffer[lo:hi] += part
        else:
            buffer[lo:hi] = part
        offset += hi - lo

