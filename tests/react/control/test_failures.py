"""Failure memory (react/control/failures.py): what failed trials exclude, per base and picture."""

from react.control.failures import FailureMemory
from react.model.transforms import GlobalSwap
from react.patterns import allreduce_double_binary_tree, allreduce_ring

INTO_3 = frozenset({(3, "in")})
INTO_3_AND_5 = frozenset({(3, "in"), (5, "in")})
OUT_OF_6 = frozenset({(6, "out")})


def test_failed_swaps_are_excluded_under_the_same_picture_only():
    # On the tree: {3<->0, 3<->1} failed with rank 3 congested inbound, {3<->2} with ranks 3
    # and 5, {6<->7} with rank 6 outbound. At overlap 0.5, {3 in} and {3 in, 5 in} are the same
    # picture (Jaccard 1/2); {6 out} is another (0).
    tree = allreduce_double_binary_tree(8)
    memory = FailureMemory(picture_overlap=0.5)
    memory.remember(tree, INTO_3, [GlobalSwap(3, 0), GlobalSwap(3, 1)])
    memory.remember(tree, INTO_3_AND_5, [GlobalSwap(3, 2)])
    memory.remember(tree, OUT_OF_6, [GlobalSwap(6, 7)])
    assert memory.excluded(tree, INTO_3) == {GlobalSwap(3, 0), GlobalSwap(3, 1), GlobalSwap(3, 2)}
    assert memory.excluded(tree, OUT_OF_6) == {GlobalSwap(6, 7)}
    # At overlap 0.6 the two pictures of rank 3 are no longer the same.
    strict = FailureMemory(picture_overlap=0.6)
    strict.remember(tree, INTO_3, [GlobalSwap(3, 0)])
    strict.remember(tree, INTO_3_AND_5, [GlobalSwap(3, 2)])
    assert strict.excluded(tree, INTO_3) == {GlobalSwap(3, 0)}


def test_failures_belong_to_their_base_pattern():
    tree, ring = allreduce_double_binary_tree(8), allreduce_ring(8)
    memory = FailureMemory(picture_overlap=0.5)
    memory.remember(tree, INTO_3, [GlobalSwap(3, 0)])
    assert memory.excluded(ring, INTO_3) == set()


def test_only_the_latest_failures_of_a_pattern_are_kept():
    tree = allreduce_double_binary_tree(8)
    memory = FailureMemory(picture_overlap=0.5, per_pattern=2)
    for partner in (0, 1, 2):
        memory.remember(tree, INTO_3, [GlobalSwap(3, partner)])
    assert memory.excluded(tree, INTO_3) == {GlobalSwap(3, 1), GlobalSwap(3, 2)}
