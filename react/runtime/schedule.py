"""One rank's program of Algorithm 2 (paper Appendix B.1) and the message's buffer layout.

Algorithm 2 runs each chunk graph independently (one thread each, :mod:`react.runtime.collective`).
Within one chunk graph a rank walks the steps in which it has operations, in increasing order: it
posts every send and receive of that step, waits for all of them, then applies the receives in
pattern flow order. The program itself is defined once, in :mod:`react.model.execution` (the
simulator derives its execution rule from the same programs); this module hands it to a rank and
lays out the buffer. It does no I/O.

Buffer layout (DESIGN.md "Execution semantics"): a message of ``count`` elements; chunk ``c`` is
the element range ``[bounds[c], bounds[c+1])`` with ``bounds = round(count * cumulative
fraction)`` in chunk-id order; a flow's payload is the concatenation of its chunks' ranges in
chunk-id order.
"""

from __future__ import annotations

import numpy as np

from react.model.errors import ReactError
from react.model.execution import GraphProgram, StepOps, rank_programs
from react.model.pattern import Pattern

__all__ = [
    "FLOW_TAG_LIMIT",
    "GraphProgram",
    "ScheduleError",
    "StepOps",
    "chunk_bounds",
    "flow_ranges",
    "flow_tag",
    "rank_program",
]

FLOW_TAG_LIMIT = 1 << 21
"""Flows per pattern a tag can name (:func:`flow_tag` packs the epoch above them)."""
_EPOCH_TAG_MOD = 1 << 10


class ScheduleError(ReactError, ValueError):
    """A pattern or buffer RCollective cannot run (rank not in the pattern, buffer too short)."""


def rank_program(pattern: Pattern, rank: int) -> tuple[GraphProgram, ...]:
    """The program of ``rank``: one :class:`GraphProgram` per chunk graph it takes part in.

    Taken from :func:`react.model.execution.rank_programs`, the one definition of Algorithm 2's
    per-rank order, which the simulator follows too.

    Raises
    ------
    ScheduleError
        If ``rank`` is not one of the pattern's ranks.
    """
    programs = rank_programs(pattern)
    if rank not in programs:
        raise ScheduleError(
            f"rank_program: rank {rank!r} is not in the pattern's ranks {list(pattern.ranks)}"
        )
    return programs[rank]


def chunk_bounds(pattern: Pattern, count: int) -> np.ndarray:
    """Element offsets ``bounds`` (length ``C + 1``): chunk ``c`` is ``[bounds[c], bounds[c+1])``.

    ``bounds[c] = round(count * (fraction_0 + ... + fraction_{c-1}))``, ``bounds[C] = count``.
    A chunk may be empty when ``count`` is smaller than the number of chunks.
    """
    if not isinstance(count, (int, np.integer)) or isinstance(count, bool) or count < 0:
        raise ScheduleError(f"chunk_bounds: count must be a non-negative integer, got {count!r}")
    fractions = np.array([c.fraction for c in pattern.chunks], dtype=np.float64)
    cumulative = np.concatenate(([0.0], np.cumsum(fractions)))
    bounds = np.rint(cumulative * int(count)).astype(np.int64)
    bounds[-1] = int(count)
    return np.maximum.accumulate(np.minimum(bounds, int(count)))


def flow_ranges(
    chunks: tuple[int, ...], bounds: np.ndarray
) -> tuple[tuple[int, int], ...]:
    """Element ranges of a flow's payload, in chunk-id order, adjacent ranges merged."""
    out: list[tuple[int, int]] = []
    for c in chunks:
        lo, hi = int(bounds[c]), int(bounds[c + 1])
        if hi <= lo:
            continue
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def flow_tag(epoch: int, flow_index: int) -> int:
    """The transport tag of flow ``flow_index`` in ``epoch``: unique per (epoch mod 1024, flow).

    Fits in 31 bits (Gloo's tag limit). Ranks are never 1024 epochs apart (each epoch's sends
    wait for the peers' receives), so tags of live messages never collide.
    """
    if not 0 <= flow_index < FLOW_TAG_LIMIT:
        raise ScheduleError(
            f"flow_tag: flow index {flow_index!r} out of range; patterns of at most "
            f"{FLOW_TAG_LIMIT} flows can run"
        )
    return (epoch % _EPOCH_TAG_MOD) * FLOW_TAG_LIMIT + flow_index
