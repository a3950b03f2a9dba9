"""The TCP-aware sharing mode: each correction checked on a case small enough to do by hand.

Star of 100 Gb/s links, 1 µs each: a flow crosses two links, so 2 µs of latency.
"""

from __future__ import annotations

import math

import pytest

from flowsim.errors import FlowError
from flowsim.network import Network
from flowsim.tcp import MAXMIN, TcpModel, TcpNetwork
from flowsim.topologies import leaf_spine, star


def _fct(net, src, dst, size):
    rec = []
    net.env.process(_one(net, src, dst, size, rec))
    net.env.run()
    return rec[0]


def _one(net, src, dst, size, out):
    out.append((yield net.start_flow(src, dst, size)))


def test_goodput_and_startup_of_a_lone_flow():
    # 1 MB at half goodput: 2 MB on the wire = 160 µs at 100 Gb/s; plus 10 µs of start-up and
    # 2 µs of latency: the flow ends at 172 µs; its record says 1 MB, asked for at 0.
    net = TcpNetwork(star(3), model=TcpModel(goodput=0.5, startup_s=10e-6))
    rec = _fct(net, "h0", "h1", 1e6)
    assert rec.end_s == pytest.approx(172e-6, rel=1e-12)
    assert rec.start_s == 0 and rec.size_bytes == 1e6 and rec.sent_bytes == 1e6


def test_long_lived_flows_into_a_host_share_one_extra_weight():
    # A long-lived flow h2 -> h1 (weight 1 + 1 = 2) and 1 MB h0 -> h1 (weight 1) on s0 -> h1:
    # the finite flow gets 1/3 of 100 Gb/s, 8e6 bits / 33.3e9 = 240 µs, + 2 µs.
    model = TcpModel(long_lived_extra=1.0)
    net = TcpNetwork(star(4), model=model)
    net.start_flow("h2", "h1", math.inf)
    assert _fct(net, "h0", "h1", 1e6).end_s == pytest.approx(242e-6, rel=1e-9)
    # A second long-lived flow into h1 adds weight 1, not 2: 2 + 1 vs 1, so 1/4 of the link,
    # 320 µs + 2 µs.
    net = TcpNetwork(star(4), model=model)
    net.start_flow("h2", "h1", math.inf)
    net.start_flow("h3", "h1", math.inf)
    assert _fct(net, "h0", "h1", 1e6).end_s == pytest.approx(322e-6, rel=1e-9)


def test_extra_weight_belongs_to_a_flow_started_while_none_ran():
    # The first long-lived flow into h1 carries the extra weight; it stops while the second
    # runs, and a third started then is not a first one: h3, h4 and 1 MB h0 -> h1 all have
    # weight 1, the finite flow gets 1/3 of the link: 240 µs + 2 µs. Once every long-lived flow
    # into h1 has stopped, the next one is a first one again (weight 2 beside 1: 242 µs too).
    net = TcpNetwork(star(5), model=TcpModel(long_lived_extra=1.0))
    first = net.start_flow("h2", "h1", math.inf)
    second = net.start_flow("h3", "h1", math.inf)
    net.stop_flow(first.flow_id)
    net.env.run()
    third = net.start_flow("h4", "h1", math.inf)
    assert _fct(net, "h0", "h1", 1e6).end_s == pytest.approx(242e-6, rel=1e-9)
    net.stop_flow(second.flow_id)
    net.stop_flow(third.flow_id)
    net.env.run()
    net.start_flow("h2", "h1", math.inf)
    start = net.env.now
    assert _fct(net, "h0", "h1", 1e6).end_s - start == pytest.approx(242e-6, rel=1e-9)


def test_without_corrections_it_is_plain_max_min():
    times = []
    for net in (Network(star(4)), TcpNetwork(star(4), model=MAXMIN)):
        net.start_flow("h2", "h1", math.inf)
        times.append(_fct(net, "h0", "h1", 3e6).end_s)
    # 3 MB at half of 100 Gb/s = 480 µs + 2 µs, on both
    assert times == pytest.approx([482e-6, 482e-6], rel=1e-12)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"goodput": 0.0}, "goodput must be in \\(0, 1\\], got goodput=0.0"),
    ({"goodput": 1.5}, "got goodput=1.5"),
    ({"startup_s": -1e-6}, "startup_s must be a finite number >= 0"),
    ({"long_lived_extra": math.nan}, "long_lived_extra must be a finite number >= 0"),
    ({"reverse_share": 0.0}, "reverse_share must be in \\(0, 1\\], got reverse_share=0.0"),
    ({"reverse_share": math.nan}, "got reverse_share=nan"),
    ({"rtt_exponent": -1.0}, "rtt_exponent must be a finite number >= 0, got rtt_exponent=-1.0"),
    ({"ramp_segments": 0.0}, "ramp_segments must be a number > 0 \\(math.inf: no ramp\\)"),
    ({"young_weight": 0.0}, "young_weight must be in \\(0, 1\\], got young_weight=0.0"),
    ({"young_weight": 2.0}, "got young_weight=2.0"),
    ({"young_s": -1e-6}, "young_s must be a finite number >= 0"),
])
def test_bad_model_parameters_are_named(kwargs, message):
    with pytest.raises(FlowError, match=message):
        TcpModel(**kwargs)


def test_bad_flow_requests_fail_at_once_despite_the_startup_delay():
    net = TcpNetwork(star(3), model=TcpModel(startup_s=1e-3))
    with pytest.raises(FlowError, match="size_bytes=0"):
        net.start_flow("h0", "h1", 0)
    with pytest.raises(Exception, match="unknown node 'h9'"):
        net.start_flow("h0", "h9", 1e6)


# -- data both ways: the pair cap --------------------------------------------------------------

def _run(net, specs):
    """Start ``(src, dst, size, tenant)`` flows at time 0; their records when all are done."""
    events = [net.start_flow(s, d, size, tenant=t) for s, d, size, t in specs]
    net.env.run()
    return [ev.value for ev in events]


def test_a_pair_exchanging_both_ways_is_capped_at_the_reverse_share():
    # 1 MB each way between h0 and h1, same job, share 0.5: each capped at 50 Gb/s, 160 µs,
    # + 2 µs. Of two different jobs, no cap: 80 µs + 2 µs each.
    model = TcpModel(reverse_share=0.5)
    same = _run(TcpNetwork(star(3), model=model), [("h0", "h1", 1e6, "j"), ("h1", "h0", 1e6, "j")])
    assert [r.end_s for r in same] == pytest.approx([162e-6, 162e-6], rel=1e-12)
    other = _run(TcpNetwork(star(3), model=model),
                 [("h0", "h1", 1e6, "a"), ("h1", "h0", 1e6, "b")])
    assert [r.end_s for r in other] == pytest.approx([82e-6, 82e-6], rel=1e-12)


def test_the_pair_cap_is_lifted_when_the_other_way_ends():
    # 1 MB h0 -> h1 and 0.5 MB back, share 0.5: both at 50 Gb/s; the 0.5 MB is sent by 80 µs
    # (ends at 82 µs), when the 1 MB flow has sent half; the other 0.5 MB at 100 Gb/s: 40 µs,
    # so it ends at 120 + 2 = 122 µs.
    recs = _run(TcpNetwork(star(3), model=TcpModel(reverse_share=0.5)),
                [("h0", "h1", 1e6, "j"), ("h1", "h0", 0.5e6, "j")])
    assert [r.end_s for r in recs] == pytest.approx([122e-6, 82e-6], rel=1e-12)


def test_the_pair_cap_binds_only_above_the_fair_share():
    # h0 -> h1 and h2 -> h1 share h1's downlink (50 Gb/s each, below a cap of 75); h1 -> h0 is
    # alone on its links and capped at 75 Gb/s: 8e6 / 75e9 = 106.67 µs, the others 160 µs;
    # + 2 µs each. On 40 Gb/s links the cap is 0.75 x 40: 1 MB alone each way takes 266.67 µs.
    model = TcpModel(reverse_share=0.75)
    recs = _run(TcpNetwork(star(4), model=model),
                [("h0", "h1", 1e6, "j"), ("h2", "h1", 1e6, "j"), ("h1", "h0", 1e6, "j")])
    assert [r.end_s for r in recs] == pytest.approx([162e-6, 162e-6, 8e6 / 75e9 + 2e-6],
                                                    rel=1e-12)
    slow = TcpNetwork(star(3, capacity_bps=40e9), model=model)
    recs = _run(slow, [("h0", "h1", 1e6, "j"), ("h1", "h0", 1e6, "j")])
    assert [r.end_s for r in recs] == pytest.approx([8e6 / 30e9 + 2e-6] * 2, rel=1e-12)


def test_the_pair_cap_starts_with_the_sending_after_startup():
    # Start-up 10 µs, then as above with share 0.5: 10 + 160 + 2 µs; a flow's own cap (20G)
    # below the pair cap wins: 8e6 / 20e9 = 400 µs (its partner, capped at 50G, ends first).
    net = TcpNetwork(star(3), model=TcpModel(startup_s=10e-6, reverse_share=0.5))
    a = net.start_flow("h0", "h1", 1e6, tenant="j")
    b = net.start_flow("h1", "h0", 1e6, tenant="j", rate_cap_bps=20e9)
    net.env.run()
    assert a.value.end_s == pytest.approx(172e-6, rel=1e-12)
    assert b.value.end_s == pytest.approx(412e-6, rel=1e-12)


# -- round trips, ramps and young flows -----------------------------------------------------------
# The queueing delay every round trip includes: 32 packets of 1502 bytes at 100 Gb/s.
QUEUE_S = 32 * 1502 * 8 / 100e9


def test_a_shorter_round_trip_takes_more_of_a_common_link():
    # 2 leaves x 1 spine x 2 hosts, 1 µs links. 1 MB h1 -> h0 (same leaf: 2 links, round trip
    # 4 µs + queue) and 1 MB h2 -> h0 (across the spine: 4 links, 8 µs + queue) share leaf0 ->
    # h0. Exponent 1: weights in the ratio of the round trips, w = (8 + q) / (4 + q).
    w = (8e-6 + QUEUE_S) / (4e-6 + QUEUE_S)
    net = TcpNetwork(leaf_spine(leaves=2, spines=1, hosts_per_leaf=2),
                     model=TcpModel(rtt_exponent=1.0))
    near = net.start_flow("h1", "h0", 1e6)
    far = net.start_flow("h2", "h0", 1e6)
    net.env.run()
    t1 = 8e6 / (100e9 * w / (w + 1))  # the near flow's last byte leaves
    far_sent = 100e9 / (w + 1) * t1  # bits
    assert near.value.end_s == pytest.approx(t1 + 2e-6, rel=1e-12)
    assert far.value.end_s == pytest.approx(t1 + (8e6 - far_sent) / 100e9 + 4e-6, rel=1e-12)
    assert w == pytest.approx(1.5099, abs=1e-4)


def test_a_rate_rise_is_held_back_for_the_ramps_lost_time():
    # 1 MB h0 -> h2 and 2 MB h1 -> h2 on a star: 50 Gb/s each until the 1 MB is sent at 160 µs;
    # the other's share rises by 50 Gb/s. Ramp of 2 segments of 1448 bytes per round trip
    # (2 + 2 µs + queue): slope a = 2 x 11584 / rtt^2, held at 50 Gb/s for 50e9 / (2 a)
    # (about 66 µs), then 100 Gb/s for the rest; held once, not again when the hold ends.
    rtt = 4e-6 + QUEUE_S
    hold = 50e9 / (2 * (2 * 1448 * 8 / rtt**2))
    net = TcpNetwork(star(3), model=TcpModel(ramp_segments=2.0))
    short = net.start_flow("h0", "h2", 1e6)
    long = net.start_flow("h1", "h2", 2e6)
    net.env.run()
    assert short.value.end_s == pytest.approx(162e-6, rel=1e-12)
    rest = 16e6 - 8e6 - 50e9 * hold
    assert long.value.end_s == pytest.approx(160e-6 + hold + rest / 100e9 + 2e-6, rel=1e-12)
    assert hold == pytest.approx(66.4e-6, abs=0.1e-6)
    # without the ramp, max-min: the last 1 MB at 100 Gb/s, 240 + 2 µs
    net = TcpNetwork(star(3), model=MAXMIN)
    long = net.start_flow("h1", "h2", 2e6)
    net.start_flow("h0", "h2", 1e6)
    net.env.run()
    assert long.value.end_s == pytest.approx(242e-6, rel=1e-12)


def test_a_young_flow_yields_to_an_old_one_until_it_grows_up():
    # A long-lived h1 -> h2 (weight 1) and 1 MB h0 -> h2, young (weight 0.5) for 60 µs:
    # 1/3 of 100 Gb/s for 60 µs (2e6 bits), then half: the other 6e6 bits in 120 µs; + 2 µs.
    # Alone, a young flow runs at full rate: 80 + 2 µs.
    model = TcpModel(young_weight=0.5, young_s=60e-6)
    net = TcpNetwork(star(3), model=model)
    net.start_flow("h1", "h2", math.inf)
    assert _fct(net, "h0", "h2", 1e6).end_s == pytest.approx(182e-6, rel=1e-12)
    assert _fct(TcpNetwork(star(3), model=model), "h0", "h2", 1e6).end_s == pytest.approx(
        82e-6, rel=1e-12)


def test_fitted_mode_delivers_every_byte_of_a_busy_leaf_spine():
    # All the corrections at once (pair caps, holds, young flows, weights) on random flows: every
    # flow finishes with exactly its bytes, and long-lived flows run until stopped.
    import random

    rng = random.Random(5)
    topo = leaf_spine(leaves=3, spines=2, hosts_per_leaf=3)
    net = TcpNetwork(topo)
    bg = net.start_flow("h8", "h0", math.inf)
    events = []
    for _ in range(60):
        src, dst = rng.sample(topo.hosts, 2)
        events.append(net.start_flow(src, dst, rng.uniform(1e5, 2e6), port=rng.randrange(4),
                                     tenant=rng.choice("ab")))
    net.env.run(until=0.05)
    assert all(ev.triggered and ev.value.sent_bytes == ev.value.size_bytes for ev in events)
    assert not bg.triggered


@pytest.mark.parametrize("kind", [Network, TcpNetwork])
def test_without_kept_records_every_event_still_fires_with_its_record(kind):
    # Two 1 MB flows into one host of a 100G star: each event fires with its record (same
    # times as a network that keeps them), and only the keeping network lists them.
    ends = {}
    for keep in (True, False):
        net = kind(star(3), keep_records=keep)
        events = [net.start_flow(f"h{i}", "h2", 1e6) for i in (0, 1)]
        net.env.run()
        ends[keep] = [ev.value.end_s for ev in events]
        assert len(net.records) == (2 if keep else 0)
    assert ends[True] == ends[False]
    assert all(e > 2 * 1e6 * 8 / 100e9 for e in ends[False])  # they share the link into h2
