"""Jobs in a closed loop on the simulator: epochs, batches, controller decisions, all jobs at once.

Each :class:`Job` is a SimPy process on the shared network's clock: it runs its pattern epoch
after epoch on its :class:`~react.backends.sim.SimBackend`; with a controller it hands every
batch of ``B`` epochs run with the controller's current pattern to
:meth:`react.controller.Controller.observe` and switches to the returned pattern after
``apply_delay_epochs`` epochs (epochs run meanwhile use the old pattern and are not handed to the
controller, so every batch it sees ran one pattern only). Several jobs and background traffic
advance together in simulated time; :func:`run_jobs` returns when every job has run its epochs.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import simpy

from react.backends.base import EpochResult
from react.backends.sim import SimBackend
from react.controller import Controller, Decision
from react.errors import ReactError
from react.pattern import Pattern
from react.tuning import TuningLoop


@dataclass
class Job:
    """One collective job: where it runs, what it runs, for how long, with or without REACT."""

    name: str
    backend: SimBackend
    pattern: Pattern
    epochs: int
    controller: Controller | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.epochs, int) and self.epochs >= 1):
            raise ReactError(f"Job {self.name!r}: epochs must be a positive integer, got "
                             f"{self.epochs!r}")
        if self.controller is not None and self.controller.pattern != self.pattern:
            raise ReactError(f"Job {self.name!r}: the controller starts from another pattern")


@dataclass
class JobRun:
    """What one job did: every epoch's result, the pattern each ran, every decision."""

    name: str
    results: list[EpochResult] = field(default_factory=list)
    patterns: list[Pattern] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)

    def times_s(self) -> list[float]:
        return [r.collective_time_s for r in self.results]


def _job_process(
    job: Job, run: JobRun, on_epoch: Callable[[str, int], None] | None
) -> Generator[simpy.Event, Any, None]:
    env = job.backend.env
    loop = TuningLoop(job.pattern, job.controller)
    for epoch in range(job.epochs):
        pattern = loop.pattern_for(epoch)
        result = yield env.process(job.backend.epoch(pattern))
        run.results.append(result)
        run.patterns.append(pattern)
        if on_epoch is not None:
            on_epoch(job.name, epoch)
        decision = loop.record(epoch, result)
        if decision is not None:
            run.decisions.append(decision)


def run_jobs(
    jobs: Sequence[Job], *, on_epoch: Callable[[str, int], None] | None = None
) -> dict[str, JobRun]:
    """Run every job to its last epoch on their shared clock; return each job's record.

    Parameters
    ----------
    jobs : sequence of Job
        Jobs whose backends share one network (and so one SimPy environment).
    on_epoch : callable, optional
        Called as ``on_epoch(job_name, epoch)`` after each epoch (progress bars).
    """
    if not jobs:
        raise ReactError("run_jobs: no jobs given")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ReactError(f"run_jobs: job names must be unique, got {names}")
    env = jobs[0].backend.env
    if any(j.backend.env is not env for j in jobs):
        raise ReactError("run_jobs: all jobs must share one network (one SimPy environment)")
    runs = {j.name: JobRun(j.name) for j in jobs}
    procs = [env.process(_job_process(j, runs[j.name], on_epoch)) for j in jobs]
    env.run(until=simpy.AllOf(env, procs))
    return runs
