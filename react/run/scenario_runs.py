"""Running a scenario on its backend: its jobs built, run by the driver, released after.

:func:`open_jobs` builds a scenario's jobs on its backend (:mod:`react.run.worlds`);
:func:`run_scenario` runs them and returns each job's record; :func:`compare_scenario` runs the
same scenario twice, without and with REACT, on identical seeds (same background, same ECMP
hashes, same per-epoch port choices), so the two columns of a table differ only by REACT. The
file format and its records are :mod:`react.run.scenario`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from flowsim.errors import FlowsimError
from react.control.backend import JobRun
from react.run.scenario import BACKENDS, Scenario, ScenarioError

__all__ = ["Comparison", "compare_scenario", "forget_flow_records", "open_jobs", "run_scenario"]


@contextmanager
def open_jobs(scenario: Scenario, *, react: bool | None = None) -> Iterator[list[Any]]:
    """The scenario's jobs built on its backend, ready for :func:`react.run.driver.run_jobs`.

    ``react`` overrides every job's on/off switch (None: as the file says). Whatever the backend
    holds (an emulated network, processes) is released when the block exits, however it exits.
    Everything random is seeded from the scenario, so on the simulator two builds run
    identically up to the controllers' decisions.
    """
    if scenario.backend not in BACKENDS:  # a Scenario built by hand
        raise ScenarioError(
            f"backend {scenario.backend!r} does not exist; expected one of {', '.join(BACKENDS)}"
        )
    from react.run.worlds import world_of

    with world_of(scenario.backend)(scenario, react=react) as jobs:
        yield jobs


def run_scenario(
    scenario: Scenario,
    *,
    react: bool | None = None,
    on_epoch: Callable[[str, int], None] | None = None,
) -> dict[str, JobRun]:
    """Run the scenario on its backend; return each job's record by name.

    Parameters
    ----------
    scenario : Scenario
    react : bool, optional
        True or False switches REACT on or off for every job; None keeps each job's setting.
    on_epoch : callable, optional
        ``on_epoch(job_name, epoch)`` after every epoch of every job (progress bars).
    """
    from react.run.driver import run_jobs

    try:
        with open_jobs(scenario, react=react) as jobs:
            forget_flow_records(jobs)
            keep = scenario.backend == "sim" and scenario.sim.after_epochs == "continue"
            return run_jobs(jobs, on_epoch=on_epoch, keep_running=keep)
    except FlowsimError as exc:  # e.g. a background source timed before the start
        raise ScenarioError(f"{scenario.source}: {exc}") from None


def forget_flow_records(jobs: list[Any]) -> None:
    """Keep no flow records in the jobs' simulated networks, as a plain run does: nothing
    reads them once :func:`run_scenario` returns (the jobs' results carry every flow's times),
    and they are more than half of what each flow of each epoch holds (:mod:`react.run.memory`).
    A trace (:func:`react.run.trace.run_recorded`) keeps them."""
    from react.backends.sim.engine import SimBackend

    for job in jobs:
        if isinstance(job.backend, SimBackend):
            job.backend.network.keep_records = False


@dataclass(frozen=True, slots=True)
class Comparison:
    """The same scenario run without and with REACT (identical seeds and background)."""

    off: dict[str, JobRun]
    on: dict[str, JobRun]


def compare_scenario(
    scenario: Scenario, *, on_epoch: Callable[[str, int], None] | None = None
) -> Comparison:
    """Run ``scenario`` twice, REACT off for every job then on for every job.

    ``on_epoch`` receives ``(job_name, epoch)`` from both runs, so a progress bar over
    ``2 x total epochs`` fills exactly.
    """
    off = run_scenario(scenario, react=False, on_epoch=on_epoch)
    on = run_scenario(scenario, react=True, on_epoch=on_epoch)
    return Comparison(off, on)
