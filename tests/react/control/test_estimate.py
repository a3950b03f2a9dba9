"""The §5.4.1 FCT estimate: seen pairs scale by bytes and degree; unseen ones by links or median.

Every model here is built the way the controller builds it, from observed epochs
(:class:`FctHistory`); the expected prices are derived by hand in the comments. Where pricing
runs on arrays (patterns of ``ARRAY_FLOWS`` flows or more) it is checked against the module
docstring's definition written out below, flow by flow with :meth:`FctModel.flow_fct`.
"""

import math
import random
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from react.control.detect import flow_degrees
from react.control.estimate import FctHistory, forget_pricing_views, overlap_sharing, round2
from react.model.critical import ARRAY_FLOWS, critical_path, schedule
from react.model.errors import ReactError
from react.model.observation import EpochResult, FlowTiming
from react.model.pattern import Chunk, Flow, Pattern
from react.patterns import allreduce_double_binary_tree, allreduce_ring


def star_reduce():
    # 1, 2 and 3 reduce into 0 at step 1 (degree 3 each); 0 copies to 1 at step 2 (degree 1).
    return Pattern(
        "reduce", (0, 1, 2, 3), (Chunk(0, 1.0),),
        (Flow(1, 1, 0, (0,), "reduce"), Flow(1, 2, 0, (0,), "reduce"),
         Flow(1, 3, 0, (0,), "reduce"), Flow(2, 0, 1, (0,), "copy")),
        root=0,
    )


def observe(pattern, fcts, size=1e6, epochs=1):
    timings = tuple(
        FlowTiming(f, 0.0, t, size) for f, t in zip(pattern.flows, fcts, strict=True)
    )
    results = [EpochResult(e, max(fcts), timings, size) for e in range(epochs)]
    history = FctHistory(60)
    history.add(pattern, results)
    return history.model()


def test_seen_pair_scales_with_bytes_and_degree():
    # 1->0 was seen at degree 3 taking 3 ms for 1 MB: 1 ms per MB per degree unit. Alone
    # (degree 1) with 2 MB it should take 2 ms.
    model = observe(star_reduce(), [3e-3, 3e-3, 6e-3, 1e-3])
    assert model.flow_fct(Flow(5, 1, 0, (0,)), 1, 2e6) == pytest.approx(2e-3)


def test_unseen_pair_takes_median_of_its_degree_class():
    # Degree-3 flows took 3, 3 and 6 ms per MB: median 3 ms per MB. An unseen pair at degree 3
    # carrying 0.5 MB: 1.5 ms.
    model = observe(star_reduce(), [3e-3, 3e-3, 6e-3, 1e-3])
    assert model.flow_fct(Flow(1, 2, 3, (0,)), 3, 0.5e6) == pytest.approx(1.5e-3)


def test_unseen_pair_and_degree_uses_median_unit_cost():
    # Unit costs (ms per MB per degree): 1, 1, 2 (degree 3) and 1 (degree 1): median 1.
    # Unseen pair at unseen degree 2 with 1 MB: 2 ms.
    model = observe(star_reduce(), [3e-3, 3e-3, 6e-3, 1e-3])
    assert model.flow_fct(Flow(1, 2, 3, (0,)), 2, 1e6) == pytest.approx(2e-3)


def test_history_keeps_only_the_last_h_epochs():
    p = star_reduce()
    history = FctHistory(2)
    for fct in (1e-3, 2e-3, 4e-3):
        history.add(p, [EpochResult(0, fct, tuple(FlowTiming(f, 0, fct, 1e6) for f in p.flows),
                                    1e6)])
    assert len(history) == 2
    # Pair (0, 1) at degree 1: mean of 2 and 4 ms = 3 ms (the 1 ms epoch was dropped).
    assert history.model().flow_fct(Flow(2, 0, 1, (0,)), 1, 1e6) == pytest.approx(3e-3)


def test_model_without_observations_is_an_error():
    with pytest.raises(ReactError, match="no observations"):
        FctHistory(5).model()
    with pytest.raises(ReactError, match="history_epochs"):
        FctHistory(0)


def observed(spans, *, unseen="links", concurrency="step"):
    """The model of one epoch in which each flow (1 byte) ran over ``spans[flow]``, a
    (start, end) pair; the flows form one pattern, their steps as given."""
    ranks = sorted({r for f in spans for r in (f.src, f.dst)})
    pattern = Pattern("allreduce", tuple(ranks), (Chunk(0, 1.0),), tuple(spans))
    timings = tuple(FlowTiming(f, *spans[f], 1.0) for f in pattern.flows)
    history = FctHistory(60, unseen=unseen, concurrency=concurrency)
    history.add(pattern, [EpochResult(0, max(e for _s, e in spans.values()), timings, 1.0)])
    return history.model()


def links_model(units, unseen="links", concurrency="step"):
    """A model from {(src, dst): seconds per byte}: one 1-byte flow per pair, each at its own
    step and alone in time (degree 1, sharing 1 both ways)."""
    spans = {Flow(i + 1, s, d, (0,)): (16.0 * i, 16.0 * i + u)
             for i, ((s, d), u) in enumerate(units.items())}
    return observed(spans, unseen=unseen, concurrency=concurrency)


# Rank 2's inbound link is congested: both flows into it cost 4; every other pair costs 1.
CONGESTED_INTO_2 = {(0, 2): 4.0, (1, 2): 4.0, (0, 3): 1.0, (1, 3): 1.0,
                    (2, 0): 1.0, (2, 1): 1.0, (3, 0): 1.0, (3, 1): 1.0}


def test_unseen_pair_into_a_congested_link_is_priced_by_that_link():
    model = links_model(CONGESTED_INTO_2)
    # The best rate seen is C = 1 byte/s. Flows into 2 got 1/4 alone: 3 competing flows there.
    # 3 -> 2 was never seen: 3's outbound link is free (rate 1), 2's inbound gives 1/(1+3).
    assert model.flow_fct(Flow(1, 3, 2, (0,)), 1, 1.0) == pytest.approx(4.0)
    # Two of the job's flows into 2 would share it with the 3 others: 1/5 each.
    assert model.flow_fct(Flow(1, 3, 2, (0,)), 2, 1.0) == pytest.approx(5.0)
    # 2 -> 3: both links free; at degree 2, 3 bytes take 3 / (1/2) = 6.
    assert model.flow_fct(Flow(1, 2, 3, (0,)), 2, 3.0) == pytest.approx(6.0)


def test_the_papers_rule_prices_every_unseen_pair_as_uncongested():
    # Median per byte of the degree-1 class (4, 4, 1 x 6) is 1, whatever the receiver.
    model = links_model(CONGESTED_INTO_2, unseen="degree_median")
    assert model.flow_fct(Flow(1, 3, 2, (0,)), 1, 1.0) == pytest.approx(1.0)


def test_one_pair_does_not_bound_a_link():
    # A ring: every rank has one pair each way, and 0 -> 1 is slow. That may be its path, not
    # a link, so nothing is bounded and an unseen pair takes the class median (1).
    model = links_model({(0, 1): 5.0, (1, 2): 1.0, (2, 0): 1.0})
    assert model.flow_fct(Flow(1, 0, 2, (0,)), 1, 1.0) == pytest.approx(1.0)


def test_links_endpoints_prices_a_ring_pair_by_the_pairs_seen_at_its_ends():
    # The same ring: 0 -> 1 costs 5, and no link is rated. With "links_endpoints" an unseen pair
    # costs the slower of the mean unit costs seen out of its sender and into its receiver:
    # 0 -> 2 (out of 0: 5; into 2: 1) and 2 -> 1 (out of 2: 1; into 1: 5) cost 5, 1 -> 0 (1 and
    # 1) costs 1; seen pairs keep their own cost.
    model = links_model({(0, 1): 5.0, (1, 2): 1.0, (2, 0): 1.0}, unseen="links_endpoints")
    assert model.flow_fct(Flow(1, 0, 2, (0,)), 1, 1.0) == pytest.approx(5.0)
    assert model.flow_fct(Flow(1, 2, 1, (0,)), 1, 2.0) == pytest.approx(10.0)
    assert model.flow_fct(Flow(1, 1, 0, (0,)), 1, 1.0) == pytest.approx(1.0)
    assert model.flow_fct(Flow(1, 0, 1, (0,)), 1, 1.0) == pytest.approx(5.0)
    # A rank with no pair seen at all (3) leaves the other end to decide: 3 -> 1 costs 5.
    assert model.flow_fct(Flow(1, 3, 1, (0,)), 1, 1.0) == pytest.approx(5.0)
    # Where links are rated, it prices as "links" does.
    rated = links_model(CONGESTED_INTO_2, unseen="links_endpoints")
    assert rated.flow_fct(Flow(1, 3, 2, (0,)), 2, 1.0) == pytest.approx(5.0)


def test_unseen_pair_pays_the_mean_path_excess():
    # 0 -> 2 costs 3 although 0's outbound and 2's inbound links carried other pairs at rate 1
    # (no competing load): an excess of 2 on one of 8 pairs, a mean excess of 0.25. 3 has a rated
    # outbound link (rate 1) and no inbound one, so the unseen 0 -> 3 costs 1 + 0.25; the seen
    # 0 -> 2 keeps its own excess: 1 + 2.
    units = {(0, 1): 1.0, (0, 2): 3.0, (1, 0): 1.0, (1, 2): 1.0, (2, 0): 1.0, (2, 1): 1.0,
             (3, 0): 1.0, (3, 1): 1.0}
    model = links_model(units)
    assert model.flow_fct(Flow(1, 0, 3, (0,)), 1, 1.0) == pytest.approx(1.25)
    assert model.flow_fct(Flow(1, 0, 2, (0,)), 1, 1.0) == pytest.approx(3.0)


def test_unseen_pair_pays_the_least_path_excess_with_links_least():
    # The same observations: the least excess any pair showed is 0 (the seven pairs at rate 1),
    # so the unseen 0 -> 3 is priced by its links alone; the seen 0 -> 2 still pays its own 2.
    units = {(0, 1): 1.0, (0, 2): 3.0, (1, 0): 1.0, (1, 2): 1.0, (2, 0): 1.0, (2, 1): 1.0,
             (3, 0): 1.0, (3, 1): 1.0}
    model = links_model(units, unseen="links_least")
    assert model.flow_fct(Flow(1, 0, 3, (0,)), 1, 1.0) == pytest.approx(1.0)
    assert model.flow_fct(Flow(1, 0, 2, (0,)), 1, 1.0) == pytest.approx(3.0)
    # A fabric-wide excess is kept. Ranks 0, 1 send to 2, 3 at 1.5 (1 -> 3 at 2.5) where their
    # links, read from 0 -> 5, 1 -> 6, 7 -> 2 and 8 -> 3 at 1, allow 1; 5, 6, 7 and 8 have one
    # pair each (their links are not rated, so those pairs show no excess). Excesses 0.5 x 3 and
    # 1.5: least 0.5, mean 0.75. The unseen 8 -> 2 (2's inbound link at rate 1) costs 1 + 0.5.
    units = {(0, 5): 1.0, (1, 6): 1.0, (7, 2): 1.0, (8, 3): 1.0,
             (0, 2): 1.5, (0, 3): 1.5, (1, 2): 1.5, (1, 3): 2.5}
    assert links_model(units, unseen="links_least").flow_fct(
        Flow(1, 8, 2, (0,)), 1, 1.0) == pytest.approx(1.5)
    assert links_model(units).flow_fct(Flow(1, 8, 2, (0,)), 1, 1.0) == pytest.approx(1.75)


def test_unknown_unseen_rule_is_an_error():
    with pytest.raises(ReactError, match="unseen must be one of .*'mean'"):
        FctHistory(5, unseen="mean")



# -- concurrency = "schedule": the effective sharing of a link ----------------------------------

def schedule_model(units):
    """Like links_model, read with concurrency="schedule" (each observed flow ran alone)."""
    return links_model(units, concurrency="schedule")


def test_effective_sharing_is_the_inverse_of_the_mean_share():
    # 0 sends 0->1 over [0, 2] and 0->2 over [1, 3]; 3->1 runs over [0, 2] into 1 as well.
    # 0->1's sender link: alone for 1 s, shared by 2 for 1 s: mean share (1 + 1/2) / 2 = 3/4,
    # so it was divided among 4/3 flows; its receiver link is shared all the time: 2.
    p = Pattern("broadcast", (0, 1, 2, 3), (Chunk(0, 0.5), Chunk(1, 0.5)),
                (Flow(1, 0, 1, (0,)), Flow(1, 3, 1, (1,)), Flow(2, 0, 2, (1,))), root=0)
    times = {Flow(1, 0, 1, (0,)): (0.0, 2.0), Flow(1, 3, 1, (1,)): (0.0, 2.0),
             Flow(2, 0, 2, (1,)): (1.0, 3.0)}
    sharing = overlap_sharing(p, [times[f][0] for f in p.flows],
                              [times[f][1] for f in p.flows], [True] * 3)
    got = dict(zip(p.flows, sharing, strict=True))
    assert got[Flow(1, 0, 1, (0,))] == pytest.approx((4 / 3, 2.0))
    assert got[Flow(1, 3, 1, (1,))] == pytest.approx((1.0, 2.0))
    assert got[Flow(2, 0, 2, (1,))] == pytest.approx((4 / 3, 1.0))


def exact_sharing(spans, i):
    """Flow i's effective sharing from the definition, in rationals: its duration over the
    integral of 1 / k(t), k(t) = 1 + the other flows with start <= t < end (t inside i's run);
    a flow of no duration: 1 + the others running strictly across its instant."""
    s, e = map(Fraction, spans[i])
    if e <= s:
        return 1 + sum(1 for j, (a, b) in enumerate(spans) if j != i and Fraction(a) < s
                       < Fraction(b))
    cuts = sorted({s, e, *(Fraction(x) for a, b in spans for x in (a, b)
                           if s < Fraction(x) < e)})
    inverse = sum((b - a) / (1 + sum(1 for j, (x, y) in enumerate(spans)
                                     if j != i and Fraction(x) <= (a + b) / 2 < Fraction(y)))
                  for a, b in zip(cuts[:-1], cuts[1:], strict=True))
    return (e - s) / inverse


def groups_pattern(groups, side):
    """One flow per span; the flows of ``groups[g]`` share rank g's ``side`` ("src": its
    outbound link, "dst": its inbound link), every other end is a rank of its own."""
    flows, spans, other = [], [], 1000
    for g, group in enumerate(groups):
        for span in group:
            other += 1
            flows.append(Flow(1, g, other, (0,)) if side == "src" else Flow(1, other, g, (0,)))
            spans.append(span)
    ranks = sorted({r for f in flows for r in (f.src, f.dst)})
    pattern = Pattern("allreduce", tuple(ranks), (Chunk(0, 1.0),), flows)
    order = {f: i for i, f in enumerate(flows)}
    return pattern, [spans[order[f]] for f in pattern.flows]


def random_groups(rng, count):
    # Ties, adjacent floats and instants: 1 and 1 + 2**-52 are one ulp apart, and the midpoint
    # of an interval between them rounds onto its low end.
    points = [0.0, 0.5, 1.0, 1.0000000000000002, 2.0]
    groups = []
    for _ in range(count):
        starts = [rng.choice(points) if rng.random() < 0.6 else rng.uniform(0, 2)
                  for _ in range(rng.randint(2, 6))]
        groups.append([(a, max(a, rng.choice(points) if rng.random() < 0.6
                               else a + rng.uniform(0, 1))) for a in starts])
    return groups


@pytest.mark.parametrize("side", ["src", "dst"])
@pytest.mark.parametrize("count", [20, 90])  # 20 groups: flow by flow; 90: over ARRAY_FLOWS
def test_overlap_sharing_matches_the_definition_on_random_groups(side, count):
    groups = random_groups(random.Random(7 + count), count)
    pattern, spans = groups_pattern(groups, side)
    assert (len(pattern.flows) >= ARRAY_FLOWS) is (count == 90)
    # One flow is not live (zero bytes): it neither counts nor is counted.
    dead = len(spans) // 2
    live = [i != dead for i in range(len(spans))]
    got = overlap_sharing(pattern, [a for a, _b in spans], [b for _a, b in spans], live)
    at = 0 if side == "src" else 1
    for i, f in enumerate(pattern.flows):
        mates = [j for j, g in enumerate(pattern.flows)
                 if live[j] and getattr(g, side) == getattr(f, side)]
        if not live[i] or len(mates) < 2:
            assert got[i][at] == 1.0
        else:
            want = float(exact_sharing([spans[j] for j in mates], mates.index(i)))
            assert got[i][at] == pytest.approx(want, rel=1e-12), [spans[j] for j in mates]
        assert got[i][1 - at] == 1.0  # the other end of every flow is alone


@pytest.mark.parametrize("copies", [1, ARRAY_FLOWS])
def test_a_flow_one_ulp_long_does_not_share_with_the_flow_starting_at_its_end(copies):
    # A runs over [1 + 2**-52, 1 + 2**-51], B from A's end to 2. The midpoint of A's one
    # interval rounds (to even) onto A's end, where B has started; B still does not run
    # alongside A: both ran alone (1.0). Flow by flow and, with many such groups, on arrays.
    a, b = (1.0000000000000002, 1.0000000000000004), (1.0000000000000004, 2.0)
    assert 0.5 * (a[0] + a[1]) == a[1]
    pattern, spans = groups_pattern([[a, b]] * copies, "src")
    got = overlap_sharing(pattern, [s for s, _e in spans], [e for _s, e in spans],
                          [True] * len(spans))
    assert got == [(1.0, 1.0)] * (2 * copies)


def test_round2_gives_pythons_round():
    # Halves of a cent as written (0.125 is exact and rounds to even, 1.005 and 2.675 are
    # stored just below their half), their neighbouring floats, large and infinite values.
    values = [0.125, 0.375, 1.005, 2.675, 0.015, 1e7 + 0.005, 123456.785, -0.125, 0.0,
              math.inf, 1.0, 4 / 3]
    values += [math.nextafter(v, math.inf) for v in values] + [
        math.nextafter(v, -math.inf) for v in values]
    values += [k / 200 for k in range(2000)] + [k / 1000 + 1e-12 for k in range(2000)]
    assert round2(np.array(values)).tolist() == [round(v, 2) for v in values]


# -- pricing a whole pattern ----------------------------------------------------------------

SCHEDULE_PASSES = 4
"""Rounds of repricing at the schedule's overlaps (the module docstring's "a few rounds")."""


def defined_fcts(model, pattern, message_bytes, concurrency):
    """Every flow's estimated FCT as the module docstring defines it, flow by flow: priced at
    its step's degrees; with "schedule", repriced at the overlaps (to 1%) of the schedule the
    previous prices give, until they repeat or for SCHEDULE_PASSES rounds."""
    degrees = pattern.degrees()
    classes = flow_degrees(pattern).tolist()
    size = [pattern.flow_bytes(f, message_bytes) for f in pattern.flows]
    sides = [(degrees[(f.step, f.src)][1], degrees[(f.step, f.dst)][0]) for f in pattern.flows]

    def price(sides):
        return [model.flow_fct(f, k, b, out_degree=o, in_degree=i, share=max(o, i))
                for f, k, b, (o, i) in zip(pattern.flows, classes, size, sides, strict=True)]

    fcts = price(sides)
    if concurrency == "schedule":
        for _round in range(SCHEDULE_PASSES):
            start, end = schedule(pattern, fcts)
            overlap = [(round(o, 2), round(i, 2)) for o, i in overlap_sharing(
                pattern, start.tolist(), end.tolist(), [b > 0 for b in size])]
            if overlap == sides:
                break
            sides = overlap
            fcts = price(sides)
    return fcts


def random_history(pattern, rng, *, unseen, concurrency, epochs=2, slow=()):
    """The history of ``epochs`` runs of ``pattern`` with random FCTs (ranks in ``slow``
    receiving at a third of the rate)."""
    history = FctHistory(60, unseen=unseen, concurrency=concurrency)
    message = 4e6
    for epoch in range(epochs):
        fcts = [pattern.flow_bytes(f, message) * 8 / 100e9 * rng.uniform(1.0, 2.0)
                * (3.0 if f.dst in slow else 1.0) for f in pattern.flows]
        start, end = schedule(pattern, fcts)
        timings = tuple(FlowTiming(f, float(a), float(b), pattern.flow_bytes(f, message))
                        for f, a, b in zip(pattern.flows, start, end, strict=True))
        history.add(pattern, [EpochResult(epoch, float(end.max()), timings, message)])
    return history


def swapped(pattern, x, y):
    """``pattern`` with ranks x and y exchanged in every flow: new (src, dst) pairs."""
    swap = {x: y, y: x}
    return pattern.relabelled(replace(f, src=swap.get(f.src, f.src), dst=swap.get(f.dst, f.dst))
                              for f in pattern.flows)


@pytest.mark.parametrize("concurrency", ["step", "schedule"])
@pytest.mark.parametrize("unseen", ["links", "links_endpoints", "degree_median"])
@pytest.mark.parametrize("ranks", [8, 128])  # 28 flows priced flow by flow, 508 on arrays
def test_pattern_fcts_are_the_defined_prices(ranks, unseen, concurrency):
    # Observed: the tree with random FCTs, ranks 3 and 5 slow to receive. Priced: the tree
    # (every pair seen) and the tree with 0 and 3 exchanged (some pairs never seen, some
    # reaching the slow ranks), both to the float.
    tree = allreduce_double_binary_tree(ranks)
    assert (len(tree.flows) >= ARRAY_FLOWS) is (ranks == 128)
    rng = random.Random(5)
    model = random_history(tree, rng, unseen=unseen, concurrency=concurrency,
                           slow={3, 5}).model()
    for pattern in (tree, swapped(tree, 0, 3)):
        got = model.pattern_fcts(pattern, 4e6).tolist()
        assert got == defined_fcts(model, pattern, 4e6, concurrency)


@pytest.mark.parametrize("concurrency", ["step", "schedule"])
def test_a_ring_on_arrays_prices_its_unseen_pairs_by_their_ends(concurrency):
    # A 32-rank ring (1,984 flows): one pair each way per rank, so no link is rated. Priced:
    # the ring with ranks 0 and 5 exchanged, whose four new pairs "links_endpoints" prices by
    # the pairs seen at their ends (as defined, and unlike the default "links").
    ring = allreduce_ring(32)
    assert len({(f.src, f.dst) for f in ring.flows}) == 32
    rng = random.Random(6)
    moved = swapped(ring, 0, 5)
    ends = random_history(ring, rng, unseen="links_endpoints", concurrency=concurrency,
                          epochs=1, slow={5}).model()
    fcts = ends.pattern_fcts(moved, 4e6).tolist()
    assert fcts == defined_fcts(ends, moved, 4e6, concurrency)
    rng = random.Random(6)
    plain = random_history(ring, rng, unseen="links", concurrency=concurrency, epochs=1,
                           slow={5}).model()
    assert fcts != plain.pattern_fcts(moved, 4e6).tolist()


def test_pricing_views_dropped_are_built_again_the_same():
    # What pricing a large pattern keeps with it (its flow arrays, gate arrays, the critical
    # path's plan: Pattern.derived views) can be dropped: the next pricing builds it again,
    # with the same floats.
    tree = allreduce_double_binary_tree(128)
    model = random_history(tree, random.Random(8), unseen="links",
                           concurrency="schedule").model()
    first = model.pattern_fcts(tree, 4e6)
    path = critical_path(tree, first)
    views = ["estimate.flow_arrays", ("gate_arrays", "algorithm2"),
             ("critical.plan", "algorithm2")]

    def kept(view):
        def absent():
            raise LookupError(view)
        try:
            tree.derived(view, absent)
        except LookupError:
            return False
        return True

    assert all(kept(v) for v in views)
    forget_pricing_views(tree)
    assert not any(kept(v) for v in views)
    again = model.pattern_fcts(tree, 4e6)
    assert again.tolist() == first.tolist()
    assert critical_path(tree, again) == path


# -- reading links: shared or degraded, and the capacity ---------------------------------------

def slow_into_2(shared_rate):
    """Rank 2's inbound link: 0 -> 2 alone at 1/4 of C = 1; 1 -> 2 and 4 -> 2 side by side
    (k = 2) at ``shared_rate`` each; every other pair alone at 1."""
    slow = 1.0 / shared_rate
    spans = {Flow(1, 0, 2, (0,)): (0.0, 4.0), Flow(2, 1, 2, (0,)): (16.0, 16.0 + slow),
             Flow(2, 4, 2, (0,)): (16.0, 16.0 + slow)}
    for i, (s, d) in enumerate(((0, 3), (1, 3), (2, 0), (2, 1), (3, 0), (3, 1))):
        spans[Flow(3 + i, s, d, (0,))] = (32.0 + 16.0 * i, 33.0 + 16.0 * i)
    return observed(spans, concurrency="schedule")


def test_a_slow_link_read_at_one_sharing_is_taken_as_shared():
    # Flows into 2 got a quarter of C alone: 3 competing flows (C / (k + 3)) or a link of a
    # quarter capacity (C / 4 / k); one reading cannot tell, and both rules keep the first:
    # two job flows into 2 get 1/5 each.
    assert links_model(CONGESTED_INTO_2).flow_fct(Flow(1, 3, 2, (0,)), 2, 1.0) == \
        pytest.approx(5.0)
    assert schedule_model(CONGESTED_INTO_2).flow_fct(Flow(1, 3, 2, (0,)), 2, 1.0) == \
        pytest.approx(5.0)


def test_readings_at_several_sharings_tell_a_degraded_link_from_a_shared_one():
    # Readings of 2's inbound link, q = C / b - k: 0 -> 2 alone at 1/4 (q = 3); 1 -> 2 and
    # 4 -> 2 together at 1/8 each (q = 6) or at 1/5 (q = 3); the least load is 3 either way.
    # Degraded (a link of C' = max b k = 1/4): 1/4 alone and 1/8 each with two flows predicts
    # 1/8 exactly, where sharing with 3 others predicts 1/5: the unseen 3 -> 2 then gets 1/8
    # beside another flow (8 s per byte) and 1/4 alone.
    degraded = slow_into_2(1 / 8)
    assert degraded.flow_fct(Flow(1, 3, 2, (0,)), 2, 1.0, in_degree=2.0) == pytest.approx(8.0)
    assert degraded.flow_fct(Flow(1, 3, 2, (0,)), 1, 1.0) == pytest.approx(4.0)
    # Shared: 1/4 alone and 1/5 with two flows (3 competing flows): 1/5 beside another flow,
    # 1/6 with two others.
    shared = slow_into_2(1 / 5)
    assert shared.flow_fct(Flow(1, 3, 2, (0,)), 2, 1.0, in_degree=2.0) == pytest.approx(5.0)
    assert shared.flow_fct(Flow(1, 3, 2, (0,)), 3, 1.0, in_degree=3.0) == pytest.approx(6.0)


def test_flows_of_different_steps_that_overlap_share_their_link():
    # Rank 0's outbound link carries 3 competing flows (0->1 and 0->2 took 4 s per byte alone,
    # C = 1 byte/s). Candidate: 0->1 (chunk 0, step 1, 0.5 bytes) and, in chunk 1, 3->0 (0.5
    # bytes, 0.5 s) then 0->2 (step 2, 0.5 bytes). Per step rank 0 sends one flow, so "step"
    # prices each at 0.5 / (1/4) = 2 s. In fact they overlap: as a fluid, 0->1 runs at 1/4
    # for 0.5 s (0.125 bytes), then both at 1/5; 0->1 ends at 0.5 + 0.375 * 5 = 2.375 s, and
    # 0->2 has 0.125 bytes left at 1/4: it ends at 2.875, an FCT of 2.375 s as well. The
    # estimate prices a flow at its time-averaged sharing, not at the time-varying rate: within
    # 3% here.
    units = {(0, 1): 4.0, (0, 2): 4.0, (1, 0): 1.0, (2, 0): 1.0, (3, 0): 1.0, (1, 2): 1.0,
             (2, 1): 1.0, (3, 1): 1.0, (3, 2): 1.0}
    candidate = Pattern("broadcast", (0, 1, 2, 3), (Chunk(0, 0.5), Chunk(1, 0.5)),
                        (Flow(1, 0, 1, (0,)), Flow(1, 3, 0, (1,)), Flow(2, 0, 2, (1,))), root=0)
    fcts = dict(zip(candidate.flows, schedule_model(units).pattern_fcts(candidate, 1.0),
                    strict=True))
    assert fcts[Flow(1, 0, 1, (0,))] == pytest.approx(2.375, rel=0.03)
    assert fcts[Flow(2, 0, 2, (1,))] == pytest.approx(2.375, rel=0.03)
    assert fcts[Flow(1, 3, 0, (1,))] == pytest.approx(0.5)
    step = dict(zip(candidate.flows, links_model(units).pattern_fcts(candidate, 1.0),
                    strict=True))
    assert step[Flow(1, 0, 1, (0,))] == pytest.approx(2.0)


def capacity_observed(concurrency):
    """1 -> 2 over [0, 1] inside 0 -> 2's [0, 4], both into 2 at step 1; every other pair
    alone at 1 byte/s."""
    spans = {Flow(1, 1, 2, (0,)): (0.0, 1.0), Flow(1, 0, 2, (0,)): (0.0, 4.0)}
    for i, (s, d) in enumerate(((0, 3), (1, 3), (2, 0), (2, 1), (3, 0), (3, 1))):
        spans[Flow(2 + i, s, d, (0,))] = (16.0 * i + 16.0, 16.0 * i + 17.0)
    return observed(spans, concurrency=concurrency)


def test_capacity_is_read_from_flows_that_ran_alone():
    # 1 -> 2 shared 2's inbound link with 0 -> 2 all along (k = 2) but got the full rate 1,
    # its mate being held back elsewhere: b * k = 2 would double C. Read from the flows that
    # ran alone, C = 1. 0 -> 2 shared for 1 s of its 4: k = 4 / (1/2 + 3) = 8/7.
    model = capacity_observed("schedule")
    # 2's inbound readings q = C / b - k: 1 - 2 < 0 (kept, the least, clipped to 0) and
    # 4 - 8/7; so both links of the unseen 3 -> 2 are free at C = 1, plus the mean path excess
    # over the 8 pairs: 1 -> 2 ran 1 s against 2 s predicted (-1), 0 -> 2 4 s against 8/7
    # (+20/7): (20/7 - 1) / 8 = 13/56.
    assert model.flow_fct(Flow(1, 3, 2, (0,)), 1, 1.0) == pytest.approx(1 + 13 / 56)
    # 1 -> 2 alone: its links say 1 s, its own excess -1 s: never faster than C, so 1 s.
    assert model.flow_fct(Flow(1, 1, 2, (0,)), 1, 1.0) == pytest.approx(1.0)
    # "step" takes the best b * k, C = 2 (1 -> 2 at its step's in-degree 2), and then reads
    # every link a flow crossed alone at rate 1 as carrying q = 2 - 1 = 1 competing flow: the
    # unseen 3 -> 2 gets 2 / (1 + 1) = 1 from 3's outbound link (2's inbound is free: 2 / 1 -
    # 2 = 0), plus the mean excess, 0 -> 2's 4 s against the 1 s predicted over 8 pairs: 3/8.
    assert capacity_observed("step").flow_fct(Flow(1, 3, 2, (0,)), 1, 1.0) == \
        pytest.approx(1 + 3 / 8)


def test_unknown_concurrency_rule_is_an_error():
    with pytest.raises(ReactError, match="concurrency must be one of .*'time'"):
        FctHistory(5, concurrency="time")
