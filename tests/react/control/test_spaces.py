"""The swap spaces' budget (react/control/spaces.py): what a space weighs, what is kept."""

from react.control.spaces import SpaceCache
from react.patterns import allgather_recursive_doubling, allreduce_double_binary_tree


def test_a_space_is_weighed_with_the_replays_it_holds():
    # Recursive doubling on 16 ranks: two chunk graphs of 8 chunks over 4 steps; rank 0's swaps
    # replay one of them, 16 ranks x 8 chunks x 4 steps = 512 entries, which the space weighs
    # beside its 64 flows.
    rd = allgather_recursive_doubling(16)
    spaces = SpaceCache()
    space = spaces.get(rd)
    assert spaces.bytes_of(space) == 64 * SpaceCache.SPACE_BYTES_PER_FLOW
    space.candidate_classes(0)
    assert space.replay_entries() == 512
    assert spaces.bytes_of(space) == (64 * SpaceCache.SPACE_BYTES_PER_FLOW
                                      + 512 * SpaceCache.REPLAY_BYTES_PER_ENTRY)


def test_the_least_recently_used_space_goes_first_and_the_newest_stays():
    tree8, tree16, rd8 = (allreduce_double_binary_tree(8), allreduce_double_binary_tree(16),
                          allgather_recursive_doubling(8))
    spaces = SpaceCache(max_spaces=2)
    first = spaces.get(tree8)
    second = spaces.get(tree16)
    assert spaces.get(tree8) is first  # kept, and now the most recently used
    spaces.get(rd8)  # a third: tree16, least recently used, goes
    assert len(spaces) == 2 and spaces.get(tree8) is first
    assert spaces.get(tree16) is not second  # built again
    # A budget below one space's weight still keeps the newest space.
    tiny = SpaceCache(max_bytes=1)
    tiny.get(tree8)
    tiny.get(tree16)
    assert len(tiny) == 1
