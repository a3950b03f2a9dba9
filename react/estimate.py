"""The analytical estimate of a candidate pattern from observed FCTs (paper §5.4.1).

REACT never probes the network: it predicts how a rewritten pattern would perform from what the
current and earlier patterns observed. Each observation is reduced to a *unit cost*, seconds per
byte per unit of degree, ``fct / (bytes * degree)``, because a flow's FCT grows with the bytes it
carries and, on a fair-shared link, with the number of flows it meets at its endpoints (its
degree, :func:`react.detect.flow_degrees`). Then, for a flow of a candidate pattern:

* if its ``(src, dst)`` pair was observed in the last ``H`` epochs, its FCT is the pair's mean
  unit cost times its bytes and its new degree ("scaled as per the new node degrees and message
  sizes");
* otherwise, by default (``unseen="links"``), from what was seen of its two endpoints: every
  flow out of ``src`` crosses ``src``'s outbound link and every flow into ``dst`` crosses
  ``dst``'s inbound link, so the cheapest observed pair out of ``src`` bounds the cost of that
  link and the cheapest pair into ``dst`` bounds the other (a link is bounded only when two or
  more distinct pairs crossed it: one slow pair cannot tell its endpoint's link from its path
  through the fabric). The flow gets the larger of the bounds it has, plus the mean excess of
  observed pairs over their own link bounds (what paths through the fabric add on average). A
  rank whose inbound link is congested therefore stays expensive whichever rank sends to it,
  and moving the healthy end of a congested flow is not mistaken for a gain;
* with ``unseen="degree_median"`` (the paper's rule, and the fallback when neither endpoint's
  link is bounded): the median FCT per byte of the observed flows of the same degree,
  times its bytes ("the median completion time across all flows of same degree"); if no flow of
  that degree was seen, the median unit cost of all observations times bytes and degree. This
  rule prices every unseen pair as uncongested, which makes almost any swap that creates new
  pairs look like a gain (docs/deviations.md has the measurement).

History older than ``H`` epochs is dropped (§5.4.2), so the model follows job churn.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from react.backends.base import EpochResult
from react.detect import flow_degrees
from react.errors import ReactError
from react.pattern import Flow, Pattern

UNSEEN_RULES = ("links", "degree_median")
"""How :class:`FctModel` prices a never-observed (src, dst) pair (module docstring)."""


class _Observation(NamedTuple):
    # A NamedTuple, not a dataclass: hundreds are made per batch and tuples are cheap.
    src: int
    dst: int
    degree: int
    size_bytes: float
    fct_s: float


class FctHistory:
    """The FCT observations of the last ``history_epochs`` epochs, whatever pattern ran them."""

    def __init__(self, history_epochs: int = 60, *, unseen: str = "links") -> None:
        if not (isinstance(history_epochs, int) and history_epochs >= 1):
            raise ReactError(
                f"FctHistory: history_epochs must be a positive integer, got {history_epochs!r}"
            )
        if unseen not in UNSEEN_RULES:
            raise ReactError(f"FctHistory: unseen must be one of {UNSEEN_RULES}, got {unseen!r}")
        self._epochs: deque[tuple[_Observation, ...]] = deque(maxlen=history_epochs)
        self._model: FctModel | None = None
        self._unseen = unseen

    def add(self, pattern: Pattern, batch: Sequence[EpochResult]) -> None:
        """Record every flow of every epoch in ``batch`` (all run with ``pattern``)."""
        degrees = flow_degrees(pattern).tolist()
        for result in batch:
            self._epochs.append(
                tuple(
                    _Observation(t.flow.src, t.flow.dst, degrees[i], t.size_bytes,
                                 t.end_s - t.start_s)
                    for i, t in enumerate(result.flows)
                    if t.size_bytes > 0
                )
            )
        self._model = None

    def __len__(self) -> int:
        return len(self._epochs)

    def model(self) -> FctModel:
        """The estimator over the current history (cached until the next :meth:`add`)."""
        if self._model is None:
            self._model = FctModel([obs for epoch in self._epochs for obs in epoch],
                                   unseen=self._unseen)
        return self._model


class FctModel:
    """Predicts FCTs of flows of any pattern from a fixed set of observations.

    ``unseen`` chooses how a never-observed ``(src, dst)`` pair is priced (module docstring).
    """

    def __init__(self, observations: Sequence[_Observation], *, unseen: str = "links") -> None:
        if not observations:
            raise ReactError("FctModel: no observations yet; run at least one epoch first")
        if unseen not in UNSEEN_RULES:
            raise ReactError(
                f"FctModel: unseen must be one of {UNSEEN_RULES}, got {unseen!r}"
            )
        pair_costs: dict[tuple[int, int], list[float]] = {}
        per_degree: dict[int, list[float]] = {}
        units = []
        for obs in observations:
            unit = obs.fct_s / (obs.size_bytes * obs.degree)
            pair_costs.setdefault((obs.src, obs.dst), []).append(unit)
            per_degree.setdefault(obs.degree, []).append(obs.fct_s / obs.size_bytes)
            units.append(unit)
        # statistics, not numpy: these lists are short and numpy's per-call overhead dominates.
        self._pair_unit = {pair: statistics.fmean(v) for pair, v in pair_costs.items()}
        self._degree_per_byte = {k: float(statistics.median(v)) for k, v in per_degree.items()}
        self._median_unit = float(statistics.median(units))
        self._out_unit: dict[int, float] = {}
        self._in_unit: dict[int, float] = {}
        self._path_unit = 0.0
        if unseen == "links":
            outs: dict[int, list[float]] = {}
            ins: dict[int, list[float]] = {}
            for (src, dst), unit in self._pair_unit.items():
                outs.setdefault(src, []).append(unit)
                ins.setdefault(dst, []).append(unit)
            # A link is bounded only by two or more distinct pairs: with one, a slow pair cannot
            # tell its endpoint's link from its path through the fabric (a ring's flows).
            self._out_unit = {r: min(v) for r, v in outs.items() if len(v) >= 2}
            self._in_unit = {r: min(v) for r, v in ins.items() if len(v) >= 2}
            residuals = [
                unit - max(self._out_unit[src], self._in_unit[dst])
                for (src, dst), unit in self._pair_unit.items()
                if src in self._out_unit and dst in self._in_unit
            ]
            self._path_unit = statistics.fmean(residuals) if residuals else 0.0

    def flow_fct(self, flow: Flow, degree: int, size_bytes: float) -> float:
        """Estimated FCT of ``flow`` carrying ``size_bytes`` at degree ``degree``."""
        unit = self._pair_unit.get((flow.src, flow.dst))
        if unit is not None:
            return unit * size_bytes * degree
        links = [u for u in (self._out_unit.get(flow.src), self._in_unit.get(flow.dst))
                 if u is not None]
        if links:
            return (max(links) + self._path_unit) * size_bytes * degree
        per_byte = self._degree_per_byte.get(degree)
        if per_byte is not None:
            return per_byte * size_bytes
        return self._median_unit * size_bytes * degree

    def pattern_fcts(self, pattern: Pattern, message_bytes: float) -> np.ndarray:
        """Estimated FCT of every flow of ``pattern`` (pattern order)."""
        degrees = flow_degrees(pattern)
        return np.array(
            [
                self.flow_fct(f, int(degrees[i]), pattern.flow_bytes(f, message_bytes))
                for i, f in enumerate(pattern.flows)
            ]
        )
