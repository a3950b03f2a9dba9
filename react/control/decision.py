"""What a controller hands back after each batch: the pattern to run next, why, and what it saw.

Every policy (REACT's :class:`~react.control.controller.Controller`, the baselines of
:mod:`react.control.policies`) answers with a :class:`Decision`, so that drivers, reports, the
run page and the tuner's result file read them alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from react.control.detect import CongestionReport
from react.model.pattern import Pattern
from react.model.transforms import Swap

__all__ = ["ACTIONS", "Action", "Decision", "microseconds"]

Action = Literal["keep", "try", "revert", "settled"]

ACTIONS: tuple[Action, ...] = ("keep", "try", "revert", "settled")
"""Every action, in the order of the loop: keep the pattern, put one on trial, revert a trial,
stay settled."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What the controller decided after one batch, and why (in words).

    ``report`` is the congestion the controller detected in the batch and acted on (the
    thresholds are the job's own), so that what is shown of a decision is what it saw; None
    where it ran no detection (a trial judged and reverted, a baseline) or found no congested
    flow.
    """

    batch: int
    action: Action
    pattern: Pattern
    reason: str
    swaps: tuple[Swap, ...] = ()
    estimated_gain: float | None = None
    observed_gain: float | None = None
    mean_time_s: float = math.nan
    report: CongestionReport | None = None

    @property
    def changed(self) -> bool:
        """Whether the next batch runs a different pattern from the batch just observed."""
        return self.action in ("try", "revert")


def microseconds(seconds: float) -> str:
    """A time as decision reasons write it: ``"123.4 us"``."""
    return f"{seconds * 1e6:.1f} us"
