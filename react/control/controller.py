"""The REACT feedback loop (paper §5.4, Algorithm 1, Table 3) as a backend-agnostic state machine.

After every batch of ``B`` epochs the job hands the batch's observations to
:meth:`Controller.observe`, which returns a :class:`Decision`: the pattern to run next, why, and
the congestion it acted on. The controller never runs anything and never learns which backend
produced the numbers, so the same object drives the simulator, an emulated network or real GPUs.

One step of the loop (§5.4.1, §5.4.2), each a state of :meth:`Controller.observe`:

1. *Judge the trial.* If the last decision put a new pattern on trial, compare its observed mean
   collective time ``T1`` with the time ``T0`` of the pattern it came from. Keep it only if
   ``T1 * (1 + tau_r) <= T0`` (each change must earn at least ``tau_r``); otherwise revert to the
   old pattern and remember its swaps as failed *for that pattern and that congestion picture*
   (:mod:`react.control.failures`, :mod:`react.control.picture`). The reverted pattern runs one
   batch before the next exploration, so every trial is judged against a fresh measurement of
   its base.
2. *Detect* congested flows (:mod:`react.control.detect`, classes by degree and flow size).
3. *Settled?* A settled job stays so until the congestion picture changes, its time rises, or a
   periodic look is due (:mod:`react.control.settling`).
4. *Explore* (:mod:`react.control.explore`): the congested flows on the critical paths, their
   likelier-congested ends, a beam search over swaps of those ranks priced by the §5.4.1
   estimate (:mod:`react.control.estimate`); the best pattern goes on trial if its estimate is
   at least ``(1 + epsilon)`` better.
5. *Count* an exploration that found nothing, or whose trial was reverted, as fruitless; after
   ``Emax`` in a row settle on the fastest pattern of the round.

``Kt`` grows by ``trials_growth`` with every exploration; FCT history older than ``H`` epochs is
dropped; a steady-congested rank whose congestion a kept swap resolved is never again used as a
swap partner.

Where this differs from the paper on purpose (each with its reason and a measurement in
docs/deviations.md): the congested end is targeted by evidence (§5.4.1 ranks vertices by counts
only, which sends ties to the healthy sender); failures are remembered per congestion picture
and a settled job looks again after 30, 60, 120, ... quiet epochs (the paper clears its tabu list
and re-explores after every ``Emax`` quiet batches, which retries the same failures forever under
steady congestion); the base pattern is re-measured after a revert; candidates are judged on the
whole pattern's estimated critical path; an unseen pair is priced from its endpoints' links; flows
are priced at the links they share with the flows that overlap them in time (``concurrency``),
and the beam search may go through steps up to 3% worse by estimate (``search_slack``).
``max_accepted`` (Algorithm 1's ``Kmax``/``Amax`` has no value in Table 3; 4 here), the growth
of ``Kt`` (+5 per exploration), and that a rank already moved in this batch is not moved again
in it are choices where the paper is silent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from react.control.config import CONCURRENCY_MODES, ConfigError, ControllerConfig
from react.control.decision import Action, Decision
from react.control.decision import microseconds as _us
from react.control.detect import CongestionReport, detect_congestion
from react.control.estimate import FctHistory
from react.control.explore import Exploration, Explorer
from react.control.failures import FailureMemory
from react.control.picture import Picture, congestion_picture
from react.control.settling import Settled, Settling
from react.control.spaces import SpaceCache
from react.model.errors import ReactError
from react.model.observation import EpochResult
from react.model.pattern import Flow, Pattern
from react.model.swapspace import SwapSpace
from react.model.transforms import Swap

__all__ = ["CONCURRENCY_MODES", "Action", "ConfigError", "Controller", "ControllerConfig",
           "Decision"]


@dataclass(frozen=True, slots=True)
class _Trial:
    base_pattern: Pattern
    base_time_s: float
    swaps: tuple[Swap, ...]
    resolved_steady: frozenset[int]
    picture: Picture
    reexploring: Settled | None = None
    """The settled state this trial's re-exploration left (a failure settles straight back)."""


class Controller:
    """REACT's feedback loop for one job (module docstring for the algorithm).

    Parameters
    ----------
    pattern : Pattern
        The job's initial pattern ``G0``; it must verify.
    config : ControllerConfig, optional
        Parameters (defaults: the paper's Table 3).
    spaces : SpaceCache, optional
        Where the swap spaces are kept (default: the standard budget); a smaller budget costs
        time, never a different decision.

    Examples
    --------
    >>> from react.patterns import allreduce_double_binary_tree
    >>> ctl = Controller(allreduce_double_binary_tree(8))
    >>> ctl.config.batch_epochs
    6
    """

    _TIMED_PATTERNS = 64
    """Patterns whose batch times are kept beyond the history horizon, at most."""

    def __init__(self, pattern: Pattern, config: ControllerConfig | None = None, *,
                 spaces: SpaceCache | None = None) -> None:
        self.config = cfg = config or ControllerConfig()
        self.pattern = pattern
        self.decisions: list[Decision] = []
        checked = cfg.concurrency == "checked"
        self._history = FctHistory(cfg.history_epochs, unseen=cfg.unseen_pairs,
                                   concurrency="step" if checked else cfg.concurrency)
        self._check = (FctHistory(cfg.history_epochs, unseen=cfg.unseen_pairs,
                                  concurrency="schedule") if checked else None)
        self._spaces = spaces if spaces is not None else SpaceCache()
        self._spaces.get(pattern, check=True)
        self._explorer = Explorer(cfg, self._spaces)
        self._failures = FailureMemory(cfg.picture_overlap)
        self._settling = Settling(cfg)
        self._trial: _Trial | None = None
        self._excluded: set[int] = set()  # steady-congested ranks a kept swap resolved
        self._times: dict[tuple[Flow, ...], deque[tuple[int, float]]] = {}

    # -- the loop ------------------------------------------------------------------------------
    def observe(self, batch: Sequence[EpochResult]) -> Decision:
        """Digest one batch run with :attr:`pattern`; return the decision for the next batch."""
        batch = tuple(batch)
        if not batch:
            raise ReactError("Controller.observe: the batch is empty, expected >= 1 epoch")
        mean_time = float(np.mean([r.collective_time_s for r in batch]))
        index = len(self.decisions)
        self._history.add(self.pattern, batch)
        if self._check is not None:
            self._check.add(self.pattern, batch)
        self._record_time(index, self.pattern, mean_time)
        notes: list[str] = []
        observed_gain = None

        if self._trial is not None:  # 1. judge the trial
            trial, self._trial = self._trial, None
            observed_gain = trial.base_time_s / mean_time - 1.0
            if not self._judge(trial, mean_time, observed_gain, notes):
                return self._revert(trial, index, notes, mean_time, observed_gain)

        report = self._detect(self.pattern, batch)  # 2. detect
        picture = congestion_picture(self.pattern, report)
        seen = report if report.congested else None
        settling = self._settling
        settling.reexploring = None
        if settling.settled is not None and settling.stays(picture, mean_time, index, notes):
            return self._decide(index, "settled", notes, mean_time, observed_gain, seen)  # 3.

        found = self._explorer.explore(  # 4. explore
            self.pattern, batch, report, self._history, notes,
            partners_excluded=self._excluded, check=self._check,
            failed=self._failures.excluded(self.pattern, picture))
        if found is None:  # 5. count
            if report.congested or settling.reexploring is not None:
                self._fruitless(notes, picture, mean_time, index)
            return self._decide(index, "keep", notes, mean_time, observed_gain, seen)
        return self._try(found, picture, index, notes, mean_time, observed_gain, seen)

    @property
    def settled(self) -> bool:
        """Whether the controller has settled (explores again only when congestion changes)."""
        return self._settling.settled is not None

    def swap_space(self, pattern: Pattern) -> SwapSpace:
        """The (cached) swap space of ``pattern``; its ``build_all()`` precomputes all ranks."""
        return self._spaces.get(pattern)

    # -- the states ----------------------------------------------------------------------------
    def _judge(self, trial: _Trial, mean_time: float, observed_gain: float,
               notes: list[str]) -> bool:
        """Whether the trial earned ``tau_r``; if so it is kept (and its notes written)."""
        if mean_time * (1.0 + self.config.revert_threshold) > trial.base_time_s:
            return False
        self._settling.kept()
        self._excluded |= trial.resolved_steady
        notes.append(
            f"kept {', '.join(s.describe() for s in trial.swaps)}: observed {_us(mean_time)} vs "
            f"{_us(trial.base_time_s)} before ({observed_gain:+.1%})"
        )
        return True

    def _revert(self, trial: _Trial, index: int, notes: list[str], mean_time: float,
                observed_gain: float) -> Decision:
        """Back to the trial's base; its swaps failed under its picture (a fruitless round)."""
        tried = self.pattern
        self._failures.remember(trial.base_pattern, trial.picture, trial.swaps)
        self._settling.reverted(mean_time, tried, trial.swaps, trial.reexploring)
        self.pattern = trial.base_pattern
        notes.append(
            f"reverted {', '.join(s.describe() for s in trial.swaps)}: observed "
            f"{_us(mean_time)} vs {_us(trial.base_time_s)} before ({observed_gain:+.1%}, needed "
            f"at least {self.config.revert_threshold:+.0%})"
        )
        self._fruitless(notes, trial.picture, trial.base_time_s, index)
        # Settling may pick the pattern just tried, which then simply stays.
        action: Action = "keep" if self.pattern == tried else "revert"
        return self._decide(index, action, notes, mean_time, observed_gain, None)

    def _fruitless(self, notes: list[str], picture: Picture, time_s: float, index: int) -> None:
        switch = self._settling.fruitless(notes, picture, time_s, index)
        if switch is not None:
            self.pattern = switch

    def _try(self, found: Exploration, picture: Picture, index: int, notes: list[str],
             mean_time: float, observed_gain: float | None,
             report: CongestionReport | None) -> Decision:
        """Put ``found`` on trial for the next batch, judged against the base's recent time."""
        base_time = self._recent_time(self.pattern)
        self._trial = _Trial(self.pattern, base_time, found.swaps, found.resolved_steady, picture,
                             self._settling.reexploring)
        self.pattern = found.pattern
        decision = Decision(
            batch=index, action="try", pattern=found.pattern, reason="; ".join(notes),
            swaps=found.swaps,
            estimated_gain=found.estimate_before_s / found.estimate_after_s - 1.0,
            observed_gain=observed_gain, mean_time_s=mean_time, report=report,
        )
        self.decisions.append(decision)
        return decision

    def _decide(self, index: int, action: Action, notes: list[str], mean_time: float,
                observed_gain: float | None, report: CongestionReport | None) -> Decision:
        decision = Decision(
            batch=index, action=action, pattern=self.pattern, reason="; ".join(notes),
            observed_gain=observed_gain, mean_time_s=mean_time, report=report,
        )
        self.decisions.append(decision)
        return decision

    # -- measurements --------------------------------------------------------------------------
    def _detect(self, pattern: Pattern, batch: Sequence[EpochResult]) -> CongestionReport:
        cfg = self.config
        return detect_congestion(pattern, batch, delta1=cfg.delta1, delta2=cfg.delta2,
                                 size_aware=cfg.size_aware_detection)

    def _record_time(self, index: int, pattern: Pattern, mean_time: float) -> None:
        times = self._times.setdefault(pattern.flows, deque())
        times.append((index, mean_time))
        horizon = index - self.config.history_epochs // self.config.batch_epochs
        while times and times[0][0] <= horizon:
            times.popleft()
        if len(self._times) > self._TIMED_PATTERNS:
            stale = [k for k, v in self._times.items() if not v or v[-1][0] <= horizon]
            for key in stale:
                del self._times[key]

    def _recent_time(self, pattern: Pattern) -> float:
        """Mean collective time of ``pattern`` over its batches in the last ``H`` epochs.

        A trial is judged against this, not against one batch: under ECMP a pattern's batch
        means vary by several percent, and one lucky or unlucky base batch decides the trial.
        """
        times = self._times[pattern.flows]
        return float(np.mean([t for _i, t in times]))
