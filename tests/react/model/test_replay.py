"""Shared replays of chunk graphs: bounded, and a dropped replay rebuilt gives the same answers."""

import pytest

from react.model.errors import PatternError
from react.model.replay import ReplayCache
from react.model.swapspace import SwapSpace
from react.patterns import GENERATORS


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


def _next_access(pattern, g, pos, t, r, c):
    """Reference, from the flows alone: the step of the next access to (r, c) after ``t``,
    and whether any access at that step reads it (None, None: never accessed again)."""
    accesses = []
    for i in pattern.flows_of_chunk_graph(g):
        f = pattern.flows[i]
        if c in f.chunks and f.step > t:
            if pos[f.src] == r:
                accesses.append((f.step, True))  # a send reads
            if pos[f.dst] == r:
                accesses.append((f.step, f.op != "copy"))  # a reduce reads, a copy overwrites
    if not accesses:
        return None, None
    step = min(a for a, _ in accesses)
    return step, any(reads for a, reads in accesses if a == step)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_whole_state_queries_match_the_per_buffer_definitions(name):
    # boundary() and held() read the original trajectory for every (rank, chunk) at once from
    # flat arrays; each entry must be what value() (the trajectory's dicts, one buffer at a
    # time) and the next access found in the flows themselves say, at every step boundary,
    # before the first and past the last.
    import math

    from react.model.replay import GraphReplay

    for n in (2, 3, 5, 8, 12):
        try:
            pattern = GENERATORS[name](n)
        except PatternError:
            continue  # a size this generator does not take
        pos = {r: i for i, r in enumerate(pattern.ranks)}
        for g in range(len(pattern.chunk_graphs())):
            replay = GraphReplay(pattern, g, pos)
            for t in [0, *replay.steps, replay.steps[-1] + 3]:
                vid, over, _ = replay.boundary(t)
                held = replay.held(t)
                value_of_id: dict[int, int] = {}
                for r in range(replay.n):
                    for j, c in enumerate(replay.chunks):
                        value = replay.value(t, r, c)
                        assert value_of_id.setdefault(int(vid[r, j]), value) == value
                        assert held[r, j] == (value != 0)
                        step, reads = _next_access(pattern, g, pos, t, r, c)
                        if step is None:  # never touched again: dead unless constrained
                            want = math.nan if (r, c) in replay.final else math.inf
                        else:  # dead only if the next access overwrites without reading
                            want = math.nan if reads else float(step)
                        got = over[r, j]
                        assert (math.isnan(want) and math.isnan(got)) or got == want, \
                            (name, n, t, r, c)
                # distinct ids, distinct values: equal ids exactly when the buffers are equal
                assert len(set(value_of_id.values())) == len(value_of_id)


def _splitmix_weight(r, c):
    """Reference weight with Python integers and explicit masks."""
    mask = (1 << 64) - 1
    z = (r * 0x9E3779B97F4A7C15 + c * 0xBF58476D1CE4E5B9 + 1) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return (z ^ (z >> 31)) | 1


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_influence_hashes_sum_the_weights_of_the_influence_sets(name):
    # The hashes boundary() gives come from one backward pass on arrays; reach() computes the
    # influence sets themselves (bitsets, its own backward pass). Each hash must be the sum
    # modulo 2**64 of splitmix64 weights (Python integers, explicit masks) of its set's
    # constrained final buffers, at every step boundary (steps[0] - 1 included).
    from react.model.replay import GraphReplay

    for n in (3, 5, 8):
        pattern = GENERATORS[name](n)
        pos = {r: i for i, r in enumerate(pattern.ranks)}
        for g in range(len(pattern.chunk_graphs())):
            replay = GraphReplay(pattern, g, pos)
            reach = replay.reach()
            if reach is None:
                continue
            sets, _ = reach
            assert sorted(sets) == [replay.steps[0] - 1, *replay.steps]
            for t, per_chunk in sets.items():
                _, _, hashes = replay.boundary(t)
                for j, c in enumerate(replay.chunks):
                    for r in range(replay.n):
                        members = [k for k in range(replay.n) if per_chunk[j][r] >> k & 1]
                        want = sum(_splitmix_weight(k, c) for k in members) % 2**64
                        assert int(hashes[r, j]) == want, (name, n, t, r, c)


def test_rank_two_test_matches_the_matrix_on_random_vectors():
    # Independent truth: build p (x) q + r (x) (i + kappa q) as a matrix of integers and look.
    import random

    import numpy as np

    from react.model.replay.linear import rank_two_is_zero

    rng = random.Random(7)
    width = 5

    def vector(choices):
        v = [rng.choice(choices) for _ in range(width)]
        plus = sum(1 << k for k, e in enumerate(v) if e == 1)
        minus = sum(1 << k for k, e in enumerate(v) if e == -1)
        return np.asarray(v), plus, minus

    seen = {True: 0, False: 0}
    for _ in range(4000):
        # sparse vectors make the zero cases common enough to test both answers
        p, p0, p1 = vector([0, 0, 0, 1, -1])
        q, q0, q1 = vector([0, 0, 0, 1, -1])
        r = p * rng.choice([1, -1]) if rng.random() < 0.4 else vector([0, 0, 0, 1, -1])[0]
        r0 = sum(1 << k for k, e in enumerate(r) if e == 1)
        r1 = sum(1 << k for k, e in enumerate(r) if e == -1)
        kappa = rng.choice([-2, -1, 0, 1, 2])
        i = q * rng.choice([-2, -1, 0, 1, 2]) if rng.random() < 0.5 else vector([0, 0, 1, -1])[0]
        i = np.clip(i, -1, 1)
        i0 = sum(1 << k for k, e in enumerate(i) if e == 1)
        i1 = sum(1 << k for k, e in enumerate(i) if e == -1)
        truth = not np.any(np.outer(p, q) + np.outer(r, i + kappa * q))
        assert rank_two_is_zero(p0, p1, q0, q1, r0, r1, i0, i1, kappa) == truth
        seen[truth] += 1
    assert min(seen.values()) > 400, seen
