"""The analytical estimate of a candidate pattern from observed FCTs (paper §5.4.1).

REACT never probes the network: it predicts how a rewritten pattern would perform from what the
current and earlier patterns observed. Each observation is reduced to a *unit cost*, seconds per
byte per unit of degree, ``fct / (bytes * degree)``, because a flow's FCT grows with the bytes it
carries and, on a fair-shared link, with the number of flows it meets at its endpoints (its
degree, :func:`react.detect.flow_degrees`). Then, for a flow of a candidate pattern:

* if its ``(src, dst)`` pair was observed in the last ``H`` epochs, its FCT is the pair's mean
  unit cost times its bytes and its new degree ("scaled as per the new node degrees and message
  sizes") — and, with ``unseen="links"``, no less than its endpoints' links allow (below): a pair
  seen where its sender's fan-out was the bottleneck says nothing about its receiver's link;
* otherwise, by default (``unseen="links"``), from what was seen of its two endpoints' links.
  A link shared fairly by ``k`` of the job's flows and ``q`` competing flows gives each
  ``C / (k + q)``, so every observed flow tells how many competing flows its sender's link and
  its receiver's link carried (``C`` is the best rate the job ever saw out of or into a rank;
  each link keeps its least loaded reading over the history, and is rated only from two or more
  distinct pairs: one slow pair cannot tell its endpoint's link from its path through the
  fabric). The unseen flow gets the rate of the slower of its two links at its new degrees,
  plus the mean time per byte by which observed pairs exceeded what their links predict (what
  paths through the fabric add on average). A rank whose inbound link is congested therefore
  stays slow whichever rank sends to it, and moving the healthy end of a congested flow is not
  mistaken for a gain;
* with ``unseen="degree_median"`` (the paper's rule, and the fallback when neither endpoint's
  link is bounded): the median FCT per byte of the observed flows of the same degree,
  times its bytes ("the median completion time across all flows of same degree"); if no flow of
  that degree was seen, the median unit cost of all observations times bytes and degree. This
  rule prices every unseen pair as uncongested, which makes almost any swap that creates new
  pairs look like a gain (docs/deviations.md has the measurement).

History older than ``H`` epochs is dropped (§5.4.2), so the model follows job churn.
"""

from __future__ import annotations

import math
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
    out_degree: int = 1  # flows out of src at the flow's step (all chunk graphs)
    in_degree: int = 1  # flows into dst at the flow's step


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
        sides = _side_degrees(pattern)
        for result in batch:
            self._epochs.append(
                tuple(
                    _Observation(t.flow.src, t.flow.dst, degrees[i], t.size_bytes,
                                 t.end_s - t.start_s, *sides[i])
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
        self._capacity = 0.0
        self._out_load: dict[int, float] = {}
        self._in_load: dict[int, float] = {}
        self._path_per_byte = 0.0
        self._pair_excess: dict[tuple[int, int], float] = {}
        if unseen == "links":
            self._fit_links(observations)
        self._memo: dict[tuple[object, float], dict[tuple[object, ...], float]] = {}

    def _fit_links(self, observations: Sequence[_Observation]) -> None:
        """Each rank's outbound and inbound competing load, and the mean path excess.

        A link of capacity ``C`` shared fairly by ``k`` of the job's flows and ``q`` competing
        ones gives each flow ``C / (k + q)``; so a flow's throughput ``b`` with ``k`` of the job's
        flows on its sender's (receiver's) link says that link carried ``q = C / b - k``
        competing flows. ``C`` is the best rate the job ever got out of or into any rank. Each
        link keeps its smallest ``q`` over the history (the flow least held back elsewhere), and
        is rated only from two or more distinct pairs: with one, a slow pair cannot tell its
        endpoint's link from its path through the fabric (a ring's flows).
        """
        seen = [(obs, obs.size_bytes / obs.fct_s) for obs in observations if obs.fct_s > 0]
        if not seen:
            return
        capacity = max(max(b * obs.out_degree, b * obs.in_degree) for obs, b in seen)
        outs: dict[int, dict[int, float]] = {}
        ins: dict[int, dict[int, float]] = {}
        for obs, b in seen:
            out = outs.setdefault(obs.src, {})
            out[obs.dst] = min(out.get(obs.dst, math.inf), capacity / b - obs.out_degree)
            into = ins.setdefault(obs.dst, {})
            into[obs.src] = min(into.get(obs.src, math.inf), capacity / b - obs.in_degree)
        self._capacity = capacity
        self._out_load = {r: max(0.0, min(v.values())) for r, v in outs.items() if len(v) >= 2}
        self._in_load = {r: max(0.0, min(v.values())) for r, v in ins.items() if len(v) >= 2}
        excess: dict[tuple[int, int], list[float]] = {}
        for obs, _b in seen:
            rate = self._link_rate(obs.src, obs.dst, obs.out_degree, obs.in_degree)
            if rate is not None and obs.src in self._out_load and obs.dst in self._in_load:
                excess.setdefault((obs.src, obs.dst), []).append(
                    obs.fct_s / obs.size_bytes - 1.0 / rate)
        self._pair_excess = {pair: statistics.fmean(v) for pair, v in excess.items()}
        if excess:
            self._path_per_byte = statistics.fmean(self._pair_excess.values())

    def _link_rate(self, src: int, dst: int, out_degree: int, in_degree: int) -> float | None:
        """The rate the fitted links give a flow src -> dst at these degrees (None: unknown)."""
        rates = []
        if src in self._out_load:
            rates.append(self._capacity / (out_degree + self._out_load[src]))
        if dst in self._in_load:
            rates.append(self._capacity / (in_degree + self._in_load[dst]))
        return min(rates) if rates else None

    def flow_fct(self, flow: Flow, degree: int, size_bytes: float, *,
                 out_degree: int | None = None, in_degree: int | None = None) -> float:
        """Estimated FCT of ``flow`` carrying ``size_bytes`` at degree ``degree``.

        ``out_degree`` / ``in_degree``: flows sharing its sender's / receiver's link at its step
        (default ``degree``), used to price an unseen pair from its endpoints' links.
        """
        pair = (flow.src, flow.dst)
        if flow.src in self._out_load and flow.dst in self._in_load:
            # Both links rated: their rate at the new degrees, plus this pair's own excess over
            # its links' prediction when it was seen (its path), else the mean excess.
            rate = self._link_rate(flow.src, flow.dst, out_degree or degree,
                                   in_degree or degree)
            assert rate is not None
            return size_bytes * (1.0 / rate
                                 + self._pair_excess.get(pair, self._path_per_byte))
        unit = self._pair_unit.get(pair)
        if unit is not None:
            return unit * size_bytes * degree
        rate = self._link_rate(flow.src, flow.dst, out_degree or degree, in_degree or degree)
        if rate is not None:
            return size_bytes * (1.0 / rate + self._path_per_byte)
        per_byte = self._degree_per_byte.get(degree)
        if per_byte is not None:
            return per_byte * size_bytes
        return self._median_unit * size_bytes * degree

    def pattern_fcts(self, pattern: Pattern, message_bytes: float) -> np.ndarray:
        """Estimated FCT of every flow of ``pattern`` (pattern order)."""
        # The controller estimates many patterns that differ from each other in a few flows, so
        # each flow's estimate is kept by what it depends on (ends, degrees, bytes).
        # A flow's bytes depend on its chunks, the chunks' fractions and the message.
        degrees = pattern.degrees()
        memo = self._memo.setdefault((pattern.chunks, message_bytes), {})
        fcts = []
        for f in pattern.flows:
            out_degree = degrees[(f.step, f.src)][1]
            in_degree = degrees[(f.step, f.dst)][0]
            key = (f.src, f.dst, f.chunks, out_degree, in_degree)
            fct = memo.get(key)
            if fct is None:
                fct = memo[key] = self.flow_fct(
                    f, max(out_degree, in_degree),  # flow_degrees' class
                    pattern.flow_bytes(f, message_bytes),
                    out_degree=out_degree, in_degree=in_degree,
                )
            fcts.append(fct)
        return np.array(fcts)


def _side_degrees(pattern: Pattern) -> list[tuple[int, int]]:
    """For each flow: (flows out of its sender, flows into its receiver) at its step."""
    degrees = pattern.degrees()
    return [(degrees[(f.step, f.src)][1], degrees[(f.step, f.dst)][0]) for f in pattern.flows]
