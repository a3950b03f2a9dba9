"""One exploration of Algorithm 1 (paper §5.4.1): from a batch's congestion to a pattern to try.

1. Targets: the critical paths of every epoch and of the batch-mean FCTs
   (:mod:`react.model.critical`); the congested flows on them (``X = C ∩ P``); the TEN vertices
   at their ends, ranked by the *evidence* that the end is the congested one
   (:func:`react.control.picture.end_evidence`: steady share, then any share; ties go to the
   receiver).
2. A beam search over swaps: at each depth (up to ``max_accepted`` swaps) ``Kt`` single swaps
   of the targets' ranks are estimated, split over the ``search_width`` best patterns so far,
   drawn from each pattern's :class:`~react.model.swapspace.SwapSpace` in priority order
   (position-equivalent, chunk-local, global; degree-lowering "green" ones first; random order
   within a class), never with a steady-congested or excluded partner nor a swap that failed
   under this picture. A candidate's estimate is the critical path of the FCTs the §5.4.1
   model (:mod:`react.control.estimate`) predicts for all its flows; those no worse than their
   parent (within ``search_slack``) go on.
3. The best pattern found is worth a trial if its estimate is at least ``(1 + epsilon)``
   better; with ``concurrency = "checked"`` the overlap estimate must agree.

Where the paper is silent or differs on purpose (docs/deviations.md): candidates are judged on
the whole pattern's estimated critical path, not on the current critical paths mapped through
the swap (a swap can make another path critical); the beam goes through steps up to
``search_slack`` worse by estimate; ``Kt`` grows by ``trials_growth`` per exploration; a rank
already moved on a path is not moved again on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from react.control.config import ControllerConfig
from react.control.decision import microseconds as _us
from react.control.detect import CongestionReport
from react.control.estimate import FctHistory, FctModel, forget_pricing_views
from react.control.picture import end_evidence
from react.control.spaces import SpaceCache
from react.model.critical import critical_path
from react.model.observation import EpochResult
from react.model.pattern import Flow, Pattern
from react.model.swapspace import Direction
from react.model.transforms import Swap

__all__ = ["Exploration", "Explorer", "Vertex", "estimated_time", "rank_vertices"]


@dataclass(frozen=True, slots=True)
class Exploration:
    """What an exploration found worth a trial: the pattern, the swaps that lead there, the
    estimates before and after, and the steady-congested ranks the swaps move."""

    pattern: Pattern
    swaps: tuple[Swap, ...]
    estimate_before_s: float
    estimate_after_s: float
    resolved_steady: frozenset[int]


@dataclass(frozen=True, slots=True)
class Vertex:
    """A TEN vertex to move: ``rank`` on the ``direction`` side of a congested flow of chunk
    graph ``graph`` at ``flow_step``."""

    rank: int
    direction: Direction
    graph: int
    flow_step: int


@dataclass(frozen=True, slots=True)
class _Path:
    """A pattern the search reached from the observed one, and how."""

    estimate_s: float
    pattern: Pattern
    swaps: tuple[Swap, ...]
    moved: frozenset[int]
    resolved: frozenset[int]


class Explorer:
    """Algorithm 1's search over swaps (module docstring), with its own random draws.

    Parameters
    ----------
    config : ControllerConfig
        The controller's parameters (``trials``, ``search_width``, ``epsilon``, ...; ``seed``
        seeds the random order within a priority class).
    spaces : SpaceCache
        Where the swap spaces of the patterns it reaches are kept.
    """

    def __init__(self, config: ControllerConfig, spaces: SpaceCache) -> None:
        self.config = config
        self.explorations = 0
        """Explorations that had a target (``Kt`` grows with each)."""
        self._spaces = spaces
        self._rng = np.random.default_rng(config.seed)

    def explore(
        self, pattern: Pattern, batch: Sequence[EpochResult], report: CongestionReport,
        history: FctHistory, notes: list[str], *, partners_excluded: set[int],
        failed: set[Swap], check: FctHistory | None = None,
    ) -> Exploration | None:
        """Algorithm 1 on ``pattern`` with ``batch``'s observations; None if nothing helps.

        ``history`` prices candidates; ``partners_excluded``: ranks never used as a swap's
        partner; ``failed``: swaps that failed under this picture; ``check``: the overlap
        estimate that must agree (``concurrency = "checked"``). ``notes`` gets the reasons.
        """
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
        vertices = rank_vertices(pattern, report, on_path)
        if not vertices:
            notes.append("none of them is on a critical path")
            return None
        self.explorations += 1
        model = history.model()
        message = batch[0].message_bytes
        before = estimated_time(model, pattern, message)
        if cfg.overestimate_tolerance > 0:
            observed = float(np.mean([r.collective_time_s for r in batch]))
            miss = before / observed - 1.0
            if miss > cfg.overestimate_tolerance:
                notes.append(
                    f"the estimate of the running pattern, {_us(before)}, is {miss:.0%} above "
                    f"its observed {_us(observed)} (more than "
                    f"{cfg.overestimate_tolerance:.0%}), which would inflate every estimated "
                    "gain: none is trusted")
                return None
        blocked = partners_excluded | report.steady_inbound | report.steady_outbound
        steady = report.steady_inbound | report.steady_outbound
        best, trials = self._search(_Path(before, pattern, (), frozenset(), frozenset()),
                                    vertices, blocked, failed, steady, model, message)
        if best.estimate_s * (1.0 + cfg.epsilon) > before:
            notes.append(f"no swaps are estimated to gain {cfg.epsilon:.0%} ({trials} tried)")
            return None
        what = " + ".join(s.describe() for s in best.swaps)
        if check is not None:
            checked = check.model()
            then, now = (estimated_time(checked, best.pattern, message),
                         estimated_time(checked, pattern, message))
            if then * (1.0 + cfg.epsilon) > now:
                notes.append(
                    f"{what}: estimated {_us(before)} -> {_us(best.estimate_s)}, but "
                    f"{_us(now)} -> {_us(then)} with the flows sharing links as they overlap "
                    "in time: not tried")
                return None
        notes.append(f"{what}: estimated collective time {_us(before)} -> "
                     f"{_us(best.estimate_s)} ({trials} swap(s) estimated)")
        return Exploration(best.pattern, best.swaps, before, best.estimate_s, best.resolved)

    def _search(
        self, start: _Path, vertices: Sequence[Vertex], blocked: set[int], failed: set[Swap],
        steady: frozenset[int], model: FctModel, message: float,
    ) -> tuple[_Path, int]:
        """The beam search from ``start``: the best path found, and the estimates made."""
        cfg = self.config
        budget = cfg.trials + cfg.trials_growth * (self.explorations - 1)
        best, beam, trials = start, [start], 0
        seen = {start.pattern.flows}
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
        return best, trials

    def _expand(
        self, parent: _Path, vertices: Sequence[Vertex], budget: int, blocked: set[int],
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
        space = self._spaces.get(parent.pattern)
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
                estimate = estimated_time(model, candidate, message)
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


def rank_vertices(pattern: Pattern, report: CongestionReport, on_path: set[int]) -> list[Vertex]:
    """TEN vertices at the ends of congested flows on a critical path, likeliest culprit first.

    Algorithm 1 takes ``X = C ∩ P`` (``on_path``: flow indices on a critical path); each such
    flow contributes its receiver vertex ``(t, dst)`` and its sender vertex ``(t - 1, src)``.
    They are ordered by the evidence of their end (steady share, then any share), then
    receivers first, then by how many congested flows on a critical path touch them, then by
    (step, rank).
    """
    evidence = end_evidence(pattern, report)
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
    return [Vertex(rank, side, graph, flow_step)  # type: ignore[arg-type]
            for (_step, rank, side), (_count, graph, flow_step) in ranked]


def estimated_time(model: FctModel, pattern: Pattern, message_bytes: float) -> float:
    """The collective time the model predicts: the critical path over all predicted FCTs."""
    return critical_path(pattern, model.pattern_fcts(pattern, message_bytes)).length_s


def _partner(swap: Swap, rank: int) -> int:
    return swap.y if swap.x == rank else swap.x
