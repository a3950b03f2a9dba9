"""The incremental replay of a swapped window: what is left when no proof decides.

Relabelling rank positions ``x`` and ``y`` in a chunk graph's flows of steps ``first..last``
changes nothing before ``first``, so the replay starts there from the original's state. It
keeps only an *overlay*: the buffers whose values differ from the original run's. At each step
it replays the ranks the swap touches or the overlay names; once past the window with an empty
overlay, the rest is the original's, which verifies. The step rule is the original run's
(:func:`~react.model.replay.trajectory.step_updates`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable

from react.model.replay.trajectory import Inflows, Trajectory, step_updates

__all__ = ["replay_swap"]

Overlay = dict[tuple[int, int], int]  # (rank position, chunk) -> value differing from the run's


def replay_swap(run: Trajectory, x: int, y: int, first: int, last: int) -> bool:
    """Whether relabelling rank positions ``x`` and ``y`` in the flows of steps
    ``first..last`` of ``run``'s chunk graph keeps the graph valid (its final condition met,
    no violation on the way)."""
    overlay: Overlay = {}
    for t in run.steps[bisect_left(run.steps, first):]:
        inside = t <= last
        if not inside and not overlay:
            return True  # the rest of the replay is the original's, which verifies
        affected, inflows = _swapped_step(run, t, x, y, inside, overlay)

        def read(r: int, c: int, t: int = t, overlay: Overlay = overlay) -> int:
            v = overlay.get((r, c))
            return run.value(t - 1, r, c) if v is None else v

        updates = step_updates(t, read, inflows, None)
        if updates is None:
            return False
        new_overlay = _differences(run, t, (x, y, last), affected, updates, overlay, read)
        if new_overlay is None:
            return False
        overlay = new_overlay
    for key, v in overlay.items():
        want = run.final.get(key)
        if want is not None and v != want:
            return False
    return True


def _swapped_step(
    run: Trajectory, t: int, x: int, y: int, inside: bool, overlay: Overlay
) -> tuple[set[int], Inflows]:
    """The ranks to replay at step ``t`` and their inflows in the swapped graph: those the
    overlay names, inside the window also ``x``, ``y`` and the receivers of their sends (and
    of the overlay's); outside, the receivers of the overlay's ranks' sends."""

    def swap(r: int) -> int:
        return y if r == x else x if r == y else r

    dirty = {r for r, _ in overlay}
    into, out = run.into[t], run.out[t]
    affected = set(dirty)
    if inside:
        affected.update((x, y))
        for r in (x, y):
            for d, _, _ in out.get(r, ()):
                affected.add(swap(d))
        for r in dirty:
            for d, _, _ in out.get(swap(r), ()):
                affected.add(swap(d))
        inflows = {
            a: [(swap(s), ch, cp) for s, ch, cp in into.get(swap(a), ())] for a in affected
        }
    else:
        for r in dirty:
            for d, _, _ in out.get(r, ()):
                affected.add(d)
        inflows = {a: into.get(a, []) for a in affected}
    return affected, inflows


def _differences(
    run: Trajectory, t: int, swap: tuple[int, int, int], affected: set[int],
    updates: dict[tuple[int, int], int], overlay: Overlay, read: Callable[[int, int], int],
) -> Overlay | None:
    """The overlay after step ``t``: the replayed ranks' buffers whose values now differ from
    the original's; None if one is a wrong final value that nothing will write again.
    ``swap``: ``(x, y, last)``, the two ranks and the window's last step."""
    x, y, last = swap
    into = run.into[t]
    new_overlay: Overlay = {}
    # Only these buffers can differ from the original's after step t: those the swapped
    # step writes, those already differing, and those the original step writes. Any other
    # holds its original value of step t - 1, which the original kept through step t.
    maybe: dict[int, set[int]] = {a: set() for a in affected}
    for r, c in updates:
        maybe[r].add(c)
    for r, c in overlay:
        maybe[r].add(c)
    for a in affected:
        for _, chunks, _ in into.get(a, ()):
            maybe[a].update(chunks)
    order = run.col.__getitem__
    for a in affected:
        for c in sorted(maybe[a], key=order):
            v = updates.get((a, c))
            if v is None:
                v = read(a, c)
            if v != run.value(t, a, c):
                new_overlay[(a, c)] = v
                # Fail early: a wrong final value that nothing will write again.
                want = run.final.get((a, c))
                if want is not None and v != want:
                    other = y if a == x else x if a == y else -1
                    if not _written_after(run, t, (a, c), last, other):
                        return None
    return new_overlay


def _written_after(run: Trajectory, t: int, key: tuple[int, int], last: int, other: int) -> bool:
    """Whether the swapped graph writes buffer ``key = (r, c)`` after step ``t``; ``other`` is
    the partner of ``r`` if ``r`` is swapped (inside the window ``r`` then takes the partner's
    writes), else -1."""
    r, c = key
    inside = run.writes.get((other, c), ()) if other >= 0 else run.writes.get(key, ())
    k = bisect_right(inside, t)
    if k < len(inside) and inside[k] <= last:
        return True
    outside = run.writes.get(key, ())
    k = bisect_right(outside, max(t, last))
    return k < len(outside)
