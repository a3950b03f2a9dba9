"""Pattern generators: NCCL's trees edge by edge, ring and recursive structure, and every
registered generator through the verifier."""

from __future__ import annotations

import math

import pytest

from react.model.errors import PatternError
from react.model.pattern import Pattern
from react.model.verify import verify
from react.patterns import (
    GENERATORS,
    allgather_recursive_doubling,
    allgather_ring,
    allreduce_double_binary_tree,
    allreduce_halving_doubling,
    allreduce_ring,
    broadcast_binary_tree,
    generator,
    nccl_btree,
    nccl_double_binary_tree,
    reduce_binary_tree,
    reduce_scatter_ring,
)


def _edges(tree) -> dict[int, set[int]]:
    return {p: set(kids) for p, kids in enumerate(tree.children) if kids}


# -- NCCL's double binary tree (src/graph/trees.cc, ncclGetBtree / ncclGetDtree) ------------------
def test_double_binary_tree_n8_matches_nccl():
    # T0: 0->{4}, 4->{2,6}, 2->{1,3}, 6->{5,7};  T1 (mirror r -> 7-r): 7->{3}, 3->{5,1},
    # 5->{6,4}, 1->{2,0}.
    t0, t1 = nccl_double_binary_tree(8)
    assert _edges(t0) == {0: {4}, 4: {2, 6}, 2: {1, 3}, 6: {5, 7}}
    assert _edges(t1) == {7: {3}, 3: {5, 1}, 5: {6, 4}, 1: {2, 0}}
    assert (t0.root, t1.root) == (0, 7)


def test_double_binary_tree_n16_node3_aggregates_1_and_5():
    # Paper Fig. 1: in T1 (the mirror r -> 15-r) node 3 aggregates nodes 1 and 5: it mirrors
    # T0's node 12, whose children (down0, down1) are (10, 14) -> (5, 1). T1's root is 15 -> {7}.
    t0, t1 = nccl_double_binary_tree(16)
    assert set(t1.children[3]) == {5, 1}
    assert t1.children[3] == (5, 1)
    assert t1.root == 15 and t1.children[15] == (7,)


def test_double_binary_tree_n5_shifts_for_odd_n():
    # T0: 0->{4}, 4->{2}, 2->{1,3};  T1 (shift r -> r+1 mod 5): 1->{0}, 0->{3}, 3->{2,4}.
    t0, t1 = nccl_double_binary_tree(5)
    assert _edges(t0) == {0: {4}, 4: {2}, 2: {1, 3}}
    assert _edges(t1) == {1: {0}, 0: {3}, 3: {2, 4}}
    assert (t0.root, t1.root) == (0, 1)


def test_btree_n14_matches_nccl_illustration():
    # trees.cc draws n=14: 0->8, 8->{4,12}, 4->{2,6}, 12->{10,13}, 2->{1,3}, 6->{5,7},
    # 10->{9,11}; 13 hangs off 12 because 14 is out of range.
    assert _edges(nccl_btree(14)) == {
        0: {8}, 8: {4, 12}, 4: {2, 6}, 12: {10, 13}, 2: {1, 3}, 6: {5, 7}, 10: {9, 11},
    }


@pytest.mark.parametrize("n", range(2, 70))
def test_btree_parents_and_children_agree(n):
    # Every rank but the root has exactly one parent, listed among that parent's children, and
    # no rank has more than two children: a binary tree spanning 0..n-1.
    for tree in (nccl_btree(n), *nccl_double_binary_tree(n)):
        assert tree.parent.count(None) == 1
        assert sorted(c for kids in tree.children for c in kids) == sorted(
            r for r in range(n) if r != tree.root
        )
        for r, kids in enumerate(tree.children):
            assert len(kids) <= 2
            assert all(tree.parent[c] == r for c in kids)


@pytest.mark.parametrize("n", [4, 8, 16, 32, 64])
def test_double_binary_tree_even_n_inner_nodes_are_leaves_in_other_tree(n):
    # The point of NCCL's mirror for even n (and power of two n): each rank except the two roots'
    # neighbours is an inner node in at most one tree, so each rank receives from at most two
    # children overall in the reduce phase.
    t0, t1 = nccl_double_binary_tree(n)
    for r in range(n):
        inner = [bool(t.children[r]) and t.parent[r] is not None for t in (t0, t1)]
        assert not all(inner), r


def test_double_binary_tree_pattern_steps_line_up():
    # n=8: heights 3 in both trees; reduce at steps 1..3 (leaves first), broadcast at 4..6;
    # 2 trees x 2 phases x 7 edges = 28 flows of half the message each.
    p = allreduce_double_binary_tree(8)
    assert p.num_steps == 6 and len(p.flows) == 28
    assert {f.op for f in p.flows if f.step <= 3} == {"reduce"}
    assert {f.op for f in p.flows if f.step >= 4} == {"copy"}
    assert {p.flow_fraction(f) for f in p.flows} == {0.5}
    # Leaf 1 of T0 sends to 2 at step 1; root 0 of T0 sends to 4 at step 4 (= H + depth 1).
    assert any(f.step == 1 and (f.src, f.dst, f.chunks) == (1, 2, (0,)) for f in p.flows)
    assert any(f.step == 4 and (f.src, f.dst, f.chunks) == (0, 4, (0,)) for f in p.flows)
    assert p.chunk_graphs() == ((0,), (1,))


# -- every registered generator ---------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generator_verifies_for_n_2_to_33(name):
    # Each generator must implement its collective for every n in 2..33 (powers of two or not).
    make = GENERATORS[name]
    for n in range(2, 34):
        pattern = make(n)
        assert pattern.n == n and pattern.name == name
        verify(pattern)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generator_json_round_trip(name):
    # A pattern read back from its JSON equals the original, flows and all.
    for n in (2, 7, 8):
        pattern = GENERATORS[name](n)
        again = Pattern.from_json(pattern.to_json())
        assert again == pattern
        verify(again)


@pytest.mark.parametrize("name", sorted(GENERATORS))
@pytest.mark.parametrize("bad", [1, 0, -3, 2.0, True, "8", None])
def test_generator_rejects_bad_n(name, bad):
    # "<name>: n must be an integer >= 2, got n=<bad>"
    with pytest.raises(PatternError, match=f"^{name}: n must be an integer >= 2, got n={bad!r}$"):
        GENERATORS[name](bad)


def test_generator_unknown_name_lists_known_ones():
    # "unknown pattern generator 'allreduce_rign'; known: ..., allreduce_ring, ..."
    with pytest.raises(PatternError, match=r"generator 'allreduce_rign'; known: .*allreduce_ring"):
        generator("allreduce_rign")
    assert generator("allreduce_ring") is GENERATORS["allreduce_ring"]


def test_generator_fractions_sum_to_one():
    for name, make in GENERATORS.items():
        assert math.fsum(c.fraction for c in make(12).chunks) == pytest.approx(1.0), name


# -- ring -------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 5, 8])
def test_allreduce_ring_structure(n):
    # 2(n-1) steps of n flows, one to the successor each; n chunks of 1/n; reduce-scatter
    # (reduce) in steps 1..n-1, all-gather (copy) in steps n..2n-2.
    p = allreduce_ring(n)
    assert p.num_steps == 2 * (n - 1) and len(p.flows) == 2 * (n - 1) * n
    assert len(p.chunks) == n and all(c.fraction == 1 / n for c in p.chunks)
    assert all(f.dst == (f.src + 1) % n and len(f.chunks) == 1 for f in p.flows)
    assert {f.op for f in p.flows if f.step < n} == {"reduce"}
    assert {f.op for f in p.flows if f.step >= n} == {"copy"}
    assert all(p.degree(t, r) == (1, 1) for t in range(1, p.num_steps + 1) for r in range(n))


def test_reduce_scatter_and_allgather_ring_chunk_ownership():
    # ReduceScatter: chunk c starts at rank c+1 (step 1, rank r sends chunk r-1) and ends at c.
    # AllGather: at step 1 every rank sends the chunk it owns.
    rs, ag = reduce_scatter_ring(4), allgather_ring(4)
    assert [f.chunks for f in rs.flows if f.step == 1] == [(3,), (0,), (1,), (2,)]
    assert [f.chunks for f in ag.flows if f.step == 1] == [(0,), (1,), (2,), (3,)]
    assert [c.owner for c in rs.chunks] == [0, 1, 2, 3] == [c.owner for c in ag.chunks]
    assert rs.num_steps == ag.num_steps == 3


# -- recursive doubling / halving -------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 4, 8, 16, 32])
def test_allgather_recursive_doubling_doubles_each_step(n):
    # n = 2^k: k steps; at step s rank r sends 2^(s-1) chunks (2^(s-1)/n of the message) to
    # r XOR 2^(s-1).
    p = allgather_recursive_doubling(n)
    k = n.bit_length() - 1
    assert p.num_steps == k and len(p.flows) == k * n and len(p.chunks) == n
    for f in p.flows:
        assert f.dst == f.src ^ (1 << (f.step - 1))
        assert p.flow_fraction(f) == pytest.approx(2 ** (f.step - 1) / n)
        assert f.op == "copy"


def test_allgather_recursive_doubling_n8_rank5():
    # Rank 5 sends {5} to 4, then {4,5} to 7, then {4-7} to 1.
    p = allgather_recursive_doubling(8)
    assert [(f.dst, f.chunks) for f in p.flows if f.src == 5] == [
        (4, (5,)), (7, (4, 5)), (1, (4, 5, 6, 7)),
    ]


def test_allgather_recursive_doubling_folds_extra_ranks():
    # n=6, p=4: step 1 ranks 4,5 copy chunks 4,5 to ranks 0,1; steps 2-3 RD on 0..3 (rank 0
    # sends {0,4} then {0,1,4,5}); step 4 ranks 0,1 copy all other chunks to 4,5.
    p = allgather_recursive_doubling(6)
    assert p.num_steps == 4
    step1 = [(f.src, f.dst, f.chunks) for f in p.flows if f.step == 1]
    assert step1 == [(4, 0, (4,)), (5, 1, (5,))]
    assert [f.chunks for f in p.flows if f.src == 0 and f.step in (2, 3)] == [(0, 4), (0, 1, 4, 5)]
    assert [(f.src, f.dst, f.chunks) for f in p.flows if f.step == 4] == [
        (0, 4, (0, 1, 2, 3, 5)), (1, 5, (0, 1, 2, 3, 4)),
    ]


def test_allreduce_halving_doubling_n8_sizes():
    # n=8: 3 halving steps (4, 2, 1 chunks of 1/8 each per flow, reduce) then 3 doubling steps
    # (1, 2, 4 chunks, copy); partners r^4, r^2, r^1, then r^1, r^2, r^4.
    p = allreduce_halving_doubling(8)
    assert p.num_steps == 6 and len(p.chunks) == 8
    rank0 = [(f.dst, f.chunks, f.op) for f in p.flows if f.src == 0]
    assert rank0 == [
        (4, (4, 5, 6, 7), "reduce"), (2, (2, 3), "reduce"), (1, (1,), "reduce"),
        (1, (0,), "copy"), (2, (0, 1), "copy"), (4, (0, 1, 2, 3), "copy"),
    ]


def test_allreduce_halving_doubling_folds_extra_ranks():
    # n=5, p=4: step 1 rank 4 adds all 4 chunks into 0; steps 2-5 on 0..3; step 6 0 -> 4 copy.
    p = allreduce_halving_doubling(5)
    assert p.num_steps == 6 and len(p.chunks) == 4
    assert [(f.step, f.src, f.dst, f.op) for f in p.flows if 4 in (f.src, f.dst)] == [
        (1, 4, 0, "reduce"), (6, 0, 4, "copy"),
    ]


def test_broadcast_and_reduce_binary_tree_use_the_root():
    # Root 2 of 5 ranks: the btree relabelled r -> r+2 mod 5: 2->{1}, 1->{4}, 4->{3,0}.
    b = broadcast_binary_tree(5, root=2)
    assert b.root == 2
    assert {(f.src, f.dst, f.step) for f in b.flows} == {(2, 1, 1), (1, 4, 2), (4, 3, 3), (4, 0, 3)}
    r = reduce_binary_tree(5, root=2)
    assert {(f.src, f.dst, f.step) for f in r.flows} == {(3, 4, 1), (0, 4, 1), (4, 1, 2), (1, 2, 3)}
    verify(b)
    verify(r)
    with pytest.raises(PatternError, match=r"^broadcast_binary_tree: root must be a rank in 0..4, "
                                           r"got root=5$"):
        broadcast_binary_tree(5, root=5)
