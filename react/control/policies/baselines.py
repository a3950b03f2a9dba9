"""Two trivial policies to measure REACT against, written against the public controller interface.

:class:`NeverChange` keeps the job's pattern forever: it is "no REACT" seen through the same
driver, so any difference from a run without a controller is the driver's, not the policy's.
:class:`RandomSwap` is what REACT would be without its detection and its estimate: after every
batch it puts one swap on trial, drawn uniformly from the viable, pruned swaps of a random rank
(:class:`react.model.swapspace.SwapSpace`), keeps it if the next batch is faster by the same
threshold REACT uses (``revert_threshold``), and reverts it otherwise. Both produce
:class:`~react.control.controller.Decision` records with REACT's actions, so their traces read
alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from react.control.controller import ControllerConfig, Decision
from react.model.errors import ReactError
from react.model.observation import EpochResult
from react.model.pattern import Pattern
from react.model.swapspace import SwapSpace
from react.model.transforms import Swap

__all__ = ["NeverChange", "RandomSwap"]


def _mean_time(batch: Sequence[EpochResult]) -> float:
    if not batch:
        raise ReactError("observe: the batch is empty, expected >= 1 epoch")
    return math.fsum(r.collective_time_s for r in batch) / len(batch)


class NeverChange:
    """The "never change" baseline: every batch, keep the pattern (module docstring)."""

    def __init__(self, pattern: Pattern, config: ControllerConfig | None = None) -> None:
        self.pattern = pattern
        self.config = config or ControllerConfig()
        self.decisions: list[Decision] = []

    def observe(self, batch: Sequence[EpochResult]) -> Decision:
        mean = _mean_time(batch)
        decision = Decision(batch=len(self.decisions), action="keep", pattern=self.pattern,
                            reason="baseline: never changes the pattern", mean_time_s=mean)
        self.decisions.append(decision)
        return decision


class RandomSwap:
    """The "random viable swap with revert" baseline (module docstring).

    Seeded by ``config.seed``; a trial is kept when ``T_trial * (1 + revert_threshold) <=
    T_before``, as REACT's rule.
    """

    def __init__(self, pattern: Pattern, config: ControllerConfig | None = None) -> None:
        self.pattern = pattern
        self.config = config or ControllerConfig()
        self.decisions: list[Decision] = []
        self._rng = np.random.default_rng(self.config.seed)
        self._trial: tuple[Pattern, float, Swap] | None = None  # (before, its time, the swap)

    def observe(self, batch: Sequence[EpochResult]) -> Decision:
        mean = _mean_time(batch)
        index = len(self.decisions)
        if self._trial is not None:
            before, before_s, swap = self._trial
            self._trial = None
            gain = before_s / mean - 1.0
            if mean * (1.0 + self.config.revert_threshold) > before_s:
                self.pattern = before
                return self._record(Decision(
                    batch=index, action="revert", pattern=before,
                    reason=f"reverted {swap.describe()}: observed {gain:+.1%}",
                    observed_gain=gain, mean_time_s=mean))
            kept = f"kept {swap.describe()} ({gain:+.1%}); "
        else:
            gain, kept = None, ""
        drawn = self._draw()
        if drawn is None:
            return self._record(Decision(batch=index, action="keep", pattern=self.pattern,
                                         reason=kept + "no viable swap", observed_gain=gain,
                                         mean_time_s=mean))
        self._trial = (self.pattern, mean, drawn)
        self.pattern = drawn.apply(self.pattern)
        return self._record(Decision(
            batch=index, action="try", pattern=self.pattern, swaps=(drawn,),
            reason=kept + f"trying a random viable swap: {drawn.describe()}",
            observed_gain=gain, mean_time_s=mean))

    def _draw(self) -> Swap | None:
        space = SwapSpace(self.pattern, check=False)
        ranks = list(self.pattern.ranks)
        for i in self._rng.permutation(len(ranks)):
            swaps = space.swaps_for(ranks[int(i)])
            if swaps:
                return swaps[int(self._rng.integers(len(swaps)))]
        return None

    def _record(self, decision: Decision) -> Decision:
        self.decisions.append(decision)
        return decision
