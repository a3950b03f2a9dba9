"""The one small interface between the REACT controller and whatever runs the collective.

A backend executes a :class:`~react.pattern.Pattern` for some epochs and reports, per epoch, the
collective's completion time and every flow's start and end. It never decides anything; the
controller never knows which backend it talks to (ASTRA-sim's network front-ends follow the same
separation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from react.pattern import Flow, Pattern

if TYPE_CHECKING:
    from react.controller import Controller, Decision


@dataclass(frozen=True, slots=True)
class FlowTiming:
    """One flow of one epoch as observed: the TEN edge, when it ran, how many bytes it carried.

    Times are seconds from the start of the epoch. ``end_s - start_s`` is the flow completion
    time (FCT) the controller works with (§5.2).
    """

    flow: Flow
    start_s: float
    end_s: float
    size_bytes: float

    @property
    def fct_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def throughput_bps(self) -> float:
        """Observed throughput in bits per second (size over FCT)."""
        fct = self.end_s - self.start_s
        return 8.0 * self.size_bytes / fct if fct > 0 else float("inf")


@dataclass(frozen=True, slots=True)
class EpochResult:
    """One execution of a collective: its total time and every flow's timing (in pattern order)."""

    epoch: int
    collective_time_s: float
    flows: tuple[FlowTiming, ...]
    message_bytes: float

    @property
    def algorithm_bandwidth_bps(self) -> float:
        """Message size over collective time, in bits per second (the paper's algo BW, §7.1)."""
        return 8.0 * self.message_bytes / self.collective_time_s


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

    The driver (:func:`react.jobs.run_jobs`) owns the closed loop: it asks for epochs with the
    pattern :class:`react.tuning.TuningLoop` names and hands the results back to the loop.
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
    (:mod:`react.runtime.tuner`), with the same :class:`react.tuning.TuningLoop` rules as the
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
