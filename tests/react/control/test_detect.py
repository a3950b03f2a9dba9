"""Congestion detection (§5.2) on hand-made batches whose verdicts follow from Eq. 1 and Eq. 2."""

import pytest

from react.control.detect import detect_congestion, flow_degrees
from react.model.errors import ReactError
from react.model.observation import EpochResult, FlowTiming
from react.model.pattern import Chunk, Flow, Pattern


def fan_in_pattern():
    # Ranks 1, 2 reduce into 0 at step 1 (degree 2 each); 0 copies to 3 at step 2 (degree 1).
    return Pattern(
        "reduce",
        (0, 1, 2, 3),
        (Chunk(0, 1.0),),
        (Flow(1, 1, 0, (0,), "reduce"), Flow(1, 2, 0, (0,), "reduce"),
         Flow(1, 3, 0, (0,), "reduce"), Flow(2, 0, 3, (0,), "copy")),
        root=0,
    )


def batch_from(pattern, fcts_per_epoch, size=1e6):
    out = []
    for e, fcts in enumerate(fcts_per_epoch):
        timings = tuple(
            FlowTiming(f, 0.0, fct, size) for f, fct in zip(pattern.flows, fcts, strict=True)
        )
        out.append(EpochResult(e, max(fcts), timings, size))
    return out


def test_flow_degree_is_max_of_endpoint_degrees():
    # Step 1: 0 receives three flows (in-degree 3), so each step-1 flow has degree 3;
    # step 2: 0 -> 3 alone, degree 1.
    assert list(flow_degrees(fan_in_pattern())) == [3, 3, 3, 1]


def test_steady_congestion_eq1():
    # Degree-3 class: flows take 1, 1 and 2 ms in every epoch. Throughputs (Mb/s): 8000, 8000,
    # 4000; class mean 6667; (1 - 0.2) * 6667 = 5333 > 4000 = p90 of the slow flow -> steady.
    p = fan_in_pattern()
    batch = batch_from(p, [[1e-3, 1e-3, 2e-3, 1e-3]] * 6)
    report = detect_congestion(p, batch)
    assert [(c.flow.src, c.kind) for c in report.flows] == [(3, "steady")]
    assert report.flows[0].p90_bps == pytest.approx(4e9)
    assert report.flows[0].class_mean_bps == pytest.approx(8e9 * 5 / 6)
    # Rank 3's only outgoing flow is steady congested; rank 0 has fast inbound flows too.
    assert report.steady_outbound == frozenset({3})
    assert report.steady_inbound == frozenset()


def test_erratic_congestion_eq2():
    # Flow 1->0 alternates 1 ms and 1.5 ms: throughputs 8 and 5.33 Gb/s, mean 6.67, population
    # std 1.33, normalised 0.2 > 0.15 -> erratic. Its p90 (8 Gb/s) is above 0.8 x the class mean,
    # so it is not steady. The others are constant: no congestion.
    p = fan_in_pattern()
    batch = batch_from(p, [[1e-3 if e % 2 else 1.5e-3, 1e-3, 1e-3, 1e-3] for e in range(6)])
    report = detect_congestion(p, batch)
    assert [(c.flow.src, c.kind) for c in report.flows] == [(1, "erratic")]
    assert report.flows[0].normalised_std == pytest.approx(0.2)


def test_no_congestion_on_uniform_flows():
    p = fan_in_pattern()
    report = detect_congestion(p, batch_from(p, [[1e-3, 1e-3, 1e-3, 5e-4]] * 6))
    assert not report.congested


def test_batch_of_another_pattern_is_rejected():
    p = fan_in_pattern()
    other = p.with_flows(p.flows[:3])
    with pytest.raises(ReactError, match="did not run this pattern"):
        detect_congestion(p, batch_from(other, [[1e-3] * 3]))


def test_empty_batch_is_rejected():
    with pytest.raises(ReactError, match="empty"):
        detect_congestion(fan_in_pattern(), [])
