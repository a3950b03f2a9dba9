"""The verifier: every violation kind is caught, with a message that says where and why."""

from __future__ import annotations

import pytest

from react.model.errors import PatternError
from react.model.pattern import Chunk, Flow, Pattern
from react.model.verify import first_violation, verify
from react.patterns import (
    allgather_ring,
    allreduce_double_binary_tree,
    allreduce_ring,
    broadcast_binary_tree,
    reduce_scatter_ring,
)


def _allreduce(n: int, flows: list[Flow], chunks: int = 1) -> Pattern:
    return Pattern(
        "allreduce", tuple(range(n)), tuple(Chunk(c, 1 / chunks) for c in range(chunks)), flows,
        name="hand",
    )


def _reduce(step, src, dst, chunk=0):
    return Flow(step, src, dst, (chunk,), "reduce")


def _copy(step, src, dst, chunk=0):
    return Flow(step, src, dst, (chunk,), "copy")


def test_verify_accepts_a_hand_made_allreduce():
    # 3 ranks, one chunk: 1 and 2 add into 0 at step 1 (0 = {0-2}), 0 copies back at step 2.
    p = _allreduce(3, [_reduce(1, 1, 0), _reduce(1, 2, 0), _copy(2, 0, 1), _copy(2, 0, 2)])
    assert verify(p) is None
    assert first_violation(p) is None


def test_verify_catches_a_reduce_that_adds_a_rank_twice():
    # Step 2 adds rank 1's input into rank 0 a second time: 0 holds {0-2}, adds {1}.
    p = _allreduce(3, [_reduce(1, 1, 0), _reduce(1, 2, 0), _reduce(2, 1, 0),
                       _copy(3, 0, 1), _copy(3, 0, 2)])
    with pytest.raises(PatternError) as err:
        verify(p)
    assert str(err.value) == (
        "hand (allreduce, n=3) is not valid: step 2, flow 1 -> 0 (reduce of chunk 0): rank 0 "
        "holds chunk 0 = {0-2} and would add {1}, counting {1} twice; should hold each "
        "contribution once"
    )


def test_verify_catches_two_reduces_carrying_one_rank_at_one_step():
    # Step 1: 0 adds into 1 (1 = {0,1}). Step 2: 0 and 1 both add into 2: {0} arrives twice.
    p = _allreduce(3, [_reduce(1, 0, 1), _reduce(2, 0, 2), _reduce(2, 1, 2),
                       _copy(3, 2, 0), _copy(3, 2, 1)])
    assert first_violation(p) == (
        "step 2, flow 1 -> 2 (reduce of chunk 0): rank 2 holds chunk 0 = {0,2} and would add "
        "{0,1}, counting {0} twice; should hold each contribution once"
    )


def test_verify_catches_a_copy_overwriting_a_partial_sum():
    # Step 1: 1 adds into 0 (0 = {0,1}); step 2: 2 *copies* over it (0 = {2}): {0,1} are lost
    # from rank 0, so the broadcast from 0 at step 3 spreads {2} only.
    p = _allreduce(3, [_reduce(1, 1, 0), _copy(2, 2, 0), _copy(3, 0, 1), _copy(3, 0, 2)])
    assert first_violation(p) == (
        "at the end, rank 0 holds chunk 0 = {2}, should hold {0-2} (missing {0,1}); {0,1} was "
        "first overwritten at step 2 by the copy 2 -> 0, which replaced {0,1} held by rank 0"
    )


def test_verify_catches_a_dropped_flow():
    # Double binary tree, n=4, T0 is 0->{2}, 2->{1,3}. Without leaf 1's reduce into 2 at step 1,
    # root 0 ends with {0,2,3}, and the broadcast overwrites rank 1's own {1} at step 4.
    full = allreduce_double_binary_tree(4)
    dropped = Flow(1, 1, 2, (0,), "reduce")
    assert dropped in full.flows
    p = full.with_flows(f for f in full.flows if f != dropped)
    with pytest.raises(PatternError, match=(
        r"at the end, rank 0 holds chunk 0 = \{0,2,3\}, should hold \{0-3\} \(missing \{1\}\); "
        r"\{1\} was first overwritten at step 4 by the copy 2 -> 1"
    )):
        verify(p)
    # Chunk 1 (tree 1) is untouched, so checking only it passes.
    assert first_violation(p, chunks=[1]) is None


def test_verify_catches_a_flow_sending_data_its_source_does_not_hold():
    # AllGather over 3 ranks: at step 1 rank 0 holds only its own chunk 0, not chunk 1.
    p = Pattern("allgather", (0, 1, 2), tuple(Chunk(c, 1 / 3, c) for c in range(3)),
                [_copy(1, 0, 2, chunk=1)], name="hand")
    assert first_violation(p) == (
        "step 1, flow 0 -> 2 (copy of chunk 1): rank 0 sends chunk 1 but holds nothing of it at "
        "the end of step 0"
    )


def test_verify_catches_a_rank_missing_from_the_result():
    # The ring AllGather's last flow (step 3: 3 -> 0 carries chunk 1) removed: rank 0 never
    # receives chunk 1.
    full = allgather_ring(4)
    last = Flow(3, 3, 0, (1,), "copy")
    assert last in full.flows
    p = full.with_flows(f for f in full.flows if f != last)
    assert first_violation(p) == (
        "at the end, rank 0 holds chunk 1 = nothing of it, should hold {1} (missing {1})"
    )


def test_verify_catches_two_copies_into_one_rank_at_one_step():
    # Broadcast from 0: step 1 0 -> 1; step 2 both 0 and 1 copy chunk 0 into rank 2.
    p = Pattern("broadcast", (0, 1, 2), (Chunk(0, 1.0),),
                [_copy(1, 0, 1), _copy(2, 0, 2), _copy(2, 1, 2)], root=0, name="hand")
    assert first_violation(p) == (
        "step 2, flow 1 -> 2 (copy of chunk 0): rank 2 also receives chunk 0 from rank 0 (copy) "
        "at the same step; a copy and another write of one chunk into one rank at one step have "
        "no defined order"
    )


def test_verify_reads_sources_as_of_the_previous_step():
    # Step 1: 1 -> 2 and 0 -> 1 are simultaneous, so 2 receives rank 1's *old* {1}; rank 0's
    # input then reaches 2 only if forwarded later. Here it is not: 2 ends without {0}.
    p = _allreduce(3, [_reduce(1, 0, 1), _reduce(1, 1, 2), _copy(2, 2, 0), _copy(2, 2, 1)])
    problem = first_violation(p)
    assert problem is not None
    assert problem.startswith("at the end, rank 0 holds chunk 0 = {1,2}, should hold {0-2}")


def test_verify_reports_the_earliest_violation_across_chunks():
    # Chunk 0 double-counts at step 2 (0 adds {0} into 1 twice); chunk 1 has two copies into
    # rank 2 at step 1. Chunk 0 is replayed first, yet step 1 (chunk 1) is the first violation.
    p = _allreduce(3, [_reduce(1, 0, 1, chunk=0), _reduce(2, 0, 1, chunk=0),
                       _copy(1, 0, 2, chunk=1), _copy(1, 1, 2, chunk=1)], chunks=2)
    assert first_violation(p).startswith("step 1, flow 1 -> 2 (copy of chunk 1)")
    assert first_violation(p, chunks=[0]).startswith("step 2, flow 0 -> 1 (reduce of chunk 0)")


def test_verify_prints_rank_sets_compactly():
    # Star reduce into 0 from 1..6 except 4, then broadcast: rank 0 ends with {0-3,5,6}.
    flows = [_reduce(1, r, 0) for r in (1, 2, 3, 5, 6)] + [_copy(2, 0, r) for r in range(1, 7)]
    assert first_violation(_allreduce(7, flows)) == (
        "at the end, rank 0 holds chunk 0 = {0-3,5,6}, should hold {0-6} (missing {4}); {4} was "
        "first overwritten at step 2 by the copy 0 -> 4, which replaced {4} held by rank 4"
    )


def test_first_violation_rejects_unknown_chunks():
    with pytest.raises(PatternError, match=r"first_violation: unknown chunk 7; expected ids 0..3"):
        first_violation(allreduce_ring(4), chunks=[7])


def test_verify_broadcast_rank_without_data():
    # Broadcast tree without the flow into rank 3: rank 3 ends with nothing.
    full = broadcast_binary_tree(4)
    p = full.with_flows(f for f in full.flows if f.dst != 3)
    assert first_violation(p) == (
        "at the end, rank 3 holds chunk 0 = nothing of it, should hold {0} (missing {0})"
    )


def test_first_violation_checks_candidate_flows_without_a_pattern():
    # T0 of the 4-rank dual tree is 0->{2}, 2->{1,3}. Swapping leaves 1 and 3 keeps it valid.
    p = allreduce_double_binary_tree(4)
    tree0 = [p.flows[i] for i in p.flows_of_chunk_graph(0)]

    def swap(flow: Flow, x: int, y: int) -> Flow:
        name = {x: y, y: x}
        return Flow(flow.step, name.get(flow.src, flow.src), name.get(flow.dst, flow.dst),
                    flow.chunks, flow.op)

    assert first_violation(p, chunks=[0], flows=[swap(f, 1, 3) for f in tree0]) is None
    # Swap 0 and 2 in the reduce phase only (steps 1-2): 1 and 3 now add into 0, 0 adds
    # {0,1,3} into 2 at step 2, but the broadcast (unchanged) still starts from root 0, which
    # holds only {0,1,3}: rank 0 ends without {2}.
    mixed = [swap(f, 0, 2) if f.step <= 2 else f for f in tree0]
    assert first_violation(p, chunks=[0], flows=mixed).startswith(
        "at the end, rank 0 holds chunk 0 = {0,1,3}, should hold {0-3} (missing {2})"
    )


def test_first_violation_rejects_candidate_flows_with_unknown_ranks():
    p = allreduce_ring(4)
    with pytest.raises(PatternError, match=r"a flow names rank 9, which is not in the pattern"):
        first_violation(p, chunks=[0], flows=[Flow(1, 9, 0, (0,), "reduce")])


def test_verify_reduce_scatter_owner_must_end_with_the_full_sum():
    # Ring ReduceScatter over 3 ranks without its step-2 flows: chunk 0 gets as far as rank 2
    # ({1,2}, from 1 at step 1) and never reaches its owner 0, which keeps {0}.
    full = reduce_scatter_ring(3)
    p = full.with_flows(f for f in full.flows if f.step == 1)
    assert first_violation(p) == (
        "at the end, rank 0 holds chunk 0 = {0}, should hold {0-2} (missing {1,2})"
    )


def test_verify_reduce_root_must_end_with_the_full_sum():
    # Reduce to root 1 of 3 ranks where only 0 adds into 1: the root misses {2}.
    p = Pattern("reduce", (0, 1, 2), (Chunk(0, 1.0),), [_reduce(1, 0, 1)], root=1, name="hand")
    assert first_violation(p) == (
        "at the end, rank 1 holds chunk 0 = {0,1}, should hold {0-2} (missing {2})"
    )


def test_verify_allgather_reduce_onto_a_held_chunk_double_counts():
    # In an AllGather a "reduce" into a rank that already holds the chunk counts its owner twice.
    p = Pattern("allgather", (0, 1), (Chunk(0, 0.5, 0), Chunk(1, 0.5, 1)),
                [_copy(1, 0, 1, chunk=0), _copy(1, 1, 0, chunk=1), _reduce(2, 0, 1, chunk=0)],
                name="hand")
    assert first_violation(p).startswith(
        "step 2, flow 0 -> 1 (reduce of chunk 0): rank 1 holds chunk 0 = {0} and would add {0}"
    )


def test_verify_uses_rank_labels_not_positions():
    # Ranks need not be 0..n-1: a broadcast from 30 over ranks (10, 20, 30).
    p = Pattern("broadcast", (10, 20, 30), (Chunk(0, 1.0),),
                [_copy(1, 30, 10), _copy(2, 10, 20)], root=30, name="hand")
    assert first_violation(p) is None
    q = p.with_flows([_copy(1, 30, 10)])
    assert first_violation(q) == (
        "at the end, rank 20 holds chunk 0 = nothing of it, should hold {30} (missing {30})"
    )


@pytest.mark.parametrize(
    "pattern",
    [allreduce_ring(5), allreduce_double_binary_tree(6), allgather_ring(4),
     broadcast_binary_tree(7)],
    ids=lambda p: f"{p.name}-{p.n}",
)
def test_verify_catches_every_single_dropped_flow(pattern):
    # None of these patterns has a redundant flow: removing any one loses data somewhere.
    for gone in pattern.flows:
        assert first_violation(pattern.with_flows(f for f in pattern.flows if f != gone)), gone
