"""Records the engine hands out: a finished flow, and a snapshot of a running one.

Frozen, slotted dataclasses with units in field names, so that they can cross module and process
boundaries (results stores, tables, the REACT backends) without dragging the engine along.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FlowRecord", "FlowState"]


@dataclass(frozen=True, slots=True)
class FlowRecord:
    """A finished flow: what was asked, what happened, and when.

    ``end_s`` is when the last byte arrived (last byte sent plus the path's propagation latency),
    or, for a flow ended by :meth:`flowsim.network.Network.stop_flow`, the moment it was stopped
    (then ``stopped`` is true and ``sent_bytes`` may be less than ``size_bytes``, which is
    ``math.inf`` for a long-lived flow).
    """

    flow_id: int
    src: str
    dst: str
    size_bytes: float
    sent_bytes: float
    start_s: float
    end_s: float
    path: tuple[int, ...]
    port: int
    tag: str
    tenant: str
    weight: float
    stopped: bool

    @property
    def duration_s(self) -> float:
        """Flow completion time: ``end_s - start_s``."""
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class FlowState:
    """A snapshot of a running flow (from :meth:`flowsim.network.Network.active_flows`)."""

    flow_id: int
    src: str
    dst: str
    size_bytes: float
    sent_bytes: float
    rate_bps: float
    start_s: float
    path: tuple[int, ...]
    port: int
    tag: str
    tenant: str
    weight: float
