"""The three swap transforms of REACT (paper §5.3.1): rewrite who plays which role in a pattern.

A transform relabels two ranks ``x`` and ``y`` in some of a pattern's flows and leaves the
collective's meaning (kind, ranks, chunks, owners, root) untouched; whether the rewritten flows
still implement the collective is for :func:`react.model.verify.verify` (or a
:class:`react.model.swapspace.SwapSpace`) to say. Each transform is a small frozen record with an
``apply(pattern) -> Pattern`` method, so a swap can be stored, compared, printed and applied to
several patterns (the controller also applies it to its critical paths, §5.4.1):

- :class:`GlobalSwap` (①, "global permutation swap"): relabel ``x`` and ``y`` in every flow. For
  kinds whose chunks are owned (AllGather, ReduceScatter) the chunks owned by ``x`` are also
  renamed to those owned by ``y`` (the k-th to the k-th) and vice versa, because chunk ``c`` is
  owner ``c``'s input or result: a permutation of the rank-to-device mapping moves the owner's
  data with it.
- :class:`ChunkLocalSwap` (②): relabel ``x`` and ``y`` only in the flows of one chunk graph
  (an independent sub-pattern, e.g. one tree of NCCL's double binary tree), no chunk renaming.
- :class:`PositionSwap` (③, "position-equivalent swap"): relabel ``x`` and ``y`` only in the flows
  of one chunk graph whose step lies in ``[first_step, last_step]``: the TEN vertices of ``x`` and
  ``y`` exchange places over that window (e.g. only in the reduce phase of one tree).

The functions :func:`global_swap`, :func:`chunk_local_swap` and :func:`position_swap` are the
same transforms in call form. Priority for the controller (§5.3.1, end of ③): position-equivalent
before chunk-local before global, the finest change first; see :data:`PRIORITY`.

Examples
--------
>>> from react.model.pattern import Chunk, Flow, Pattern
>>> p = Pattern("allreduce", (0, 1, 2), (Chunk(0, 1.0),),
...             (Flow(1, 1, 0, (0,), "reduce"), Flow(2, 2, 0, (0,), "reduce"),
...              Flow(3, 0, 1, (0,), "copy"), Flow(3, 0, 2, (0,), "copy")))
>>> swapped = GlobalSwap(0, 2).apply(p)
>>> [(f.step, f.src, f.dst) for f in swapped.flows]
[(1, 1, 2), (2, 0, 2), (3, 2, 0), (3, 2, 1)]
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from react.model.errors import PatternError
from react.model.pattern import Flow, Pattern

__all__ = [
    "PRIORITY",
    "ChunkLocalSwap",
    "GlobalSwap",
    "PositionSwap",
    "Swap",
    "chunk_local_swap",
    "global_swap",
    "position_swap",
]

#: Lower is tried first: the finer the change, the fewer new network paths it explores (§5.3.1).
PRIORITY: dict[str, int] = {"position": 0, "chunk_local": 1, "global": 2}


def _check_pair(where: str, x: object, y: object) -> None:
    for name, value in (("x", x), ("y", y)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise PatternError(f"{where}: rank {name} must be an integer, got {name}={value!r}")
    if x == y:
        raise PatternError(f"{where}: x and y must be different ranks, got x=y={x!r}")


def _check_ranks(where: str, pattern: Pattern, x: int, y: int) -> None:
    known = pattern._rank_set()
    for value in (x, y):
        if value not in known:
            raise PatternError(
                f"{where}: rank {value!r} is not in the pattern; its ranks are "
                f"{_rank_span(pattern.ranks)}"
            )


def _check_graph(where: str, pattern: Pattern, graph: int) -> None:
    count = len(pattern.chunk_graphs())
    if not (isinstance(graph, int) and not isinstance(graph, bool) and 0 <= graph < count):
        raise PatternError(
            f"{where}: unknown chunk graph {graph!r}; the pattern has chunk graphs 0..{count - 1}"
        )


def _rank_span(ranks: tuple[int, ...]) -> str:
    if ranks and list(ranks) == list(range(ranks[0], ranks[0] + len(ranks))):
        return f"{ranks[0]}..{ranks[-1]}"
    return repr(ranks) if len(ranks) <= 8 else f"{ranks[:8]!r}..."


def _relabel(flow: Flow, x: int, y: int, chunk_map: dict[int, int] | None = None) -> Flow:
    src = y if flow.src == x else x if flow.src == y else flow.src
    dst = y if flow.dst == x else x if flow.dst == y else flow.dst
    chunks = flow.chunks
    if chunk_map:
        chunks = tuple(sorted(chunk_map.get(c, c) for c in chunks))
    if src == flow.src and dst == flow.dst and chunks == flow.chunks:
        return flow
    return replace(flow, src=src, dst=dst, chunks=chunks)


def _owned_chunk_map(pattern: Pattern, x: int, y: int) -> dict[int, int]:
    """Chunk renaming of a global swap: x's k-th owned chunk <-> y's k-th owned chunk."""
    owned_x = [c.id for c in pattern.chunks if c.owner == x]
    owned_y = [c.id for c in pattern.chunks if c.owner == y]
    if len(owned_x) != len(owned_y):
        raise PatternError(
            f"GlobalSwap({x}, {y}): in a {pattern.kind} rank {x} owns {len(owned_x)} chunk(s) and "
            f"rank {y} owns {len(owned_y)}; a global swap needs equal counts to move the owners' "
            "data with them"
        )
    mapping = dict(zip(owned_x, owned_y, strict=True))
    mapping.update(zip(owned_y, owned_x, strict=True))
    return mapping


@dataclass(frozen=True, slots=True)
class GlobalSwap:
    """Swap ranks ``x`` and ``y`` in every flow (①, §5.3.1).

    Equivalent to exchanging the two devices in the rank-to-device mapping, so for AllReduce it
    always keeps the meaning; for owned chunks it renames them too (module docstring).
    """

    x: int
    y: int
    kind: ClassVar[str] = "global"

    def __post_init__(self) -> None:
        _check_pair("GlobalSwap", self.x, self.y)

    @property
    def graph(self) -> None:
        """Global swaps touch every chunk graph; ``None`` keeps the three records alike."""
        return None

    def apply(self, pattern: Pattern) -> Pattern:
        """The pattern with ``x`` and ``y`` exchanged everywhere.

        Raises
        ------
        PatternError
            If ``x`` or ``y`` is not a rank of the pattern, or (owned chunks) they own different
            numbers of chunks.
        """
        _check_ranks("GlobalSwap", pattern, self.x, self.y)
        chunk_map = (
            _owned_chunk_map(pattern, self.x, self.y)
            if pattern.kind in ("allgather", "reduce_scatter")
            else None
        )
        return pattern.relabelled(_relabel(f, self.x, self.y, chunk_map) for f in pattern.flows)

    def describe(self) -> str:
        return f"global swap {self.x}<->{self.y} (all chunk graphs)"


@dataclass(frozen=True, slots=True)
class ChunkLocalSwap:
    """Swap ranks ``x`` and ``y`` only inside chunk graph ``graph`` (②, §5.3.1).

    ``graph`` indexes :meth:`react.model.pattern.Pattern.chunk_graphs`; the other chunk graphs keep
    their flows, so only the paths of one independent sub-pattern change.
    """

    graph: int
    x: int
    y: int
    kind: ClassVar[str] = "chunk_local"

    def __post_init__(self) -> None:
        _check_pair("ChunkLocalSwap", self.x, self.y)
        if not isinstance(self.graph, int) or isinstance(self.graph, bool) or self.graph < 0:
            raise PatternError(
                f"ChunkLocalSwap: graph must be a chunk-graph index >= 0, got graph={self.graph!r}"
            )

    def apply(self, pattern: Pattern) -> Pattern:
        """The pattern with ``x`` and ``y`` exchanged in the flows of chunk graph ``graph``.

        Raises
        ------
        PatternError
            If ``x`` or ``y`` is not a rank of the pattern or ``graph`` is not a chunk graph of it.
        """
        _check_ranks("ChunkLocalSwap", pattern, self.x, self.y)
        _check_graph("ChunkLocalSwap", pattern, self.graph)
        return _swap_in_graph(pattern, self.graph, self.x, self.y, None, None)

    def describe(self) -> str:
        return f"chunk-local swap {self.x}<->{self.y} in chunk graph {self.graph}"


@dataclass(frozen=True, slots=True)
class PositionSwap:
    """Swap the TEN positions of ``x`` and ``y`` in chunk graph ``graph`` over a step window (③).

    Only flows of ``graph`` with ``first_step <= step <= last_step`` are relabelled. The paper
    finds such swaps by brute force over vertex pairs (appendix A.3); which windows
    :class:`react.model.swapspace.SwapSpace` proposes is documented there.
    """

    graph: int
    x: int
    y: int
    first_step: int
    last_step: int
    kind: ClassVar[str] = "position"

    def __post_init__(self) -> None:
        _check_pair("PositionSwap", self.x, self.y)
        if not isinstance(self.graph, int) or isinstance(self.graph, bool) or self.graph < 0:
            raise PatternError(
                f"PositionSwap: graph must be a chunk-graph index >= 0, got graph={self.graph!r}"
            )
        if not (isinstance(self.first_step, int) and isinstance(self.last_step, int)):
            raise PatternError(
                f"PositionSwap: steps must be integers, got first_step={self.first_step!r}, "
                f"last_step={self.last_step!r}"
            )
        if not 1 <= self.first_step <= self.last_step:
            raise PatternError(
                "PositionSwap: expected 1 <= first_step <= last_step, got "
                f"first_step={self.first_step}, last_step={self.last_step}"
            )

    def apply(self, pattern: Pattern) -> Pattern:
        """The pattern with ``x`` and ``y`` exchanged in ``graph``'s flows inside the window.

        Raises
        ------
        PatternError
            If ``x`` or ``y`` is not a rank of the pattern or ``graph`` is not a chunk graph of it.
        """
        _check_ranks("PositionSwap", pattern, self.x, self.y)
        _check_graph("PositionSwap", pattern, self.graph)
        return _swap_in_graph(
            pattern, self.graph, self.x, self.y, self.first_step, self.last_step
        )

    def describe(self) -> str:
        return (
            f"position swap {self.x}<->{self.y} in chunk graph {self.graph}, "
            f"steps {self.first_step}..{self.last_step}"
        )


Swap = GlobalSwap | ChunkLocalSwap | PositionSwap


def _swap_in_graph(
    pattern: Pattern, graph: int, x: int, y: int, first: int | None, last: int | None
) -> Pattern:
    touched = set(pattern.flows_of_chunk_graph(graph))
    flows = list(pattern.flows)
    for i in touched:
        flow = flows[i]
        if first is not None and last is not None and not first <= flow.step <= last:
            continue
        flows[i] = _relabel(flow, x, y)
    return pattern.relabelled(flows)


def global_swap(pattern: Pattern, x: int, y: int) -> Pattern:
    """``GlobalSwap(x, y).apply(pattern)``."""
    return GlobalSwap(x, y).apply(pattern)


def chunk_local_swap(pattern: Pattern, graph: int, x: int, y: int) -> Pattern:
    """``ChunkLocalSwap(graph, x, y).apply(pattern)``."""
    return ChunkLocalSwap(graph, x, y).apply(pattern)


def position_swap(
    pattern: Pattern, graph: int, x: int, y: int, first_step: int, last_step: int
) -> Pattern:
    """``PositionSwap(graph, x, y, first_step, last_step).apply(pattern)``."""
    return PositionSwap(graph, x, y, first_step, last_step).apply(pattern)
