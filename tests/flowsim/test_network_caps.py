"""Per-flow rate caps in the engine: hand-computed rates, timelines, bad caps, and the max-min
conditions with caps checked after every change of random workloads."""

import math
import random

import pytest
from engine_regimes import every_regime, small_leaf_spine

from flowsim.errors import FlowError
from flowsim.network import Network
from flowsim.topologies import star

GBPS = 1e9
US = 1e-6


@pytest.fixture
def net():
    """8 hosts on one switch, 100 Gbps links, no latency."""
    return Network(star(8, capacity_bps=100 * GBPS, latency_s=0.0))


def rates_gbps(network):
    network.env.run(until=network.env.now + 1e-9)
    return {f.flow_id: f.rate_bps / GBPS for f in network.active_flows()}


def test_capped_flow_leaves_the_rest_of_the_link_to_the_other(net):
    # Two flows into h1 on s0 -> h1 (100G), one capped at 30G: 30 and 100 - 30 = 70.
    a = net.start_flow("h0", "h1", math.inf, rate_cap_bps=30 * GBPS)
    b = net.start_flow("h2", "h1", math.inf)
    assert rates_gbps(net) == pytest.approx({a.flow_id: 30.0, b.flow_id: 70.0}, rel=1e-12)


def test_cap_above_the_fair_share_changes_nothing(net):
    # Fair share 50G each; a cap of 60G is never reached.
    a = net.start_flow("h0", "h1", math.inf, rate_cap_bps=60 * GBPS)
    b = net.start_flow("h2", "h1", math.inf)
    assert rates_gbps(net) == pytest.approx({a.flow_id: 50.0, b.flow_id: 50.0}, rel=1e-12)


def test_cap_with_weights(net):
    # Into h1: A weight 2, B and C weight 1. Uncapped: 100 / 4 per unit, A = 50, B = C = 25.
    # A capped at 30G: the other two share 70 equally, 35 each.
    a = net.start_flow("h0", "h1", math.inf, weight=2.0, rate_cap_bps=30 * GBPS)
    b = net.start_flow("h2", "h1", math.inf)
    c = net.start_flow("h3", "h1", math.inf)
    assert rates_gbps(net) == pytest.approx(
        {a.flow_id: 30.0, b.flow_id: 35.0, c.flow_id: 35.0}, rel=1e-12)


def test_capped_flow_on_two_links(net):
    # f1 h0 -> h1 crosses h0's uplink (shared with f2 h0 -> h2) and h1's downlink (shared with
    # f3 h3 -> h1). Uncapped every link holds two flows: 50 each. f1 capped at 20G: f2 and f3
    # each get the 80 it leaves on their link.
    f1 = net.start_flow("h0", "h1", math.inf, rate_cap_bps=20 * GBPS)
    f2 = net.start_flow("h0", "h2", math.inf)
    f3 = net.start_flow("h3", "h1", math.inf)
    assert rates_gbps(net) == pytest.approx(
        {f1.flow_id: 20.0, f2.flow_id: 80.0, f3.flow_id: 80.0}, rel=1e-12)


def test_cap_sets_a_lone_flows_time_and_the_record_shows_only_the_route():
    # 1 MB alone, capped at 40G: 8e6 bits / 40e9 = 200 us, + 2 x 2 us of latency = 204 us.
    network = Network(star(4, capacity_bps=100 * GBPS, latency_s=2 * US))
    ev = network.start_flow("h0", "h1", 1e6, rate_cap_bps=40 * GBPS)
    network.env.run()
    assert ev.value.end_s == pytest.approx(204 * US, rel=1e-12)
    assert ev.value.path == tuple(network.router.route("h0", "h1", 0))


def test_set_rate_cap_while_the_flow_runs(net):
    # 1 MB capped at 40G: 500 KB by 100 us; the cap is lifted then, the other 500 KB take
    # 4e6 / 100e9 = 40 us: the flow ends at 140 us. A second flow, uncapped at first, gets a cap
    # of 25G at 100 us: 2 MB at 100G until then (1.25 MB sent), then 750 KB at 25G = 240 us, so
    # it ends at 340 us.
    a = net.start_flow("h0", "h1", 1e6, rate_cap_bps=40 * GBPS)
    b = net.start_flow("h2", "h3", 2e6)

    def change(env):
        yield env.timeout(100 * US)
        net.set_rate_cap(a.flow_id, None)
        net.set_rate_cap(b.flow_id, 25 * GBPS)

    net.env.process(change(net.env))
    net.env.run()
    assert a.value.end_s == pytest.approx(140 * US, rel=1e-12)
    assert b.value.end_s == pytest.approx(340 * US, rel=1e-12)


def test_cap_links_are_reused_after_their_flows_end(net):
    # Many capped flows one after the other: each alone at its cap, 1 MB at 50G = 160 us.
    ends = []

    def chain(env):
        for _ in range(20):
            rec = yield net.start_flow("h0", "h1", 1e6, rate_cap_bps=50 * GBPS)
            ends.append(rec.end_s - rec.start_s)

    net.env.process(chain(net.env))
    net.env.run()
    assert ends == pytest.approx([160 * US] * 20, rel=1e-12)
    assert len(net._cap_list) == len(net.topology.links) + 2  # padding + one cap link


@pytest.mark.parametrize("bad", [0, 0.0, -1e9, math.nan, -math.inf, "fast"])
def test_bad_rate_caps_are_named(net, bad):
    with pytest.raises(FlowError, match=f"rate_cap_bps={bad!r}, expected a positive number"):
        net.start_flow("h0", "h1", 1e6, rate_cap_bps=bad)
    ev = net.start_flow("h0", "h1", 1e6)
    with pytest.raises(FlowError, match=f"set_rate_cap: rate_cap_bps={bad!r}"):
        net.set_rate_cap(ev.flow_id, bad)


def test_set_rate_cap_of_a_flow_not_running(net):
    with pytest.raises(FlowError, match="flow_id=7 is not running"):
        net.set_rate_cap(7, 1e9)


# -- the max-min conditions with caps, after every change ------------------------------------

def check_max_min_with_caps(flows, caps_bps, link_caps_bps):
    """Rates are max-min fair with caps: feasible, and every flow is at its cap or crosses a
    saturated link on which no flow has a larger rate / weight. Checked from the definition."""
    tol = 1e-9
    load: dict[int, float] = {}
    for f in flows:
        for lk in f.path:
            load[lk] = load.get(lk, 0.0) + f.rate_bps
    for lk, ld in load.items():
        assert ld <= link_caps_bps[lk] * (1 + tol) + 1e-3, (lk, ld)
    for f in flows:
        cap = caps_bps.get(f.flow_id, math.inf)
        assert f.rate_bps <= cap * (1 + tol), (f, cap)
        if f.rate_bps >= cap * (1 - tol):
            continue
        level = f.rate_bps / f.weight
        bottleneck = [
            lk for lk in f.path
            if load[lk] >= link_caps_bps[lk] * (1 - tol) - 1e-3
            and all(g.rate_bps / g.weight <= level * (1 + tol) + 1e-3
                    for g in flows if lk in g.path)
        ]
        assert bottleneck, f"flow {f.flow_id} is below its cap {cap} and has no bottleneck"


@every_regime
@pytest.mark.parametrize("seed", range(4))
def test_rates_with_caps_are_max_min_after_every_change(seed, small_flows, list_flows):
    # Random arrivals (some capped, some weighted, some long-lived), cap changes, weight
    # changes, stops and link capacity changes on a small leaf-spine, in every re-solve regime
    # of the engine.
    rng = random.Random(seed)
    topo, network = small_leaf_spine(seed, small_flows, list_flows)
    hosts = topo.hosts
    caps: dict[int, float] = {}
    checked = []
    at_cap = []
    reweighted = []

    def driver(env):
        events = []
        for _step in range(70):
            action = rng.random()
            live = [e for e in events if not e.triggered]
            if action < 0.5 or not live:
                src, dst = rng.sample(hosts, 2)
                size = math.inf if rng.random() < 0.15 else rng.uniform(1e5, 3e6)
                cap = rng.choice([None, None, 5 * GBPS, 20 * GBPS, 45 * GBPS])
                ev = network.start_flow(src, dst, size, port=rng.randrange(8),
                                        weight=rng.choice([1.0, 1.0, 2.0, 0.5]),
                                        rate_cap_bps=cap)
                events.append(ev)
                if cap is not None:
                    caps[ev.flow_id] = cap
            elif action < 0.6:
                ev = rng.choice(live)
                cap = rng.choice([None, 3 * GBPS, 15 * GBPS, 60 * GBPS])
                network.set_rate_cap(ev.flow_id, cap)
                caps.pop(ev.flow_id, None)
                if cap is not None:
                    caps[ev.flow_id] = cap
            elif action < 0.8:
                ev = rng.choice(live)
                network.set_weight(ev.flow_id, rng.choice([1.0, 0.25, 3.0, 1e-6]))
                reweighted.append(ev.flow_id)
            elif action < 0.88:
                network.stop_flow(rng.choice(live).flow_id)
            else:
                link = rng.randrange(len(topo.links))
                network.set_link_capacity(
                    link, rng.choice([10 * GBPS, 40 * GBPS, topo.links[link].capacity_bps]))
            if rng.random() < 0.6:
                yield env.timeout(rng.uniform(0, 200 * US))
            flows = network.active_flows()
            if flows:
                link_caps = {i: network.link_capacity_bps(i) for i in range(len(topo.links))}
                check_max_min_with_caps(flows, caps, link_caps)
                checked.append(len(flows))
                at_cap.extend(f for f in flows
                              if f.rate_bps >= caps.get(f.flow_id, math.inf) * (1 - 1e-9))

    network.env.process(driver(network.env))
    network.env.run(until=0.05)
    assert sum(checked) > 100 and len(at_cap) > 10  # caps did bind
    assert len(reweighted) > 5
    # every finite flow that finished delivered exactly its bytes
    assert all(r.sent_bytes == r.size_bytes for r in network.records if not r.stopped)
