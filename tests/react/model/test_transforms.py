"""Tests for react.model.transforms: the three swaps rewrite exactly the flows they should."""

import pytest

from react.model.errors import PatternError
from react.model.pattern import Chunk, Flow, Pattern
from react.model.transforms import (
    PRIORITY,
    ChunkLocalSwap,
    GlobalSwap,
    PositionSwap,
    chunk_local_swap,
    global_swap,
    position_swap,
)
from react.model.verify import first_violation, verify
from react.patterns import allreduce_double_binary_tree, allreduce_ring


def _edges(pattern, graph=None):
    flows = pattern.flows
    if graph is not None:
        flows = [pattern.flows[i] for i in pattern.flows_of_chunk_graph(graph)]
    return sorted((f.step, f.src, f.dst, f.op) for f in flows)


@pytest.fixture
def dtree16():
    return allreduce_double_binary_tree(16)


@pytest.fixture
def allgather3():
    # A hand-made AllGather over ranks 0,1,2 (chunk c owned by rank c): everyone sends its own
    # chunk to both others at step 1.
    flows = [Flow(1, s, d, (s,), "copy") for s in range(3) for d in range(3) if s != d]
    chunks = tuple(Chunk(c, 1 / 3, owner=c) for c in range(3))
    return Pattern("allgather", (0, 1, 2), chunks, flows, name="direct")


def test_global_swap_relabels_every_flow(dtree16):
    swapped = GlobalSwap(3, 2).apply(dtree16)
    rename = {3: 2, 2: 3}
    expected = sorted(
        (f.step, rename.get(f.src, f.src), rename.get(f.dst, f.dst), f.op) for f in dtree16.flows
    )
    assert _edges(swapped) == expected
    verify(swapped)  # AllReduce is invariant under any permutation of ranks


def test_global_swap_renames_owned_chunks(allgather3):
    # Rank 0's chunk 0 must travel with rank 0's role: after 0<->1, rank 1 sends chunk 1
    # where rank 0 sent chunk 0, so the AllGather still verifies.
    swapped = global_swap(allgather3, 0, 1)
    assert Flow(1, 1, 2, (1,), "copy") in swapped.flows
    assert Flow(1, 0, 2, (0,), "copy") in swapped.flows
    verify(swapped)


def test_global_swap_with_unequal_ownership_raises():
    flows = [Flow(1, 0, 1, (0, 1), "copy"), Flow(1, 1, 0, (2,), "copy")]
    chunks = (Chunk(0, 0.25, 0), Chunk(1, 0.25, 0), Chunk(2, 0.5, 1))
    p = Pattern("allgather", (0, 1), chunks, flows)
    with pytest.raises(PatternError, match="owns 2 chunk"):
        GlobalSwap(0, 1).apply(p)


def test_chunk_local_swap_touches_only_its_graph(dtree16):
    # The paper's Fig. 1 swap: 3<->2 in tree T1 (chunk graph 1) leaves T0 as it was.
    swapped = ChunkLocalSwap(1, 3, 2).apply(dtree16)
    assert _edges(swapped, 0) == _edges(dtree16, 0)
    # In T1, 3 aggregated 5 and 1 at step 2; now 2 does, and 3 is a leaf under 1.
    assert (2, 5, 2, "reduce") in _edges(swapped, 1)
    assert (2, 1, 2, "reduce") in _edges(swapped, 1)
    assert (1, 3, 1, "reduce") in _edges(swapped, 1)
    assert all(f.dst != 3 for f in swapped.flows if f.op == "reduce")
    verify(swapped)
    assert chunk_local_swap(dtree16, 1, 3, 2) == swapped


def test_position_swap_touches_only_its_window(dtree16):
    # Reduce phase of T1 only (steps 1..4): the broadcast phase keeps 3 as the inner node.
    swapped = PositionSwap(1, 3, 2, 1, 4).apply(dtree16)
    before, after = _edges(dtree16, 1), _edges(swapped, 1)
    assert [e for e in after if e[0] > 4] == [e for e in before if e[0] > 4]
    assert (2, 5, 2, "reduce") in after
    assert (7, 3, 5, "copy") in after
    verify(swapped)
    assert position_swap(dtree16, 1, 3, 2, 1, 4) == swapped


def test_swaps_can_break_a_pattern():
    # Swapping only the first half of a ring's chunk path leaves the reduced chunk at the wrong
    # rank for the all-gather: the transform applies, the verifier says no.
    ring = allreduce_ring(4)
    swapped = PositionSwap(0, 0, 1, 1, 1).apply(ring)
    assert first_violation(swapped) is not None


def test_swap_is_an_involution(dtree16):
    for swap in (GlobalSwap(3, 12), ChunkLocalSwap(0, 3, 12), PositionSwap(1, 3, 12, 5, 8)):
        assert swap.apply(swap.apply(dtree16)).flows == dtree16.flows


def test_swaps_describe_themselves():
    assert GlobalSwap(3, 2).describe() == "global swap 3<->2 (all chunk graphs)"
    assert ChunkLocalSwap(1, 3, 2).describe() == "chunk-local swap 3<->2 in chunk graph 1"
    assert PositionSwap(1, 3, 2, 1, 4).describe() == (
        "position swap 3<->2 in chunk graph 1, steps 1..4"
    )
    kinds = [GlobalSwap(0, 1).kind, ChunkLocalSwap(0, 0, 1).kind, PositionSwap(0, 0, 1, 1, 1).kind]
    assert sorted(kinds, key=PRIORITY.__getitem__) == ["position", "chunk_local", "global"]


@pytest.mark.parametrize(
    "swap, message",
    [
        (GlobalSwap(3, 99), "rank 99"),
        (ChunkLocalSwap(2, 3, 4), "chunk graph 2"),
        (ChunkLocalSwap(0, -1, 4), "rank -1"),
        (PositionSwap(5, 3, 4, 1, 2), "chunk graph 5"),
    ],
)
def test_swap_of_unknown_rank_or_graph_raises(dtree16, swap, message):
    with pytest.raises(PatternError, match=message):
        swap.apply(dtree16)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: GlobalSwap(3, 3), "x=y=3"),
        (lambda: ChunkLocalSwap(0, 2, 2), "x=y=2"),
        (lambda: PositionSwap(0, 1, 2, 4, 3), "first_step=4"),
        (lambda: PositionSwap(0, 1, 2, 0, 3), "first_step=0"),
        (lambda: ChunkLocalSwap(-1, 1, 2), "graph=-1"),
        (lambda: GlobalSwap(1, "2"), "y='2'"),
    ],
)
def test_malformed_swap_raises(make, message):
    with pytest.raises(PatternError, match=message):
        make()
