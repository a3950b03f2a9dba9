"""Hand-made observations for the controller's tests: batches with chosen flow times, no simulator.

``fair_share_fcts`` times each flow as a fluid fair share would: every rank's inbound and
outbound link carries 100 Gb/s, divided among the pattern's flows on it at the flow's step, and
``p`` background flows share the inbound link of rank ``into``; a flow runs at the rate of the
busier of its two links. For the 8-rank double binary tree with 20 MB (10 MB per chunk, 0.8 ms
alone) that gives ``0.8 ms x share``. ``batch_of`` lays the flows out as the pattern's schedule
runs them (:func:`react.model.critical.schedule`) and repeats the epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from react.model.critical import schedule
from react.model.observation import EpochResult, FlowTiming
from react.model.pattern import Pattern
from react.patterns import allreduce_double_binary_tree

MESSAGE_BYTES = 20e6
LINK_BPS = 100e9


def fair_share_fcts(pattern: Pattern, *, into: int | None = None, p: int = 0,
                    message_bytes: float = MESSAGE_BYTES) -> list[float]:
    """Each flow's FCT at the fair share of the busier of its links (module docstring)."""
    degrees = pattern.degrees()
    fcts = []
    for f in pattern.flows:
        inbound = degrees[(f.step, f.dst)][0] + (p if f.dst == into else 0)
        outbound = degrees[(f.step, f.src)][1]
        fcts.append(pattern.flow_bytes(f, message_bytes) * 8 / LINK_BPS * max(inbound, outbound))
    return fcts


def batch_of(pattern: Pattern, fcts: Sequence[float], *, epochs: int = 6, first_epoch: int = 0,
             message_bytes: float = MESSAGE_BYTES,
             collective_time_s: float | None = None) -> list[EpochResult]:
    """``epochs`` identical epochs whose flows take ``fcts`` (pattern order), as scheduled;
    ``collective_time_s`` overrides the epochs' time (default: the schedule's end)."""
    start, end = schedule(pattern, fcts)
    timings = tuple(FlowTiming(f, float(a), float(b), pattern.flow_bytes(f, message_bytes))
                    for f, a, b in zip(pattern.flows, start, end, strict=True))
    time_s = float(end.max()) if collective_time_s is None else collective_time_s
    return [EpochResult(first_epoch + e, time_s, timings, message_bytes) for e in range(epochs)]


@pytest.fixture
def tree() -> Pattern:
    """The 8-rank double binary tree AllReduce (28 flows, 6 steps, two chunks of 10 MB)."""
    return allreduce_double_binary_tree(8)


@pytest.fixture
def congested() -> Callable[..., list[EpochResult]]:
    """``congested(pattern, into=3, p=2, scale=1.0, **batch)``: a batch of ``pattern`` with
    ``p`` background flows into rank ``into`` (every FCT times ``scale``)."""

    def make(pattern: Pattern, into: int = 3, p: int = 2, scale: float = 1.0,
             **batch: object) -> list[EpochResult]:
        fcts = [t * scale for t in fair_share_fcts(pattern, into=into, p=p)]
        return batch_of(pattern, fcts, **batch)  # type: ignore[arg-type]

    return make
