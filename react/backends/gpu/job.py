"""One job on this host's GPUs, closed loop included: a
:class:`~react.control.backend.TunedBackend`.

:meth:`GpuJob.run_job` does what the paper's prototype does (§6), as the emulator's job does on
namespaces, through the same :class:`~react.runtime.launcher.RankLauncher`: it starts RTuner's
leader (:mod:`react.runtime.tuner`, a CPU process listening on loopback TCP) with the job's
controller (REACT, or any :func:`react.control.policies.make_controller` made: the leader makes
it again from its reference), then one rank process per GPU
(:mod:`react.backends.gpu.rank`, ranks in the environment as ``torchrun`` sets them). Every rank
runs RCollective on NCCL and hands each epoch's CUDA-event flow timings to the leader without
waiting; the leader merges them, the controller decides after each batch, and every rank
switches at the epoch the leader names. When the job ends the driver gets a
:class:`~react.control.backend.JobRun` like the simulator's, plus ``info``: the tuner's cost per
batch, the ranks' waits for it, the switching cost, each rank's host posting time and each
epoch's *span* (the longest enter-to-exit of any rank, measured the same way for NCCL's own
collective).

Failure handling: the pattern is verified before anything starts; GPUs are counted before any
rank starts (fewer GPUs than ranks is refused, naming both); any rank that exits non-zero ends
the job: every other rank and the leader are killed and the error names the rank and quotes its
last line. Every NCCL operation is bounded by the process group's timeout (NCCL's watchdog), the
tuner's every wait by ``timeout_s``, and the job as a whole by a deadline, so no process
outlives :meth:`run_job`.

Several hosts: start the leader (``python -m react.runtime.tuner``) and ``torchrun -m
react.backends.gpu.rank JOB.json`` on each host by hand with one JOB.json
(:func:`~react.backends.gpu.rank.gpu_job_spec`); this class covers one host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from react.backends.gpu.cuda import MULTICAST_OFF, GpuError
from react.backends.gpu.eventclock import check_stamp
from react.backends.gpu.rank import MODES, gpu_job_spec
from react.control.backend import JobRun
from react.model.observation import EpochResult
from react.model.pattern import Pattern
from react.model.verify import verify
from react.runtime.launcher import RankLauncher
from react.runtime.schedule import chunk_bounds, flow_ranges

__all__ = ["GpuJob", "epoch_spans", "flow_bytes", "visible_gpus"]


def visible_gpus() -> int:
    """GPUs torch sees on this host; :class:`GpuError` without torch or CUDA."""
    from react.backends.gpu.cuda import import_cuda_torch

    return int(import_cuda_torch().cuda.device_count())


def flow_bytes(pattern: Pattern, message_bytes: float, dtype: str = "float32") -> list[float]:
    """Bytes each flow really carries: whole elements of ``dtype`` (what the tuner sizes by)."""
    import numpy as np

    itemsize = np.dtype(dtype).itemsize
    count = max(1, int(message_bytes) // itemsize)
    bounds = chunk_bounds(pattern, count)
    return [float(itemsize * sum(hi - lo for lo, hi in flow_ranges(f.chunks, bounds)))
            for f in pattern.flows]


def epoch_spans(records: Sequence[dict[str, Any]]) -> list[float]:
    """Each epoch's span: the longest enter-to-exit of any rank (ranks' ``rank{r}.json``)."""
    if not records:
        return []
    epochs = min(len(r["epochs"]) for r in records)
    return [max(r["epochs"][e][1] - r["epochs"][e][0] for r in records) for e in range(epochs)]


def _rank_envs(n: int) -> list[dict[str, str]]:
    """Each rank's environment, as ``torchrun`` sets it on one host (a free rendezvous port)."""
    from react.runtime.local import free_ports

    port = free_ports(1)[0]
    return [{**os.environ, **MULTICAST_OFF, "RANK": str(r), "WORLD_SIZE": str(n),
             "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": str(port)} for r in range(n)]


class GpuJob:
    """One job of rank processes on this host's GPUs (module docstring).

    Parameters
    ----------
    devices : sequence of int
        The GPU of each rank (distinct).
    message_bytes : float
        The collective's message.
    mode : str
        ``"rcollective"`` (REACT's runtime) or ``"nccl"`` (NCCL's own collective: a baseline,
        no flows, no tuner).
    tuner : bool
        Start RTuner (always, when a controller is given); without it the ranks only run and
        time their epochs (to measure what the tuner costs).
    apply_delay_epochs, timeout_s, lanes, compute_gap_s, stamp, graph
        As in :func:`~react.backends.gpu.rank.gpu_job_spec`.
    workdir : path, optional
        Where the specs, logs and results go (default: a temporary folder, removed at close).
    """

    def __init__(self, devices: Sequence[int], *, message_bytes: float,
                 mode: str = "rcollective", tuner: bool = True, apply_delay_epochs: int = 5,
                 timeout_s: float = 120.0, lanes: int = 4, compute_gap_s: float = 0.0,
                 workdir: str | os.PathLike[str] | None = None, gpus: int | None = None,
                 python: Sequence[str] | None = None, stamp: str = "post",
                 graph: bool = False) -> None:
        self.stamp = check_stamp(stamp)
        self.graph = bool(graph)
        self.devices = [int(d) for d in devices]
        if len(set(self.devices)) != len(self.devices):
            raise GpuError(f"GpuJob: two ranks on one GPU ({self.devices}); the GPU backend "
                           "runs one rank per GPU")
        if mode not in MODES:
            raise GpuError(f"GpuJob: mode must be one of {MODES}, got {mode!r}")
        if not (isinstance(message_bytes, (int, float)) and message_bytes > 0):
            raise GpuError(f"GpuJob: message_bytes must be positive, got {message_bytes!r}")
        self.message_bytes = float(message_bytes)
        self.mode = mode
        self.tuner = bool(tuner) and mode != "nccl"
        self.apply_delay_epochs = int(apply_delay_epochs)
        self.timeout_s = float(timeout_s)
        self.lanes = int(lanes)
        self.compute_gap_s = float(compute_gap_s)
        self._gpus = gpus
        self._python = list(python) if python is not None else [sys.executable]
        self._tmp = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="react-gpu-")
            workdir = self._tmp.name
        self.workdir = Path(workdir)
        self.launcher: RankLauncher | None = None
        """The running (or last) job's processes (:class:`~react.runtime.launcher.RankLauncher`)."""
        self._runs = 0

    def run_job(self, name: str, pattern: Pattern, epochs: int, controller: Any,
                on_epoch: Callable[[str, int], None] | None = None) -> JobRun:
        verify(pattern)  # refused here, before any process starts
        if controller is not None and self.mode == "nccl":
            raise GpuError(f"job {name!r}: NCCL's own collective cannot be tuned (mode 'nccl' "
                           "with a controller)")
        if len(self.devices) != pattern.n:
            raise GpuError(f"job {name!r}: {pattern.n} ranks but {len(self.devices)} GPUs "
                           f"given ({self.devices})")
        gpus = visible_gpus() if self._gpus is None else self._gpus
        if max(self.devices) >= gpus:
            raise GpuError(f"job {name!r}: {pattern.n} ranks on GPUs {self.devices}, but this "
                           f"host has {gpus} GPU(s); the GPU backend runs one rank per GPU")
        launcher = RankLauncher(name, self.workdir / f"{name}-{self._runs}", error=GpuError,
                                kill_timeout_s=10)
        spec = None
        if self.tuner or controller is not None:
            spec = launcher.tuner_spec(
                pattern, controller, message_bytes=self.message_bytes,
                apply_delay_epochs=self.apply_delay_epochs, host="127.0.0.1",
                timeout_s=self.timeout_s, flow_bytes=flow_bytes(pattern, self.message_bytes))
        self._runs += 1
        self.launcher = launcher
        tuner = None if spec is None else launcher.start_tuner(
            spec, popen=lambda argv, **kw: subprocess.Popen([*self._python, *argv[1:]], **kw),
            timeout_s=self.timeout_s)
        job_file = launcher.write_json("job.json", gpu_job_spec(
            job=name, pattern=pattern, epochs=epochs, message_bytes=self.message_bytes,
            tuner=tuner, out_dir=str(launcher.folder), devices=self.devices, mode=self.mode,
            lanes=self.lanes, timeout_s=self.timeout_s, compute_gap_s=self.compute_gap_s,
            apply_delay_epochs=self.apply_delay_epochs, stamp=self.stamp, graph=self.graph))
        launcher.start_ranks(
            [[*self._python, "-m", "react.backends.gpu.rank", str(job_file)]] * pattern.n,
            envs=_rank_envs(pattern.n))
        launcher.wait(epochs, deadline_s=self._limit_s(epochs), tuner_timeout_s=self.timeout_s,
                      on_epoch=on_epoch)
        return self._job_run(launcher, pattern, epochs, on_epoch)

    def _job_run(self, launcher: RankLauncher, pattern: Pattern, epochs: int,
                 on_epoch: Callable[[str, int], None] | None) -> JobRun:
        # what every rank recorded itself (rank{r}.json), beside what the tuner merged
        records = [json.loads((launcher.folder / f"rank{r}.json").read_text())
                   for r in range(pattern.n)]
        spans = epoch_spans(records)
        info: dict[str, Any] = {
            "mode": self.mode, "devices": self.devices, "spans_s": spans,
            "post_s": [r["post_s"] / max(1, len(r["epochs"])) for r in records],
            "loop_wall_s": [r.get("loop_wall_s") for r in records],
            "checks": [r["checks"] for r in records],
            "client": [r.get("tuner") for r in records],
        }
        if launcher.tuner is not None:
            run = launcher.result()
            run.info = {**info, **run.info, "result_file": str(launcher.result_file)}
            return run
        results = [EpochResult(e, s, (), self.message_bytes) for e, s in enumerate(spans)]
        if on_epoch is not None:
            for e in range(epochs):
                on_epoch(launcher.name, e)
        return JobRun(launcher.name, results, [pattern] * len(results), [], info=info)

    def _limit_s(self, epochs: int) -> float:
        # start-up (CUDA, NCCL, the tuner's handshake) plus a generous bound per epoch
        return 2 * self.timeout_s + epochs * (self.compute_gap_s + 0.05)

    def close(self) -> None:
        """Kill whatever of this job still runs and drop its temporary folder; idempotent."""
        if self.launcher is not None:
            self.launcher.kill()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
