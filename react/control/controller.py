"""The REACT feedback loop (paper §5.4, Algorithm 1, Table 3) as a backend-agnostic state machine.

After every batch of ``B`` epochs the job hands the batch's observations to
:meth:`Controller.observe`, which returns a :class:`Decision`: the pattern to run next and why.
The controller never runs anything and never learns which backend produced the numbers, so the
same object drives the simulator, an emulated network or real GPUs.

One step of the loop (§5.4.1, §5.4.2):

1. If the last decision put a new pattern on trial, compare its observed mean collective time
   ``T1`` with the time ``T0`` of the pattern it came from. Keep it only if
   ``T1 * (1 + tau_r) <= T0`` (each change must earn at least ``tau_r``); otherwise revert to the
   old pattern and remember the swaps as failed *for that pattern and that congestion picture*
   (with ``failure_memory = "combinations"``: the pattern tried, and a swap only once it failed
   alone or twice).
   The reverted pattern runs one batch before the next exploration, so every trial is judged
   against a fresh measurement of its base.
2. Explore: detect congested flows (:mod:`react.control.detect`, classes by degree and flow size);
   compute the critical paths of every epoch and of the batch-mean FCTs (:mod:`react.model.critical`);
   take the congested flows on those paths (Algorithm 1: ``X = C ∩ P``) and rank the TEN vertices
   at their ends by the *evidence* that the end is the congested one: the share of that rank's
   flows in that direction (into it for the receiver, out of it for the sender) that are steady,
   then any, congested — a rank whose inbound link is congested has all its inbound flows slow,
   the healthy sender of one of them has only that one; ties go to the receiver. For each vertex
   in turn, draw candidate swaps of its rank from the pattern's
   :class:`~react.model.swapspace.SwapSpace` in priority order (position-equivalent, chunk-local,
   global; degree-lowering "green" ones first; random order within a class), never with a
   steady-congested partner nor one that failed before under this picture, and estimate each
   candidate pattern's collective time as the critical path of the FCTs the §5.4.1 model
   (:mod:`react.control.estimate`) predicts for all its flows. The search is a beam: at each depth (up
   to ``max_accepted`` swaps) ``Kt`` single swaps are estimated, split over the ``search_width``
   best patterns so far, and those no worse than their parent go on. The best pattern found is
   put on trial for the next batch if its estimate is at least ``(1 + epsilon)`` better.
3. Settling: after ``Emax`` fruitless explorations in a row (reverted, or nothing estimated to
   gain) the controller settles on its pattern and explores again when the congestion picture
   changes (the set of congested ends, compared by Jaccard similarity against
   ``picture_overlap``), when the collective time rises more than ``tau_r`` above the settled
   time, or once after ``reexplore_epochs`` quiet epochs (the paper's ``Emax x B``, against local
   optima), the wait doubling after each such look that finds nothing to keep. With
   ``unsettle_batches`` above 1, a changed picture or a risen time must last that many batches
   in a row (against other jobs' bursts, which flicker the picture batch to batch).
   ``Kt`` grows by ``trials_growth`` with every exploration; FCT history older than ``H`` epochs is
   dropped; a steady-congested rank whose congestion a kept swap resolved is never again used as
   a swap partner.

Where this differs from the paper on purpose (each with its reason and a measurement in
docs/deviations.md): the congested end is targeted by evidence (§5.4.1 ranks vertices by counts
only, which sends ties to the healthy sender); failures are remembered per congestion picture
and a settled job looks again after 30, 60, 120, ... quiet epochs (the paper clears its tabu list
and re-explores after every ``Emax`` quiet batches, which retries the same failures forever under
steady congestion);
the base pattern is re-measured after a revert; candidates are judged on the whole pattern's
estimated critical path, not on the current critical paths mapped through the swap (a swap can
make another path critical); an unseen pair is priced from its endpoints' links
(:mod:`react.control.estimate`); flows are priced at the links they share with the flows that overlap
them in time, not only with those of their step (``concurrency``; the paper's step degrees
misprice flows of two steps that run at once), and the beam search may go through steps up to
3% worse by estimate (``search_slack``).
``max_accepted`` (Algorithm 1's ``Kmax``/``Amax`` has no value in Table 3; 4 here), the growth
of ``Kt`` (+5 per exploration), and that a rank already moved in this batch is not moved again
in it are choices where the paper is silent.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np

from react.control.detect import CongestionReport, detect_congestion
from react.control.estimate import (
    CONCURRENCY_RULES,
    UNSEEN_RULES,
    FctHistory,
    FctModel,
    forget_pricing_views,
)
from react.model.critical import critical_path
from react.model.errors import ReactError
from react.model.observation import EpochResult
from react.model.pattern import Flow, Pattern
from react.model.replay import ReplayCache
from react.model.swapspace import Direction, SwapSpace
from react.model.transforms import Swap

Action = Literal["keep", "try", "revert", "revert_try", "settled"]
"""``revert_try`` (back and a new trial in one step) is no longer decided, since a reverted base is
re-measured first; it remains a valid action so that decision logs of earlier versions load."""

CONCURRENCY_MODES = (*CONCURRENCY_RULES, "checked")
"""The controller's ``concurrency`` choices: the estimate's two rules, or both (a check)."""

FAILURE_MEMORIES = ("swaps", "combinations")
"""What a failed trial excludes under its congestion picture (``ControllerConfig``)."""

End = tuple[int, str]
"""A congested end: ``(rank, "in")`` for a rank's inbound side, ``(rank, "out")`` for outbound."""


class ConfigError(ReactError, ValueError):
    """A controller parameter is out of range or unknown."""


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """REACT's parameters; defaults are the paper's Table 3 where it gives one.

    Attributes
    ----------
    batch_epochs : int
        ``B``, epochs per batch (6).
    delta1, delta2 : float
        Steady and erratic congestion thresholds of Eq. 1 and Eq. 2 (0.2, 0.15).
    trials : int
        ``Kt``, swap estimates tried per exploration (15); grows by ``trials_growth`` (5) each
        exploration so that later rounds search wider.
    epsilon : float
        Minimum estimated improvement to accept a swap (0.05).
    history_epochs : int
        ``H``, epochs of FCT history kept (60); at least two batches (a trial and its base).
    exploration_rounds : int
        ``Emax``, fruitless explorations in a row (reverted, or nothing estimated to gain) before
        settling (5).
    max_accepted : int
        Swaps accepted per exploration (Algorithm 1's bound; not given in Table 3; 4).
    revert_threshold : float
        ``tau_r``: a tried pattern must be observed at least this much faster, else revert; a
        settled job explores again when its time rises more than this (0.05).
    picture_overlap : float
        Two congestion pictures (sets of congested ends) are the same when their Jaccard
        similarity is at least this (0.5): failures are remembered per picture, and a settled
        job explores again when the picture is no longer the same. In (0, 1].
    size_aware_detection : bool
        Detection classes by degree and flow size (True) or, as Eq. 1, by degree alone.
    unseen_pairs : str
        How the estimate prices a never-observed (src, dst) pair: ``"links"`` (from its
        endpoints' observed links plus the mean path excess of the observed pairs, default),
        ``"links_least"`` (the same with the least path excess observed),
        ``"links_endpoints"`` (as ``"links"``, but where neither link is rated, as in a ring,
        no faster than the pairs seen at its ends) or ``"degree_median"`` (the paper's rule).
    concurrency : str
        Which flows the estimate takes a flow to share its sender's and receiver's links with:
        ``"schedule"`` (default), those that overlap it in time, observed and, for a candidate,
        in the schedule its predicted FCTs give (:mod:`react.control.estimate`); ``"step"``, those of its
        step in every chunk graph (the paper's "node degrees"; it misprices flows of different
        steps that run at once); or ``"checked"``: search with the step degrees and try the best
        pattern only if the overlap estimate also gives it ``epsilon`` (docs/deviations.md
        compares the three).
    failure_memory : str
        What a failed trial excludes from later explorations of its base pattern under the same
        congestion picture: ``"swaps"`` (default) each of its swaps; ``"combinations"`` the
        pattern it tried (whatever swaps lead there), and a swap on its own only once it failed
        alone or was part of two failed trials, so that one bad partner in a combination does
        not rule out a swap that pays alone, and still no swap is tried more than twice.
    search_width : int
        Patterns kept at each depth of the exploration's beam search (4): at each depth ``Kt``
        single swaps of congested ranks are estimated, split over the beam's patterns, and
        those no worse than their parent go on, up to ``max_accepted`` swaps deep (so at most
        ``Kt x max_accepted`` estimates per exploration). Width 1 is close to Algorithm 1's
        greedy walk, but still accepts estimate-neutral steps.
    search_slack : float
        How much slower by estimate than its parent a beam step may be and still go on (0.03;
        0: no slower). The overlap estimate (``concurrency = "schedule"``) rates most single
        swaps a little worse or better rather than equal, and with no slack the beam then stops
        after one level; docs/deviations.md has the measurement.
    fit_tolerance : float
        Explore only when the estimate reproduces the running pattern: when the estimated
        collective time of the pattern that ran misses the batch's observed mean time by more
        than this fraction, no estimated gain is trusted and the batch counts as fruitless
        (0, default: always explore; docs/deviations.md has the measurement).
    overestimate_tolerance : float
        Explore only when the estimate does not overprice the running pattern: when the
        estimated collective time of the pattern that ran exceeds the batch's observed mean time
        by more than this fraction, every estimated gain is inflated by as much, so none is
        trusted and the batch counts as fruitless (0, default: off). One-sided, unlike
        ``fit_tolerance``: an estimate that underprices the running pattern makes its gains
        conservative, not optimistic (docs/deviations.md has the measurement).
    unsettle_batches : int
        Batches in a row that must show a changed congestion picture (or a collective time risen
        above the settled one) before a settled job explores again (1, default: at once). Above 1
        a picture that flickers for a batch (another job's burst) leaves the job settled
        (docs/deviations.md has the measurement).
    reexplore_epochs : int
        A settled job explores once more after this many epochs (30: the paper's ``Emax x B``,
        "to ensure we are not stuck in a local optima"), then after twice as many, and so on
        while these explorations find nothing to keep; swaps that failed under the picture stay
        excluded, so each one tries something new. 0: never (settle until the picture changes).
    apply_delay_epochs : int
        Epochs a new pattern takes to reach every rank (5 in the paper's GPU prototype, §6.3;
        0 in simulation). Applied by the job driver, which keeps the old pattern meanwhile.
    seed : int
        Seeds the random choice among equally ranked swaps.
    """

    batch_epochs: int = 6
    delta1: float = 0.2
    delta2: float = 0.15
    trials: int = 15
    trials_growth: int = 5
    epsilon: float = 0.05
    history_epochs: int = 60
    exploration_rounds: int = 5
    max_accepted: int = 4
    revert_threshold: float = 0.05
    picture_overlap: float = 0.5
    size_aware_detection: bool = True
    unseen_pairs: str = "links"
    concurrency: str = "schedule"
    failure_memory: str = "swaps"
    search_width: int = 4
    search_slack: float = 0.03
    fit_tolerance: float = 0.0
    overestimate_tolerance: float = 0.0
    unsettle_batches: int = 1
    reexplore_epochs: int = 30
    apply_delay_epochs: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        positive = ("batch_epochs", "trials", "history_epochs", "exploration_rounds",
                    "max_accepted", "search_width", "unsettle_batches")
        non_negative = ("trials_growth", "reexplore_epochs", "apply_delay_epochs", "seed")
        fractions = ("delta1", "delta2", "epsilon", "revert_threshold", "search_slack",
                     "fit_tolerance", "overestimate_tolerance")
        for name in positive + non_negative:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"ControllerConfig: {name} must be an integer, got {value!r}")
            if name in positive and value < 1:
                raise ConfigError(f"ControllerConfig: {name} must be >= 1, got {value}")
            if name in non_negative and value < 0:
                raise ConfigError(f"ControllerConfig: {name} must be >= 0, got {value}")
        for name in fractions:
            value = getattr(self, name)
            if not _is_number(value) or not 0 <= value < 1:
                raise ConfigError(
                    f"ControllerConfig: {name} must be a number in [0, 1), got {value!r}"
                )
        if not _is_number(self.picture_overlap) or not 0 < self.picture_overlap <= 1:
            raise ConfigError(
                "ControllerConfig: picture_overlap must be a number in (0, 1], got "
                f"{self.picture_overlap!r}"
            )
        if not isinstance(self.size_aware_detection, bool):
            raise ConfigError(
                "ControllerConfig: size_aware_detection must be true or false, got "
                f"{self.size_aware_detection!r}"
            )
        if self.concurrency not in CONCURRENCY_MODES:
            raise ConfigError(
                f"ControllerConfig: concurrency must be one of {list(CONCURRENCY_MODES)}, got "
                f"{self.concurrency!r}"
            )
        if self.unseen_pairs not in UNSEEN_RULES:
            raise ConfigError(
                f"ControllerConfig: unseen_pairs must be one of {list(UNSEEN_RULES)}, got "
                f"{self.unseen_pairs!r}"
            )
        if self.failure_memory not in FAILURE_MEMORIES:
            raise ConfigError(
                f"ControllerConfig: failure_memory must be one of {list(FAILURE_MEMORIES)}, got "
                f"{self.failure_memory!r}"
            )
        if self.history_epochs < 2 * self.batch_epochs:
            raise ConfigError(
                f"ControllerConfig: history_epochs ({self.history_epochs}) must hold at least "
                f"two batches (2 x batch_epochs = {2 * self.batch_epochs}): a trial is estimated "
                "from its base batch and judged against it"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, where: str = "react") -> ControllerConfig:
        """Build from a scenario-file table; an unknown key is an error naming it."""
        known = {f.name for f in fields(cls)}
        for key in values:
            if key not in known:
                raise ConfigError(
                    f"{where}: unknown parameter {key!r}; expected one of {sorted(known)}"
                )
        return cls(**dict(values))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True, slots=True)
class Decision:
    """What the controller decided after one batch, and why (in words)."""

    batch: int
    action: Action
    pattern: Pattern
    reason: str
    swaps: tuple[Swap, ...] = ()
    estimated_gain: float | None = None
    observed_gain: float | None = None
    mean_time_s: float = math.nan

    @property
    def changed(self) -> bool:
        """Whether the next batch runs a different pattern from the batch just observed."""
        return self.action in ("try", "revert", "revert_try")


@dataclass(frozen=True, slots=True)
class _Trial:
    base_pattern: Pattern
    base_time_s: float
    swaps: tuple[Swap, ...]
    resolved_steady: frozenset[int]
    picture: frozenset[End]
    reexploring: _Settled | None = None
    """The settled state this trial's re-exploration left (a failure settles straight back)."""


@dataclass(frozen=True, slots=True)
class _Exploration:
    pattern: Pattern
    swaps: tuple[Swap, ...]
    estimate_before_s: float
    estimate_after_s: float
    resolved_steady: frozenset[int]


@dataclass(frozen=True, slots=True)
class _Path:
    """A pattern the exploration reached from the observed one, and how."""

    estimate_s: float
    pattern: Pattern
    swaps: tuple[Swap, ...]
    moved: frozenset[int]
    resolved: frozenset[int]


@dataclass(frozen=True, slots=True)
class _Settled:
    picture: frozenset[End]
    time_s: float
    batch: int
    """The batch it settled after; the next re-exploration is counted from here."""
    reexplorations: int
    """Re-explorations of this settled picture that found nothing to keep (doubles the wait)."""


class Controller:
    """REACT's feedback loop for one job (module docstring for the algorithm).

    Parameters
    ----------
    pattern : Pattern
        The job's initial pattern ``G0``; it must verify.
    config : ControllerConfig, optional
        Parameters (defaults: the paper's Table 3).

    Examples
    --------
    >>> from react.patterns import allreduce_double_binary_tree
    >>> ctl = Controller(allreduce_double_binary_tree(8))
    >>> ctl.config.batch_epochs
    6
    """

    _FAILURES_PER_PATTERN = 64
    _SPACES_CACHED = 64
    _SPACES_BYTES = 192 * 2**20
    """What the kept swap spaces may hold, estimated (the newest space is kept whatever its
    size): :data:`_SPACE_BYTES_PER_FLOW` per flow of their patterns and
    :data:`_REPLAY_BYTES_PER_ENTRY` per entry of the chunk-graph replays they hold. Counting
    flows alone let 64 spaces of a 240-rank recursive-doubling AllGather (1,120 flows, but one
    replay of ~85 MiB each) fill 4.6 GB. A space dropped is built again when needed, with the
    same answers."""
    _SPACE_BYTES_PER_FLOW = 350
    _REPLAY_BYTES_PER_ENTRY = 200
    """Measured with ``tracemalloc`` after three ranks' swaps: a 240-rank RD AllGather's replay,
    85 MiB for 518,400 entries (164 bytes each); one of a 128-rank one's two, 22 MiB for 57,344
    (380 each). Set for the large replays the bound is there for."""
    _REPLAYS_SHARED_ENTRIES = 2**19
    """Entries of the replays shared between spaces (:class:`react.model.replay.ReplayCache`),
    about 100 MiB, beyond those the kept spaces hold."""

    def __init__(self, pattern: Pattern, config: ControllerConfig | None = None) -> None:
        self.config = config or ControllerConfig()
        self.pattern = pattern
        self.decisions: list[Decision] = []
        checked = self.config.concurrency == "checked"
        self._history = FctHistory(self.config.history_epochs, unseen=self.config.unseen_pairs,
                                   concurrency="step" if checked else self.config.concurrency)
        self._check = (FctHistory(self.config.history_epochs, unseen=self.config.unseen_pairs,
                                  concurrency="schedule") if checked else None)
        self._rng = np.random.default_rng(self.config.seed)
        self._spaces: OrderedDict[tuple[Flow, ...], SwapSpace] = OrderedDict()
        self._replays = ReplayCache(4 * self._SPACES_CACHED, self._REPLAYS_SHARED_ENTRIES)
        self._space(pattern, check=True)
        self._trial: _Trial | None = None
        # Per base pattern: (picture, swaps, flows of the pattern tried) of each failed trial.
        self._failed: dict[tuple[Flow, ...],
                           list[tuple[frozenset[End], frozenset[Swap], tuple[Flow, ...]]]] = {}
        self._excluded: set[int] = set()
        self._explorations = 0
        self._fruitless = 0
        self._settled: _Settled | None = None
        self._unsettled_batches = 0  # batches in a row a settled job saw a reason to explore
        self._reexploring: _Settled | None = None
        self._times: dict[tuple[Flow, ...], deque[tuple[int, float]]] = {}
        self._round: list[tuple[float, Pattern, tuple[Swap, ...]]] = []

    # -- the loop ------------------------------------------------------------------------------
    def observe(self, batch: Sequence[EpochResult]) -> Decision:
        """Digest one batch run with :attr:`pattern`; return the decision for the next batch."""
        cfg = self.config
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

        if self._trial is not None:
            trial, self._trial = self._trial, None
            observed_gain = trial.base_time_s / mean_time - 1.0
            what = ", ".join(s.describe() for s in trial.swaps)
            if mean_time * (1.0 + cfg.revert_threshold) > trial.base_time_s:
                tried = self.pattern
                self._remember_failure(trial, tried)
                self._round.append((mean_time, tried, trial.swaps))
                self.pattern = trial.base_pattern
                notes.append(
                    f"reverted {what}: observed {_us(mean_time)} vs {_us(trial.base_time_s)} "
                    f"before ({observed_gain:+.1%}, needed at least {cfg.revert_threshold:+.0%})"
                )
                self._reexploring = trial.reexploring
                self._count_fruitless(notes, trial.picture, trial.base_time_s)
                # Settling may pick the pattern just tried, which then simply stays.
                action: Action = "keep" if self.pattern == tried else "revert"
                return self._decide(index, action, notes, mean_time, observed_gain)
            self._fruitless = 0
            self._round.clear()
            self._excluded |= trial.resolved_steady
            notes.append(
                f"kept {what}: observed {_us(mean_time)} vs {_us(trial.base_time_s)} before "
                f"({observed_gain:+.1%})"
            )

        report = self._detect(self.pattern, batch)
        picture = _picture(self.pattern, report)
        self._reexploring = None
        if self._settled is not None:
            settled = self._settled
            why = self._unsettle_reason(picture, mean_time)
            self._unsettled_batches = 0 if why is None else self._unsettled_batches + 1
            if why is not None and self._unsettled_batches < cfg.unsettle_batches:
                notes.append(f"settled still: {why}, {self._unsettled_batches} of "
                             f"{cfg.unsettle_batches} batches in a row")
                return self._decide(index, "settled", notes, mean_time, observed_gain)
            if why is None and not self._reexplore_due(settled, index):
                notes.append("settled: the congestion picture and the collective time are as "
                             "when it settled")
                return self._decide(index, "settled", notes, mean_time, observed_gain)
            self._settled = None
            self._unsettled_batches = 0
            if why is None:  # a periodic look for a better pattern, same picture
                self._reexploring = settled
                notes.append(f"settled for {(index - settled.batch) * cfg.batch_epochs} epochs: "
                             "exploring once more")
            else:
                self._fruitless = 0
                notes.append(f"{why}: exploring again")

        found = self._explore(self.pattern, batch, report, notes)
        if found is None:
            if report.congested or self._reexploring is not None:
                self._count_fruitless(notes, picture, mean_time)
            return self._decide(index, "keep", notes, mean_time, observed_gain)
        base_time = self._recent_time(index, self.pattern)
        self._trial = _Trial(self.pattern, base_time, found.swaps, found.resolved_steady, picture,
                             self._reexploring)
        self.pattern = found.pattern
        decision = Decision(
            batch=index, action="try", pattern=found.pattern, reason="; ".join(notes),
            swaps=found.swaps,
            estimated_gain=found.estimate_before_s / found.estimate_after_s - 1.0,
            observed_gain=observed_gain, mean_time_s=mean_time,
        )
        self.decisions.append(decision)
        return decision

    @property
    def settled(self) -> bool:
        """Whether the controller has settled (explores again only when congestion changes)."""
        return self._settled is not None

    # -- pieces --------------------------------------------------------------------------------
    def _decide(self, index: int, action: Action, notes: list[str], mean_time: float,
                observed_gain: float | None) -> Decision:
        decision = Decision(
            batch=index, action=action, pattern=self.pattern, reason="; ".join(notes),
            observed_gain=observed_gain, mean_time_s=mean_time,
        )
        self.decisions.append(decision)
        return decision

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
        if len(self._times) > self._SPACES_CACHED:
            stale = [k for k, v in self._times.items() if not v or v[-1][0] <= horizon]
            for key in stale:
                del self._times[key]

    def _recent_time(self, index: int, pattern: Pattern) -> float:
        """Mean collective time of ``pattern`` over its batches in the last ``H`` epochs.

        A trial is judged against this, not against one batch: under ECMP a pattern's batch
        means vary by several percent, and one lucky or unlucky base batch decides the trial.
        """
        times = self._times[pattern.flows]
        return float(np.mean([t for _i, t in times]))

    def _count_fruitless(self, notes: list[str], picture: frozenset[End], time_s: float) -> None:
        """One more fruitless exploration; settle after ``Emax`` of them in a row.

        Settling picks the best pattern measured in the round: a trial that was faster than its
        base by less than ``tau_r`` was reverted, but if it is the fastest pattern seen, keeping
        it costs nothing and earns its gain for as long as the picture lasts.
        """
        self._fruitless += 1
        again = self._reexploring
        if again is not None:  # a re-exploration that found nothing: settle straight back
            self._reexploring = None
            self._settled = _Settled(again.picture, again.time_s, len(self.decisions),
                                     again.reexplorations + 1)
            notes.append("nothing better: settled again, next look after "
                         f"{self._reexplore_wait(self._settled)} epochs")
            return
        if self._fruitless < self.config.exploration_rounds:
            return
        best = min(self._round, key=lambda t: t[0], default=None)
        if best is not None and best[0] < time_s:
            best_time, best_pattern, swaps = best
            self.pattern = best_pattern
            notes.append(
                f"settling on the fastest pattern of this round "
                f"({', '.join(s.describe() for s in swaps)}: observed {_us(best_time)} vs "
                f"{_us(time_s)})"
            )
            time_s = best_time
        self._round.clear()
        self._settled = _Settled(picture, time_s, len(self.decisions), 0)
        notes.append(
            f"{self._fruitless} explorations in a row did not pay off: settling until the "
            "congestion picture changes"
            + (f" (or for {self._reexplore_wait(self._settled)} epochs)"
               if self.config.reexplore_epochs else "")
        )

    def _reexplore_wait(self, settled: _Settled) -> int:
        """Epochs a settled job waits before exploring once more: doubles with each miss."""
        return self.config.reexplore_epochs * 2 ** settled.reexplorations

    def _reexplore_due(self, settled: _Settled, index: int) -> bool:
        if not self.config.reexplore_epochs:
            return False
        waited = (index - settled.batch) * self.config.batch_epochs
        return waited >= self._reexplore_wait(settled)

    def _unsettle_reason(self, picture: frozenset[End], mean_time: float) -> str | None:
        settled = self._settled
        assert settled is not None
        if not _same_picture(picture, settled.picture, self.config.picture_overlap):
            return (f"the congestion picture changed ({_describe_picture(settled.picture)} -> "
                    f"{_describe_picture(picture)})")
        if mean_time > settled.time_s * (1.0 + self.config.revert_threshold):
            return (f"the collective time rose to {_us(mean_time)} from {_us(settled.time_s)} "
                    "when it settled")
        return None

    def _remember_failure(self, trial: _Trial, tried: Pattern) -> None:
        failures = self._failed.setdefault(trial.base_pattern.flows, [])
        failures.append((trial.picture, frozenset(trial.swaps), tried.flows))
        del failures[:-self._FAILURES_PER_PATTERN]

    def _failed_under(self, pattern: Pattern, picture: frozenset[End]
                      ) -> tuple[set[Swap], set[tuple[Flow, ...]]]:
        """What failed trials on ``pattern`` under a picture the same as ``picture`` exclude:
        swaps, and (``failure_memory = "combinations"``) the patterns they tried."""
        overlap = self.config.picture_overlap
        failures = [(swaps, tried) for seen, swaps, tried in self._failed.get(pattern.flows, ())
                    if _same_picture(seen, picture, overlap)]
        if self.config.failure_memory == "swaps":
            return {swap for swaps, _tried in failures for swap in swaps}, set()
        strikes: Counter[Swap] = Counter(swap for swaps, _tried in failures for swap in swaps)
        alone = {swap for swaps, _tried in failures if len(swaps) == 1 for swap in swaps}
        return ({swap for swap, n in strikes.items() if n >= 2} | alone,
                {tried for _swaps, tried in failures})

    def swap_space(self, pattern: Pattern) -> SwapSpace:
        """The (cached) swap space of ``pattern``; its ``build_all()`` precomputes all ranks."""
        return self._space(pattern)

    def _space(self, pattern: Pattern, *, check: bool = False) -> SwapSpace:
        key = pattern.flows
        space = self._spaces.get(key)
        if space is None:
            space = SwapSpace(pattern, check=check, replays=self._replays)
            self._spaces[key] = space
            held = sum(map(self._space_bytes, self._spaces.values()))
            while len(self._spaces) > 1 and (len(self._spaces) > self._SPACES_CACHED
                                             or held > self._SPACES_BYTES):
                held -= self._space_bytes(self._spaces.popitem(last=False)[1])
        else:
            self._spaces.move_to_end(key)
        return space

    def _space_bytes(self, space: SwapSpace) -> int:
        return (self._SPACE_BYTES_PER_FLOW * len(space.pattern.flows)
                + self._REPLAY_BYTES_PER_ENTRY * space.replay_entries())

    def _explore(
        self, pattern: Pattern, batch: tuple[EpochResult, ...], report: CongestionReport,
        notes: list[str],
    ) -> _Exploration | None:
        """Algorithm 1 on ``pattern`` with ``batch``'s observations; None if nothing helps."""
        cfg = self.config
        if not report.congested:
            notes.append("no congestion detected")
            return None
        fcts = np.array([[t.fct_s for t in r.flows] for r in batch])
        paths = [critical_path(pattern, row).flows for row in fcts]
        paths.append(critical_path(pattern, fcts.mean(axis=0)).flows)
        on_path = {i for p in paths for i in p}
        worst = sorted(report.flows, key=lambda c: (c.kind != "steady", c.p90_bps))[0]
        notes.append(f"{len(report.flows)} congested flow(s), e.g. {worst.describe()}")
        vertices = _rank_vertices(pattern, report, on_path)
        if not vertices:
            notes.append("none of them is on a critical path")
            return None
        self._explorations += 1
        budget = cfg.trials + cfg.trials_growth * (self._explorations - 1)
        model = self._history.model()
        message = batch[0].message_bytes
        before = _estimated_time(model, pattern, message)
        if cfg.fit_tolerance > 0 or cfg.overestimate_tolerance > 0:
            observed = float(np.mean([r.collective_time_s for r in batch]))
            miss = before / observed - 1.0
            if cfg.fit_tolerance > 0 and abs(miss) > cfg.fit_tolerance:
                notes.append(
                    f"the estimate of the running pattern, {_us(before)}, misses its observed "
                    f"{_us(observed)} by {miss:+.0%} (more than {cfg.fit_tolerance:.0%}): no "
                    "estimated gain is trusted")
                return None
            if cfg.overestimate_tolerance > 0 and miss > cfg.overestimate_tolerance:
                notes.append(
                    f"the estimate of the running pattern, {_us(before)}, is {miss:.0%} above "
                    f"its observed {_us(observed)} (more than "
                    f"{cfg.overestimate_tolerance:.0%}), which would inflate every estimated "
                    "gain: none is trusted")
                return None
        blocked = self._excluded | report.steady_inbound | report.steady_outbound
        failed, failed_patterns = self._failed_under(pattern, _picture(pattern, report))
        steady = report.steady_inbound | report.steady_outbound
        start = _Path(before, pattern, (), frozenset(), frozenset())
        best, beam, trials = start, [start], 0
        seen = {pattern.flows, *failed_patterns}
        for _level in range(cfg.max_accepted):
            children: list[_Path] = []
            share = -(-budget // len(beam))  # Kt estimates per level, split over the beam
            for parent in beam:
                trials += self._expand(parent, vertices, share, blocked, failed, steady, model,
                                       message, seen, children)
            if not children:
                break
            children.sort(key=lambda c: c.estimate_s)
            beam = children[: cfg.search_width]
            if beam[0].estimate_s < best.estimate_s:
                best = beam[0]
        if best.estimate_s * (1.0 + cfg.epsilon) > before:
            notes.append(f"no swaps are estimated to gain {cfg.epsilon:.0%} ({trials} tried)")
            return None
        if self._check is not None:
            check = self._check.model()
            then, now = (_estimated_time(check, best.pattern, message),
                         _estimated_time(check, pattern, message))
            if then * (1.0 + cfg.epsilon) > now:
                notes.append(
                    f"{' + '.join(s.describe() for s in best.swaps)}: estimated {_us(before)} -> "
                    f"{_us(best.estimate_s)}, but {_us(now)} -> {_us(then)} with the flows "
                    "sharing links as they overlap in time: not tried")
                return None
        notes.append(
            f"{' + '.join(s.describe() for s in best.swaps)}: estimated collective time "
            f"{_us(before)} -> {_us(best.estimate_s)} ({trials} swap(s) estimated)"
        )
        return _Exploration(best.pattern, best.swaps, before, best.estimate_s, best.resolved)

    def _expand(
        self, parent: _Path, vertices: Sequence[_Vertex], budget: int, blocked: set[int],
        failed: set[Swap], steady: frozenset[int], model: FctModel, message: float,
        seen: set[tuple[Flow, ...]], children: list[_Path],
    ) -> int:
        """Estimate up to ``budget`` single swaps from ``parent``; keep those no worse than it.

        A swap joins ``children`` when its estimate is at most the parent's (plus
        ``search_slack``): a step that only keeps the estimate level can open the way to a gain
        two swaps away (two congested ranks on parallel critical paths: moving either alone
        shortens nothing). Returns the number of estimates made.
        """
        trials = 0
        space = self._space(parent.pattern)
        for vertex in vertices:
            rank = vertex.rank
            if rank in parent.moved:
                continue
            classes = space.candidate_classes(
                rank, graph=vertex.graph, step=vertex.flow_step, direction=vertex.direction
            )
            candidates = self._shuffled(
                [s for s in group
                 if _partner(s, rank) not in blocked and _partner(s, rank) not in parent.moved
                 and s not in failed]
                for group in classes
            )
            for swap in candidates:
                if trials >= budget:
                    return trials
                candidate = swap.apply(parent.pattern)
                if candidate.flows in seen:
                    continue
                seen.add(candidate.flows)
                trials += 1
                estimate = _estimated_time(model, candidate, message)
                forget_pricing_views(candidate)  # memory: a level's candidates are kept
                if estimate <= parent.estimate_s * (1.0 + self.config.search_slack):
                    children.append(_Path(
                        estimate, candidate, (*parent.swaps, swap),
                        parent.moved | {swap.x, swap.y},
                        parent.resolved | ({rank} & steady),
                    ))
        return trials

    def _shuffled(self, classes: Iterable[list[Swap]]) -> list[Swap]:
        """Keep the priority classes in order; shuffle inside each (the paper picks at random)."""
        out: list[Swap] = []
        for group in classes:
            out.extend(group[i] for i in self._rng.permutation(len(group)))
        return out


@dataclass(frozen=True, slots=True)
class _Vertex:
    rank: int
    direction: Direction
    graph: int
    flow_step: int


def _end_evidence(pattern: Pattern, report: CongestionReport) -> dict[End, tuple[float, float]]:
    """For every end of a congested flow: (share of steady, share of any congested) of its flows.

    The share is over all the rank's flows in that direction in the whole pattern, so an end
    whose link is congested scores near 1 and the healthy other end of one slow flow scores low.
    """
    total: dict[End, int] = {}
    for f in pattern.flows:
        for end in ((f.dst, "in"), (f.src, "out")):
            total[end] = total.get(end, 0) + 1
    steady: dict[End, int] = {}
    anyc: dict[End, int] = {}
    for c in report.flows:
        for end in ((c.flow.dst, "in"), (c.flow.src, "out")):
            anyc[end] = anyc.get(end, 0) + 1
            steady[end] = steady.get(end, 0) + (c.kind == "steady")
    return {end: (steady[end] / total[end], anyc[end] / total[end]) for end in anyc}


def _picture(pattern: Pattern, report: CongestionReport) -> frozenset[End]:
    """The congestion picture: the end each steady-congested flow is blamed on (ties: receiver).

    Erratic flows count only when no flow is steady congested: ECMP re-hashes them every epoch,
    so the ends they touch change from batch to batch while the congestion stays where it was.
    """
    evidence = _end_evidence(pattern, report)
    blamed = set()
    for c in report.steady() or report.flows:
        receiver, sender = (c.flow.dst, "in"), (c.flow.src, "out")
        blamed.add(sender if evidence[sender] > evidence[receiver] else receiver)
    return frozenset(blamed)


def _same_picture(a: frozenset[End], b: frozenset[End], overlap: float) -> bool:
    if not a and not b:
        return True
    return len(a & b) / len(a | b) >= overlap


def _describe_picture(picture: frozenset[End]) -> str:
    if not picture:
        return "no congestion"
    return ", ".join(f"{rank} {side}bound" for rank, side in sorted(picture))


def _rank_vertices(
    pattern: Pattern, report: CongestionReport, on_path: set[int]
) -> list[_Vertex]:
    """TEN vertices at the ends of congested flows on a critical path, likeliest culprit first.

    Algorithm 1 takes ``X = C ∩ P``; each such flow contributes its receiver vertex
    ``(t, dst)`` and its sender vertex ``(t - 1, src)``. They are ordered by the evidence of
    their end (:func:`_end_evidence`: steady share, then any share), then receivers first, then
    by how many congested flows on a critical path touch them, then by (step, rank).
    """
    evidence = _end_evidence(pattern, report)
    touched: dict[tuple[int, int, str], list[Any]] = {}
    for c in report.flows:
        f = c.flow
        if pattern.flow_index(f) not in on_path:
            continue
        graph = pattern.chunk_graph_of_flow(f)
        for rank, side, step in ((f.dst, "in", f.step), (f.src, "out", f.step - 1)):
            entry = touched.setdefault((step, rank, side), [0, graph, f.step])
            entry[0] += 1
    ranked = sorted(
        touched.items(),
        key=lambda kv: (
            -evidence[(kv[0][1], kv[0][2])][0], -evidence[(kv[0][1], kv[0][2])][1],
            kv[0][2] != "in", -kv[1][0], kv[0][0], kv[0][1],
        ),
    )
    return [_Vertex(rank, side, graph, flow_step)  # type: ignore[arg-type]
            for (_step, rank, side), (_count, graph, flow_step) in ranked]


def _partner(swap: Swap, rank: int) -> int:
    return swap.y if swap.x == rank else swap.x


def _estimated_time(model: FctModel, pattern: Pattern, message_bytes: float) -> float:
    """The collective time the model predicts: the critical path over all predicted FCTs."""
    return critical_path(pattern, model.pattern_fcts(pattern, message_bytes)).length_s


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us"
