"""Congestion detection from per-flow throughput over one batch of epochs (paper §5.2).

For each flow ``f`` of the pattern, ``b_f`` is its observed throughput (bytes over FCT) in each
epoch of the batch. Two kinds of congestion are told apart:

* steady (Eq. 1): ``p90(b_f) < (1 - delta1) * mean(b_F(k_f))`` — even the flow's good epochs are
  clearly slower than the flows of its own degree class ``k_f``;
* erratic (Eq. 2): ``std(b_f) / mean(b_f) > delta2`` — the flow is fast in some epochs and slow
  in others, as when ECMP re-hashes it onto a congested spine now and then.

Choices where the paper is terse (documented so results can be compared):

* the degree of a flow ``(t, u -> v)`` is ``max(out_degree(t, u), in_degree(t, v))`` over the whole
  pattern (all chunk graphs): the number of flows it shares its endpoints' links with at that
  step, which is what sets its fair share on an uncongested fabric. §5.2 says "the maximum of
  in-degree and out-degree" without naming the vertex; the flow's two endpoints are the natural
  reading.
* the class ``k_f`` is the degree *and the flow's size* (its fraction of the message) by default
  (``size_aware=True``): a small flow's throughput is lowered by latency and start-up, so
  comparing it with larger flows of the same degree calls healthy small flows congested (the
  paper's Eq. 1 uses the degree alone; ``size_aware=False`` restores it). docs/deviations.md
  gives the measurement.
* ``mean(b_F(k))`` averages over every flow of the class and every epoch of the batch.
* ``std`` is the population standard deviation; a flow that is both steady and erratic is
  reported as steady (the more severe kind, which the controller resolves first).
* a rank is steady congested inbound (outbound) when every flow into (out of) it is steady
  congested (§5.4.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from react.model.errors import ReactError
from react.model.observation import EpochResult
from react.model.pattern import Flow, Pattern

CongestionKind = Literal["steady", "erratic"]


@dataclass(frozen=True, slots=True)
class FlowCongestion:
    """A congested flow, how it was classified, and the numbers behind the verdict."""

    flow: Flow
    kind: CongestionKind
    degree: int
    p90_bps: float
    mean_bps: float
    class_mean_bps: float
    normalised_std: float

    def describe(self) -> str:
        f = self.flow
        return (
            f"flow {f.src}->{f.dst} at step {f.step} is {self.kind} congested: p90 "
            f"{self.p90_bps / 1e9:.1f} Gb/s vs {self.class_mean_bps / 1e9:.1f} Gb/s mean of its "
            f"class (degree {self.degree}), normalised std {self.normalised_std:.2f}"
        )


@dataclass(frozen=True, slots=True)
class CongestionReport:
    """What :func:`detect_congestion` found in one batch."""

    flows: tuple[FlowCongestion, ...]
    steady_inbound: frozenset[int]
    steady_outbound: frozenset[int]

    @property
    def congested(self) -> bool:
        return bool(self.flows)

    def steady(self) -> tuple[FlowCongestion, ...]:
        return tuple(c for c in self.flows if c.kind == "steady")

    def erratic(self) -> tuple[FlowCongestion, ...]:
        return tuple(c for c in self.flows if c.kind == "erratic")

    def by_flow(self) -> dict[Flow, FlowCongestion]:
        return {c.flow: c for c in self.flows}


def flow_degrees(pattern: Pattern) -> np.ndarray:
    """Degree class of every flow (by index), as defined in the module docstring."""
    degrees = pattern.degrees()
    return np.array(
        [max(degrees[(f.step, f.src)][1], degrees[(f.step, f.dst)][0]) for f in pattern.flows],
        dtype=np.int64,
    )


def flow_classes(pattern: Pattern, *, size_aware: bool = True) -> np.ndarray:
    """Detection class of every flow (by index): its degree, and its size when ``size_aware``.

    Classes are returned as small integers; flows share a class exactly when they have the same
    degree (and carry the same fraction of the message, to 9 significant digits).
    """
    degrees = flow_degrees(pattern)
    if not size_aware:
        return degrees
    keys = [(int(d), float(f"{pattern.flow_fraction(f):.9g}"))
            for d, f in zip(degrees, pattern.flows, strict=True)]
    ids: dict[tuple[int, float], int] = {}
    return np.array([ids.setdefault(key, len(ids)) for key in keys], dtype=np.int64)


def throughput_matrix(pattern: Pattern, batch: Sequence[EpochResult]) -> np.ndarray:
    """Throughputs in bits/s, shape ``(epochs, flows)``, flows in pattern order.

    Raises
    ------
    ReactError
        If an epoch's flows are not exactly the pattern's flows (a batch must run one pattern).
    """
    if not batch:
        raise ReactError("detect_congestion: the batch is empty, expected at least one epoch")
    check_ran(pattern, batch, "detect_congestion")
    rows = [[t.throughput_bps for t in result.flows] for result in batch]
    return np.asarray(rows, dtype=np.float64)


def check_ran(pattern: Pattern, batch: Sequence[EpochResult], where: str) -> None:
    """Raise a ReactError naming ``where`` unless every epoch of ``batch`` ran ``pattern``."""
    for result in batch:
        if len(result.flows) != len(pattern.flows) or any(
            t.flow != f for t, f in zip(result.flows, pattern.flows, strict=True)
        ):
            raise ReactError(
                f"{where}: epoch {result.epoch} did not run this pattern's flows "
                f"({len(result.flows)} observed, {len(pattern.flows)} in the pattern)"
            )


def detect_congestion(
    pattern: Pattern,
    batch: Sequence[EpochResult],
    *,
    delta1: float = 0.2,
    delta2: float = 0.15,
    size_aware: bool = True,
) -> CongestionReport:
    """Classify each flow of ``pattern`` over ``batch`` as steady, erratic or not congested.

    Parameters
    ----------
    pattern : Pattern
        The pattern every epoch of the batch ran.
    batch : sequence of EpochResult
        The last ``B`` epochs.
    delta1, delta2 : float
        Thresholds of Eq. 1 and Eq. 2 (paper defaults 0.2 and 0.15).
    size_aware : bool
        Compare a flow only with flows of its degree and size (default), or, as Eq. 1 does, with
        every flow of its degree.
    """
    b = throughput_matrix(pattern, batch)
    degree = flow_degrees(pattern)
    k = flow_classes(pattern, size_aware=size_aware)
    p90 = np.percentile(b, 90, axis=0)
    mean = b.mean(axis=0)
    nstd = np.divide(b.std(axis=0), mean, out=np.zeros_like(mean), where=mean > 0)
    class_mean = np.empty_like(mean)
    for cls in np.unique(k):
        members = k == cls
        class_mean[members] = b[:, members].mean()
    steady = p90 < (1.0 - delta1) * class_mean
    erratic = ~steady & (nstd > delta2)
    found = []
    for i, flow in enumerate(pattern.flows):
        if steady[i] or erratic[i]:
            found.append(
                FlowCongestion(
                    flow=flow,
                    kind="steady" if steady[i] else "erratic",
                    degree=int(degree[i]),
                    p90_bps=float(p90[i]),
                    mean_bps=float(mean[i]),
                    class_mean_bps=float(class_mean[i]),
                    normalised_std=float(nstd[i]),
                )
            )
    inbound: dict[int, bool] = {}
    outbound: dict[int, bool] = {}
    for i, flow in enumerate(pattern.flows):
        inbound[flow.dst] = inbound.get(flow.dst, True) and bool(steady[i])
        outbound[flow.src] = outbound.get(flow.src, True) and bool(steady[i])
    return CongestionReport(
        flows=tuple(found),
        steady_inbound=frozenset(r for r, all_steady in inbound.items() if all_steady),
        steady_outbound=frozenset(r for r, all_steady in outbound.items() if all_steady),
    )
