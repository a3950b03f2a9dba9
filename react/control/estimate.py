"""The analytical estimate of a candidate pattern from observed FCTs (paper §5.4.1).

REACT never probes the network: it predicts how a rewritten pattern would perform from what the
current and earlier patterns observed. Each observation is reduced to a *unit cost*, seconds per
byte per unit of degree, ``fct / (bytes * degree)``, because a flow's FCT grows with the bytes it
carries and, on a fair-shared link, with the number of flows it meets at its endpoints (its
degree, :func:`react.control.detect.flow_degrees`). Then, for a flow of a candidate pattern:

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
  mistaken for a gain. With ``unseen="links_least"`` the excess added is the least any observed
  pair showed (never below 0) instead of the mean: an unseen pair's path is unknown, and the
  mean is pulled up by the few observed paths that cross an ECMP collision or a slow link, which
  made every swap that re-routes flows look worse than it was (docs/deviations.md);
* with ``unseen="links_endpoints"``, as ``"links"``, but a pair whose links are both unrated
  (a ring: every rank sends to one rank and receives from one, so no link is seen with two
  pairs) is priced no faster than the pairs seen out of its sender and into its receiver (their
  mean unit cost, the slower of the two), instead of the degree median: a congested end stays
  congested whichever rank it meets (docs/deviations.md has the measurement);
* with ``unseen="degree_median"`` (the paper's rule, and the fallback when neither endpoint's
  link is bounded): the median FCT per byte of the observed flows of the same degree,
  times its bytes ("the median completion time across all flows of same degree"); if no flow of
  that degree was seen, the median unit cost of all observations times bytes and degree. This
  rule prices every unseen pair as uncongested, which makes almost any swap that creates new
  pairs look like a gain (docs/deviations.md has the measurement).

*Degree* above is, with ``concurrency="step"`` (the paper's "scaled as per the new node
degrees"), the number of flows out of the sender (into the receiver) at the flow's step in
every chunk graph. With ``concurrency="schedule"`` it is how many flows the link was really
divided among while the flow ran: observed from the flows' start and end times, and for a
candidate from the schedule its predicted FCTs give (flows of different steps of different chunk
graphs overlap; priced again at those overlaps, a few rounds). That mode also reads ``C`` from
the flows that ran alone on both links (a flow whose link mates were held back elsewhere gets
more than ``C / k``), and reads a slow link seen at several sharings as degraded (``C' / k``)
when that predicts its readings better than sharing with ``q`` competing flows (``C / (k +
q)``); one reading cannot tell them apart (docs/deviations.md has the measurement).

History older than ``H`` epochs is dropped (§5.4.2), so the model follows job churn.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Sequence
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from react.control.detect import check_ran, flow_degrees
from react.model.critical import ARRAY_FLOWS as _ARRAY_FLOWS
from react.model.critical import schedule
from react.model.errors import ReactError
from react.model.execution import EXECUTION_RULES
from react.model.observation import EpochResult
from react.model.pattern import Flow, Pattern

UNSEEN_RULES = ("links", "links_least", "links_endpoints", "degree_median")
"""How :class:`FctModel` prices a never-observed (src, dst) pair (module docstring)."""

CONCURRENCY_RULES = ("step", "schedule")
"""How many flows a flow is taken to share its sender's and receiver's links with (module
docstring): those of its step, or those that overlap it in time."""


class _Observation(NamedTuple):
    # A NamedTuple, not a dataclass: hundreds are made per batch and tuples are cheap.
    src: int
    dst: int
    degree: int
    size_bytes: float
    fct_s: float
    out_degree: float = 1  # flows out of src at the flow's step (all chunk graphs), or in time
    in_degree: float = 1  # flows into dst at the flow's step, or in time

    def share(self, concurrency: str) -> float:
        """The number of flows its bytes were divided among: its unit cost's divisor."""
        return self.degree if concurrency == "step" else max(self.out_degree, self.in_degree)


class FctHistory:
    """The FCT observations of the last ``history_epochs`` epochs, whatever pattern ran them."""

    def __init__(self, history_epochs: int = 60, *, unseen: str = "links",
                 concurrency: str = "step") -> None:
        if not (isinstance(history_epochs, int) and history_epochs >= 1):
            raise ReactError(
                f"FctHistory: history_epochs must be a positive integer, got {history_epochs!r}"
            )
        if unseen not in UNSEEN_RULES:
            raise ReactError(f"FctHistory: unseen must be one of {UNSEEN_RULES}, got {unseen!r}")
        if concurrency not in CONCURRENCY_RULES:
            raise ReactError(f"FctHistory: concurrency must be one of {CONCURRENCY_RULES}, got "
                             f"{concurrency!r}")
        self._epochs: deque[tuple[_Observation, ...]] = deque(maxlen=history_epochs)
        self._model: FctModel | None = None
        self._unseen = unseen
        self._concurrency = concurrency

    def add(self, pattern: Pattern, batch: Sequence[EpochResult]) -> None:
        """Record every flow of every epoch in ``batch`` (all run with ``pattern``)."""
        degrees = flow_degrees(pattern).tolist()
        check_ran(pattern, batch, "FctHistory.add")
        sides: list[tuple[float, float]] = list(_side_degrees(pattern))
        for result in batch:
            if self._concurrency == "schedule":  # how the flows of this epoch overlapped
                sides = overlap_sharing(
                    pattern, [t.start_s for t in result.flows], [t.end_s for t in result.flows],
                    [t.size_bytes > 0 for t in result.flows])
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
                                   unseen=self._unseen, concurrency=self._concurrency)
        return self._model


class FctModel:
    """Predicts FCTs of flows of any pattern from a fixed set of observations.

    ``unseen`` chooses how a never-observed ``(src, dst)`` pair is priced, ``concurrency`` how
    many flows a flow shares its links with (module docstring).
    """

    _SCHEDULE_PASSES = 4
    """Rounds of pricing flows at the overlaps of the previous round's schedule."""
    _OVERLAP_MEMO_MAX = 100_000
    """Groups kept by the overlap memo of small patterns before it starts afresh."""

    def __init__(self, observations: Sequence[_Observation], *, unseen: str = "links",
                 concurrency: str = "step") -> None:
        if not observations:
            raise ReactError("FctModel: no observations yet; run at least one epoch first")
        if unseen not in UNSEEN_RULES:
            raise ReactError(
                f"FctModel: unseen must be one of {UNSEEN_RULES}, got {unseen!r}"
            )
        if concurrency not in CONCURRENCY_RULES:
            raise ReactError(
                f"FctModel: concurrency must be one of {CONCURRENCY_RULES}, got {concurrency!r}"
            )
        self._concurrency = concurrency
        pair_costs: dict[tuple[int, int], list[float]] = {}
        per_degree: dict[int, list[float]] = {}
        units = []
        for obs in observations:
            unit = obs.fct_s / (obs.size_bytes * obs.share(concurrency))
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
        self._out_degraded: dict[int, float] = {}
        self._in_degraded: dict[int, float] = {}
        self._path_per_byte = 0.0
        self._pair_excess: dict[tuple[int, int], float] = {}
        if unseen in ("links", "links_least", "links_endpoints"):
            self._fit_links(observations, least=unseen == "links_least")
        # With "links_endpoints": the mean unit cost of the pairs seen out of (into) each rank.
        self._by_ends = unseen == "links_endpoints"
        self._end_out_unit: dict[int, float] = {}
        self._end_in_unit: dict[int, float] = {}
        if self._by_ends:
            outs: dict[int, list[float]] = {}
            ins: dict[int, list[float]] = {}
            for (a, b), unit in self._pair_unit.items():
                outs.setdefault(a, []).append(unit)
                ins.setdefault(b, []).append(unit)
            self._end_out_unit = {r: statistics.fmean(v) for r, v in outs.items()}
            self._end_in_unit = {r: statistics.fmean(v) for r, v in ins.items()}
        self._tables: _Tables | None = None
        # Small patterns are priced flow by flow, each flow's FCT kept by what it depends on
        # (ends, chunks, degrees; the bytes by the memo's key), since candidates differ in a
        # few flows.
        self._memo: dict[tuple[object, float], dict[tuple[object, ...], float]] = {}
        # ... and each sender's (receiver's) group sharing by its flows' times: candidates'
        # schedules mostly keep them.
        self._overlap_memo: dict[tuple[tuple[float, float], ...], tuple[float, ...]] = {}

    def _fit_links(self, observations: Sequence[_Observation], *, least: bool = False) -> None:
        """Each rank's outbound and inbound competing load, and the mean (``least``: the least,
        at least 0) path excess of the observed pairs.

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
        if self._concurrency == "schedule":
            # b * k overstates C when a flow's link mates were held back elsewhere (max-min
            # gives it their unused share); a flow that ran alone on both links got C / (1 + q)
            # exactly, so the fastest of those is the best reading of C when there is one.
            alone = [b for obs, b in seen if max(obs.out_degree, obs.in_degree) < 1.0 + 1e-6]
            if alone:
                capacity = max(alone)
        # Per link, per other end: (competing load q, the job's flows k on it then), the
        # reading with the least q kept.
        outs: dict[int, dict[int, tuple[float, float]]] = {}
        ins: dict[int, dict[int, tuple[float, float]]] = {}
        for obs, b in seen:
            out = outs.setdefault(obs.src, {})
            reading = (capacity / b - obs.out_degree, obs.out_degree)
            out[obs.dst] = min(out.get(obs.dst, reading), reading)
            into = ins.setdefault(obs.dst, {})
            reading = (capacity / b - obs.in_degree, obs.in_degree)
            into[obs.src] = min(into.get(obs.src, reading), reading)
        self._capacity = capacity
        rated_out = {r: list(v.values()) for r, v in outs.items() if len(v) >= 2}
        rated_in = {r: list(v.values()) for r, v in ins.items() if len(v) >= 2}
        self._out_load = {r: max(0.0, min(v)[0]) for r, v in rated_out.items()}
        self._in_load = {r: max(0.0, min(v)[0]) for r, v in rated_in.items()}
        if self._concurrency == "schedule":
            self._out_degraded = self._degraded(rated_out, self._out_load)
            self._in_degraded = self._degraded(rated_in, self._in_load)
        excess: dict[tuple[int, int], list[float]] = {}
        for obs, _b in seen:
            rate = self._link_rate(obs.src, obs.dst, obs.out_degree, obs.in_degree)
            if rate is not None and obs.src in self._out_load and obs.dst in self._in_load:
                excess.setdefault((obs.src, obs.dst), []).append(
                    obs.fct_s / obs.size_bytes - 1.0 / rate)
        self._pair_excess = {pair: statistics.fmean(v) for pair, v in excess.items()}
        if excess:
            self._path_per_byte = (max(0.0, min(self._pair_excess.values())) if least
                                   else statistics.fmean(self._pair_excess.values()))

    def _degraded(self, readings: dict[int, list[tuple[float, float]]],
                  loads: dict[int, float]) -> dict[int, float]:
        """The capacity of each slow link that is better read as degraded than as shared.

        A slow link is either shared with ``q`` competing flows (each of ``k`` job flows gets
        ``C / (k + q)``) or of less capacity ``C'`` (``C' / k`` each). Readings at one ``k``
        cannot tell them apart, and the shared reading is kept; readings at several ``k`` (the
        job's flows overlapped on it by different amounts) choose the model that predicts them
        better (least squared log error), so a degraded link is not priced as if more of the
        job's flows could share it cheaply.
        """
        out = {}
        for rank, values in readings.items():
            q = loads[rank]
            ks = [k for _q, k in values]
            if q <= 0 or max(ks) - min(ks) < 0.25:
                continue
            rates = [self._capacity / (qi + k) for qi, k in values]
            degraded = max(b * k for b, k in zip(rates, ks, strict=True))
            shared_error = sum(math.log(self._capacity / (k + q) / b) ** 2
                               for b, k in zip(rates, ks, strict=True))
            degraded_error = sum(math.log(degraded / k / b) ** 2
                                 for b, k in zip(rates, ks, strict=True))
            if degraded_error < shared_error:
                out[rank] = degraded
        return out

    def _link_rate(self, src: int, dst: int, out_degree: float,
                   in_degree: float) -> float | None:
        """The rate the fitted links give a flow src -> dst at these degrees (None: unknown)."""
        rates = []
        if src in self._out_load:
            degraded = self._out_degraded.get(src)
            rates.append(degraded / out_degree if degraded is not None
                         else self._capacity / (out_degree + self._out_load[src]))
        if dst in self._in_load:
            degraded = self._in_degraded.get(dst)
            rates.append(degraded / in_degree if degraded is not None
                         else self._capacity / (in_degree + self._in_load[dst]))
        return min(rates) if rates else None

    def _terms(self, src: np.ndarray, dst: np.ndarray, degree: np.ndarray) -> _Terms:
        """What pricing the flows ``src -> dst`` of these degree classes looks up."""
        if self._tables is None:
            self._tables = _Tables(
                _Lookup(dict.fromkeys(self._out_load, 1.0)),
                _Lookup(dict.fromkeys(self._in_load, 1.0)),
                _Lookup(self._out_load), _Lookup(self._in_load),
                _Lookup(self._out_degraded), _Lookup(self._in_degraded),
                _Lookup({a * _PAIRS + b: v for (a, b), v in self._pair_unit.items()}),
                _Lookup({a * _PAIRS + b: v for (a, b), v in self._pair_excess.items()}),
                _Lookup(self._degree_per_byte),
                _Lookup(self._end_out_unit), _Lookup(self._end_in_unit))
        t = self._tables
        out_known, _ = t.out_rated.get(src)
        in_known, _ = t.in_rated.get(dst)
        both = out_known & in_known
        pairs = np.asarray(src, dtype=np.int64) * _PAIRS + dst
        excess_seen, excess = t.pair_excesses.get(pairs)
        ended = end_unit = None
        if self._by_ends:
            end_out_seen, end_out = t.end_out_units.get(src)
            end_in_seen, end_in = t.end_in_units.get(dst)
            # The slower of the seen ends (fmax ignores the NaN of an end never seen).
            ended, end_unit = end_out_seen | end_in_seen, np.fmax(end_out, end_in)
        return _Terms(out_known, both, out_known | in_known,
                      *t.out_capacities.get(src), t.out_loads.get(src)[1],
                      *t.in_capacities.get(dst), t.in_loads.get(dst)[1],
                      *t.pair_units.get(pairs),
                      np.where(both & excess_seen, excess, self._path_per_byte),
                      *t.degree_costs.get(degree), ended, end_unit)

    def _rates(self, terms: _Terms, out_degree: np.ndarray, in_degree: np.ndarray) -> np.ndarray:
        # A link read as degraded gives C' / k, one shared C / (k + q).
        with np.errstate(divide="ignore", invalid="ignore"):
            out_rate = np.where(terms.out_degraded, terms.out_capacity / out_degree,
                                self._capacity / (out_degree + terms.out_load))
            in_rate = np.where(terms.in_degraded, terms.in_capacity / in_degree,
                               self._capacity / (in_degree + terms.in_load))
        return np.where(terms.both, np.minimum(out_rate, in_rate),
                        np.where(terms.out_known, out_rate, in_rate))

    def flow_fct(self, flow: Flow, degree: int, size_bytes: float, *,
                 out_degree: float | None = None, in_degree: float | None = None,
                 share: float | None = None) -> float:
        """Estimated FCT of ``flow`` carrying ``size_bytes`` at degree ``degree``.

        ``out_degree`` / ``in_degree``: flows sharing its sender's / receiver's link (default
        ``degree``), used to price a pair from its endpoints' links; ``share``: the number of
        flows its bytes are divided among, which scales a seen pair's unit cost (default
        ``degree``; the larger of the two with ``concurrency="schedule"``).
        """
        out_degree = out_degree or degree
        in_degree = in_degree or degree
        share = share or degree
        pair = (flow.src, flow.dst)
        if flow.src in self._out_load and flow.dst in self._in_load:
            # Both links rated: their rate at the new degrees, plus this pair's own excess over
            # its links' prediction when it was seen (its path), else the unseen pairs' excess
            # (the mean or, with "links_least", the least seen).
            rate = self._link_rate(flow.src, flow.dst, out_degree, in_degree)
            assert rate is not None
            per_byte = 1.0 / rate + self._pair_excess.get(pair, self._path_per_byte)
            if self._concurrency == "schedule":
                # A pair seen faster than its links' prediction (its link mates were held
                # back elsewhere) has a negative excess; no flow beats the best rate seen.
                per_byte = max(per_byte, 1.0 / self._capacity)
            return size_bytes * per_byte
        unit = self._pair_unit.get(pair)
        if unit is not None:
            return unit * size_bytes * share
        rate = self._link_rate(flow.src, flow.dst, out_degree, in_degree)
        if rate is not None:
            per_byte = 1.0 / rate + self._path_per_byte
            if self._concurrency == "schedule":
                per_byte = max(per_byte, 1.0 / self._capacity)
            return size_bytes * per_byte
        if self._by_ends:
            ends = [u for u in (self._end_out_unit.get(flow.src),
                                self._end_in_unit.get(flow.dst)) if u is not None]
            if ends:
                return max(ends) * size_bytes * share
        class_per_byte = self._degree_per_byte.get(degree)
        if class_per_byte is not None:
            return class_per_byte * size_bytes
        return self._median_unit * size_bytes * share

    def _fcts(self, terms: _Terms, size: np.ndarray, out_degree: np.ndarray,
              in_degree: np.ndarray, share: np.ndarray) -> np.ndarray:
        """:meth:`flow_fct` of many flows at once (one per element; the same floats)."""
        rate = self._rates(terms, out_degree, in_degree)
        with np.errstate(divide="ignore", invalid="ignore"):
            # Both links rated: their rate at the new degrees, plus this pair's own excess over
            # its links' prediction when it was seen (its path), else the unseen pairs' excess
            # (mean or least). One link rated and the pair never seen: that link, plus it.
            per_byte = 1.0 / rate + terms.excess
            if self._concurrency == "schedule" and self._capacity > 0:
                # A pair seen faster than its links' prediction (its link mates were held
                # back elsewhere) has a negative excess; no flow beats the best rate seen.
                per_byte = np.maximum(per_byte, 1.0 / self._capacity)
            unrated = np.where(terms.classed, terms.class_per_byte * size,
                               self._median_unit * size * share)
            if terms.ended is not None:  # "links_endpoints"
                unrated = np.where(terms.ended, terms.end_unit * size * share, unrated)
            return np.where(
                terms.both, size * per_byte,
                np.where(terms.seen, terms.unit * size * share,
                         np.where(terms.linked, size * per_byte, unrated)))

    def pattern_fcts(self, pattern: Pattern, message_bytes: float) -> np.ndarray:
        """Estimated FCT of every flow of ``pattern`` (pattern order).

        With ``concurrency="schedule"`` the flows are first priced at their step's degrees, then
        repriced at the overlaps of the schedule those FCTs give, a few rounds: flows of
        different steps of different chunk graphs that run at the same time share their links.
        """
        if len(pattern.flows) < _ARRAY_FLOWS:
            return self._pattern_fcts_in_python(pattern, message_bytes)
        flows = _flow_arrays(pattern)
        degree = np.maximum(flows.out_step, flows.in_step)  # flow_degrees' class
        size = flows.fraction * message_bytes  # as Pattern.flow_bytes
        sides = flows.out_step.astype(np.float64), flows.in_step.astype(np.float64)
        terms = self._terms(flows.src, flows.dst, degree)
        fcts = self._fcts(terms, size, *sides, np.maximum(*sides))
        if self._concurrency == "schedule":
            groups = _SharingGroups(flows.src, flows.dst, size > 0)
            for _round in range(self._SCHEDULE_PASSES):
                start, end = schedule(pattern, fcts)
                overlap = groups.rounded_sharing(start, end)
                if all(np.array_equal(a, b) for a, b in zip(overlap, sides, strict=True)):
                    break  # a fixed point (to 1%): the same sharing, the same FCTs
                sides = overlap
                fcts = self._fcts(terms, size, *sides, np.maximum(*sides))
        return fcts

    def _pattern_fcts_in_python(self, pattern: Pattern, message_bytes: float) -> np.ndarray:
        """:meth:`pattern_fcts` flow by flow, for small patterns (the same floats)."""
        # The controller estimates many patterns that differ from each other in a few flows, so
        # each flow's estimate is kept by what it depends on (ends, degrees, bytes).
        # A flow's bytes depend on its chunks, the chunks' fractions and the message.
        memo = self._memo.setdefault((pattern.chunks, message_bytes), {})
        step_sides = _side_degrees(pattern)
        classes = [max(o, i) for o, i in step_sides]  # flow_degrees' class
        sides: list[tuple[float, float]] = list(step_sides)
        fcts = self._priced(pattern, message_bytes, sides, classes, memo)
        if self._concurrency == "schedule":
            live = [pattern.flow_bytes(f, message_bytes) > 0 for f in pattern.flows]
            for _round in range(self._SCHEDULE_PASSES):
                start, end = schedule(pattern, fcts)
                if len(self._overlap_memo) > self._OVERLAP_MEMO_MAX:
                    self._overlap_memo.clear()
                overlap = [(round(o, 2), round(i, 2)) for o, i in
                           _overlap_sharing_in_python(pattern, start.tolist(), end.tolist(),
                                                      live, self._overlap_memo)]
                if overlap == sides:  # a fixed point (to 1%): the same sharing, the same FCTs
                    break
                sides = overlap
                fcts = self._priced(pattern, message_bytes, sides, classes, memo)
        return fcts

    def _priced(self, pattern: Pattern, message_bytes: float,
                sides: Sequence[tuple[float, float]], classes: Sequence[int],
                memo: dict[tuple[object, ...], float]) -> np.ndarray:
        """Each flow's FCT when it shares its sender's and receiver's links as ``sides`` say."""
        fcts = []
        for f, (out_degree, in_degree), degree in zip(pattern.flows, sides, classes,
                                                      strict=True):
            key = (f.src, f.dst, f.chunks, degree, out_degree, in_degree)
            fct = memo.get(key)
            if fct is None:
                fct = memo[key] = self.flow_fct(
                    f, degree, pattern.flow_bytes(f, message_bytes),
                    out_degree=out_degree, in_degree=in_degree,
                    share=max(out_degree, in_degree),
                )
            fcts.append(fct)
        return np.array(fcts)


class _Tables(NamedTuple):
    """A model's fitted values as :class:`_Lookup` tables, built when first priced on arrays."""

    out_rated: _Lookup
    in_rated: _Lookup
    out_loads: _Lookup
    in_loads: _Lookup
    out_capacities: _Lookup  # of the links read as degraded
    in_capacities: _Lookup
    pair_units: _Lookup  # by src * _PAIRS + dst
    pair_excesses: _Lookup
    degree_costs: _Lookup
    end_out_units: _Lookup  # with "links_endpoints" (else empty)
    end_in_units: _Lookup


class _Terms(NamedTuple):
    """Per flow, what :meth:`FctModel._fcts` looks up once for all the rounds of a pattern."""

    out_known: np.ndarray  # the sender's link is rated
    both: np.ndarray  # both links are rated
    linked: np.ndarray  # at least one is
    out_degraded: np.ndarray  # the sender's link is read as degraded, of capacity:
    out_capacity: np.ndarray
    out_load: np.ndarray  # else its competing load
    in_degraded: np.ndarray
    in_capacity: np.ndarray
    in_load: np.ndarray
    seen: np.ndarray  # the pair was seen, at this unit cost:
    unit: np.ndarray
    excess: np.ndarray  # per byte over the links' prediction: the pair's, else the mean
    classed: np.ndarray  # flows of this degree were seen, at this cost per byte:
    class_per_byte: np.ndarray
    ended: np.ndarray | None  # "links_endpoints" only: a pair was seen out of the sender or
    end_unit: np.ndarray | None  # into the receiver, the slower of their mean unit costs


class _Lookup:
    """A dict of integer keys to floats as sorted arrays, to look up many keys at once."""

    def __init__(self, values: dict[int, float]) -> None:
        keys = sorted(values)
        self._keys = np.array(keys, dtype=np.int64)
        self._values = np.array([values[k] for k in keys], dtype=np.float64)

    def get(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Whether each key is present, and its value (NaN where absent)."""
        keys = np.asarray(keys, dtype=np.int64)
        if not self._keys.size:
            return np.zeros(keys.shape, dtype=bool), np.full(keys.shape, np.nan)
        at = np.minimum(np.searchsorted(self._keys, keys), self._keys.size - 1)
        found = self._keys[at] == keys
        return found, np.where(found, self._values[at], np.nan)


_PAIRS = 1 << 32
"""A (src, dst) pair of ranks is looked up as ``src * _PAIRS + dst`` (ranks below 2**31)."""


class _FlowArrays(NamedTuple):
    """A pattern's flows as arrays (pattern order), kept with the pattern."""

    src: np.ndarray
    dst: np.ndarray
    fraction: np.ndarray  # of the message, as Pattern.flow_fraction
    out_step: np.ndarray  # flows out of the sender at the flow's step (all chunk graphs)
    in_step: np.ndarray  # flows into the receiver at the flow's step


def forget_pricing_views(pattern: Pattern) -> None:
    """Drop what pricing ``pattern`` kept with it: its flow arrays, gate arrays and critical
    path plan (about 500 bytes per flow). The controller prices dozens of candidates per
    decision and keeps a level's worth of them; a view dropped is built again if needed."""
    pattern.forget_derived(["estimate.flow_arrays",
                            *((view, rule) for view in ("gate_arrays", "critical.plan")
                              for rule in EXECUTION_RULES)])


def _flow_arrays(pattern: Pattern) -> _FlowArrays:
    return pattern.derived("estimate.flow_arrays", lambda: _build_flow_arrays(pattern))


def _build_flow_arrays(pattern: Pattern) -> _FlowArrays:
    flows = pattern.flows
    n = len(flows)
    src = np.fromiter(map(attrgetter("src"), flows), np.int64, n)
    dst = np.fromiter(map(attrgetter("dst"), flows), np.int64, n)
    step = np.fromiter(map(attrgetter("step"), flows), np.int64, n)
    chunks = list(map(attrgetter("chunks"), flows))
    fractions: dict[tuple[int, ...], float] = {}
    for f, c in zip(flows, chunks, strict=True):
        if c not in fractions:
            fractions[c] = pattern.flow_fraction(f)
    fraction = np.fromiter(map(fractions.__getitem__, chunks), np.float64, n)
    low = int(min(src.min(), dst.min())) if n else 0
    width = int(max(src.max(), dst.max())) - low + 1 if n else 1
    out_key, in_key = step * width + (src - low), step * width + (dst - low)
    # (step, rank) counted over both ends at once: a key's count in each role.
    keys, where = np.unique(np.concatenate((out_key, in_key)), return_inverse=True)
    out_count = np.bincount(where[:n], minlength=keys.size)
    in_count = np.bincount(where[n:], minlength=keys.size)
    return _FlowArrays(src, dst, fraction, out_count[where[:n]], in_count[where[n:]])


def overlap_sharing(pattern: Pattern, start: Sequence[float], end: Sequence[float],
                     live: Sequence[bool]) -> list[tuple[float, float]]:
    """For each flow: among how many flows its sender's and its receiver's link were divided.

    A link shared fairly by ``k(t)`` flows gives each ``C / k(t)``, so over a flow's run its
    mean rate is ``C`` times the time-average of ``1 / k(t)``; the flow's *effective* sharing is
    the inverse of that average (1 alone, 2 with another flow throughout, 4/3 with another for
    half its time). ``k(t)`` counts the ``live`` flows out of the same sender (into the same
    receiver) running at ``t``; a flow of zero duration gets its instant's count.
    """
    if len(pattern.flows) < _ARRAY_FLOWS:
        return _overlap_sharing_in_python(pattern, start, end, live)
    flows = _flow_arrays(pattern)
    sender, receiver = _SharingGroups(flows.src, flows.dst, np.asarray(live, dtype=bool)).sharing(
        np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64))
    return list(zip(sender.tolist(), receiver.tolist(), strict=True))


def _overlap_sharing_in_python(
    pattern: Pattern, start: Sequence[float], end: Sequence[float], live: Sequence[bool],
    memo: dict[tuple[tuple[float, float], ...], tuple[float, ...]] | None = None,
) -> list[tuple[float, float]]:
    """:func:`overlap_sharing` group by group, for small patterns (the same floats); ``memo``
    keeps each group's result by its flows' (start, end) times."""
    n = len(pattern.flows)
    outs: dict[int, list[int]] = {}
    ins: dict[int, list[int]] = {}
    for i, f in enumerate(pattern.flows):
        if live[i]:
            outs.setdefault(f.src, []).append(i)
            ins.setdefault(f.dst, []).append(i)
    sender = [1.0] * n
    receiver = [1.0] * n
    for groups, shares in ((outs, sender), (ins, receiver)):
        for group in groups.values():
            if len(group) < 2:
                continue
            spans = tuple((start[j], end[j]) for j in group)
            got = None if memo is None else memo.get(spans)
            if got is None:
                got = _group_sharing(spans)
                if memo is not None:
                    memo[spans] = got
            for j, x in zip(group, got, strict=True):
                shares[j] = x
    return list(zip(sender, receiver, strict=True))


def _group_sharing(spans: Sequence[tuple[float, float]]) -> tuple[float, ...]:
    """The effective sharing of each of a group's flows (``(start, end)`` each), in order.

    Over the group's elementary intervals (between consecutive distinct starts and ends), the
    flows running at an interval's midpoint are counted once for the whole group; a flow adds up
    ``length / k`` over the intervals of its run, ``k`` being itself and the others running (a
    flow that starts exactly when this one ends does not run alongside it).
    """
    starts = sorted(s for s, _e in spans)
    ends = sorted(e for _s, e in spans)
    cuts = sorted({*starts, *ends})
    mids = [0.5 * (a + b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    # Flows with start <= mid < end: those started by then less those ended (end >= start).
    running = [bisect_right(starts, m) - bisect_right(ends, m) for m in mids]
    out = []
    for s, e in spans:
        if e <= s:  # an instant: the other flows running then
            out.append(1.0 + sum(1 for a, b in spans if a < e and b > s))
            continue
        inverse = 0.0
        for m in range(bisect_left(cuts, s), bisect_left(cuts, e)):
            mid = mids[m]
            k = 1 + running[m] - (s <= mid < e)
            if mid == e:  # the midpoint rounded onto e: flows starting at e are not alongside
                k -= sum(1 for a, b in spans if a == e < b)
            inverse += (cuts[m + 1] - cuts[m]) / k
        out.append((e - s) / inverse)
    return tuple(out)


class _SharingGroups:
    """The groups of :func:`overlap_sharing` of one pattern, found once for all its rounds.

    The live flows out of one sender (into one receiver) form a group; the groups of one size
    are solved together as the rows of one array (:func:`_group_sharing_rows`).
    """

    def __init__(self, src: np.ndarray, dst: np.ndarray, live: np.ndarray) -> None:
        n = src.size
        alive = np.flatnonzero(live)
        # Per group size: the members' flow indices (one row per group), and where each
        # member's result goes in the (sender, receiver) results laid end to end.
        by_size: dict[int, list[tuple[np.ndarray, int]]] = {}
        for offset, ends in ((0, src), (n, dst)):
            order = alive[np.argsort(ends[alive], kind="stable")]
            sorted_ends = ends[order]
            firsts = np.flatnonzero(np.concatenate(
                ([order.size > 0], sorted_ends[1:] != sorted_ends[:-1])))
            sizes = np.diff(np.append(firsts, order.size))
            for size in np.unique(sizes[sizes >= 2]).tolist():
                at = firsts[sizes == size]
                by_size.setdefault(size, []).append(
                    (order[at[:, None] + np.arange(size)], offset))
        self._n = n
        self._rows: list[tuple[np.ndarray, np.ndarray]] = []
        for _size, parts in sorted(by_size.items()):
            members = np.concatenate([m for m, _offset in parts])
            targets = np.concatenate([m + offset for m, offset in parts])
            self._rows.append((members, targets))

    def sharing(self, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each flow's (sender, receiver) effective sharing, 1.0 outside a group."""
        out = np.ones(2 * self._n)
        for members, targets in self._rows:
            out[targets] = _group_sharing_rows(start[members], end[members])
        return out[:self._n], out[self._n:]

    def rounded_sharing(self, start: np.ndarray,
                        end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`sharing` with each value as ``round(x, 2)`` gives it (to 1%)."""
        sender, receiver = self.sharing(start, end)
        return round2(sender), round2(receiver)


def _group_sharing_rows(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The effective sharing of each flow of each group (one group of ``(start, end)`` per row).

    Over a group's elementary intervals (between consecutive starts and ends), the flows running
    at an interval's midpoint are counted once for the whole group; a flow adds up ``length /
    k`` over the intervals of its run, in time order, ``k`` being itself and the others running
    (a flow that starts exactly when this one ends does not run alongside it). A repeated cut
    makes an interval of length 0, which adds 0.0: the sums are those over distinct cuts.

    Work and memory follow the flows and the intervals of their runs, not groups x flows x
    intervals: each flow sums its own run (a contiguous range of its group's intervals), all
    flows one interval at a time. Inside a run ``k`` is the interval's running count, except
    where the last interval's midpoint rounds onto the flow's end (adjacent floats): there
    neither the flow nor the flows starting at its end run alongside. The same floats as the
    group-by-group :func:`_group_sharing`, so that a pattern prices alike whichever path its
    size takes (tests/react/control/test_estimate.py checks both against the definition and
    the estimate on arrays against the definition flow by flow).
    """
    groups, width = start.shape
    both = np.concatenate((start, end), axis=1)
    cuts = np.sort(both, axis=1)
    low, high = cuts[:, :-1], cuts[:, 1:]
    mid = 0.5 * (low + high)  # (groups, intervals)
    keys = _RowKeys(both, cuts, mid)
    # Flows with start <= mid < end: those started by then less those ended (end >= start).
    running = (np.searchsorted(keys.sorted_rows(keys.start), keys.mid, "right")
               - np.searchsorted(keys.sorted_rows(keys.end), keys.mid, "right"))
    length = (high - low).ravel()
    term = np.zeros(length.shape)
    np.divide(length, running, out=term, where=running > 0)
    # A flow's run: the intervals with start <= low < end, [first, first + count).
    first = np.searchsorted(keys.low, keys.start.ravel(), "left")
    count = np.searchsorted(keys.low, keys.end.ravel(), "left") - first
    timed = end > start
    onto, last_term = _last_terms_onto_ends(keys, timed, mid, end, first, count, length, running)
    inverse = np.zeros(count.shape)
    for j in range(int(count.max(initial=0))):  # in time order, as a running sum
        live = np.flatnonzero(count > j)
        add = term[first[live] + j]
        if onto is not None:
            other = onto[live] & (count[live] == j + 1)
            add[other] = last_term[live[other]]
        inverse[live] += add
    inverse = inverse.reshape(groups, width)
    if timed.all():
        return (end - start) / inverse
    # An instant: the other flows running then.
    instant = np.ones(start.shape)
    for g in np.flatnonzero(~timed.all(axis=1)).tolist():
        s, e = start[g], end[g]
        instant[g] = 1.0 + ((s[None, :] < e[:, None]) & (e[None, :] > s[:, None])).sum(axis=1)
    return np.where(timed, (end - start) / np.where(timed, inverse, 1.0), instant)


class _RowKeys:
    """Exact integer keys that let one ``searchsorted`` search every row at once.

    A cut's key is twice its rank among its row's distinct cuts, a midpoint strictly inside an
    interval one more than the interval's low end, plus the row times a span that keeps rows
    apart: comparisons of keys are those of the floats within a row, and rows never mix.
    """

    def __init__(self, both: np.ndarray, cuts: np.ndarray, mid: np.ndarray) -> None:
        groups, width2 = cuts.shape
        rank = np.zeros(cuts.shape, dtype=np.int64)
        np.cumsum(cuts[:, 1:] != cuts[:, :-1], axis=1, out=rank[:, 1:])
        self.row = np.arange(groups, dtype=np.int64)[:, None] * (2 * width2 + 2)
        cut = 2 * rank + self.row
        by_flow = np.empty_like(cut)
        np.put_along_axis(by_flow, np.argsort(both, axis=1), cut, axis=1)
        half = width2 // 2
        self.start, self.end = by_flow[:, :half], by_flow[:, half:]
        low = cut[:, :-1]
        self.low = low.ravel()  # sorted: rows in order, each row's cuts sorted
        self.mid = np.where(mid == cuts[:, 1:], cut[:, 1:], low + (mid != cuts[:, :-1])).ravel()

    @staticmethod
    def sorted_rows(keys: np.ndarray) -> np.ndarray:
        return np.sort(keys, axis=1).ravel()


def _last_terms_onto_ends(keys: _RowKeys, timed: np.ndarray, mid: np.ndarray, end: np.ndarray,
                          first: np.ndarray, count: np.ndarray, length: np.ndarray,
                          running: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """Which runs' last midpoint rounds onto the flow's end, and their last term there (by
    flow); ``(None, ...)`` when none does, the usual case."""
    runs = np.flatnonzero(count > 0)
    last = first[runs] + count[runs] - 1
    rounds = mid.ravel()[last] == end.ravel()[runs]
    last_term = np.zeros(count.shape)
    if not rounds.any():
        return None, last_term
    flows, at = runs[rounds], last[rounds]
    # The timed flows starting at that end (untimed ones keyed below their row's keys).
    starts = keys.sorted_rows(np.where(timed, keys.start, keys.row - 1))
    ends = keys.end.ravel()[flows]
    starting = np.searchsorted(starts, ends, "right") - np.searchsorted(starts, ends, "left")
    onto = np.zeros(count.shape, dtype=bool)
    onto[flows] = True
    last_term[flows] = length[at] / (1 + running[at] - starting)
    return onto, last_term


_ROUND2_EXACT_BELOW = 1e6
"""Below it, ``x * 100`` is within 1.2e-8 of its exact value: ``rint`` then rounds it as
``round`` rounds the exact value, unless it lies within 1e-6 of a half (then ``round`` is used)."""


def round2(values: np.ndarray) -> np.ndarray:
    """``[round(x, 2) for x in values]``, the same floats, mostly without a call per value.

    ``round(x, 2)`` is the float nearest to ``K / 100``, ``K`` the exact ``100 x`` rounded
    half to even; ``rint(100 x) / 100`` is the same float when ``100 x`` computed in floats
    rounds to the same ``K`` (it does unless it lies next to a half) and ``K / 100`` is divided
    correctly rounded (it is, ``K`` being an exact integer).
    """
    with np.errstate(over="ignore", invalid="ignore"):  # huge or infinite: doubtful anyway
        scaled = values * 100.0
        out = np.rint(scaled) / 100.0
        doubtful = ~(np.abs(values) < _ROUND2_EXACT_BELOW) | (
            np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6)
    for i in np.flatnonzero(doubtful).tolist():
        out[i] = round(float(values[i]), 2)
    return out


def _side_degrees(pattern: Pattern) -> list[tuple[int, int]]:
    """For each flow: (flows out of its sender, flows into its receiver) at its step."""
    degrees = pattern.degrees()
    return [(degrees[(f.step, f.src)][1], degrees[(f.step, f.dst)][0]) for f in pattern.flows]
