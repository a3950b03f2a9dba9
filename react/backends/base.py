"""The one small interface between the REACT controller and whatever runs the collective.

A backend executes a :class:`~react.pattern.Pattern` for some epochs and reports, per epoch, the
collective's completion time and every flow's start and end. It never decides anything; the
controller never knows which backend it talks to (ASTRA-sim's network front-ends follow the same
separation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from react.pattern import Flow, Pattern


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


@runtime_checkable
class Backend(Protocol):
    """What runs a collective: the simulator, ns-3, the namespace emulator, or real GPUs."""

    def run_epochs(self, pattern: Pattern, epochs: int) -> list[EpochResult]:
        """Execute ``pattern`` ``epochs`` times back to back and report each execution."""
        ...

    def close(self) -> None:
        """Release whatever the backend holds (processes, namespaces, communicators)."""
        ...
