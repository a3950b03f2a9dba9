"""Degree tables of a pattern, built once per swap space in one pass over the flows.

The degree rule (§5.3.2) and the degree load compare, per (rank, step), the whole pattern's
in- and out-degrees with what one chunk graph contributes to them; a 1,024-rank ring has 2
million flows, so both live in numpy arrays, and one chunk graph's entries of a rank or of a
step are a slice, not a search.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from react.model.pattern import Pattern

__all__ = ["Degrees", "GraphTable", "degree_tables"]


@dataclass(frozen=True, slots=True)
class GraphTable:
    """Degree contributions of one chunk graph, as numpy arrays of (rank position, step) entries.

    ``by_step`` / ``by_rank`` hold the same entries ``(rank, step, in, out)`` sorted by step and
    by rank, with ``step_start`` / ``rank_start`` giving where each step's / rank's run begins
    (index ``k`` of ``steps`` / rank position ``k``), so a profile is a slice, not a search.
    """

    by_step: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    steps: np.ndarray
    step_start: np.ndarray
    by_rank: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    rank_start: np.ndarray
    span: tuple[int, int]

    def rank_profile(self, pos: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(steps, in, out)`` of rank position ``pos`` in this graph, by step."""
        lo, hi = self.rank_start[pos], self.rank_start[pos + 1]
        _, t, gin, gout = self.by_rank
        return t[lo:hi], gin[lo:hi], gout[lo:hi]

    def step_column(self, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rank positions, in, out)`` of this graph at ``step``, by rank (empty if none)."""
        k = int(np.searchsorted(self.steps, step))
        if k == len(self.steps) or self.steps[k] != step:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        lo, hi = self.step_start[k], self.step_start[k + 1]
        r, _, gin, gout = self.by_step
        return r[lo:hi], gin[lo:hi], gout[lo:hi]


@dataclass(frozen=True, slots=True)
class Degrees:
    """The whole pattern's ``(n, steps + 1)`` in- and out-degree arrays (``deg`` their maximum,
    §5.2) and the per-chunk-graph tables."""

    tables: tuple[GraphTable, ...]
    tin: np.ndarray
    tout: np.ndarray
    deg: np.ndarray

    def vector(self, direction: str) -> np.ndarray:
        """The degrees a load in ``direction`` sums: in, out, or (``"any"``) their maximum."""
        if direction == "in":
            return self.tin
        if direction == "out":
            return self.tout
        return self.deg


def degree_tables(pattern: Pattern, pos: dict[int, int]) -> tuple[Degrees, dict[str, np.ndarray]]:
    """The pattern's degrees and its flows as arrays (step, src, dst, is_copy, graph, chunk: the
    first chunk of the flow; positions for ranks), in pattern order.

    One pass over the flows in Python, the rest in numpy.
    """
    flows = pattern.flows
    n, steps = pattern.n, pattern.num_steps
    graph_of_chunk = np.zeros(len(pattern.chunks), dtype=np.int64)
    for g, block in enumerate(pattern.chunk_graphs()):
        graph_of_chunk[list(block)] = g
    count = len(flows)
    step = np.fromiter((f.step for f in flows), dtype=np.int64, count=count)
    src = np.fromiter((pos[f.src] for f in flows), dtype=np.int64, count=count)
    dst = np.fromiter((pos[f.dst] for f in flows), dtype=np.int64, count=count)
    first_chunk = np.fromiter((f.chunks[0] for f in flows), dtype=np.int64, count=count)
    is_copy = np.fromiter((f.op == "copy" for f in flows), dtype=bool, count=count)
    graph = graph_of_chunk[first_chunk]

    tin = np.zeros((n, steps + 1), dtype=np.int64)
    tout = np.zeros((n, steps + 1), dtype=np.int64)
    np.add.at(tin, (dst, step), 1)
    np.add.at(tout, (src, step), 1)
    arrays = {
        "step": step, "src": src, "dst": dst, "is_copy": is_copy, "graph": graph,
        "chunk": first_chunk,
    }
    tables = _graph_tables(n, steps + 1, len(pattern.chunk_graphs()), arrays)
    return Degrees(tables, tin, tout, np.maximum(tin, tout)), arrays


def _graph_tables(
    n: int, width: int, graphs: int, arrays: dict[str, np.ndarray]
) -> tuple[GraphTable, ...]:
    """Entries (graph, rank, step) -> (in, out), aggregated, cut into one table per graph."""
    graph, src, dst, step = arrays["graph"], arrays["src"], arrays["dst"], arrays["step"]
    count = len(step)
    key = np.concatenate([(graph * n + dst) * width + step, (graph * n + src) * width + step])
    ein = np.concatenate([np.ones(count, dtype=np.int64), np.zeros(count, dtype=np.int64)])
    uniq, inverse = np.unique(key, return_inverse=True)
    agg_in = np.bincount(inverse, weights=ein, minlength=len(uniq)).astype(np.int64)
    agg_out = np.bincount(inverse, minlength=len(uniq)).astype(np.int64) - agg_in
    e_graph = uniq // (n * width)
    e_rank = (uniq // width) % n
    e_step = uniq % width
    graph_bounds = np.searchsorted(e_graph, np.arange(graphs + 1))

    tables = []
    for g in range(graphs):
        lo, hi = graph_bounds[g], graph_bounds[g + 1]
        r, t, gi, go = e_rank[lo:hi], e_step[lo:hi], agg_in[lo:hi], agg_out[lo:hi]
        by_rank = (r, t, gi, go)  # already sorted by (rank, step)
        rank_start = np.searchsorted(r, np.arange(n + 1))
        o = np.argsort(t, kind="stable")
        by_step = (r[o], t[o], gi[o], go[o])
        uniq_steps, step_first = np.unique(by_step[1], return_index=True)
        step_start = np.append(step_first, len(o))
        tables.append(
            GraphTable(
                by_step, uniq_steps, step_start, by_rank, rank_start,
                (int(uniq_steps[0]), int(uniq_steps[-1])),
            )
        )
    return tuple(tables)
