"""Tests for react.model.swapspace: the paper's Fig. 1 example, a brute-force reference,
properties."""

import random
from dataclasses import replace

import numpy as np
import pytest

from react.model.errors import PatternError
from react.model.pattern import Chunk, Flow, Pattern
from react.model.replay import GraphReplay, ReplayCache
from react.model.swapspace import SwapSpace
from react.model.transforms import ChunkLocalSwap, GlobalSwap, PositionSwap
from react.model.verify import first_violation, verify
from react.patterns import GENERATORS, allreduce_double_binary_tree, allreduce_ring


@pytest.fixture(scope="module")
def dtree16():
    return allreduce_double_binary_tree(16)


@pytest.fixture(scope="module")
def space16(dtree16):
    return SwapSpace(dtree16)


# -- the paper's example (§4.3, Fig. 1) ----------------------------------------------------------
def test_fig1_swap_3_2_in_tree_t1_is_viable_and_preferred(dtree16, space16):
    # In T1 (chunk graph 1) rank 3 aggregates 5 and 1 at step 2; T1's leaves are even ranks.
    assert {(f.src, f.dst) for f in dtree16.flows if f.step == 2 and f.chunks == (1,)
            and f.op == "reduce" and f.dst == 3} == {(5, 3), (1, 3)}
    swap = ChunkLocalSwap(1, 3, 2)
    assert swap in space16.swaps_for(3, kind="chunk_local", graph=1)
    assert swap in space16.preferred(3, direction="in")
    assert swap in space16.preferred(3)
    # After it, 3 receives nothing in the reduce phase (steps 1..4) of either tree.
    after = swap.apply(dtree16)
    assert [f for f in after.flows if f.dst == 3 and f.op == "reduce"] == []
    verify(after)


def test_fig1_swaps_3_4_and_3_12_in_tree_t1_are_pruned(dtree16, space16):
    # Rank 4 receives from 2 and 6 in T0 at step 2; taking 3's place in T1 it would also
    # receive from 5 and 1 at step 2: in-degree 4 > max(deg(2,3), deg(2,4)) = 2. Same for 12
    # (10 and 14 in T0).
    assert dtree16.degree(2, 4) == (2, 0) and dtree16.degree(2, 12) == (2, 0)
    assert ChunkLocalSwap(1, 3, 4).apply(dtree16).degree(2, 4)[0] == 4
    local = space16.swaps_for(3, kind="chunk_local", graph=1)
    assert ChunkLocalSwap(1, 3, 4) not in local
    assert ChunkLocalSwap(1, 3, 12) not in local
    # Both still verify: they are removed by the degree rule, not by the meaning.
    assert first_violation(ChunkLocalSwap(1, 3, 4).apply(dtree16)) is None


def test_swaps_that_change_nothing_are_left_out(dtree16, space16):
    # 1 and 3 are sibling leaves of 2 in T0: swapping them there rewrites no flow.
    assert ChunkLocalSwap(0, 3, 1).apply(dtree16).flows == dtree16.flows
    assert ChunkLocalSwap(0, 3, 1) not in space16.swaps_for(3)
    assert ChunkLocalSwap(1, 3, 1) in space16.swaps_for(3)  # in T1, 1 is 3's child


def test_fig1_degree_rule_allows_the_doubled_leaf_out_degree(dtree16):
    # After 3<->2 in T1, 3 is a leaf of both trees: out-degree 2 at step 1. Allowed because
    # deg(1, 2) = 2 before (2 receives 1 and 3 in T0).
    after = ChunkLocalSwap(1, 3, 2).apply(dtree16)
    assert after.degree(1, 3) == (0, 2)
    assert max(dtree16.degree(1, 2)) == 2


def test_candidates_put_position_before_chunk_local_before_global_preferred_first(space16):
    cands = space16.candidates(3, graph=1)
    kinds = [s.kind for s in cands]
    assert kinds == sorted(kinds, key=["position", "chunk_local", "global"].index)
    base = space16.load(3)
    for kind in ("position", "chunk_local", "global"):
        flags = [space16.load_after(3, s) < base for s in cands if s.kind == kind]
        assert flags == sorted(flags, reverse=True)  # preferred (True) first
    assert all(s.graph in (1, None) for s in cands)
    # A step restricts position windows to those that contain it.
    assert all(s.first_step <= 2 <= s.last_step
               for s in space16.candidates(3, graph=1, step=2) if isinstance(s, PositionSwap))


def test_load_after_matches_the_swapped_pattern(dtree16, space16):
    for swap in space16.swaps_for(3)[:60]:
        after = swap.apply(dtree16)
        for direction, pick in (("any", max), ("in", lambda d: d[0]), ("out", lambda d: d[1])):
            expected = sum(pick(after.degree(t, 3)) for t in range(1, after.num_steps + 1))
            assert space16.load_after(3, swap, direction) == expected


# -- a brute-force reference (appendix A.3) ------------------------------------------------------
# Written from the paper's description, sharing nothing with SwapSpace or react.model.transforms but
# the verifier: every pair of ranks and, in every chunk graph, every step window [a, b] with
# 1 <= a <= b <= steps is applied by the little relabeller below; the result is kept if it
# rewrites some flow, verifies, and passes the degree rule of §5.3.2 computed from the flows.
# The whole graph as window is the chunk-local swap, every flow the global swap (for owned
# chunks with the owners' chunks renamed k-th to k-th). Swaps are compared by the patterns they
# produce: windows that give the same pattern are one rewrite, whatever their bounds.
def _chunk_blocks(pattern):
    """Chunk graphs by union-find over the chunks that travel in one flow."""
    parent = {c.id: c.id for c in pattern.chunks}

    def root(c):
        while parent[c] != c:
            c = parent[c]
        return c

    for f in pattern.flows:
        for c in f.chunks[1:]:
            parent[root(c)] = root(f.chunks[0])
    blocks = {}
    for c in parent:
        blocks.setdefault(root(c), set()).add(c)
    return [frozenset(b) for b in blocks.values()]


def _swap_rank(r, x, y):
    return y if r == x else x if r == y else r


def _relabelled(flows, x, y, chunk_map=None):
    """``flows`` with x and y exchanged (and chunks renamed by ``chunk_map``)."""
    out = set()
    for f in flows:
        chunks = tuple(sorted(chunk_map.get(c, c) for c in f.chunks)) if chunk_map else f.chunks
        out.add(Flow(f.step, _swap_rank(f.src, x, y), _swap_rank(f.dst, x, y), chunks, f.op))
    return out


def _degrees(flows):
    count = {}
    for f in flows:
        count[(f.step, f.src, "out")] = count.get((f.step, f.src, "out"), 0) + 1
        count[(f.step, f.dst, "in")] = count.get((f.step, f.dst, "in"), 0) + 1
    return lambda t, r: max(count.get((t, r, "in"), 0), count.get((t, r, "out"), 0))


def _brute_force(pattern):
    """``{frozenset({x, y}): {frozenset(flows after the swap), ...}}`` over every candidate."""
    before = _degrees(pattern.flows)
    steps = range(1, max(f.step for f in pattern.flows) + 1)
    original = frozenset(pattern.flows)
    owned = {r: sorted(c.id for c in pattern.chunks if c.owner == r) for r in pattern.ranks}
    blocks = _chunk_blocks(pattern)
    found = {}
    for i, x in enumerate(pattern.ranks):
        for y in pattern.ranks[i + 1:]:
            rewrites = []
            if pattern.kind in ("allgather", "reduce_scatter"):
                if len(owned[x]) == len(owned[y]):
                    pairs = list(zip(owned[x], owned[y], strict=True))
                    renamed = dict(pairs + [(b, a) for a, b in pairs])
                    rewrites.append(_relabelled(original, x, y, renamed))
            else:
                rewrites.append(_relabelled(original, x, y))
            for block in blocks:
                # Only flows with x or y as an end change; the others stay as they are.
                mine = [f for f in original if f.chunks[0] in block and {f.src, f.dst} & {x, y}]
                for a in steps:
                    for b in steps[a - 1:]:
                        window = {f for f in mine if a <= f.step <= b}
                        rewrites.append((original - window) | _relabelled(window, x, y))
            seen = set()
            for flows in rewrites:
                key = frozenset(flows)
                if key == original or key in seen:
                    continue
                seen.add(key)
                after = _degrees(flows)
                if any(after(t, r) > max(before(t, x), before(t, y))
                       for t in steps for r in (x, y)):
                    continue
                swapped = Pattern(pattern.kind, pattern.ranks, pattern.chunks, flows,
                                  root=pattern.root)
                if first_violation(swapped) is None:
                    found.setdefault(frozenset((x, y)), set()).add(key)
    return found


def _offered(pattern, space):
    """The space's swaps in the same form, checking that each rank's list names it first and
    that no two of its swaps give one pattern (the global swap of owned chunks excepted: its
    renaming of the owners' chunks can be invisible, making it equal a finer swap)."""
    got = {}
    for r in pattern.ranks:
        swaps = space.swaps_for(r)
        assert all(s.x == r for s in swaps)
        results = [frozenset(s.apply(pattern).flows) for s in swaps]
        finer = [key for s, key in zip(swaps, results, strict=True)
                 if pattern.kind not in ("allgather", "reduce_scatter") or s.kind != "global"]
        assert len(set(finer)) == len(finer), f"rank {r}: two swaps give one pattern"
        for s, key in zip(swaps, results, strict=True):
            got.setdefault(frozenset((s.x, s.y)), set()).add(key)
    return got


_SMALL = [(name, n) for name in sorted(GENERATORS) for n in (4, 5, 8)]


@pytest.mark.parametrize("name, n", _SMALL)
def test_space_equals_brute_force(name, n):
    pattern = GENERATORS[name](n)
    assert _offered(pattern, SwapSpace(pattern)) == _brute_force(pattern)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GENERATORS))
@pytest.mark.parametrize("n", [6, 7])
def test_space_equals_brute_force_more_sizes(name, n):
    pattern = GENERATORS[name](n)
    assert _offered(pattern, SwapSpace(pattern)) == _brute_force(pattern)


def test_brute_force_finds_position_swaps_over_windows_that_are_not_phases():
    # Recursive-doubling AllGather (n = 4) has one operation (copy) at every step, so no phase
    # boundary; the brute force still finds position swaps over part of the steps, and so
    # must the space (Table 1 of the paper: RD benefits from position-equivalent swaps).
    pattern = GENERATORS["allgather_recursive_doubling"](8)
    found = _brute_force(pattern)
    space = SwapSpace(pattern)
    positions = [s for r in pattern.ranks for s in space.swaps_for(r, kind="position")]
    assert positions
    assert {frozenset(s.apply(pattern).flows) for s in positions} <= set().union(*found.values())


def _shape(pattern, rename):
    """The flows with ranks renamed by ``rename``, chunks left out: what a symmetry must keep."""
    return {(f.step, rename[f.src], rename[f.dst], f.op) for f in pattern.flows}


@pytest.mark.parametrize("name", ["allreduce_ring", "allreduce_double_binary_tree"])
def test_ranks_alike_by_symmetry_get_the_swaps_a_direct_computation_finds(name):
    # The 12-rank ring is invariant under the rotation r -> r + 1 and the double binary tree
    # (n even) under the mirror r -> n - 1 - r: the space computes one rank per orbit and maps
    # its swaps onto the others. The same pattern with its ranks renamed by a random
    # permutation has neither symmetry, so its space computes every rank directly; each rank's
    # swaps must be, renamed, those of the rank it was.
    pattern = GENERATORS[name](12)
    n = pattern.n
    same = dict(zip(pattern.ranks, pattern.ranks, strict=True))
    rotation = {r: (r + 1) % n for r in pattern.ranks}
    mirror = {r: n - 1 - r for r in pattern.ranks}
    assert _shape(pattern, rotation) == _shape(pattern, same) or \
        _shape(pattern, mirror) == _shape(pattern, same)
    perm = list(pattern.ranks)
    random.Random(5).shuffle(perm)
    renamed = pattern.with_flows(
        Flow(f.step, perm[f.src], perm[f.dst], f.chunks, f.op) for f in pattern.flows)
    verify(renamed)
    assert _shape(renamed, rotation) != _shape(renamed, same)
    assert _shape(renamed, mirror) != _shape(renamed, same)
    with_symmetry, direct = SwapSpace(pattern), SwapSpace(renamed)
    for r in pattern.ranks:
        want = [replace(s, x=perm[s.x], y=perm[s.y]) for s in with_symmetry.swaps_for(r)]
        got = direct.swaps_for(perm[r])
        assert len(got) == len(want) and set(got) == set(want), r


def _meaning_fixed(pattern, g, x):
    """Reference: for every partner y, whether the meaning of chunk graph g names neither x
    nor y (the root of a rooted kind, the owners of the graph's chunks; nobody for AllReduce).
    Then renaming the two inside g cannot change whether g verifies."""
    if pattern.kind == "allreduce":
        named = set()
    elif pattern.kind in ("broadcast", "reduce"):
        named = {pattern.root}
    else:
        named = {pattern.chunks[k].owner for k in pattern.chunk_graphs()[g]}
    rx = pattern.ranks[x]
    return np.asarray([rx not in named and ry not in named for ry in pattern.ranks])


def test_replay_verdicts_agree_with_the_verifier_on_every_window():
    # The incremental replay and the no-replay verdicts and rejections, on every pair and
    # window, including those the degree rule prunes (the space never asks for them).
    for pattern in (allreduce_double_binary_tree(7), GENERATORS["allreduce_halving_doubling"](8),
                    allreduce_ring(5), GENERATORS["broadcast_binary_tree"](6),
                    GENERATORS["allgather_recursive_doubling"](8),
                    GENERATORS["reduce_scatter_ring"](5), GENERATORS["reduce_binary_tree"](6)):
        pos = {r: i for i, r in enumerate(pattern.ranks)}
        for g in range(len(pattern.chunk_graphs())):
            replay = GraphReplay(pattern, g, pos)
            steps = replay.steps
            for t1, t2 in [(a, b) for a in steps for b in steps if a <= b]:
                for x in range(pattern.n):
                    fixed = _meaning_fixed(pattern, g, x)
                    proven, rejected = replay.verdicts(x, np.arange(pattern.n), t1, t2,
                                                       fixed)
                    for y in range(pattern.n):
                        if x == y:
                            continue
                        swap = PositionSwap(g, pattern.ranks[x], pattern.ranks[y], t1, t2)
                        truth = first_violation(swap.apply(pattern), pattern.chunk_graphs()[g])
                        assert replay.viable(x, y, t1, t2) == (truth is None), swap
                        if proven[y]:
                            assert truth is None, swap
                        if rejected[y]:
                            assert truth is not None, swap
                        ys, firsts = np.asarray([y]), np.asarray([t1])
                        if replay.unheld_at_start(x, ys, firsts)[0]:
                            assert truth is not None, swap
                        sure, bad = replay.linear_verdicts(x, ys, t1, t2)
                        if sure[0]:
                            assert truth is None, swap
                        if bad[0]:
                            assert truth is not None, swap


# -- properties ----------------------------------------------------------------------------------
def _random_walk(pattern, steps, seed):
    """Apply ``steps`` random swaps drawn from the space, each from a fresh space of the
    current pattern (lazy: only the drawn rank's swaps are computed); all must verify."""
    rng = random.Random(seed)
    applied = 0
    while applied < steps:
        space = SwapSpace(pattern, check=False)
        rank = rng.choice(pattern.ranks)
        swaps = space.swaps_for(rank)
        if not swaps:
            continue
        swap = rng.choice(swaps)
        pattern = swap.apply(pattern)
        problem = first_violation(pattern)
        assert problem is None, f"after {applied} swaps, {swap.describe()}: {problem}"
        applied += 1
    return pattern


_WALK_PATTERNS = [
    ("allreduce_double_binary_tree", 16),
    ("allreduce_ring", 8),
    ("allgather_recursive_doubling", 8),
    ("broadcast_binary_tree", 9),
    ("reduce_scatter_ring", 6),
]


@pytest.mark.parametrize("name, n", _WALK_PATTERNS)
def test_random_swaps_in_sequence_all_verify(name, n):
    _random_walk(GENERATORS[name](n), 200, seed=n)


@pytest.mark.slow
@pytest.mark.parametrize("name, n", _WALK_PATTERNS)
def test_ten_thousand_random_swaps_in_sequence_all_verify(name, n):
    _random_walk(GENERATORS[name](n), 2000, seed=n)


def test_one_thousand_random_swaps_on_the_double_tree_verify():
    _random_walk(allreduce_double_binary_tree(16), 1000, seed=1)


@pytest.mark.slow
def test_ten_thousand_random_swaps_on_the_double_tree_verify():
    _random_walk(allreduce_double_binary_tree(16), 10_000, seed=2)


# -- bad input -----------------------------------------------------------------------------------
def test_space_of_an_invalid_pattern_raises():
    flows = [Flow(1, 0, 1, (0,), "reduce")]  # rank 0 never receives the sum
    bad = Pattern("allreduce", (0, 1), (Chunk(0, 1.0),), flows)
    with pytest.raises(PatternError, match="not valid"):
        SwapSpace(bad)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda s: s.swaps_for(99), "rank 99"),
        (lambda s: s.swaps_for(3, kind="diagonal"), "'diagonal'"),
        (lambda s: s.swaps_for(3, graph=7), "chunk graph 7"),
        (lambda s: s.preferred(3, direction="sideways"), "'sideways'"),
        (lambda s: s.load_after(5, GlobalSwap(3, 2)), "rank 5"),
    ],
)
def test_bad_queries_raise(space16, call, message):
    with pytest.raises(PatternError, match=message):
        call(space16)


def test_counts_and_describe(space16):
    counts = space16.counts(3)
    assert counts == {k: len(space16.swaps_for(3, kind=k)) for k in counts}
    text = space16.describe(3)
    assert "chunk-local swap 3<->2 in chunk graph 1" in text
    assert "rank 3" in text


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_shared_replays_and_one_graph_questions_change_no_answer(name):
    # What the controller does (spaces of patterns a swap apart sharing replays; one chunk
    # graph's swaps asked for) must give each rank the swaps a fresh space lists for it.
    base = GENERATORS[name](8)
    rng = random.Random(3)
    first = rng.choice(list(SwapSpace(base)))
    patterns = [base, first.apply(base)]
    patterns.append(rng.choice(list(SwapSpace(patterns[1], check=False))).apply(patterns[1]))
    shared = ReplayCache(size=4)  # small: entries get dropped and rebuilt
    for pattern in patterns:
        alone = SwapSpace(pattern, check=False)
        together = SwapSpace(pattern, check=False, replays=shared)
        graphs = range(len(pattern.chunk_graphs()))
        for rank in pattern.ranks:
            whole = alone.swaps_for(rank)
            for g in graphs:
                assert together.swaps_for(rank, graph=g) == tuple(
                    s for s in whole if s.graph is None or s.graph == g), (rank, g)
            assert together.swaps_for(rank) == whole
            assert SwapSpace(pattern, check=False, replays=shared).swaps_for(rank) == whole
