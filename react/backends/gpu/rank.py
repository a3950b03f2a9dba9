"""One GPU rank of a real job: RCollective (or NCCL's own collective) epoch by epoch, under RTuner.

Started once per GPU with the rank in the environment as ``torchrun`` sets it (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``; :class:`~.job.GpuJob` starts
them so on one host, ``torchrun`` on each host does the same on several)::

    python -m react.backends.gpu.rank JOB.json

``JOB.json`` (format ``react-gpu-job/1``, :func:`gpu_job_spec`) holds the starting pattern, the
epochs (after ``warmup_epochs`` untimed ones that nobody reports), the message size, the tuner's
address (or none), the GPU of each rank (default ``LOCAL_RANK``), the lanes, the timeouts and a
folder for the rank's own record.

Each epoch (:func:`rank_loop`): ask the :class:`~react.runtime.tuner.TunerClient` which pattern is
in force (it blocks only when the leader is more than ``apply_delay_epochs`` behind), refill the
device buffer from the rank's fixed input (a device copy, ordered before the collective on the
stream), post the collective (returns at once), then read the *previous* epoch's CUDA-event timings
and hand them to the tuner's background thread: the host never waits for the epoch it just posted,
so the GPU always has the next epoch queued and the control channel (TCP/JSON on the CPU) never
blocks the GPU stream. The result is checked against the collective's meaning
(:mod:`react.runtime.reference`) on the GPU at epoch 0, at the first epoch of every new pattern and
at the last epoch.

``mode = "nccl"`` runs NCCL's own collective of the pattern's kind instead (AllReduce, AllGather,
Broadcast, Reduce; no flows, no tuner), timed by the same enter/exit events: the baseline beside
RCollective under the same congestion.

Every rank writes ``rank{r}.json`` into the job's folder: each epoch's enter and exit on the host
clock, the host's posting time, the loop's wall time, the checks and the tuner client's waits. Any
failure ends the process with a non-zero status and one line on stderr naming the rank, the epoch
and the problem; NCCL's watchdog (the process group's timeout) ends a rank whose peer is gone, so
no rank hangs."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from react.backends.gpu.eventclock import check_stamp
from react.model.errors import ReactError
from react.model.pattern import Pattern
from react.runtime.timings import RankEpochTimings

__all__ = ["FORMAT", "MODES", "gpu_job_spec", "main", "rank_loop", "run_gpu_rank"]

FORMAT = "react-gpu-job/1"
MODES = ("rcollective", "nccl")


def gpu_job_spec(
    *,
    job: str,
    pattern: Pattern,
    epochs: int,
    message_bytes: float,
    tuner: tuple[str, int] | None,
    out_dir: str,
    devices: Sequence[int] | None = None,
    mode: str = "rcollective",
    lanes: int = 4,
    timeout_s: float = 120.0,
    compute_gap_s: float = 0.0,
    apply_delay_epochs: int = 5,
    warmup_epochs: int = 3,
    dtype: str = "float32",
    stamp: str = "post",
    graph: bool = False,
) -> dict[str, Any]:
    """The JSON document every rank of a GPU job reads (module docstring); ``graph``: post as
    CUDA graphs (:class:`~react.backends.gpu.collective.GpuCollective`)."""
    check_stamp(stamp)
    if mode not in MODES:
        raise ReactError(f"gpu_job_spec: mode must be one of {MODES}, got {mode!r}")
    if mode == "nccl" and tuner is not None:
        raise ReactError("gpu_job_spec: NCCL's own collective has no flows to tune; "
                         "give tuner=None with mode='nccl'")
    return {
        "format": FORMAT, "job": job, "pattern": pattern.to_dict(), "epochs": int(epochs),
        "message_bytes": float(message_bytes), "mode": mode,
        "tuner": None if tuner is None else [tuner[0], int(tuner[1])],
        "out_dir": str(out_dir), "devices": None if devices is None else [int(d) for d in devices],
        "lanes": int(lanes), "timeout_s": float(timeout_s), "graph": bool(graph),
        "compute_gap_s": float(compute_gap_s), "apply_delay_epochs": int(apply_delay_epochs),
        "warmup_epochs": int(warmup_epochs), "dtype": dtype, "stamp": stamp,
    }


def rank_loop(
    pattern: Pattern,
    epochs: int,
    post: Callable[[Pattern, int], Any],
    *,
    client: Any = None,
    report_late: bool = True,
    gap_s: float = 0.0,
    on_timings: Callable[[RankEpochTimings], None] | None = None,
    on_pattern: Callable[[int, Pattern, bool], None] | None = None,
) -> Pattern:
    """Run ``epochs`` epochs (module docstring); returns the last pattern run.

    ``post(pattern, epoch)`` posts one epoch and returns a handle whose ``timings()`` gives the
    epoch's :class:`RankEpochTimings` (blocking until the GPU ran it). With ``report_late`` the
    epoch's timings are read after the next epoch is posted (the host never waits for the epoch
    it just posted); this needs the tuner's ``apply_delay_epochs >= 1``, since a rank asking for
    epoch ``e + 1`` may need the leader's answer on epoch ``e``. ``on_pattern(epoch, pattern,
    changed)`` is called after each post (``changed``: the first epoch, or a pattern other than
    the previous epoch's).
    """
    previous: Pattern | None = None
    pending = None

    def hand_over(handle: Any) -> None:
        timings = handle.timings()
        if timings is None:
            return
        if client is not None:
            client.report(timings)
        if on_timings is not None:
            on_timings(timings)

    for epoch in range(epochs):
        if client is not None:
            pattern = client.pattern_for(epoch, pattern)
        handle = post(pattern, epoch)
        if on_pattern is not None:
            on_pattern(epoch, pattern, previous is None or pattern is not previous)
        previous = pattern
        if report_late:
            if pending is not None:
                hand_over(pending)
            pending = handle
        else:
            hand_over(handle)
        if gap_s > 0:
            time.sleep(gap_s)
    if pending is not None:
        hand_over(pending)
    return previous if previous is not None else pattern


class _NcclEpoch:
    """NCCL's own collective, posted: enter and exit events as a flowless RankEpochTimings."""

    def __init__(self, rank: int, epoch: int, anchor: Any, anchor_host_s: float, enter: Any,
                 exit_: Any) -> None:
        self.rank, self.epoch = rank, epoch
        self._anchor, self._anchor_host_s, self._enter, self._exit = (anchor, anchor_host_s,
                                                                      enter, exit_)

    def timings(self) -> RankEpochTimings:
        from react.backends.gpu.eventclock import to_rank_timings

        self._exit.synchronize()
        self._anchor.synchronize()  # on its own stream: the exit's completion does not imply it
        return to_rank_timings(self.rank, self.epoch, self._anchor_host_s,
                               self._anchor.elapsed_time(self._enter),
                               self._anchor.elapsed_time(self._exit), ())


class _Nccl:
    """Posts NCCL's collective of a pattern's kind, timed (events reused in turn)."""

    SETS = 8

    def __init__(self, torch: Any, rank: int) -> None:
        self.torch, self.rank = torch, rank
        self._clock = torch.cuda.Stream()
        self._sets = [[torch.cuda.Event(enable_timing=True) for _ in range(3)]
                      for _ in range(self.SETS)]
        self._owners: list[_NcclEpoch | None] = [None] * self.SETS
        self._gather: Any = None

    def run(self, pattern: Pattern, buffer: Any, epoch: int) -> _NcclEpoch:
        from react.backends.gpu.eventclock import stamp_anchor

        torch, dist = self.torch, self.torch.distributed
        k = epoch % self.SETS
        if self._owners[k] is not None:
            self._owners[k].timings()  # type: ignore[union-attr]
        anchor, enter, exit_ = self._sets[k]
        anchor_host_s = stamp_anchor(anchor, self._clock)
        enter.record()
        kind = pattern.kind
        if kind == "allreduce":
            dist.all_reduce(buffer)
        elif kind == "broadcast":
            dist.broadcast(buffer, src=pattern.root)
        elif kind == "reduce":
            dist.reduce(buffer, dst=pattern.root)
        elif kind == "allgather":
            # NCCL gathers equal slices; the pattern's chunks need not be: gather everything
            n = dist.get_world_size()
            if self._gather is None or self._gather.numel() != n * buffer.numel():
                self._gather = torch.empty(n * buffer.numel(), dtype=buffer.dtype,
                                           device=buffer.device)
            dist.all_gather_into_tensor(self._gather, buffer)
        else:
            raise ReactError(f"mode 'nccl': no NCCL collective for kind {kind!r}")
        exit_.record()
        handle = _NcclEpoch(self.rank, epoch, anchor, anchor_host_s, enter, exit_)
        self._owners[k] = handle
        return handle


def _check_spec(spec: Any) -> tuple[Pattern, str, float]:
    if not isinstance(spec, Mapping) or spec.get("format") != FORMAT:
        raise ReactError(f"GPU job spec: expected format {FORMAT!r}, got "
                         f"{spec.get('format') if isinstance(spec, Mapping) else spec!r}")
    pattern = Pattern.from_dict(spec["pattern"])
    mode = str(spec["mode"])
    if mode not in MODES:
        raise ReactError(f"GPU job spec: mode must be one of {MODES}, got {mode!r}")
    return pattern, mode, float(spec["timeout_s"])


def _device(spec: Mapping[str, Any]) -> int | None:
    """This rank's GPU from the spec's ``devices`` (by ``RANK``); None: ``LOCAL_RANK``'s."""
    env_rank = int(os.environ.get("RANK", "-1"))
    devices = spec.get("devices")
    if devices is None or not 0 <= env_rank < len(devices):
        return None
    return int(devices[env_rank])


def _rank_buffers(torch: Any, pattern: Pattern, spec: Mapping[str, Any],
                  rank: int) -> tuple[Any, Any, Any]:
    """On the GPU: the buffer every epoch starts from, and the result it must end with (the
    defined elements' values and their indices), from the rank's fixed input."""
    from react.runtime.rank import element_count, rank_input
    from react.runtime.reference import expected_output, initial_buffer

    dtype = str(spec["dtype"])
    count = element_count(float(spec["message_bytes"]), dtype)
    inputs = [rank_input(r, count, dtype) for r in range(pattern.n)]
    mine = inputs[pattern.ranks.index(rank)]
    want_np, defined_np = expected_output(pattern, inputs, rank)
    start = torch.from_numpy(initial_buffer(pattern, mine, rank)).cuda()
    del inputs
    want = torch.from_numpy(want_np[defined_np]).cuda()
    defined = torch.from_numpy(np.flatnonzero(defined_np)).cuda()
    return start, want, defined


def _collective(torch: Any, rank: int, mode: str, spec: Mapping[str, Any]) -> Any:
    if mode == "nccl":
        return _Nccl(torch, rank)
    from react.backends.gpu.collective import GpuCollective

    return GpuCollective(lanes=int(spec["lanes"]), timing=True,
                         stamp=str(spec.get("stamp", "post")), graph=bool(spec.get("graph", False)))


def _result_check(torch: Any, buffer: Any, want: Any, defined: Any, last_epoch: int,
                  checked: list[int]) -> Callable[[int, Pattern, bool], None]:
    """``on_pattern`` for :func:`rank_loop`: the result against the collective's meaning at the
    first epoch, the first of every new pattern and the last; each checked epoch in ``checked``."""

    def check(epoch: int, p: Pattern, changed: bool) -> None:
        if not (changed or epoch == last_epoch):
            return
        got = buffer[defined]
        if not torch.equal(got, want):
            bad = int(torch.nonzero(got != want)[0, 0])
            raise ReactError(f"epoch {epoch}, {p.name or p.kind}: wrong result at element "
                             f"{int(defined[bad])}: got {got[bad].item()!r}, expected "
                             f"{want[bad].item()!r}")
        checked.append(epoch)

    return check


def _write_record(spec: Mapping[str, Any], rank: int, record: dict[str, Any]) -> None:
    path = os.path.join(str(spec["out_dir"]), f"rank{rank}.json")
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    os.replace(path + ".tmp", path)


def run_gpu_rank(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The rank's whole life (module docstring); returns the record it wrote."""
    from react.backends.gpu.cuda import close_gpu_world, init_gpu_world

    pattern, mode, timeout_s = _check_spec(spec)
    world = init_gpu_world(timeout_s=timeout_s, device_index=_device(spec))
    rank = world.rank
    if world.world_size != pattern.n:
        close_gpu_world()
        raise ReactError(f"the pattern has {pattern.n} ranks but WORLD_SIZE is "
                         f"{world.world_size}")
    import torch

    record: dict[str, Any] = {"rank": rank, "mode": mode, "device": world.device_index,
                              "epochs": [], "checks": [], "post_s": 0.0}
    client = None
    coll: Any = None
    failed = True
    try:
        start, want, defined = _rank_buffers(torch, pattern, spec, rank)
        buffer = torch.empty_like(start)
        coll = _collective(torch, rank, mode, spec)
        if spec.get("tuner") is not None:
            from react.runtime.tuner import TunerClient

            host, port = spec["tuner"]
            client = TunerClient(rank, (str(host), int(port)), timeout_s=timeout_s)

        def post(p: Pattern, epoch: int) -> Any:
            t0 = time.perf_counter()
            buffer.copy_(start)
            handle = coll.run(p, buffer, epoch)
            record["post_s"] += time.perf_counter() - t0
            return handle

        # warm-up, untimed and unreported: NCCL connects its peers and the plan, buffers and
        # events are made on the first calls (the switch benchmark measures that cost)
        for _ in range(int(spec.get("warmup_epochs", 0))):
            buffer.copy_(start)
            coll.run(pattern, buffer, 0).timings()
        torch.cuda.synchronize()
        record["post_s"] = 0.0
        t0 = time.perf_counter()
        rank_loop(pattern, int(spec["epochs"]), post, client=client,
                  report_late=int(spec["apply_delay_epochs"]) >= 1 or client is None,
                  gap_s=float(spec["compute_gap_s"]),
                  on_timings=lambda t: record["epochs"].append([t.start_s, t.end_s]),
                  on_pattern=_result_check(torch, buffer, want, defined,
                                           int(spec["epochs"]) - 1, record["checks"]))
        torch.cuda.synchronize()
        record["loop_wall_s"] = time.perf_counter() - t0
        failed = False
    finally:
        if client is not None:
            client.close()
            record["tuner"] = {"waited_epochs": client.waited_epochs,
                               "waited_s": client.waited_s, "report_s": client.report_s,
                               "failure": client.failure}
        if not failed:  # a failed rank skips the teardown: it waits for NCCL work whose peer
            if coll is not None and hasattr(coll, "close"):  # may wait for us (main() exits)
                coll.close()
            close_gpu_world()
    _write_record(spec, rank, record)
    return record


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m react.backends.gpu.rank JOB.json (rank from the environment, "
              "as torchrun sets it)", file=sys.stderr)
        return 2
    rank = os.environ.get("RANK", "?")
    try:
        with open(args[0], encoding="utf-8") as fh:
            spec = json.load(fh)
        run_gpu_rank(spec)
    except (ReactError, OSError, ValueError, KeyError, RuntimeError) as exc:
        text = str(exc).strip().splitlines()
        print(f"rank {rank}: {type(exc).__name__}: {text[0] if text else repr(exc)}",
              file=sys.stderr, flush=True)
        # end now: NCCL's teardown at interpreter exit can wait forever for a peer that is
        # itself waiting for this rank's posted work (seen: a job hung until its deadline)
        sys.stdout.flush()
        os._exit(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
