"""A collective pattern as a time-expanded network (TEN), paper §5.1.

A pattern is the concrete series of message exchanges that implements one collective operation:
which rank sends which chunks of the message to which rank at which logical step, and whether the
receiver adds them into its buffer (``reduce``) or overwrites its buffer with them (``copy``).
In TEN terms, vertex ``(t, r)`` is rank ``r`` after step ``t`` and a flow of step ``t`` is the edge
``(t-1, src) -> (t, dst)``.

The collective's meaning (its pre- and post-condition) is fixed by ``kind``, the ranks, ``root``
and each chunk's ``owner``; the flows are one implementation of it.
:func:`react.model.verify.verify` checks that the flows implement the meaning;
:mod:`react.model.transforms` rewrites the flows only.

Chunk ownership ties a chunk to a rank's role in the collective's meaning: in an AllGather chunk
``c`` is the input of rank ``owner``; in a ReduceScatter it is the part of the result that rank
``owner`` must end with. Chunks of AllReduce, Broadcast and Reduce have no owner.

Chunk graphs (§5.3.1) are derived, not stored: the finest partition of the chunks such that every
flow's chunks lie in one block. Each block's flows form an independent sub-pattern.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal, TypeVar, cast

from react.model.errors import PatternError

Op = Literal["reduce", "copy"]
Kind = Literal["allreduce", "allgather", "reduce_scatter", "broadcast", "reduce"]
OPS: tuple[str, ...] = ("reduce", "copy")
KINDS: tuple[str, ...] = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce")
_ROOTED = ("broadcast", "reduce")
_OWNED = ("allgather", "reduce_scatter")
_FORMAT = "react-pattern/1"
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Chunk:
    """A part of the message: ``fraction`` of its bytes; ``owner`` as in the module docstring."""

    id: int
    fraction: float
    owner: int | None = None


@dataclass(frozen=True, slots=True, order=True)
class Flow:
    """One message: at ``step`` rank ``src`` sends ``chunks`` to ``dst``, who applies ``op``.

    ``chunks`` is a sorted tuple of chunk ids (a tuple, not a set, so flows order totally).
    """

    step: int
    src: int
    dst: int
    chunks: tuple[int, ...]
    op: Op = "copy"


@dataclass(frozen=True)
class Pattern:
    """The TEN of one collective. Immutable; construct it through a generator or directly.

    Parameters
    ----------
    kind : {"allreduce", "allgather", "reduce_scatter", "broadcast", "reduce"}
    ranks : sequence of int
        The participating ranks (distinct; at least two).
    chunks : sequence of Chunk
        Ids ``0..C-1`` in order; fractions positive and summing to 1.
    flows : iterable of Flow
        Stored sorted by ``(step, src, dst, chunks)``; steps start at 1.
    root : int, optional
        The root rank of a broadcast or reduce; must be ``None`` for the other kinds.
    name : str
        The generator that made it, e.g. ``"allreduce_double_binary_tree"``.

    Raises
    ------
    PatternError
        On any malformed field, naming it and the bad value.

    Notes
    -----
    Structural checks happen here; whether the flows implement the collective is checked by
    :func:`react.model.verify.verify`, which is more expensive.
    """

    kind: str
    ranks: tuple[int, ...]
    chunks: tuple[Chunk, ...]
    flows: tuple[Flow, ...]
    root: int | None = None
    name: str = ""
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ranks = tuple(self.ranks)
        chunks = tuple(self.chunks)
        flows = tuple(sorted((_normalise_flow(f) for f in self.flows), key=_flow_key))
        object.__setattr__(self, "ranks", ranks)
        object.__setattr__(self, "chunks", chunks)
        object.__setattr__(self, "flows", flows)
        _check_structure(self)

    # -- basic sizes ---------------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of ranks."""
        return len(self.ranks)

    @property
    def num_steps(self) -> int:
        """The last step that has a flow (0 for a pattern without flows)."""
        return self.flows[-1].step if self.flows else 0

    def flow_fraction(self, flow: Flow) -> float:
        """Fraction of the message a flow carries (the sum of its chunks' fractions)."""
        cache = self._cache.setdefault("fractions", {})
        fraction = cache.get(flow.chunks)
        if fraction is None:
            fraction = math.fsum(self.chunks[c].fraction for c in flow.chunks)
            cache[flow.chunks] = fraction
        return float(fraction)

    def flow_bytes(self, flow: Flow, message_bytes: float) -> float:
        """Bytes a flow carries when the collective's message is ``message_bytes`` long."""
        return self.flow_fraction(flow) * message_bytes

    # -- derived views -------------------------------------------------------------------------
    def chunk_graphs(self) -> tuple[tuple[int, ...], ...]:
        """Blocks of chunk ids whose flows form independent sub-patterns (§5.3.1).

        The finest partition such that each flow's chunks lie in one block; blocks are sorted
        tuples, ordered by their smallest chunk id.
        """
        cached = self._cache.get("chunk_graphs")
        if cached is None:
            parent = list(range(len(self.chunks)))

            def find(x: int) -> int:
                while parent[x] != x:
                    parent[x] = parent[parent[x]]
                    x = parent[x]
                return x

            for flow in self.flows:
                first = find(flow.chunks[0])
                for c in flow.chunks[1:]:
                    other = find(c)
                    if other != first:
                        parent[max(other, first)] = min(other, first)
                        first = min(other, first)
            blocks: dict[int, list[int]] = {}
            for c in range(len(self.chunks)):
                blocks.setdefault(find(c), []).append(c)
            cached = tuple(tuple(b) for b in sorted(blocks.values()))
            self._cache["chunk_graphs"] = cached
        return cached

    def chunk_graph_of_chunk(self, chunk: int) -> int:
        """Index (into :meth:`chunk_graphs`) of the chunk graph holding ``chunk``."""
        index = self._cache.get("chunk_graph_index")
        if index is None:
            index = {c: g for g, block in enumerate(self.chunk_graphs()) for c in block}
            self._cache["chunk_graph_index"] = index
        if chunk not in index:
            raise PatternError(
                f"unknown chunk {chunk!r}; expected an id in [0, {len(self.chunks)})"
            )
        return int(index[chunk])

    def chunk_graph_of_flow(self, flow: Flow) -> int:
        """Index of the chunk graph a flow belongs to."""
        return self.chunk_graph_of_chunk(flow.chunks[0])

    def flows_of_chunk_graph(self, graph: int) -> tuple[int, ...]:
        """Indices (into ``flows``) of the flows of chunk graph ``graph``."""
        per = self._cache.get("flows_per_graph")
        if per is None:
            per = [[] for _ in self.chunk_graphs()]
            for i, flow in enumerate(self.flows):
                per[self.chunk_graph_of_flow(flow)].append(i)
            per = tuple(tuple(p) for p in per)
            self._cache["flows_per_graph"] = per
        if not (isinstance(graph, int) and 0 <= graph < len(per)):
            raise PatternError(
                f"unknown chunk graph {graph!r}; expected an index in [0, {len(per)})"
            )
        return per[graph]

    def degrees(self) -> Mapping[tuple[int, int], tuple[int, int]]:
        """``{(step, rank): (in_degree, out_degree)}`` over all chunk graphs, non-zero only.

        A read-only view, computed once per pattern.
        """
        cached = self._cache.get("degrees")
        if cached is None:
            ins = Counter((f.step, f.dst) for f in self.flows)
            outs = Counter((f.step, f.src) for f in self.flows)
            # Keys in a fixed order (flows are sorted), so iteration is deterministic.
            cached = {key: (ins[key], outs[key]) for key in dict.fromkeys([*ins, *outs])}
            self._cache["degrees"] = cached
        return MappingProxyType(cached)

    def degree(self, step: int, rank: int) -> tuple[int, int]:
        """``(in_degree, out_degree)`` of ``rank`` at ``step``."""
        self._check_rank(rank)
        return self.degrees().get((step, rank), (0, 0))

    def dependencies(self) -> tuple[tuple[int, ...], ...]:
        """For each flow (by index), the indices of the flows whose data it needs.

        Flow ``(t, u -> v)`` needs every flow into ``u`` at an earlier step that carries any of
        the same chunks. This is the *dataflow* execution rule (no receiver readiness, no
        serialisation of a rank's steps), not the paper's Algorithm 2; Algorithm 2, the default,
        is :mod:`react.model.execution`'s, and implies these dependencies.
        """
        cached = self._cache.get("dependencies")
        if cached is None:
            into: dict[int, list[int]] = {}
            for i, flow in enumerate(self.flows):
                into.setdefault(flow.dst, []).append(i)
            deps = []
            for flow in self.flows:
                mine = set(flow.chunks)
                deps.append(
                    tuple(
                        j
                        for j in into.get(flow.src, ())
                        if self.flows[j].step < flow.step
                        and mine.intersection(self.flows[j].chunks)
                    )
                )
            cached = tuple(deps)
            self._cache["dependencies"] = cached
        return cached

    def derived(self, key: Hashable, build: Callable[[], _T]) -> _T:
        """A view another module derives from this pattern, built once and kept with it.

        Patterns are immutable, so a derived view (e.g. :func:`react.model.execution.gates`) never
        goes stale; ``key`` must name the view and everything it depends on besides the pattern.
        """
        views = self._cache.setdefault("derived", {})
        try:
            return cast(_T, views[key])
        except KeyError:
            value = views[key] = build()
            return value

    def forget_derived(self, keys: Iterable[Hashable]) -> None:
        """Drop the derived views named by ``keys`` (those not built are skipped).

        For memory only: a view dropped is built again, the same, when next asked for (the
        controller drops the estimate's views of each candidate once it is priced).
        """
        views = self._cache.get("derived")
        if views:
            for key in keys:
                views.pop(key, None)

    def flow_index(self, flow: Flow) -> int:
        """Index of ``flow`` in ``flows``."""
        index = self._cache.get("flow_index")
        if index is None:
            index = {f: i for i, f in enumerate(self.flows)}
            self._cache["flow_index"] = index
        try:
            return int(index[flow])
        except KeyError:
            raise PatternError(f"flow {flow!r} is not in this pattern") from None

    # -- rewriting -----------------------------------------------------------------------------
    def with_flows(self, flows: Iterable[Flow], *, name: str | None = None) -> Pattern:
        """The same collective with other flows (checked like any new pattern)."""
        return replace(self, flows=tuple(flows), name=self.name if name is None else name)

    def relabelled(self, flows: Iterable[Flow]) -> Pattern:
        """The same collective with ``flows``, a rank relabelling of this pattern's flows.

        The transforms' primitive. A bijective renaming of ranks (and of chunks owned by them)
        maps valid, distinct flows to valid, distinct flows, so the structural checks of the
        constructor are skipped; only the sort is redone. Whether the result still implements
        the collective is :func:`react.model.verify.verify`'s question, as for any pattern.
        """
        out = object.__new__(Pattern)
        for name in ("kind", "ranks", "chunks", "root", "name"):
            object.__setattr__(out, name, getattr(self, name))
        object.__setattr__(out, "flows", tuple(sorted(flows, key=_flow_key)))
        object.__setattr__(out, "_cache", {})
        if len(out.flows) != len(self.flows):
            raise PatternError(
                f"Pattern.relabelled: expected {len(self.flows)} flows, got {len(out.flows)}"
            )
        return out

    def _check_rank(self, rank: int) -> None:
        if rank not in self._rank_set():
            raise PatternError(
                f"unknown rank {rank!r}; the pattern's ranks are {_span(self.ranks)}"
            )

    def _rank_set(self) -> frozenset[int]:
        ranks = self._cache.get("rank_set")
        if ranks is None:
            ranks = frozenset(self.ranks)
            self._cache["rank_set"] = ranks
        return ranks

    # -- text and JSON -------------------------------------------------------------------------
    def describe(self) -> str:
        """A readable, multi-line summary: what it is, then the flows step by step."""
        graphs = self.chunk_graphs()
        head = (
            f"{self.name or 'pattern'}: {self.kind} over {self.n} ranks, {len(self.chunks)} "
            f"chunk(s), {len(self.flows)} flows in {self.num_steps} steps, "
            f"{len(graphs)} chunk graph(s)"
        )
        if self.root is not None:
            head += f", root {self.root}"
        lines = [head]
        step = None
        for flow in self.flows:
            if flow.step != step:
                step = flow.step
                lines.append(f"  step {step}:")
            sign = "+=" if flow.op == "reduce" else ":="
            chunk_text = ",".join(str(c) for c in flow.chunks)
            graph = self.chunk_graph_of_flow(flow)
            lines.append(
                f"    {flow.src:>4} -> {flow.dst:<4} {sign} chunk {chunk_text} (graph {graph})"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "name": self.name,
            "kind": self.kind,
            "ranks": list(self.ranks),
            "root": self.root,
            "chunks": [[c.id, c.fraction, c.owner] for c in self.chunks],
            "flows": [[f.step, f.src, f.dst, list(f.chunks), f.op] for f in self.flows],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pattern:
        if not isinstance(data, Mapping):
            raise PatternError(
                f"Pattern.from_dict: expected a JSON object, got {type(data).__name__}"
            )
        if data.get("format") != _FORMAT:
            raise PatternError(
                f"Pattern.from_dict: expected format {_FORMAT!r}, got {data.get('format')!r}"
            )
        try:
            chunks = tuple(Chunk(int(i), float(fr), None if o is None else int(o))
                           for i, fr, o in data["chunks"])
            flows = tuple(Flow(int(t), int(s), int(d), tuple(int(c) for c in cs), str(op))  # type: ignore[arg-type]
                          for t, s, d, cs, op in data["flows"])
            ranks = tuple(int(r) for r in data["ranks"])
            root = data.get("root")
            return cls(
                kind=str(data["kind"]),
                ranks=ranks,
                chunks=chunks,
                flows=flows,
                root=None if root is None else int(root),
                name=str(data.get("name", "")),
            )
        except PatternError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise PatternError(f"Pattern.from_dict: malformed pattern data ({exc!r})") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> Pattern:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PatternError(f"Pattern.from_json: not valid JSON ({exc})") from None
        return cls.from_dict(data)


def _flow_key(flow: Flow) -> tuple[int, int, int, tuple[int, ...], str]:
    # Same order as Flow's generated comparison, but a plain tuple key sorts much faster.
    return (flow.step, flow.src, flow.dst, flow.chunks, flow.op)


def _normalise_flow(flow: Flow) -> Flow:
    if not isinstance(flow, Flow):
        raise PatternError(f"Pattern: flows must be Flow objects, got {flow!r}")
    chunks = tuple(sorted(flow.chunks))
    return flow if chunks == flow.chunks else replace(flow, chunks=chunks)


def _span(ranks: tuple[int, ...]) -> str:
    if ranks and list(ranks) == list(range(ranks[0], ranks[0] + len(ranks))):
        return f"{ranks[0]}..{ranks[-1]}"
    return repr(ranks) if len(ranks) <= 8 else f"{ranks[:8]!r}..."


def _check_structure(p: Pattern) -> None:
    if p.kind not in KINDS:
        raise PatternError(f"Pattern: kind={p.kind!r}, expected one of {KINDS}")
    if len(p.ranks) < 2:
        raise PatternError(f"Pattern: needs at least 2 ranks, got n={len(p.ranks)}")
    seen: set[int] = set()
    for r in p.ranks:
        if not isinstance(r, int) or isinstance(r, bool):
            raise PatternError(f"Pattern: ranks must be integers, got {r!r}")
        if r in seen:
            raise PatternError(f"Pattern: duplicate rank {r}")
        seen.add(r)
    if p.kind in _ROOTED:
        if p.root not in seen:
            raise PatternError(
                f"Pattern: a {p.kind} needs a root among its ranks, got root={p.root!r}"
            )
    elif p.root is not None:
        raise PatternError(f"Pattern: a {p.kind} has no root, got root={p.root!r}")
    if not p.chunks:
        raise PatternError("Pattern: needs at least one chunk, got none")
    for i, chunk in enumerate(p.chunks):
        if not isinstance(chunk, Chunk) or chunk.id != i:
            raise PatternError(
                f"Pattern: chunk at index {i} must be Chunk(id={i}, ...), got {chunk!r}"
            )
        if not (math.isfinite(chunk.fraction) and chunk.fraction > 0):
            raise PatternError(
                f"Pattern: chunk {i} has fraction={chunk.fraction!r}, expected a positive number"
            )
        if p.kind in _OWNED:
            if chunk.owner not in seen:
                raise PatternError(
                    f"Pattern: chunk {i} of a {p.kind} needs an owner among the ranks, "
                    f"got owner={chunk.owner!r}"
                )
        elif chunk.owner is not None:
            raise PatternError(
                f"Pattern: chunk {i} of a {p.kind} has no owner, got {chunk.owner!r}"
            )
    total = math.fsum(c.fraction for c in p.chunks)
    if abs(total - 1.0) > 1e-9:
        raise PatternError(f"Pattern: chunk fractions sum to {total!r}, expected 1")
    previous = None
    for flow in p.flows:
        where = f"flow (step {flow.step}, {flow.src} -> {flow.dst})"
        if not isinstance(flow.step, int) or flow.step < 1:
            raise PatternError(f"Pattern: {where} has step={flow.step!r}, expected an integer >= 1")
        for end in (flow.src, flow.dst):
            if end not in seen:
                raise PatternError(
                    f"Pattern: {where} names unknown rank {end!r}; ranks are {_span(p.ranks)}"
                )
        if flow.src == flow.dst:
            raise PatternError(f"Pattern: {where} sends to itself")
        if flow.op not in OPS:
            raise PatternError(f"Pattern: {where} has op={flow.op!r}, expected one of {OPS}")
        if not flow.chunks:
            raise PatternError(f"Pattern: {where} carries no chunk")
        for c in flow.chunks:
            if not isinstance(c, int) or not 0 <= c < len(p.chunks):
                raise PatternError(
                    f"Pattern: {where} names unknown chunk {c!r}; "
                    f"expected ids 0..{len(p.chunks) - 1}"
                )
        if len(set(flow.chunks)) != len(flow.chunks):
            raise PatternError(f"Pattern: {where} lists a chunk twice: {flow.chunks}")
        if flow == previous:
            raise PatternError(f"Pattern: {where} appears twice")
        previous = flow
