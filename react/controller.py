"""The REACT feedback loop (paper §5.4, Algorithm 1, Table 3) as a backend-agnostic state machine.

After every batch of ``B`` epochs the job hands the batch's observations to
:meth:`Controller.observe`, which returns a :class:`Decision`: the pattern to run next and why.
The controller never runs anything and never learns which backend produced the numbers, so the
same object drives the simulator, an emulated network or real GPUs.

One step of the loop (§5.4.1, §5.4.2):

1. If the last decision put a new pattern on trial, compare its observed mean collective time
   ``T1`` with the time ``T0`` of the pattern it came from. Keep it only if
   ``T1 * (1 + tau_r) <= T0`` (each change must earn at least ``tau_r``); otherwise revert to the
   old pattern, remember the swaps as tried for it, and explore again from it with its own batch.
2. Explore: detect congested flows (:mod:`react.detect`); compute the critical paths of every
   epoch and of the batch-mean FCTs (:mod:`react.critical`); take the congested flows on those
   paths; rank their TEN vertices ``(t, r)`` by how many steady, then how many congested flows
   touch them. For each vertex in turn, draw candidate swaps of rank ``r`` from the pattern's
   :class:`~react.swapspace.SwapSpace` in priority order (position-equivalent, chunk-local,
   global; degree-lowering "green" ones first; random order within a class) and estimate each
   with the §5.4.1 model (:mod:`react.estimate`) on the critical paths mapped through the swap.
   Accept a swap if the mean estimated path time drops by at least ``(1 + epsilon)``; stop after
   ``Kt`` trials or ``max_accepted`` accepted swaps. The result is put on trial for the next batch.
3. Bookkeeping: ``Kt`` grows by ``trials_growth`` with every exploration; after ``Emax``
   explorations in a row that were reverted the controller settles on its pattern, and after
   ``Emax`` quiet batches it explores again; FCT history older than ``H`` epochs is dropped; a
   steady-congested rank whose congestion a kept swap resolved is never again used as a swap
   partner.

Choices where the paper is silent, all in :class:`ControllerConfig`: ``max_accepted`` (the
Algorithm 1 bound ``Kmax``/``Amax`` has no value in Table 3; 4 here), the growth of ``Kt`` (+5 per
exploration), and that a rank already moved in this batch is not moved again in it.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np

from react.backends.base import EpochResult
from react.critical import critical_path
from react.detect import detect_congestion
from react.errors import ReactError
from react.estimate import FctHistory, FctModel
from react.pattern import Flow, Pattern
from react.swapspace import Direction, SwapSpace
from react.transforms import GlobalSwap, PositionSwap, Swap

Action = Literal["keep", "try", "revert", "revert_try", "settled"]


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
        ``H``, epochs of FCT history kept (60).
    exploration_rounds : int
        ``Emax``, reverted explorations in a row before settling, and quiet batches before
        exploring again (5).
    max_accepted : int
        Swaps accepted per exploration (Algorithm 1's bound; not given in Table 3; 4).
    revert_threshold : float
        ``tau_r``: a tried pattern must be observed at least this much faster, else revert (0.05).
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
    apply_delay_epochs: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        positive = ("batch_epochs", "trials", "history_epochs", "exploration_rounds",
                    "max_accepted")
        non_negative = ("trials_growth", "apply_delay_epochs")
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in positive + non_negative + ("seed",):
                if not isinstance(value, int) or isinstance(value, bool):
                    raise ConfigError(
                        f"ControllerConfig: {f.name} must be an integer, got {value!r}"
                    )
                if f.name in positive and value < 1:
                    raise ConfigError(f"ControllerConfig: {f.name} must be >= 1, got {value}")
                if f.name in non_negative and value < 0:
                    raise ConfigError(f"ControllerConfig: {f.name} must be >= 0, got {value}")
            else:
                if not isinstance(value, (int, float)) or isinstance(value, bool) or not (
                    0 <= value < 1
                ):
                    raise ConfigError(
                        f"ControllerConfig: {f.name} must be a number in [0, 1), got {value!r}"
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
    base_batch: tuple[EpochResult, ...]
    base_time_s: float
    swaps: tuple[Swap, ...]
    resolved_steady: frozenset[int]


@dataclass(frozen=True, slots=True)
class _Exploration:
    pattern: Pattern
    swaps: tuple[Swap, ...]
    estimate_before_s: float
    estimate_after_s: float
    resolved_steady: frozenset[int]


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

    def __init__(self, pattern: Pattern, config: ControllerConfig | None = None) -> None:
        self.config = config or ControllerConfig()
        self.pattern = pattern
        self.decisions: list[Decision] = []
        self._history = FctHistory(self.config.history_epochs)
        self._rng = np.random.default_rng(self.config.seed)
        self._spaces: OrderedDict[tuple[Flow, ...], SwapSpace] = OrderedDict()
        self._space(pattern, check=True)
        self._trial: _Trial | None = None
        self._tabu: dict[tuple[Flow, ...], set[Swap]] = {}
        self._excluded: set[int] = set()
        self._explorations = 0
        self._reverted_in_a_row = 0
        self._settled = False
        self._quiet = 0

    # -- the loop ------------------------------------------------------------------------------
    def observe(self, batch: Sequence[EpochResult]) -> Decision:
        """Digest one batch run with :attr:`pattern`; return the decision for the next batch."""
        cfg = self.config
        batch = tuple(batch)
        if not batch:
            raise ReactError("Controller.observe: the batch is empty, expected >= 1 epoch")
        times = np.array([r.collective_time_s for r in batch])
        mean_time = float(times.mean())
        index = len(self.decisions)
        self._history.add(self.pattern, batch)
        prefix: list[str] = []
        observed_gain = None

        if self._trial is not None:
            trial, self._trial = self._trial, None
            observed_gain = trial.base_time_s / mean_time - 1.0
            what = ", ".join(s.describe() for s in trial.swaps)
            if mean_time * (1.0 + cfg.revert_threshold) > trial.base_time_s:
                self._tabu.setdefault(trial.base_pattern.flows, set()).update(trial.swaps)
                self.pattern = trial.base_pattern
                self._reverted_in_a_row += 1
                prefix.append(
                    f"reverted {what}: observed {_us(mean_time)} vs {_us(trial.base_time_s)} "
                    f"before ({observed_gain:+.1%}, needed at least {cfg.revert_threshold:+.0%})"
                )
                if self._reverted_in_a_row >= cfg.exploration_rounds:
                    self._settled = True
                    self._quiet = 0
                    prefix.append(
                        f"{cfg.exploration_rounds} explorations in a row did not pay off: "
                        "settling on this pattern"
                    )
                    return self._decide(index, "revert", prefix, mean_time, observed_gain)
                found = self._explore(trial.base_pattern, trial.base_batch, prefix)
                if found is None:
                    return self._decide(index, "revert", prefix, mean_time, observed_gain)
                return self._start_trial(
                    index, "revert_try", found, trial.base_pattern, trial.base_batch,
                    trial.base_time_s, prefix, mean_time, observed_gain,
                )
            self._reverted_in_a_row = 0
            self._excluded |= trial.resolved_steady
            prefix.append(
                f"kept {what}: observed {_us(mean_time)} vs {_us(trial.base_time_s)} before "
                f"({observed_gain:+.1%})"
            )

        if self._settled:
            self._quiet += 1
            if self._quiet < cfg.exploration_rounds:
                prefix.append(f"settled ({self._quiet}/{cfg.exploration_rounds} quiet batches)")
                return self._decide(index, "settled", prefix, mean_time, observed_gain)
            self._settled = False
            self._reverted_in_a_row = 0
            self._tabu.clear()
            prefix.append(f"{cfg.exploration_rounds} quiet batches: exploring again")

        found = self._explore(self.pattern, batch, prefix)
        if found is None:
            return self._decide(index, "keep", prefix, mean_time, observed_gain)
        return self._start_trial(
            index, "try", found, self.pattern, batch, mean_time, prefix, mean_time, observed_gain
        )

    # -- pieces --------------------------------------------------------------------------------
    def _decide(self, index: int, action: Action, notes: list[str], mean_time: float,
                observed_gain: float | None) -> Decision:
        decision = Decision(
            batch=index, action=action, pattern=self.pattern, reason="; ".join(notes),
            observed_gain=observed_gain, mean_time_s=mean_time,
        )
        self.decisions.append(decision)
        return decision

    def _start_trial(
        self, index: int, action: Action, found: _Exploration, base: Pattern,
        base_batch: tuple[EpochResult, ...], base_time: float, notes: list[str],
        mean_time: float, observed_gain: float | None,
    ) -> Decision:
        self._trial = _Trial(base, base_batch, base_time, found.swaps, found.resolved_steady)
        self.pattern = found.pattern
        gain = found.estimate_before_s / found.estimate_after_s - 1.0
        decision = Decision(
            batch=index, action=action, pattern=found.pattern, reason="; ".join(notes),
            swaps=found.swaps, estimated_gain=gain, observed_gain=observed_gain,
            mean_time_s=mean_time,
        )
        self.decisions.append(decision)
        return decision

    def swap_space(self, pattern: Pattern) -> SwapSpace:
        """The (cached) swap space of ``pattern``; its ``build_all()`` precomputes all ranks."""
        return self._space(pattern)

    def _space(self, pattern: Pattern, *, check: bool = False) -> SwapSpace:
        key = pattern.flows
        space = self._spaces.get(key)
        if space is None:
            space = SwapSpace(pattern, check=check)
            self._spaces[key] = space
            if len(self._spaces) > 16:
                self._spaces.popitem(last=False)
        else:
            self._spaces.move_to_end(key)
        return space

    def _explore(
        self, pattern: Pattern, batch: tuple[EpochResult, ...], notes: list[str]
    ) -> _Exploration | None:
        """Algorithm 1 on ``pattern`` with ``batch``'s observations; None if nothing helps."""
        cfg = self.config
        report = detect_congestion(pattern, batch, delta1=cfg.delta1, delta2=cfg.delta2)
        if not report.congested:
            notes.append("no congestion detected")
            return None
        fcts = np.array([[t.fct_s for t in r.flows] for r in batch])
        paths = [critical_path(pattern, row).flows for row in fcts]
        paths.append(critical_path(pattern, fcts.mean(axis=0)).flows)
        on_path = {i for p in paths for i in p}
        worst = sorted(report.flows, key=lambda c: (c.kind != "steady", c.p90_bps))[0]
        notes.append(f"{len(report.flows)} congested flow(s), e.g. {worst.describe()}")
        vertices = _rank_vertices(pattern, report.flows, on_path)
        if not vertices:
            notes.append("none of them is on a critical path")
            return None
        self._explorations += 1
        budget = cfg.trials + cfg.trials_growth * (self._explorations - 1)
        model = self._history.model()
        message = batch[0].message_bytes
        current = pattern
        # The B+1 critical paths as one weighted flow set: the mean of the paths' summed FCTs
        # is the sum over flows of (times the flow appears / number of paths) x its FCT.
        current_paths: dict[Flow, float] = {}
        for p in paths:
            for i in p:
                flow = pattern.flows[i]
                current_paths[flow] = current_paths.get(flow, 0.0) + 1.0 / len(paths)
        before = after = _mean_path_time(model, current, current_paths, message)
        blocked = self._excluded | report.steady_inbound | report.steady_outbound
        tabu = self._tabu.get(pattern.flows, set())
        accepted: list[Swap] = []
        moved: set[int] = set()
        resolved: set[int] = set()
        trials = 0
        for (_step, rank), vertex in vertices:
            if trials >= budget or len(accepted) >= cfg.max_accepted:
                break
            if rank in moved:
                continue
            classes = self._space(current).candidate_classes(
                rank, graph=vertex.graph, step=vertex.flow_step, direction=vertex.direction
            )
            candidates = self._shuffled(
                [s for s in group
                 if _partner(s, rank) not in blocked and _partner(s, rank) not in moved
                 and s not in tabu]
                for group in classes
            )
            for swap in candidates:
                if trials >= budget:
                    break
                trials += 1
                candidate = swap.apply(current)
                mapped = {_map_flow(swap, current, f): w for f, w in current_paths.items()}
                estimate = _mean_path_time(model, candidate, mapped, message)
                if estimate * (1.0 + cfg.epsilon) <= after:
                    notes.append(
                        f"{swap.describe()} for rank {rank}: estimated critical paths "
                        f"{_us(after)} -> {_us(estimate)}"
                    )
                    accepted.append(swap)
                    moved.update((swap.x, swap.y))
                    if rank in report.steady_inbound or rank in report.steady_outbound:
                        resolved.add(rank)
                    current, current_paths, after = candidate, mapped, estimate
                    break
        if not accepted:
            notes.append(f"no swap is estimated to gain {cfg.epsilon:.0%} ({trials} tried)")
            return None
        notes.append(f"{trials} swap(s) estimated, {len(accepted)} accepted")
        return _Exploration(current, tuple(accepted), before, after, frozenset(resolved))

    def _shuffled(self, classes: Iterable[list[Swap]]) -> list[Swap]:
        """Keep the priority classes in order; shuffle inside each (the paper picks at random)."""
        out: list[Swap] = []
        for group in classes:
            out.extend(group[i] for i in self._rng.permutation(len(group)))
        return out


@dataclass(frozen=True, slots=True)
class _Vertex:
    steady: int
    count: int
    graph: int
    flow_step: int
    direction: Direction


def _rank_vertices(
    pattern: Pattern, congested: Sequence[Any], on_path: set[int]
) -> list[tuple[tuple[int, int], _Vertex]]:
    """TEN vertices of congested flows on a critical path, most congested first (§5.4.1).

    A vertex ``(t, r)`` is scored by how many steady, then how many congested flows of the whole
    pattern (on a critical path or not) have it as source or destination; only vertices of
    congested flows that lie on a critical path are returned (Algorithm 1: ``X = C ∩ P``).
    """
    acc: dict[tuple[int, int], list[Any]] = {}
    selected: set[tuple[int, int]] = set()
    for c in congested:
        f = c.flow
        steady = int(c.kind == "steady")
        graph = pattern.chunk_graph_of_flow(f)
        for vertex, direction in (((f.step - 1, f.src), "out"), ((f.step, f.dst), "in")):
            entry = acc.setdefault(vertex, [0, 0, graph, f.step, direction])
            entry[0] += steady
            entry[1] += 1
            if pattern.flow_index(f) in on_path:
                selected.add(vertex)
    ranked = sorted(
        ((v, e) for v, e in acc.items() if v in selected),
        key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]),
    )
    return [(v, _Vertex(*e)) for v, e in ranked]


def _partner(swap: Swap, rank: int) -> int:
    return swap.y if swap.x == rank else swap.x


def _map_flow(swap: Swap, pattern: Pattern, flow: Flow) -> Flow:
    """The flow ``flow`` of ``pattern`` becomes after ``swap`` (for mapping critical paths)."""
    x, y = swap.x, swap.y
    if flow.src not in (x, y) and flow.dst not in (x, y):
        return flow
    if not isinstance(swap, GlobalSwap):
        if pattern.chunk_graph_of_flow(flow) != swap.graph:
            return flow
        if isinstance(swap, PositionSwap) and not swap.first_step <= flow.step <= swap.last_step:
            return flow
    src = y if flow.src == x else x if flow.src == y else flow.src
    dst = y if flow.dst == x else x if flow.dst == y else flow.dst
    return Flow(flow.step, src, dst, flow.chunks, flow.op)


def _mean_path_time(
    model: FctModel, pattern: Pattern, weighted_flows: Mapping[Flow, float], message_bytes: float
) -> float:
    """Mean estimated time of the critical paths, given as flows weighted by their share."""
    degrees = pattern.degrees()
    total = 0.0
    for f, weight in weighted_flows.items():
        degree = max(degrees.get((f.step, f.src), (0, 1))[1],
                     degrees.get((f.step, f.dst), (1, 0))[0])
        total += weight * model.flow_fct(f, degree, pattern.flow_bytes(f, message_bytes))
    return total


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us"

