"""Replays of chunk graphs shared between the swap spaces of related patterns."""

from __future__ import annotations

from collections import OrderedDict

from react.model.errors import PatternError
from react.model.pattern import Pattern
from react.model.replay.graph import GraphReplay

__all__ = ["ReplayCache"]


class ReplayCache:
    """Replays of chunk graphs shared by the swap spaces of related patterns, least recently
    used dropped first.

    A replay depends only on the collective's meaning (kind, ranks, root, chunks) and on the
    flows of its chunk graph, which is its key, so a space gets the same answers from a shared
    replay as from its own; its caches (verdicts, paths, boundaries) then serve every space
    whose pattern has that chunk graph. It keeps at most ``size`` replays and, with
    ``max_entries``, at most that many :attr:`GraphReplay.entries` in all (the newest replay
    whatever its size): a dropped replay is built again when asked for, with the same answers.
    """

    def __init__(self, size: int = 256, max_entries: int | None = None) -> None:
        if not (isinstance(size, int) and size >= 1):
            raise PatternError(f"ReplayCache: size must be a positive integer, got {size!r}")
        if max_entries is not None and not (isinstance(max_entries, int) and max_entries >= 1):
            raise PatternError(
                f"ReplayCache: max_entries must be a positive integer or None, got {max_entries!r}")
        self._size = size
        self._max_entries = max_entries
        self._entries = 0
        self._replays: OrderedDict[tuple[object, ...], GraphReplay] = OrderedDict()

    def __len__(self) -> int:
        return len(self._replays)

    def get(self, pattern: Pattern, g: int, pos: dict[int, int]) -> GraphReplay:
        block = pattern.chunk_graphs()[g]
        key = (pattern.kind, pattern.ranks, pattern.root, pattern.chunks, block,
               tuple(pattern.flows[i] for i in pattern.flows_of_chunk_graph(g)))
        replay = self._replays.get(key)
        if replay is None:
            replay = GraphReplay(pattern, g, pos)
            self._replays[key] = replay
            self._entries += replay.entries
            while len(self._replays) > 1 and (
                    len(self._replays) > self._size
                    or (self._max_entries is not None and self._entries > self._max_entries)):
                self._entries -= self._replays.popitem(last=False)[1].entries
        else:
            self._replays.move_to_end(key)
        return replay

