"""The one small interface between the REACT controller and whatever runs the collective.

A backend executes a :class:`~react.model.pattern.Pattern` for some epochs and reports, per epoch,
the collective's completion time and every flow's start and end. It never decides anything; the
controller never knows which backend it talks to (ASTRA-sim's network front-ends follow the same
separation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from react.model.observation import EpochResult
from react.model.pattern import Pattern

if TYPE_CHECKING:
    from react.control.controller import Controller, Decision


@dataclass
class JobRun:
    """What one job did: every epoch's result, the pattern each ran, every decision.

    ``info`` carries what a backend measured beyond the epochs (a real runtime's tuner overhead,
    switching cost, clock offsets); on the simulator only the switching cost charged at each
    pattern change (``"switch_cost_s"``), when one is configured.
    """

    name: str
    results: list[EpochResult] = field(default_factory=list)
    patterns: list[Pattern] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    info: dict[str, object] = field(default_factory=dict)

    def times_s(self) -> list[float]:
        return [r.collective_time_s for r in self.results]


@runtime_checkable
class Backend(Protocol):
    """What runs a collective, stepped by the driver: the simulator, ns-3.

    The driver (:func:`react.run.driver.run_jobs`) owns the closed loop: it asks for epochs with the
    pattern :class:`react.control.loop.TuningLoop` names and hands the results back to the loop.
    """

    def run_epochs(self, pattern: Pattern, epochs: int) -> list[EpochResult]:
        """Execute ``pattern`` ``epochs`` times back to back and report each execution."""
        ...

    def close(self) -> None:
        """Release whatever the backend holds (processes, namespaces, communicators)."""
        ...


@runtime_checkable
class TunedBackend(Protocol):
    """What runs a whole job by itself, closed loop included: real ranks (emulator, GPUs).

    The controller runs where the paper puts it, in RTuner on a leader rank
    (:mod:`react.runtime.tuner`), with the same :class:`react.control.loop.TuningLoop` rules as the
    stepped backends; the driver only starts the job and collects its record.
    """

    def run_job(
        self,
        name: str,
        pattern: Pattern,
        epochs: int,
        controller: Controller | None,
        on_epoch: Callable[[str, int], None] | None = None,
    ) -> JobRun:
        """Run ``epochs`` epochs from ``pattern`` (REACT on when ``controller`` is given)."""
        ...

    def close(self) -> None:
        """Release whatever the job holds; idempotent."""
        ...
