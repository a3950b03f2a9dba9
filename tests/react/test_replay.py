"""Shared replays of chunk graphs: bounded, and a dropped replay rebuilt gives the same answers."""

import pytest

from react.errors import PatternError
from react.patterns import GENERATORS
from react.replay import ReplayCache
from react.swapspace import SwapSpace


def test_replay_cache_size_is_checked():
    with pytest.raises(PatternError, match="size must be a positive integer, got 0"):
        ReplayCache(size=0)


def test_replay_cache_keeps_within_its_entries_and_answers_the_same():
    # Recursive doubling on 16 ranks: each chunk graph's replay holds 16 x 8 x 4 = 512 entries;
    # a bound of 600 keeps one at a time, and the answers are those of a fresh space.
    base = GENERATORS["allgather_recursive_doubling"](16)
    shared = ReplayCache(size=64, max_entries=600)
    together = SwapSpace(base, check=False, replays=shared)
    alone = SwapSpace(base, check=False)
    for rank in base.ranks:
        assert together.swaps_for(rank) == alone.swaps_for(rank)
        assert len(shared) == 1
    with pytest.raises(PatternError, match="max_entries must be a positive integer or None, got 0"):
        ReplayCache(size=4, max_entries=0)
