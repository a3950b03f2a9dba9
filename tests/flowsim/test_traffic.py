"""Tests of flowsim.traffic: background sources on a real Network, with hand-derived timings.

All topologies here have zero latency and 8 Gbps (= 1 GB/s) links, so a flow's time is bytes over
its max-min share in GB/s.
"""

import hashlib
import json
import math

import numpy as np
import pytest

from flowsim import FlowError, UnknownNodeError
from flowsim.network import Network
from flowsim.topologies import star
from flowsim.traffic import long_lived, periodic_bulk, ping_pong, poisson_on_off, source_seed

GBps = 8e9  # bits per second in one gigabyte per second
MB = 1e6


@pytest.fixture
def net():
    # h0, h1, h2 on s0; every link 1 GB/s, no latency.
    return Network(star(3, capacity_bps=GBps, latency_s=0.0))


def _collect(event, into):
    event.callbacks.append(lambda ev: into.append(ev.value))


def test_flow_sharing_a_link_with_a_long_lived_flow_gets_half(net):
    # Both flows enter h2 through s0 -> h2 (1 GB/s): max-min gives 0.5 GB/s each, so the 1 MB
    # flow ends at 1e6 / 0.5e9 = 2 ms. The long-lived flow keeps running.
    bg = long_lived(net, "h0", "h2", tenant="storage")
    done = []
    _collect(net.start_flow("h1", "h2", 1 * MB, tenant="job"), done)
    net.env.run(until=0.01)
    assert [r.end_s for r in done] == pytest.approx([2e-3], rel=1e-9)
    assert len(bg.flow_ids) == 1 and bg.running_flow_ids == bg.flow_ids
    assert bg.records == ()


def test_long_lived_stop_frees_capacity_at_stop_s(net):
    # 0-1 ms: two flows share s0 -> h2, the 1 MB flow sends 0.5 MB at 0.5 GB/s. From 1 ms it is
    # alone at 1 GB/s: the last 0.5 MB takes 0.5 ms, so it ends at 1.5 ms. The long-lived flow,
    # stopped at 1 ms, sent 0.5 GB/s * 1 ms = 0.5 MB.
    bg = long_lived(net, "h0", "h2", stop_s=1e-3, tenant="storage")
    done = []
    _collect(net.start_flow("h1", "h2", 1 * MB), done)
    net.env.run(until=0.01)
    assert done[0].end_s == pytest.approx(1.5e-3, rel=1e-9)
    (record,) = bg.records
    assert record.stopped and record.size_bytes == math.inf
    assert record.end_s == pytest.approx(1e-3, rel=1e-12)
    assert record.sent_bytes == pytest.approx(0.5 * MB, rel=1e-9)
    assert (record.tenant, record.tag) == ("storage", "long_lived")
    assert bg.running_flow_ids == ()


def test_long_lived_waits_for_start_s_and_can_be_stopped_before(net):
    late = long_lived(net, "h0", "h1", start_s=0.5)
    never = long_lived(net, "h1", "h2", start_s=0.5)
    net.env.run(until=0.25)
    assert late.flow_ids == () and never.flow_ids == ()
    never.stop()
    net.env.run(until=1.0)
    assert len(late.flow_ids) == 1
    assert never.flow_ids == () and never.stopped
    assert [f.start_s for f in net.active_flows()] == [0.5]


def test_periodic_bulk_starts_on_the_period_grid(net):
    # 250 MB alone at 1 GB/s takes 0.25 s; due every 1 s: starts 0, 1, 2, ends 0.25, 1.25, 2.25.
    src = periodic_bulk(net, "h0", "h1", 250 * MB, 1.0, count=3, tenant="pingpong")
    net.env.run()
    assert [r.start_s for r in src.records] == pytest.approx([0.0, 1.0, 2.0])
    assert [r.end_s for r in src.records] == pytest.approx([0.25, 1.25, 2.25])
    assert {(r.tenant, r.tag, r.stopped) for r in src.records} == {
        ("pingpong", "periodic_bulk", False)
    }


def test_periodic_bulk_late_transfer_starts_when_the_previous_ends(net):
    # Due every 0.1 s but each takes 0.25 s: at most one in flight, so back to back.
    src = periodic_bulk(net, "h0", "h1", 250 * MB, 0.1, count=3)
    net.env.run()
    assert [r.start_s for r in src.records] == pytest.approx([0.0, 0.25, 0.5])
    assert [r.end_s for r in src.records] == pytest.approx([0.25, 0.5, 0.75])


def test_periodic_bulk_with_overlap_starts_on_time_and_shares(net):
    # Starts 0, 0.1, 0.2 (250 MB each, one link of 1 GB/s):
    #   0.0-0.1  f0 alone, 1 GB/s:       f0 sends 100 (150 left)
    #   0.1-0.2  f0, f1 at 0.5 GB/s:     f0 50 (100 left), f1 50 (200 left)
    #   0.2-0.5  three at 1/3 GB/s:      f0 done at 0.5; f1 100 left, f2 150 left
    #   0.5-0.7  f1, f2 at 0.5 GB/s:     f1 done at 0.7; f2 50 left
    #   0.7-0.75 f2 alone:               f2 done at 0.75
    src = periodic_bulk(net, "h0", "h1", 250 * MB, 0.1, count=3, overlap=True)
    net.env.run()
    by_start = sorted(src.records, key=lambda r: r.start_s)
    assert [r.start_s for r in by_start] == pytest.approx([0.0, 0.1, 0.2])
    assert [r.end_s for r in by_start] == pytest.approx([0.5, 0.7, 0.75], rel=1e-9)


def test_ping_pong_alternates_directions_back_to_back(net):
    # 250 MB each way at 1 GB/s: h0->h1 over [0, 0.25], h1->h0 [0.25, 0.5], h0->h1 [0.5, 0.75].
    src = ping_pong(net, "h0", "h1", 250 * MB, count=3)
    net.env.run()
    assert [(r.src, r.dst) for r in src.records] == [("h0", "h1"), ("h1", "h0"), ("h0", "h1")]
    assert [r.start_s for r in src.records] == pytest.approx([0.0, 0.25, 0.5])
    assert [r.end_s for r in src.records] == pytest.approx([0.25, 0.5, 0.75])
    assert {r.tag for r in src.records} == {"ping_pong"}


def test_ping_pong_loads_the_receivers_inbound_then_outbound_link(net):
    # A long-lived flow h2->h1 shares h1's inbound link with the ping (0.5 GB/s: 250 MB in
    # 0.5 s); the pong leaves h1 alone on its outbound link (1 GB/s: 0.25 s); a gap of 0.1 s.
    long_lived(net, "h2", "h1")
    src = ping_pong(net, "h0", "h1", 250 * MB, gap_s=0.1, count=2)
    net.env.run(until=2.0)
    assert [r.start_s for r in src.records] == pytest.approx([0.0, 0.6])
    assert [r.end_s for r in src.records] == pytest.approx([0.5, 0.85])


def test_ping_pong_rejects_a_negative_gap(net):
    with pytest.raises(FlowError, match="gap_s must be a finite number >= 0, got gap_s=-1"):
        ping_pong(net, "h0", "h1", MB, gap_s=-1)


def test_periodic_bulk_stop_s_cuts_the_running_transfer(net):
    # Transfers at 0 (ends 0.25) and 1.0; at 1.1 the second has sent 100 MB and is stopped;
    # none is due at 2.0 any more.
    src = periodic_bulk(net, "h0", "h1", 250 * MB, 1.0, stop_s=1.1)
    net.env.run(until=5.0)
    assert len(src.records) == 2
    first, second = src.records
    assert not first.stopped and second.stopped
    assert second.end_s == pytest.approx(1.1)
    assert second.sent_bytes == pytest.approx(100 * MB, rel=1e-9)


def test_stopping_during_the_latency_of_a_sent_transfer_is_harmless():
    # 1 MB at 1 GB/s: last byte sent at 1 ms, arrives 2 x 1 ms of link latency later, at 3 ms.
    # Stopping the source at 2 ms finds nothing running; the record still arrives, complete.
    network = Network(star(2, capacity_bps=GBps, latency_s=1e-3))
    src = periodic_bulk(network, "h0", "h1", 1 * MB, 1.0, stop_s=2e-3)
    network.env.run(until=0.01)
    (record,) = src.records
    assert not record.stopped
    assert record.end_s == pytest.approx(3e-3)


def _on_off_intervals(seed, port=0, until=1.0):
    network = Network(star(2, capacity_bps=GBps, latency_s=0.0))
    src = poisson_on_off(
        network, "h0", "h1", mean_on_s=0.02, mean_off_s=0.03, seed=seed, port=port, tenant="noise"
    )
    network.env.run(until=until)
    return src, [(r.start_s, r.end_s) for r in src.records]


def test_poisson_on_off_is_deterministic_for_a_seed():
    _, a = _on_off_intervals(seed=7)
    _, b = _on_off_intervals(seed=7)
    assert len(a) > 5
    assert a == b


def test_poisson_on_off_differs_across_seeds_and_ports():
    _, a = _on_off_intervals(seed=7)
    _, b = _on_off_intervals(seed=8)
    _, c = _on_off_intervals(seed=7, port=1)
    assert a != b and a != c


def test_poisson_on_off_draws_follow_the_documented_generator():
    # Off, on, off, on, ... from default_rng(source_seed(seed, src, dst, port)).
    _, got = _on_off_intervals(seed=3)
    rng = np.random.default_rng(source_seed(3, "h0", "h1", 0))
    t, expected = 0.0, []
    for _ in range(len(got)):
        start = t + rng.exponential(0.03)
        t = start + rng.exponential(0.02)
        expected.append((start, t))
    # Flattened: pytest.approx does not compare nested sequences.
    flat = [x for pair in got for x in pair]
    assert flat == pytest.approx([x for pair in expected for x in pair], rel=1e-9)
    assert len(got) == len(expected)


def test_poisson_on_off_periods_are_alternating_and_stopped():
    src, intervals = _on_off_intervals(seed=1, until=2.0)
    ends = [end for _, end in intervals]
    starts = [start for start, _ in intervals]
    assert all(prev_end < start for prev_end, start in zip(ends, starts[1:], strict=False))
    assert all(r.stopped and r.tenant == "noise" for r in src.records)


def test_poisson_on_off_mean_period_lengths():
    # Over 40 s there are ~800 on periods of mean 0.02 s; their sample mean has sd ~0.0007,
    # so [0.017, 0.023] is a ~4 sd bound.
    _, intervals = _on_off_intervals(seed=5, until=40.0)
    on = [end - start for start, end in intervals]
    assert 0.017 < sum(on) / len(on) < 0.023


def test_source_seed_is_the_documented_stable_hash():
    key = json.dumps([4, "h0", "h9", 2], separators=(",", ":")).encode()
    digest = hashlib.blake2b(key, digest_size=8, person=b"flowsim-traffic").digest()
    assert source_seed(4, "h0", "h9", 2) == int.from_bytes(digest, "big")


def test_tenants_are_tagged_in_network_records(net):
    long_lived(net, "h0", "h1", stop_s=0.1, tenant="storage")
    periodic_bulk(net, "h2", "h1", 10 * MB, 0.05, count=2, tenant="job-b")
    net.start_flow("h1", "h0", 1 * MB, tenant="job-a")
    net.env.run()
    tenants = sorted({(r.tenant, r.tag) for r in net.records})
    assert tenants == [("job-a", ""), ("job-b", "periodic_bulk"), ("storage", "long_lived")]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda n: periodic_bulk(n, "h0", "h1", 1e6, 0), FlowError, "period_s=0"),
        (lambda n: periodic_bulk(n, "h0", "h1", -1, 1.0), FlowError, "size_bytes=-1"),
        (lambda n: periodic_bulk(n, "h0", "h1", 1, 1.0, count=0), FlowError, "count=0"),
        (lambda n: long_lived(n, "h0", "h1", start_s=2, stop_s=1), FlowError, "stop_s=1"),
        (lambda n: long_lived(n, "h0", "h1", start_s=-1), FlowError, "start_s=-1"),
        (lambda n: long_lived(n, "h0", "h0"), FlowError, "both 'h0'"),
        (lambda n: long_lived(n, "h0", "s0"), FlowError, "dst='s0' is a switch"),
        (lambda n: long_lived(n, "h0", "h9"), UnknownNodeError, "'h9'"),
        (lambda n: long_lived(n, "h0", "h1", port="x"), FlowError, "port='x'"),
        (
            lambda n: poisson_on_off(n, "h0", "h1", mean_on_s=1, mean_off_s=0),
            FlowError,
            "mean_off_s=0",
        ),
        (
            lambda n: poisson_on_off(n, "h0", "h1", mean_on_s=1, mean_off_s=1, seed=0.5),
            FlowError,
            "seed=0.5",
        ),
    ],
)
def test_bad_arguments_are_named(net, call, error, message):
    with pytest.raises(error, match=message):
        call(net)


def test_docstring_examples_run():
    import doctest

    import flowsim.traffic

    result = doctest.testmod(flowsim.traffic)
    assert result.attempted >= 5 and result.failed == 0
