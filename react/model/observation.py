"""What running a collective showed: every flow's timing in one epoch, and the epoch's time.

Every backend writes these records and the whole control layer reads them, so they sit in the
model, below both: a backend never needs the controller to report, and the controller never
needs a backend to read a report.
"""

from __future__ import annotations

from dataclasses import dataclass

from react.model.pattern import Flow

__all__ = ["EpochResult", "FlowTiming"]


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
