"""REACT's parameters (paper Table 3, plus the choices it leaves open) and their checks.

A :class:`ControllerConfig` is built from keywords or from a scenario file's ``react`` table
(:meth:`ControllerConfig.from_mapping`); every value is checked when it is built, so a bad
scenario fails before anything runs, with an error naming the parameter and the value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from react.control.estimate import CONCURRENCY_RULES, UNSEEN_RULES
from react.model.errors import ReactError

__all__ = ["CONCURRENCY_MODES", "REMOVED_OPTIONS", "ConfigError", "ControllerConfig"]

CONCURRENCY_MODES = (*CONCURRENCY_RULES, "checked")
"""The controller's ``concurrency`` choices: the estimate's two rules, or both (a check)."""

REMOVED_OPTIONS = ("failure_memory", "fit_tolerance", "unsettle_batches")
"""Options that were measured, never made the default, and then removed (their measurements
are in docs/deviations.md); a scenario that still sets one gets an error naming it."""


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
        in the schedule its predicted FCTs give (:mod:`react.control.estimate`); ``"step"``,
        those of its step in every chunk graph (the paper's "node degrees"; it misprices flows
        of different steps that run at once); or ``"checked"``: search with the step degrees
        and try the best pattern only if the overlap estimate also gives it ``epsilon``
        (docs/deviations.md compares the three).
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
    overestimate_tolerance : float
        Explore only when the estimate does not overprice the running pattern: when the
        estimated collective time of the pattern that ran exceeds the batch's observed mean time
        by more than this fraction, every estimated gain is inflated by as much, so none is
        trusted and the batch counts as fruitless (0, default: off). One-sided: an estimate
        that underprices the running pattern makes its gains conservative, not optimistic
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
    search_width: int = 4
    search_slack: float = 0.03
    overestimate_tolerance: float = 0.0
    reexplore_epochs: int = 30
    apply_delay_epochs: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        positive = ("batch_epochs", "trials", "history_epochs", "exploration_rounds",
                    "max_accepted", "search_width")
        non_negative = ("trials_growth", "reexplore_epochs", "apply_delay_epochs", "seed")
        fractions = ("delta1", "delta2", "epsilon", "revert_threshold", "search_slack",
                     "overestimate_tolerance")
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
        if self.history_epochs < 2 * self.batch_epochs:
            raise ConfigError(
                f"ControllerConfig: history_epochs ({self.history_epochs}) must hold at least "
                f"two batches (2 x batch_epochs = {2 * self.batch_epochs}): a trial is estimated "
                "from its base batch and judged against it"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, where: str = "react") -> ControllerConfig:
        """Build from a scenario-file table; an unknown or removed key is an error naming it."""
        known = {f.name for f in fields(cls)}
        for key in values:
            if key in REMOVED_OPTIONS:
                raise ConfigError(
                    f"{where}: parameter {key!r} was removed (measured, never the default: "
                    f"docs/deviations.md); expected one of {sorted(known)}"
                )
            if key not in known:
                raise ConfigError(
                    f"{where}: unknown parameter {key!r}; expected one of {sorted(known)}"
                )
        return cls(**dict(values))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
