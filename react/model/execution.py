"""The execution rule: when each flow of a pattern may start (DESIGN.md "Execution semantics").

``"algorithm2"`` (the default) is the paper's Algorithm 2 (appendix B.1), the rule RCollective
runs on real ranks: each chunk graph on its own streams; within one chunk graph a rank walks the
steps in which it has operations in increasing order, posting every send and receive of a step
and blocking until all of them (and the aggregation) are done before its next step. A flow
``(t, u -> v)`` therefore runs only when both ``u`` and ``v`` have reached step ``t`` in its chunk
graph, i.e. when every operation of each end's previous step in that graph has ended. Each rank's
program (:func:`rank_programs`) is the one definition of that rule: RCollective and the GPU plan
run it (:func:`react.runtime.schedule.rank_program`), the simulator and the critical path derive
their waits from it here.

``"dataflow"`` is the looser rule of :meth:`react.model.pattern.Pattern.dependencies`: a flow
starts once every earlier flow into its source that carries one of its chunks has ended, whatever
either end is doing otherwise (no receiver readiness, no serialisation of a rank's steps). It is a
lower bound on the collective time, and the rule the simulator used before; kept as a named
option.

Both rules are expressed as *gates* (:class:`Gates`): a gate opens when each of its member flows
has ended, and a flow starts when each gate it waits for is open. Under Algorithm 2 a gate is one
rank's step in one chunk graph (each flow is a member of two: its sender's and its receiver's);
under the dataflow rule a gate is one flow. Gates keep the simulator's bookkeeping linear in the
number of flows even when a rank has many operations per step. See docs/deviations.md for what
the choice changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from types import MappingProxyType

import numpy as np

from react.model.errors import ReactError
from react.model.pattern import Pattern

__all__ = [
    "DEFAULT_EXECUTION",
    "EXECUTION_RULES",
    "ExecutionError",
    "GateArrays",
    "Gates",
    "GraphProgram",
    "StepOps",
    "check_execution",
    "flow_dependencies",
    "gate_arrays",
    "gates",
    "rank_programs",
    "replay",
]

EXECUTION_RULES: tuple[str, ...] = ("algorithm2", "dataflow")
"""The execution rules a backend or scenario may name."""
DEFAULT_EXECUTION = "algorithm2"


class ExecutionError(ReactError, ValueError):
    """An unknown execution rule, or timings that do not fit a pattern."""


@dataclass(frozen=True, slots=True)
class StepOps:
    """What one rank does at one step of one chunk graph: flow indices it sends and receives.

    Both tuples are in pattern flow order, which is also the order receives are applied in.
    """

    step: int
    sends: tuple[int, ...]
    recvs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class GraphProgram:
    """One rank's steps in one chunk graph, in increasing step order."""

    graph: int
    steps: tuple[StepOps, ...]


@dataclass(frozen=True, slots=True)
class Gates:
    """When each flow may start, as gates (module docstring).

    ``members[g]``: the flows whose ends open gate ``g``; ``waits[i]``: the gates flow ``i``
    waits for; ``opens[i]`` and ``released[g]`` are the inverse maps. Every tuple is sorted, so
    a simulator that follows them launches flows in a fixed order. Every member of a gate has a
    lower step than every flow waiting for it, so flows in pattern order are a topological order.
    """

    rule: str
    members: tuple[tuple[int, ...], ...]
    waits: tuple[tuple[int, ...], ...]
    opens: tuple[tuple[int, ...], ...]
    released: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class GateArrays:
    """The gates of :class:`Gates` as flat arrays, for passes over large patterns.

    The controller prices every candidate pattern it looks at by a critical-path pass over its
    gates (:mod:`react.model.critical`); as tuples of Python ints a 128-rank ring's gates take about
    13 MB per candidate, as arrays 8 bytes per entry. ``waits``: one row per flow, its gates in
    increasing order, padded with ``gates`` (the gate past the last) to the longest row;
    ``open_gate``: every flow's ``opens`` laid end to end in flow order, ``open_count[i]``
    entries for flow ``i``; ``member_flows[member_start[g]:member_start[g + 1]]``: the
    members of gate ``g`` in increasing order.
    """

    rule: str
    gates: int
    waits: np.ndarray
    open_gate: np.ndarray
    open_count: np.ndarray
    member_flows: np.ndarray
    member_start: np.ndarray


def check_execution(value: object, where: str = "execution") -> str:
    """``value`` if it names an execution rule, else an :class:`ExecutionError` naming it."""
    if not isinstance(value, str) or value not in EXECUTION_RULES:
        raise ExecutionError(
            f"{where} = {value!r}: expected one of {', '.join(map(repr, EXECUTION_RULES))}"
        )
    return value


def rank_programs(pattern: Pattern) -> Mapping[int, tuple[GraphProgram, ...]]:
    """Every rank's Algorithm 2 program: ``rank -> one GraphProgram per chunk graph it is in``.

    Built in one pass over the flows and kept with the pattern (patterns are immutable). A rank
    without any flow maps to ``()``.
    """

    def build() -> Mapping[int, tuple[GraphProgram, ...]]:
        per: dict[int, dict[int, dict[int, tuple[list[int], list[int]]]]] = {
            r: {} for r in pattern.ranks
        }
        for g in range(len(pattern.chunk_graphs())):
            for i in pattern.flows_of_chunk_graph(g):
                flow = pattern.flows[i]
                per[flow.src].setdefault(g, {}).setdefault(flow.step, ([], []))[0].append(i)
                per[flow.dst].setdefault(g, {}).setdefault(flow.step, ([], []))[1].append(i)
        return MappingProxyType({
            rank: tuple(
                GraphProgram(g, tuple(StepOps(t, tuple(s), tuple(r))
                                      for t, (s, r) in sorted(steps.items())))
                for g, steps in sorted(graphs.items())
            )
            for rank, graphs in per.items()
        })

    return pattern.derived("rank_programs", build)


def gates(pattern: Pattern, rule: str = DEFAULT_EXECUTION) -> Gates:
    """The gates of ``pattern`` under ``rule`` (module docstring), kept with the pattern."""
    check_execution(rule, "gates: rule")
    return pattern.derived(("gates", rule), lambda: _build_gates(pattern, rule))


def gate_arrays(pattern: Pattern, rule: str = DEFAULT_EXECUTION) -> GateArrays:
    """:func:`gates` as :class:`GateArrays`, kept with the pattern; under Algorithm 2 built
    without the tuples (a pattern that is only estimated never needs them)."""
    check_execution(rule, "gate_arrays: rule")
    return pattern.derived(("gate_arrays", rule), lambda: _build_gate_arrays(pattern, rule))


def _build_gate_arrays(pattern: Pattern, rule: str) -> GateArrays:
    n = len(pattern.flows)
    if rule == "algorithm2" and n:
        core = _algorithm2_core(pattern)
        lo, hi = core.pair(core.waits_g)
        open_lo, open_hi = core.pair(core.opens_g)
        in_group = core.has_next[core.group]  # operations of a step group that opens a gate
        sizes = np.diff(np.append(core.starts, 2 * n))[core.has_next]
        return GateArrays(
            rule, int(core.has_next.sum()), _padded_pairs(lo, hi, int(core.has_next.sum())),
            _pairs_flat(open_lo, open_hi), (open_lo >= 0).astype(np.intp) + (open_hi >= 0),
            core.idx2[in_group].astype(np.intp),
            np.concatenate(([0], np.cumsum(sizes))).astype(np.intp))
    gs = gates(pattern, rule)
    num = len(gs.members)
    lengths = np.fromiter(map(len, gs.waits), np.intp, n)
    width = int(lengths.max()) if n else 0
    waits = np.full((n, width), num, dtype=np.intp)
    flat = np.fromiter(chain.from_iterable(gs.waits), np.intp, int(lengths.sum()))
    firsts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    waits[np.repeat(np.arange(n), lengths), np.arange(flat.size) - firsts] = flat
    open_count = np.fromiter(map(len, gs.opens), np.intp, n)
    sizes = np.fromiter(map(len, gs.members), np.intp, num)
    return GateArrays(
        rule, num, waits,
        np.fromiter(chain.from_iterable(gs.opens), np.intp, int(open_count.sum())), open_count,
        np.fromiter(chain.from_iterable(gs.members), np.intp, int(sizes.sum())),
        np.concatenate(([0], np.cumsum(sizes))).astype(np.intp))


def _build_gates(pattern: Pattern, rule: str) -> Gates:
    if rule != "dataflow":
        return _algorithm2_gates(pattern)
    n = len(pattern.flows)
    members: list[tuple[int, ...]] = []
    waits: list[list[int]] = [[] for _ in range(n)]
    deps = pattern.dependencies()
    gate_of: dict[int, int] = {}
    for j in sorted({j for d in deps for j in d}):
        gate_of[j] = len(members)
        members.append((j,))
    for i, d in enumerate(deps):
        waits[i] = [gate_of[j] for j in d]
    opens: list[list[int]] = [[] for _ in range(n)]
    released: list[list[int]] = [[] for _ in members]
    for g, flows in enumerate(members):
        for i in flows:
            opens[i].append(g)
    for i, gs in enumerate(waits):
        gs.sort()
        for g in gs:
            released[g].append(i)
    return Gates(rule, tuple(members), tuple(tuple(w) for w in waits),
                 tuple(tuple(o) for o in opens), tuple(tuple(r) for r in released))


def _algorithm2_gates(pattern: Pattern) -> Gates:
    """The Algorithm 2 gates as tuples, from :func:`_algorithm2_core`'s arrays.

    The gates of :func:`rank_programs`: one per rank, chunk graph and pair of consecutive steps
    in which that rank has operations, numbered in that order (rank in pattern order, chunk
    graph, step); a gate's members are the first step's operations, the flows released by it
    the second step's (the tests compare the result with gates read off :func:`rank_programs`).
    """
    if not pattern.flows:
        return Gates("algorithm2", (), (), (), ())
    core = _algorithm2_core(pattern)
    ops = _slices(core.idx2, core.starts)  # the flows of each step group
    groups = np.flatnonzero(core.has_next).tolist()
    members = tuple([ops[k] for k in groups])
    released = tuple([ops[k + 1] for k in groups])
    return Gates("algorithm2", members, _pairs(*core.pair(core.waits_g)),
                 _pairs(*core.pair(core.opens_g)), released)


@dataclass(frozen=True, slots=True)
class _Core:
    """Every operation (a flow is its sender's and its receiver's) sorted by rank position,
    chunk graph, step and flow, with the step groups and gates that sort makes."""

    idx2: np.ndarray  # the flow of each sorted operation
    starts: np.ndarray  # step group k holds sorted operations starts[k]:starts[k + 1]
    has_next: np.ndarray  # step group k opens a gate (the next group is of the same program)
    group: np.ndarray  # the step group of each sorted operation
    waits_g: np.ndarray  # per sorted operation, the gate it waits for (-1: none)
    opens_g: np.ndarray  # ... and the gate it opens (-1: none)
    send: np.ndarray  # where each flow's sending operation went in the sort
    recv: np.ndarray  # ... and its receiving one

    def pair(self, per_op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per flow, the lower and the higher of its two operations' values."""
        x, y = per_op[self.send], per_op[self.recv]
        return np.minimum(x, y), np.maximum(x, y)


def _algorithm2_core(pattern: Pattern) -> _Core:
    """The Algorithm 2 gates grouped with numpy sorts instead of Python dicts.

    The controller estimates every candidate pattern (tens of thousands of flows each for a
    ring of 128 ranks), so this runs on arrays: one sort of the (rank, graph, step, flow)
    operations, then slices.
    """
    flows = pattern.flows
    n = len(flows)
    pos = {r: k for k, r in enumerate(pattern.ranks)}
    graph_of = {c: g for g, block in enumerate(pattern.chunk_graphs()) for c in block}
    graph = [graph_of[f.chunks[0]] for f in flows]
    # Every operation twice over (a flow is its sender's and its receiver's), sorted by rank
    # position, chunk graph, step, flow.
    rank = np.array([pos[f.src] for f in flows] + [pos[f.dst] for f in flows], dtype=np.int64)
    step = np.array([f.step for f in flows], dtype=np.int64)
    gr = np.array(graph, dtype=np.int64)
    idx = np.arange(n, dtype=np.int64)
    step2, gr2, idx2 = np.tile(step, 2), np.tile(gr, 2), np.tile(idx, 2)
    order = np.lexsort((idx2, step2, gr2, rank))
    rank, gr2, step2, idx2 = rank[order], gr2[order], step2[order], idx2[order]
    new_prog = np.ones(2 * n, dtype=bool)  # first operation of a (rank, graph) program
    new_prog[1:] = (rank[1:] != rank[:-1]) | (gr2[1:] != gr2[:-1])
    new_step = new_prog.copy()  # first operation of a step group
    new_step[1:] |= step2[1:] != step2[:-1]
    starts = np.flatnonzero(new_step)  # step group k holds entries starts[k]:starts[k + 1]
    first_in_prog = new_prog[starts]
    # A step group opens a gate when the next step group belongs to the same program.
    has_next = np.append(~first_in_prog[1:], False)
    gate_of = np.cumsum(has_next) - 1  # gate of step group k (valid where has_next[k])
    group = np.cumsum(new_step) - 1  # step group of each operation
    # Per operation, the gate it opens (its step group's) and waits for (the previous step
    # group's); -1 for none.
    opens_g = np.where(has_next[group], gate_of[group], -1)
    waits_g = np.where(first_in_prog[group], -1, gate_of[group - 1])
    where = np.empty(2 * n, dtype=np.int64)  # where each operation went in the sort
    where[order] = np.arange(2 * n)
    return _Core(idx2, starts, has_next, group, waits_g, opens_g, where[:n], where[n:])


def _padded_pairs(lo: np.ndarray, hi: np.ndarray, pad: int) -> np.ndarray:
    """:func:`_pairs`' rows as an ``(n, longest)`` array, each row filled up with ``pad``."""
    two, one = lo >= 0, hi >= 0
    out = np.empty((lo.size, 2), dtype=np.intp)
    out[:, 0] = np.where(two, lo, np.where(one, hi, pad))
    out[:, 1] = np.where(two, hi, pad)
    width = 2 if two.any() else 1 if one.any() else 0
    return np.ascontiguousarray(out[:, :width])


def _pairs_flat(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """:func:`_pairs`' rows laid end to end."""
    both = np.stack((lo, hi), axis=1)
    return both[both >= 0].astype(np.intp)


def _slices(values: np.ndarray, starts: np.ndarray) -> list[tuple[int, ...]]:
    """``values`` cut at ``starts`` into tuples; the tuples are built by ``zip`` per length."""
    out: list[tuple[int, ...]] = [()] * starts.size
    sizes = np.diff(np.append(starts, values.size))
    for size in np.unique(sizes).tolist():
        at = np.flatnonzero(sizes == size)
        first = starts[at]
        cols = [values[first + j].tolist() for j in range(size)]
        for k, t in zip(at.tolist(), zip(*cols, strict=True), strict=True):
            out[k] = t
    return out


def _pairs(x: np.ndarray, y: np.ndarray) -> tuple[tuple[int, ...], ...]:
    """Per flow, the sorted tuple of the gates among ``x[i]``, ``y[i]`` that are not -1."""
    lo, hi = np.minimum(x, y), np.maximum(x, y)
    out: list[tuple[int, ...]] = [()] * x.size
    two = lo >= 0
    one = (hi >= 0) & ~two
    for i, t in zip(np.flatnonzero(two).tolist(),
                    zip(lo[two].tolist(), hi[two].tolist(), strict=True), strict=True):
        out[i] = t
    for i, single in zip(np.flatnonzero(one).tolist(), zip(hi[one].tolist()), strict=True):
        out[i] = single
    return tuple(out)


def flow_dependencies(pattern: Pattern, rule: str = DEFAULT_EXECUTION
                      ) -> tuple[tuple[int, ...], ...]:
    """For each flow, the sorted indices of the flows whose ends it waits for under ``rule``.

    Under ``"dataflow"`` this is :meth:`Pattern.dependencies`; under ``"algorithm2"`` it is every
    operation of the sender's and of the receiver's previous step in the flow's chunk graph.
    """
    if check_execution(rule, "flow_dependencies: rule") == "dataflow":
        return pattern.dependencies()

    def build() -> tuple[tuple[int, ...], ...]:
        gs = gates(pattern, rule)
        return tuple(tuple(sorted({j for g in w for j in gs.members[g]})) for w in gs.waits)

    return pattern.derived(("flow_dependencies", rule), build)


def replay(gs: Gates, durations_s: Sequence[float], first_s: Sequence[float], slices: int = 1
           ) -> tuple[list[float], list[float]]:
    """Start and end of every unit when unit ``u`` lasts ``durations_s[u]``, per the gates.

    A unit is slice ``k`` of flow ``i``, numbered ``i * slices + k`` (``slices=1``: units are
    flows). Slice ``k`` of a flow waits for slice ``k`` of every member of its flow's gates and
    for the flow's own slice ``k - 1``; slice 0 of a flow that waits for nothing starts at
    ``first_s[i]``. Returns ``(starts, ends)`` by unit. This is the timeline the ranks observe
    when each transfer takes the given time (used for measurement noise).
    """
    n = len(gs.waits)
    if len(durations_s) != n * slices or len(first_s) != n:
        raise ExecutionError(
            f"replay: expected {n * slices} durations and {n} first starts, got "
            f"{len(durations_s)} and {len(first_s)}"
        )
    opened = [0.0] * (len(gs.members) * slices)
    starts = [0.0] * (n * slices)
    ends = [0.0] * (n * slices)
    for i in range(n):
        wait = gs.waits[i]
        for k in range(slices):
            u = i * slices + k
            if wait:
                start = max(opened[g * slices + k] for g in wait)
                if k and ends[u - 1] > start:
                    start = ends[u - 1]
            else:
                start = ends[u - 1] if k else first_s[i]
            end = start + durations_s[u]
            starts[u] = start
            ends[u] = end
            for g in gs.opens[i]:
                if end > opened[g * slices + k]:
                    opened[g * slices + k] = end
    return starts, ends
