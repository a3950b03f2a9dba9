"""The §5.4.1 FCT estimate: seen pairs scale by bytes and degree, unseen pairs take the median."""

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
