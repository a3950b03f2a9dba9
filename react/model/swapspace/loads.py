"""Degree loads: what makes a viable swap preferred for a congested rank (§5.3.2).

A rank's degree load is ``sum over t of deg(t, r)`` (``in`` or ``out`` only with a direction);
a swap is preferred for the congested rank ``c`` (green in Fig. 1, against yellow) if it
strictly lowers ``c``'s load. The controller asks this of every candidate it ranks, so the
load after a swap is computed from cached Python lists over the few steps the swap changes.
"""

from __future__ import annotations

from react.model.swapspace.tables import Degrees

__all__ = ["Loads", "load_of"]


class Loads:
    """Degree loads of a pattern's ranks, before and after a swap, from its degree tables."""

    def __init__(self, degrees: Degrees) -> None:
        self._d = degrees
        self._rows: dict[tuple[int, str], tuple[list[int], list[int], int]] = {}
        self._profiles: dict[tuple[int, int], list[tuple[int, int, int]]] = {}

    def load(self, c: int, direction: str) -> int:
        """Rank position ``c``'s degree load in ``direction``."""
        return int(self._d.vector(direction)[c].sum())

    def after(self, c: int, other: int, g: int, first: int, last: int, direction: str) -> int:
        """``c``'s load once ``c`` and ``other`` exchange places in chunk graph ``g``'s steps
        ``first..last``: on those steps ``c`` gives up its own flows there and takes the
        other's."""
        tin_c, tout_c, total = self._row(c, direction)
        changes: dict[int, list[int]] = {}
        for pos, sign in ((c, -1), (other, 1)):
            for step, gin, gout in self._profile(g, pos):
                if first <= step <= last:
                    entry = changes.setdefault(step, [tin_c[step], tout_c[step]])
                    entry[0] += sign * gin
                    entry[1] += sign * gout
        for step, (new_in, new_out) in changes.items():
            total += (load_of(direction, new_in, new_out)
                      - load_of(direction, tin_c[step], tout_c[step]))
        return total

    def _row(self, c: int, direction: str) -> tuple[list[int], list[int], int]:
        """``c``'s whole-pattern in and out degrees per step, and its load in ``direction``."""
        key = (c, direction)
        row = self._rows.get(key)
        if row is None:
            row = (self._d.tin[c].tolist(), self._d.tout[c].tolist(), self.load(c, direction))
            self._rows[key] = row
        return row

    def _profile(self, g: int, pos: int) -> list[tuple[int, int, int]]:
        """``(step, in, out)`` of rank position ``pos`` in chunk graph ``g``, by step."""
        key = (g, pos)
        profile = self._profiles.get(key)
        if profile is None:
            t, gin, gout = self._d.tables[g].rank_profile(pos)
            profile = list(zip(t.tolist(), gin.tolist(), gout.tolist(), strict=True))
            self._profiles[key] = profile
        return profile


def load_of(direction: str, tin: int, tout: int) -> int:
    """One step's contribution to a load in ``direction``."""
    if direction == "in":
        return tin
    if direction == "out":
        return tout
    return max(tin, tout)
