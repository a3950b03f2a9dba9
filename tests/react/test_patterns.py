"""Pattern generators: NCCL's trees edge by edge, ring and recursive structure, and every
registered generator through the verifier."""

from __future__ import annotations

import math

import pytest

from react.errors import PatternError
from react.pattern import Pattern
from react.patterns import (
    GENERATORS,
    allreduce_double_binary_tree,
    generator,
    nccl_btree,
    nccl_double_binary_tree,
)
from react.verify import verify


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
