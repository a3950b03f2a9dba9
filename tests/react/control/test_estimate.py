"""The §5.4.1 FCT estimate: seen pairs scale by bytes and degree; unseen ones by links or median."""

import math

import numpy as np
import pytest

from react.control.estimate import FctHistory
from react.model.errors import ReactError
from react.model.observation import EpochResult, FlowTiming
from react.model.pattern import Chunk, Flow, Pattern


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


def links_model(units, unseen="links"):
    """A model from {(src, dst): unit cost} with 1-byte, degree-1 observations."""
    from react.control.estimate import FctModel, _Observation
    return FctModel([_Observation(s, d, 1, 1.0, u) for (s, d), u in units.items()],
                    unseen=unseen)


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
        links_model(CONGESTED_INTO_2, unseen="mean")


# -- concurrency = "schedule" ---------------------------------------------------------------

def schedule_model(units):
    """Like links_model, read with concurrency="schedule" (each observed flow ran alone)."""
    from react.control.estimate import FctModel, _Observation
    return FctModel([_Observation(s, d, 1, 1.0, u, 1.0, 1.0) for (s, d), u in units.items()],
                    concurrency="schedule")


def test_effective_sharing_is_the_inverse_of_the_mean_share():
    from react.control.estimate import _overlap_sharing
    # 0 sends 0->1 over [0, 2] and 0->2 over [1, 3]; 3->1 runs over [0, 2] into 1 as well.
    # 0->1's sender link: alone for 1 s, shared by 2 for 1 s: mean share (1 + 1/2) / 2 = 3/4,
    # so it was divided among 4/3 flows; its receiver link is shared all the time: 2.
    p = Pattern("broadcast", (0, 1, 2, 3), (Chunk(0, 0.5), Chunk(1, 0.5)),
                (Flow(1, 0, 1, (0,)), Flow(1, 3, 1, (1,)), Flow(2, 0, 2, (1,))), root=0)
    times = {Flow(1, 0, 1, (0,)): (0.0, 2.0), Flow(1, 3, 1, (1,)): (0.0, 2.0),
             Flow(2, 0, 2, (1,)): (1.0, 3.0)}
    sharing = _overlap_sharing(p, [times[f][0] for f in p.flows],
                               [times[f][1] for f in p.flows], [True] * 3)
    got = dict(zip(p.flows, sharing, strict=True))
    assert got[Flow(1, 0, 1, (0,))] == pytest.approx((4 / 3, 2.0))
    assert got[Flow(1, 3, 1, (1,))] == pytest.approx((1.0, 2.0))
    assert got[Flow(2, 0, 2, (1,))] == pytest.approx((4 / 3, 1.0))


def _exact_sharing(spans, i):
    """Flow i's effective sharing from the definition, in rationals: its duration over the
    integral of 1 / k(t), k(t) = 1 + the other flows with start <= t < end (t inside i's run)."""
    from fractions import Fraction as Q
    s, e = map(Q, spans[i])
    if e <= s:
        return 1 + sum(1 for j, (a, b) in enumerate(spans) if j != i and Q(a) < s < Q(b))
    cuts = sorted({s, e, *(Q(x) for a, b in spans for x in (a, b) if s < Q(x) < e)})
    inverse = sum((b - a) / (1 + sum(1 for j, (x, y) in enumerate(spans)
                                     if j != i and Q(x) <= (a + b) / 2 < Q(y)))
                  for a, b in zip(cuts[:-1], cuts[1:], strict=True))
    return (e - s) / inverse


def _group_sharing_on_arrays(spans):
    from react.control.estimate import _group_sharing_rows
    return _group_sharing_rows(np.array([[a for a, _b in spans]]),
                               np.array([[b for _a, b in spans]]))[0].tolist()


@pytest.mark.parametrize("implementation", ["python", "arrays"])
def test_group_sharing_matches_the_definition_on_random_groups(implementation):
    import random

    from react.control.estimate import _group_sharing
    sharing = _group_sharing if implementation == "python" else _group_sharing_on_arrays
    rng = random.Random(7)
    points = [0.0, 0.5, 1.0, 1.0000000000000002, 2.0]  # ties, adjacent floats, instants
    for _ in range(400):
        n = rng.randint(2, 6)
        starts = [rng.choice(points) if rng.random() < 0.6 else rng.uniform(0, 2)
                  for _ in range(n)]
        spans = [(a, max(a, rng.choice(points) if rng.random() < 0.6 else a + rng.uniform(0, 1)))
                 for a in starts]
        got = sharing(spans)
        for i in range(n):
            assert got[i] == pytest.approx(float(_exact_sharing(spans, i)), rel=1e-12), spans


def test_group_sharing_rows_give_the_floats_of_the_group_by_group_python():
    import random

    import react.control.estimate as estimate
    # Many groups of one size at once, with ties, adjacent floats and instants (midpoints that
    # round onto a cut, where a flow's last term differs) and long runs across many intervals:
    # all rows at once, each row alone and the group-by-group Python implementation (its sums
    # in the same order) must give the same floats, bit for bit. (Not the definition: where a
    # flow lasts one ulp, both count the flows ending with it at the midpoint that rounds onto
    # its end as not running, a difference confined to an interval of one ulp.)
    rng = random.Random(11)
    # The midpoint of 1 + 2**-52 and 1 + 2**-51 rounds (to even) onto the latter.
    points = [0.0, 0.5, 1.0, 1.0000000000000002, 1.0000000000000004, 2.0, 3.0,
              3.0000000000000004]
    for size in (2, 5, 9):
        groups = []
        for _ in range(300):
            starts = [rng.choice(points) if rng.random() < 0.6 else rng.uniform(0, 3)
                      for _ in range(size)]
            groups.append([(a, max(a, rng.choice(points) if rng.random() < 0.6
                                   else a + rng.uniform(0, 1))) for a in starts])
        groups.append([(0.0, 3.0), *((k / size, (k + 1) / size) for k in range(size - 1))])
        start = np.array([[a for a, _b in g] for g in groups])
        end = np.array([[b for _a, b in g] for g in groups])
        cuts = np.sort(np.concatenate((start, end), axis=1), axis=1)
        assert np.any(0.5 * (cuts[:, :-1] + cuts[:, 1:]) == cuts[:, 1:])
        assert np.any(end == start)
        together = estimate._group_sharing_rows(start, end).tolist()
        for g, spans in enumerate(groups):
            alone = estimate._group_sharing_rows(start[g:g + 1], end[g:g + 1])[0].tolist()
            assert together[g] == alone == list(estimate._group_sharing(spans)), spans


@pytest.mark.parametrize("implementation", ["python", "arrays"])
def test_overlap_sharing_of_groups_of_several_sizes_matches_the_definition(implementation):
    import random

    from react.control.estimate import _flow_arrays, _overlap_sharing_in_python, _SharingGroups
    # Senders 0..5 send 1..6 flows (groups of every size solved together); receivers get a
    # mix; one flow is not live (zero bytes): it neither counts nor is counted.
    rng = random.Random(3)
    flows = [Flow(step, src, 6 + (src * 7 + step) % 5, (0,))
             for src in range(6) for step in range(1, src + 2)]
    p = Pattern("allreduce", tuple(range(11)), (Chunk(0, 1.0),), flows)
    points = [0.0, 1.0, 1.0000000000000002, 2.0]
    start = [rng.choice(points) if rng.random() < 0.4 else rng.uniform(0, 2) for _ in p.flows]
    end = [a if rng.random() < 0.1 else a + rng.choice([1.0, rng.uniform(0, 2)]) for a in start]
    live = [i != 4 for i in range(len(p.flows))]
    if implementation == "python":
        got = _overlap_sharing_in_python(p, start, end, live)
    else:
        flows = _flow_arrays(p)
        sides = _SharingGroups(flows.src, flows.dst, np.array(live)).sharing(np.array(start),
                                                                           np.array(end))
        got = list(zip(*(side.tolist() for side in sides), strict=True))
    for side, key in ((0, "src"), (1, "dst")):
        for i, f in enumerate(p.flows):
            group = [j for j, g in enumerate(p.flows)
                     if live[j] and getattr(g, key) == getattr(f, key)]
            if not live[i] or len(group) < 2:
                assert got[i][side] == 1.0
                continue
            spans = [(start[j], end[j]) for j in group]
            want = float(_exact_sharing(spans, group.index(i)))
            assert got[i][side] == pytest.approx(want, rel=1e-12), (i, side, spans)


def test_round2_is_pythons_round():
    from react.control.estimate import _round2
    # Halves of a cent as written (0.125 is exact and rounds to even, 1.005 and 2.675 are
    # stored just below their half), their neighbouring floats, large and infinite values.
    values = [0.125, 0.375, 1.005, 2.675, 0.015, 1e7 + 0.005, 123456.785, -0.125, 0.0,
              math.inf, 1.0, 4 / 3]
    values += [math.nextafter(v, math.inf) for v in values] + [
        math.nextafter(v, -math.inf) for v in values]
    values += [k / 200 for k in range(2000)] + [k / 1000 + 1e-12 for k in range(2000)]
    assert _round2(np.array(values)).tolist() == [round(v, 2) for v in values]


def test_large_patterns_priced_on_arrays_as_flow_by_flow():
    import random

    from react.control.estimate import FctModel, _Observation
    from react.model.critical import ARRAY_FLOWS
    from react.patterns import allreduce_double_binary_tree
    # 128 ranks: 508 flows, priced on arrays; flow by flow must give the same floats. Random
    # observations of some pairs (seen, rated links, a degraded-looking link, unseen pairs).
    p = allreduce_double_binary_tree(128)
    assert len(p.flows) >= ARRAY_FLOWS
    rng = random.Random(5)
    obs = [_Observation(f.src, f.dst, 1, 1e6, rng.uniform(1e-4, 1e-3), rng.choice([1.0, 1.5, 2.0]),
                        rng.choice([1.0, 2.0, 3.0])) for f in rng.sample(p.flows, 300)]
    for unseen in ("links", "links_endpoints", "degree_median"):
        for concurrency in ("step", "schedule"):
            model = FctModel(obs, unseen=unseen, concurrency=concurrency)
            on_arrays = model.pattern_fcts(p, 4e6)
            in_python = model._pattern_fcts_in_python(p, 4e6)
            assert on_arrays.tolist() == in_python.tolist()
    # A ring: one pair each way per rank, so no link is rated. Seen: every pair of the ring;
    # priced: the ring with ranks 0 and 5 exchanged, whose four new pairs "links_endpoints"
    # prices by their ends, on arrays as flow by flow (and unlike the default).
    from dataclasses import replace

    from react.patterns import allreduce_ring
    ring = allreduce_ring(32)
    assert len(ring.flows) >= ARRAY_FLOWS
    swap = {0: 5, 5: 0}
    moved = ring.relabelled(replace(f, src=swap.get(f.src, f.src), dst=swap.get(f.dst, f.dst))
                            for f in ring.flows)
    pairs = sorted({(f.src, f.dst) for f in ring.flows})
    assert len(pairs) == 32
    obs = [_Observation(a, b, 1, 1e6, rng.uniform(1e-4, 1e-3), 1.0, 1.0) for a, b in pairs]
    for concurrency in ("step", "schedule"):
        model = FctModel(obs, unseen="links_endpoints", concurrency=concurrency)
        fcts = model.pattern_fcts(moved, 4e6)
        assert fcts.tolist() == model._pattern_fcts_in_python(moved, 4e6).tolist()
        assert fcts.tolist() != FctModel(obs, concurrency=concurrency).pattern_fcts(
            moved, 4e6).tolist()


def test_pricing_views_dropped_are_built_again_the_same():
    import random

    from react.control.estimate import FctModel, _Observation, forget_pricing_views
    from react.model.critical import critical_path
    from react.patterns import allreduce_double_binary_tree
    # What pricing a large pattern keeps with it (flow arrays, gate arrays, the critical
    # path's plan) can be dropped: the next pricing builds it again, with the same floats,
    # and equal to pricing flow by flow.
    p = allreduce_double_binary_tree(128)
    rng = random.Random(8)
    obs = [_Observation(f.src, f.dst, 1, 1e6, rng.uniform(1e-4, 1e-3), 1.0, 1.0)
           for f in rng.sample(p.flows, 300)]
    model = FctModel(obs, concurrency="schedule")
    first = model.pattern_fcts(p, 4e6)
    path = critical_path(p, first)
    views = p._cache["derived"]
    assert {"estimate.flow_arrays", ("gate_arrays", "algorithm2"),
            ("critical.plan", "algorithm2")} <= set(views)
    forget_pricing_views(p)
    assert not {"estimate.flow_arrays", ("gate_arrays", "algorithm2"),
                ("critical.plan", "algorithm2")} & set(views)
    again = model.pattern_fcts(p, 4e6)
    assert again.tolist() == first.tolist() == model._pattern_fcts_in_python(p, 4e6).tolist()
    assert critical_path(p, again) == path


def slow_into_2(shared_rate):
    """Rank 2's inbound link: 0 -> 2 alone at 1/4 of C = 1, 1 -> 2 beside another job flow
    (k = 2) at ``shared_rate``; every other pair alone at 1."""
    from react.control.estimate import FctModel, _Observation
    obs = [_Observation(0, 2, 1, 1.0, 4.0, 1.0, 1.0),
           _Observation(1, 2, 2, 1.0, 1.0 / shared_rate, 1.0, 2.0)]
    obs += [_Observation(s, d, 1, 1.0, 1.0, 1.0, 1.0)
            for s, d in ((0, 3), (1, 3), (2, 0), (2, 1), (3, 0), (3, 1))]
    return FctModel(obs, concurrency="schedule")


def test_a_slow_link_read_at_one_sharing_is_taken_as_shared():
    # Flows into 2 got a quarter of C alone: 3 competing flows (C / (k + 3)) or a link of a
    # quarter capacity (C / 4 / k); one reading cannot tell, and both rules keep the first:
    # two job flows into 2 get 1/5 each.
    assert links_model(CONGESTED_INTO_2).flow_fct(Flow(1, 3, 2, (0,)), 2, 1.0) == \
        pytest.approx(5.0)
    assert schedule_model(CONGESTED_INTO_2).flow_fct(Flow(1, 3, 2, (0,)), 2, 1.0) == \
        pytest.approx(5.0)


def test_readings_at_several_sharings_tell_a_degraded_link_from_a_shared_one():
    # Degraded: 1/4 alone and 1/8 each with two flows (a quarter-capacity link): the unseen
    # 3 -> 2 then gets 1/8 beside another flow (8 s per byte) and 1/4 alone.
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


def test_capacity_is_read_from_flows_that_ran_alone():
    # 1 -> 2 shared 2's inbound link with 0 -> 2 (k = 2) but got the full rate 1, its mate
    # being held back elsewhere: b * k = 2 would double C. Every other flow ran alone at 1.
    from react.control.estimate import FctModel, _Observation
    obs = [_Observation(1, 2, 2, 1.0, 1.0, 1.0, 2.0), _Observation(0, 2, 2, 1.0, 4.0, 1.0, 2.0)]
    obs += [_Observation(s, d, 1, 1.0, 1.0, 1.0, 1.0)
            for s, d in ((0, 3), (1, 3), (2, 0), (2, 1), (3, 0), (3, 1))]
    model = FctModel(obs, concurrency="schedule")
    assert model._capacity == pytest.approx(1.0)
    assert FctModel(obs)._capacity == pytest.approx(2.0)  # "step": the best b * k
    # The unseen 3 -> 2 alone: both links free at C = 1 (2's inbound readings: 1 - 2 < 0 and
    # 4 - 2 = 2 competing flows, the least kept, clipped to 0), plus the mean path excess over
    # the 8 pairs: 1 -> 2 ran 1 s against 2 s predicted (-1), 0 -> 2 4 s against 2 (+2): 1/8.
    assert model.flow_fct(Flow(1, 3, 2, (0,)), 1, 1.0) == pytest.approx(1.125)
    # 1 -> 2 alone: its links say 1 s, its own excess -1 s: never faster than C, so 1 s.
    assert model.flow_fct(Flow(1, 1, 2, (0,)), 1, 1.0) == pytest.approx(1.0)


def test_unknown_concurrency_rule_is_an_error():
    with pytest.raises(ReactError, match="concurrency must be one of .*'time'"):
        FctHistory(5, concurrency="time")
