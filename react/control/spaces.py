"""The swap spaces an exploration walks, kept within a memory budget.

An exploration asks for the :class:`~react.model.swapspace.SwapSpace` of every pattern its beam
reaches, and the next exploration mostly starts from one of them, so spaces are kept, least
recently used dropped first. A space is weighed by its pattern's flows and by the chunk-graph
replays it holds; the replays related patterns share live in one
:class:`~react.model.replay.ReplayCache` beside them. A space or replay dropped is built again
when asked for, with the same answers, so the budget changes the memory and the time a
decision takes, never the decision.
"""

from __future__ import annotations

from collections import OrderedDict

from react.model.pattern import Flow, Pattern
from react.model.replay import ReplayCache
from react.model.swapspace import SwapSpace

__all__ = ["SpaceCache"]


class SpaceCache:
    """Swap spaces by pattern, least recently used dropped first (module docstring).

    Parameters
    ----------
    max_spaces : int
        Spaces kept at most (64).
    max_bytes : int
        What the kept spaces may hold, estimated (:meth:`bytes_of`; 192 MiB); the newest space
        is kept whatever its size. Counting flows alone let 64 spaces of a 240-rank
        recursive-doubling AllGather (1,120 flows, but one replay of ~85 MiB each) fill 4.6 GB.
    shared_replay_entries : int
        Entries of the replays shared between spaces (2**19, about 100 MiB), beyond those the
        kept spaces hold.
    """

    SPACE_BYTES_PER_FLOW = 350
    REPLAY_BYTES_PER_ENTRY = 200
    """Measured with ``tracemalloc`` after three ranks' swaps: a 240-rank RD AllGather's replay,
    85 MiB for 518,400 entries (164 bytes each); one of a 128-rank one's two, 22 MiB for 57,344
    (380 each). Set for the large replays the bound is there for."""

    def __init__(self, *, max_spaces: int = 64, max_bytes: int = 192 * 2**20,
                 shared_replay_entries: int = 2**19) -> None:
        self._max_spaces = max_spaces
        self._max_bytes = max_bytes
        self._spaces: OrderedDict[tuple[Flow, ...], SwapSpace] = OrderedDict()
        self.replays = ReplayCache(4 * max_spaces, shared_replay_entries)
        """The chunk-graph replays shared by the spaces."""

    def __len__(self) -> int:
        return len(self._spaces)

    def get(self, pattern: Pattern, *, check: bool = False) -> SwapSpace:
        """The space of ``pattern``, built (``check``: verifying the pattern first) if not kept."""
        key = pattern.flows
        space = self._spaces.get(key)
        if space is None:
            space = SwapSpace(pattern, check=check, replays=self.replays)
            self._spaces[key] = space
            held = sum(map(self.bytes_of, self._spaces.values()))
            while len(self._spaces) > 1 and (len(self._spaces) > self._max_spaces
                                             or held > self._max_bytes):
                held -= self.bytes_of(self._spaces.popitem(last=False)[1])
        else:
            self._spaces.move_to_end(key)
        return space

    def bytes_of(self, space: SwapSpace) -> int:
        """What ``space`` is estimated to hold: its pattern's flows and its replays' entries."""
        return (self.SPACE_BYTES_PER_FLOW * len(space.pattern.flows)
                + self.REPLAY_BYTES_PER_ENTRY * space.replay_entries())
