"""The original run of a chunk graph as flat arrays, for questions about every buffer at once.

The swap space asks, for one window and all partners of a rank together, which buffers held
equal values at a step and which values were dead (overwritten before being read again). Asked
of the per-buffer history of :class:`~react.model.replay.trajectory.Trajectory` one buffer at a
time, that is a Python loop over ``n * chunks`` buffers per question; here it is a search in
sorted arrays. Positions are numbered ``r * chunks + j`` (rank position r, chunk column j), so
an answer for all of them reshapes to ``(n, chunks)``.
"""

from __future__ import annotations

import numpy as np

from react.model.replay.trajectory import Trajectory

__all__ = ["access_history", "overwritten", "value_ids"]


def access_history(run: Trajectory) -> dict[str, np.ndarray]:
    """The original trajectory and accesses as flat arrays, for whole-state queries.

    ``change``: every position's value changes (its initial value at step 0 first, then each
    write), keyed ``pos * span + step`` and ascending, with the interned id of the value (equal
    ids, equal buffers) in ``change_id``; ``nonzero``: whether the value of an id is not empty;
    ``group``: every (position, step) at which the position is accessed, keyed the same way,
    with whether any access there reads it (``group_reads``); ``final``: whether a position's
    final value is constrained.
    """
    width, span, col = len(run.chunks), run.span, run.col
    keys: list[int] = []
    values: list[int] = []
    for (r, c), steps in run.hist_steps.items():
        base = (r * width + col[c]) * span
        keys.extend([base + step for step in steps])
        values.extend(run.hist_vals[(r, c)])
    for r, c in run.initial.keys() - run.hist_steps.keys():  # never written
        keys.append((r * width + col[c]) * span)
        values.append(run.initial[(r, c)])
    interned: dict[int, int] = {}
    ids = [interned.setdefault(v, len(interned)) for v in values]
    change = np.asarray(keys, dtype=np.int64)
    order = np.argsort(change)
    events, reads = _events(run)
    order_e = np.argsort(events, kind="stable")
    event_keys, event_reads = events[order_e], reads[order_e]
    if event_keys.size:
        group, first = np.unique(event_keys, return_index=True)
        group_reads = np.logical_or.reduceat(event_reads, first)
    else:
        group, group_reads = event_keys, event_reads
    final = np.zeros(run.n * width, dtype=bool)
    final[[r * width + col[c] for r, c in run.final]] = True
    return {
        "span": np.asarray(span, dtype=np.int64),
        "change": change[order],
        "change_id": np.asarray(ids, dtype=np.int64)[order],
        "nonzero": np.asarray([v != 0 for v in interned], dtype=bool),
        "group": group,
        "group_reads": group_reads,
        "final": final,
    }


def value_ids(history: dict[str, np.ndarray], n: int, width: int, t: int) -> np.ndarray:
    """Interned ids of every position's original value at the end of step ``t`` (as
    :meth:`Trajectory.value`: the last change at a step <= t), shaped ``(n, width)``."""
    span = int(history["span"])
    base = np.arange(n * width, dtype=np.int64) * span
    at = np.searchsorted(history["change"], base + min(max(t, 0), span - 1), side="right") - 1
    return history["change_id"][at].reshape(n, width)


def overwritten(history: dict[str, np.ndarray], n: int, width: int, t: int) -> np.ndarray:
    """Per position, ``(n, width)``: if its value at the end of step ``t`` is dead -- its
    next access is a copy into it, with no read at that step -- the step of that copy;
    ``inf`` if it is never accessed again and the final condition does not constrain it;
    nan if it is live."""
    span = int(history["span"])
    base = np.arange(n * width, dtype=np.int64) * span
    group = history["group"]
    nxt = np.searchsorted(group, base + min(max(t, 0), span - 1), side="right")
    found = nxt < group.size
    nxt_in = np.where(found, nxt, 0)
    found &= (group[nxt_in] // span) == base // span  # the next access is this position's
    over = np.where(history["final"], np.nan, np.inf)
    step = (group[nxt_in] % span).astype(float)
    over = np.where(found, np.where(history["group_reads"][nxt_in], np.nan, step), over)
    return over.reshape(n, width)


def _events(run: Trajectory) -> tuple[np.ndarray, np.ndarray]:
    """Every access of a position, in flow order: its key ``pos * span + step`` and whether it
    reads (a send or a reduce into it reads the value at the end of step - 1; a copy into it
    only overwrites it, which is what makes a value dead)."""
    width, span, col = len(run.chunks), run.span, run.col
    event_keys: list[int] = []
    event_reads: list[bool] = []
    for t in run.steps:
        for d, flows in run.into[t].items():
            for s, chunks, is_copy in flows:
                for c in chunks:
                    j = col[c]
                    event_keys.append((s * width + j) * span + t)
                    event_reads.append(True)
                    event_keys.append((d * width + j) * span + t)
                    event_reads.append(not is_copy)
    return np.asarray(event_keys, dtype=np.int64), np.asarray(event_reads, dtype=bool)
