"""The one job driver: every job of a run, on whatever backend, to its last epoch.

A :class:`Job` is a pattern, a backend that runs it, a number of epochs and optionally a
controller. :func:`run_jobs` drives them all at once, each the way its backend naturally runs:

- jobs on the simulator (:class:`~react.backends.sim.engine.SimBackend`) are SimPy processes on
  their shared network's clock, so several jobs and background traffic advance together in simulated
  time; each epoch's pattern comes from the job's :class:`~react.control.loop.TuningLoop`, which
  hands batches to the controller and schedules its pattern changes;
- jobs on any other stepped :class:`~react.control.backend.Backend` run in a thread each, with the
  same loop, one epoch at a time;
- jobs on a :class:`~react.control.backend.TunedBackend` (real ranks: the emulator, GPUs) run in a
  thread each; the loop runs inside the job, in RTuner on its leader rank, and the driver collects
  the record when the job ends.

The controller never knows which of these produced its observations.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import simpy

from react.backends.sim.engine import SimBackend
from react.control.backend import Backend, JobRun, TunedBackend
from react.control.controller import Controller
from react.control.loop import TuningLoop
from react.model.errors import ReactError
from react.model.pattern import Pattern

__all__ = ["Job", "JobRun", "run_jobs"]

OnEpoch = Callable[[str, int], None]


@dataclass
class Job:
    """One collective job: where it runs, what it runs, for how long, with or without REACT."""

    name: str
    backend: Backend | TunedBackend
    pattern: Pattern
    epochs: int
    controller: Controller | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.epochs, int) and self.epochs >= 1):
            raise ReactError(f"Job {self.name!r}: epochs must be a positive integer, got "
                             f"{self.epochs!r}")
        if self.controller is not None and self.controller.pattern != self.pattern:
            raise ReactError(f"Job {self.name!r}: the controller starts from another pattern")
        if not isinstance(self.backend, (Backend, TunedBackend)):
            raise ReactError(f"Job {self.name!r}: backend {type(self.backend).__name__} has "
                             "neither run_epochs (a stepped Backend) nor run_job (a TunedBackend)")


def _sim_job(job: Job, run: JobRun, on_epoch: OnEpoch | None,
             others: _Others | None = None) -> Generator[simpy.Event, Any, None]:
    backend = job.backend
    assert isinstance(backend, SimBackend)
    loop = TuningLoop(job.pattern, job.controller)
    pattern = job.pattern
    for epoch in range(job.epochs):
        pattern = loop.pattern_for(epoch)
        result = yield backend.env.process(backend.epoch(pattern))
        _record(job, run, loop, epoch, pattern, result, on_epoch)
    if backend.switch_cost_s or backend.switch_cost_epochs:
        run.info["switch_cost_s"] = list(backend.switch_costs_s)
    if others is None:
        return
    others.finished += 1
    if others.finished == others.jobs:
        others.all_done.succeed()
    extra = 0
    while not others.all_done.triggered:  # keep loading the network, recording nothing
        yield backend.env.process(backend.epoch(pattern))
        extra += 1
    run.info["epochs_after_own"] = extra


@dataclass
class _Others:
    """Shared by simulated jobs that keep running until every job has finished its epochs."""

    jobs: int
    all_done: simpy.Event
    finished: int = 0


def _stepped_job(job: Job, run: JobRun, on_epoch: OnEpoch | None) -> None:
    backend = job.backend
    assert isinstance(backend, Backend)
    loop = TuningLoop(job.pattern, job.controller)
    for epoch in range(job.epochs):
        pattern = loop.pattern_for(epoch)
        (result,) = backend.run_epochs(pattern, 1)
        _record(job, run, loop, epoch, pattern, result, on_epoch)


def _record(job: Job, run: JobRun, loop: TuningLoop, epoch: int, pattern: Pattern, result: Any,
            on_epoch: OnEpoch | None) -> None:
    run.results.append(result)
    run.patterns.append(pattern)
    if on_epoch is not None:
        on_epoch(job.name, epoch)
    decision = loop.record(epoch, result)
    if decision is not None:
        run.decisions.append(decision)


def run_jobs(jobs: Sequence[Job], *, on_epoch: OnEpoch | None = None,
             keep_running: bool = False) -> dict[str, JobRun]:
    """Run every job to its last epoch, all at once; return each job's record by name.

    Parameters
    ----------
    jobs : sequence of Job
        Simulator jobs must share one network (one SimPy environment); simulator jobs and jobs
        on real backends cannot be mixed in one call (they keep different clocks).
    on_epoch : callable, optional
        Called as ``on_epoch(job_name, epoch)`` after each epoch (progress bars); from worker
        threads for real backends.
    keep_running : bool
        Simulator jobs only: a job whose epochs are done keeps running its last pattern,
        unrecorded, until every job has finished its epochs (its ``info["epochs_after_own"]``
        counts them), so that a job with short epochs still loads the network while a job with
        long epochs is measured. Default False: each job stops after its own epochs.
    """
    if not jobs:
        raise ReactError("run_jobs: no jobs given")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ReactError(f"run_jobs: job names must be unique, got {names}")
    simulated = [j for j in jobs if isinstance(j.backend, SimBackend)]
    if simulated and len(simulated) != len(jobs):
        raise ReactError("run_jobs: simulator jobs and jobs on other backends cannot run in one "
                         "call (they keep different clocks)")
    runs = {j.name: JobRun(j.name) for j in jobs}
    if simulated:
        env = jobs[0].backend.env  # type: ignore[union-attr]
        if any(j.backend.env is not env for j in jobs):  # type: ignore[union-attr]
            raise ReactError("run_jobs: all jobs must share one network (one SimPy environment)")
        others = _Others(len(jobs), env.event()) if keep_running else None
        procs = [env.process(_sim_job(j, runs[j.name], on_epoch, others)) for j in jobs]
        env.run(until=simpy.AllOf(env, procs))
        return runs
    if keep_running:
        raise ReactError("run_jobs: keep_running applies to simulator jobs only (real ranks and "
                         "ns-3 stop after their own epochs)")
    return _run_threads(jobs, runs, on_epoch)


def _run_threads(jobs: Sequence[Job], runs: dict[str, JobRun], on_epoch: OnEpoch | None
                 ) -> dict[str, JobRun]:
    errors: list[BaseException] = []

    def body(job: Job) -> None:
        try:
            if isinstance(job.backend, TunedBackend):
                runs[job.name] = job.backend.run_job(job.name, job.pattern, job.epochs,
                                                     job.controller, on_epoch)
            else:
                _stepped_job(job, runs[job.name], on_epoch)
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    if len(jobs) == 1:
        body(jobs[0])
    else:
        threads = [threading.Thread(target=body, args=(j,), name=f"job-{j.name}", daemon=True)
                   for j in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return runs
