"""What failed trials exclude from later explorations: their swaps, per base pattern and picture.

The paper keeps a tabu list and clears it on every re-exploration, which under steady
congestion retries the same failures forever. Here a trial that was reverted excludes each of
its swaps from explorations of the same base pattern for as long as the congestion picture
(:mod:`react.control.picture`) stays the same; when congestion moves, what failed under the old
picture may pay under the new one and is tried again (docs/deviations.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from react.control.picture import Picture, same_picture
from react.model.pattern import Flow, Pattern
from react.model.transforms import Swap

__all__ = ["FailureMemory"]


class FailureMemory:
    """The failed trials of each base pattern, each with the picture it failed under.

    Parameters
    ----------
    picture_overlap : float
        Two pictures are the same at this Jaccard similarity or more
        (:func:`react.control.picture.same_picture`).
    per_pattern : int
        Failures kept per base pattern, the oldest dropped first (64).
    """

    def __init__(self, picture_overlap: float, per_pattern: int = 64) -> None:
        self._overlap = picture_overlap
        self._per_pattern = per_pattern
        self._failed: dict[tuple[Flow, ...], list[tuple[Picture, frozenset[Swap]]]] = {}

    def remember(self, base: Pattern, picture: Picture, swaps: Iterable[Swap]) -> None:
        """A trial of ``swaps`` on ``base`` under ``picture`` was reverted."""
        failures = self._failed.setdefault(base.flows, [])
        failures.append((picture, frozenset(swaps)))
        del failures[:-self._per_pattern]

    def excluded(self, base: Pattern, picture: Picture) -> set[Swap]:
        """Every swap of a failed trial on ``base`` under a picture the same as ``picture``."""
        return {swap for seen, swaps in self._failed.get(base.flows, ())
                if same_picture(seen, picture, self._overlap) for swap in swaps}
