"""The §5.4.1 FCT estimate: seen pairs scale by bytes and degree; unseen ones by links or median."""

import pytest

from react.backends.base import EpochResult, FlowTiming
from react.errors import ReactError
from react.estimate import FctHistory
from react.pattern import Chunk, Flow, Pattern


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
    from react.estimate import FctModel, _Observation
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


def test_unknown_unseen_rule_is_an_error():
    with pytest.raises(ReactError, match="unseen must be one of .*'mean'"):
        links_model(CONGESTED_INTO_2, unseen="mean")
