"""Tests of the SimPy engine: hand-computed timelines, failures, batching, determinism."""

import math
import os
import random
import subprocess
import sys
import textwrap

import pytest
from engine_regimes import every_regime, small_leaf_spine

from flowsim.errors import FlowError, RoutingError, UnknownLinkError, UnknownNodeError
from flowsim.maxmin import max_min_rates
from flowsim.network import Network
from flowsim.topologies import star

GBPS = 1e9
US = 1e-6


@pytest.fixture
def net():
    """16 hosts on one switch, 100 Gbps (12.5e9 B/s) links, no latency."""
    return Network(star(16, capacity_bps=100 * GBPS, latency_s=0.0))


def run_flows(network, specs):
    """Start ``(src, dst, size)`` flows at time 0, run, return their records in that order."""
    events = [network.start_flow(s, d, size) for s, d, size in specs]
    network.env.run()
    return [ev.value for ev in events]


def test_network_single_flow_adds_path_latency():
    # 1 MB alone at 100 Gbps: 8e6 bits / 1e11 = 80 us of transmission; two links of 2 us: 84 us.
    network = Network(star(16, capacity_bps=100 * GBPS, latency_s=2 * US))
    (rec,) = run_flows(network, [("h0", "h1", 1e6)])
    assert rec.end_s == pytest.approx(84 * US, rel=1e-12)
    assert rec.start_s == 0.0
    assert rec.sent_bytes == 1e6
    assert not rec.stopped
    assert network.records == [rec]


def test_network_two_flows_share_an_uplink(net):
    # h0 -> h1 (1 MB) and h0 -> h2 (2 MB) share h0's uplink: 6.25e9 B/s each. The 1 MB flow ends
    # at 1e6 / 6.25e9 = 160 us; the other has 1 MB left, alone at 12.5e9 B/s: 80 us more = 240 us.
    a, b = run_flows(net, [("h0", "h1", 1e6), ("h0", "h2", 2e6)])
    assert a.end_s == pytest.approx(160 * US, rel=1e-12)
    assert b.end_s == pytest.approx(240 * US, rel=1e-12)
    assert [r.flow_id for r in net.records] == [a.flow_id, b.flow_id]


def test_network_weighted_flows(net):
    # Weights 3 and 1 on h0's uplink: 9.375e9 and 3.125e9 B/s. The 3 MB weight-3 flow ends at
    # 3e6 / 9.375e9 = 320 us, when the other has sent 1e6 B of its 2 MB; then alone: 80 us more.
    a = net.start_flow("h0", "h1", 3e6, weight=3.0)
    b = net.start_flow("h0", "h2", 2e6)
    net.env.run()
    assert a.value.end_s == pytest.approx(320 * US, rel=1e-12)
    assert b.value.end_s == pytest.approx(400 * US, rel=1e-12)


def test_network_flow_starts_when_another_ends():
    # With 2 us per link, each 1 MB flow takes 80 + 4 us; the second starts at 84 us: ends 168 us.
    network = Network(star(4, capacity_bps=100 * GBPS, latency_s=2 * US))
    seen = []

    def job(env):
        first = yield network.start_flow("h0", "h1", 1e6, tag="first")
        second = yield network.start_flow("h1", "h2", 1e6, tag="second")
        seen.extend([first, second])

    network.env.process(job(network.env))
    network.env.run()
    first, second = seen
    assert first.end_s == pytest.approx(84 * US, rel=1e-12)
    assert second.start_s == first.end_s
    assert second.end_s == pytest.approx(168 * US, rel=1e-12)
    assert (first.tag, second.tag) == ("first", "second")


def test_network_capacity_drop_and_recovery_mid_flow(net):
    # 1 MB on link 0 (h0 -> s0). 0-40 us at 12.5e9 B/s: 500,000 B. 40-60 us at 25 Gbps
    # (3.125e9 B/s): 62,500 B. Then 437,500 B at 12.5e9 B/s: 35 us -> ends at 95 us.
    net.schedule_link_capacity(40 * US, 0, 25 * GBPS)
    net.schedule_link_capacity(60 * US, 0, 100 * GBPS)
    (rec,) = run_flows(net, [("h0", "h1", 1e6)])
    assert rec.end_s == pytest.approx(95 * US, rel=1e-12)


def test_network_link_down_stalls_and_resumes(net):
    # Link 0 goes down (0) at 40 us with 500,000 B sent; the flow stalls at rate 0 (no rerouting)
    # and resumes when the link is back at 100 us: 500,000 B more take 40 us -> ends at 140 us.
    net.schedule_link_capacity(40 * US, 0, 0.0)
    net.schedule_link_capacity(100 * US, 0, 100 * GBPS)
    snapshots = []

    def probe(env):
        yield env.timeout(70 * US)
        snapshots.extend(net.active_flows())

    net.env.process(probe(net.env))
    (rec,) = run_flows(net, [("h0", "h1", 1e6)])
    assert rec.end_s == pytest.approx(140 * US, rel=1e-12)
    (state,) = snapshots
    assert state.rate_bps == 0.0
    assert state.sent_bytes == pytest.approx(500_000, rel=1e-12)


def test_network_link_down_only_stalls_flows_crossing_it(net):
    # h0 -> h1 crosses link 0 (down from t = 0); h2 -> h3 does not and runs at full rate: 80 us.
    net.set_link_capacity(0, 0.0)
    stalled = net.start_flow("h0", "h1", 1e6)
    free = net.start_flow("h2", "h3", 1e6)
    net.env.run(until=1.0)
    assert free.value.end_s == pytest.approx(80 * US, rel=1e-12)
    assert not stalled.triggered
    assert [f.flow_id for f in net.active_flows()] == [stalled.flow_id]


def test_network_stop_long_lived_flow(net):
    # A long-lived flow alone at 12.5e9 B/s, stopped at 10 us: 125,000 B sent, record at 10 us.
    def job(env):
        ev = net.start_flow("h0", "h1", math.inf, tenant="bg")
        yield env.timeout(10 * US)
        net.stop_flow(ev.flow_id)
        rec = yield ev
        assert rec is ev.value

    net.env.process(job(net.env))
    net.env.run()
    (rec,) = net.records
    assert rec.stopped and rec.tenant == "bg"
    assert rec.size_bytes == math.inf
    assert rec.end_s == pytest.approx(10 * US, rel=1e-12)
    assert rec.sent_bytes == pytest.approx(125_000, rel=1e-12)


def test_network_stop_frees_bandwidth(net):
    # Two 1 MB flows share h0's uplink (6.25e9 B/s each). At 80 us one is stopped after 500,000 B;
    # the other has 500,000 B left, now alone: 40 us more -> ends at 120 us.
    a = net.start_flow("h0", "h1", 1e6)
    b = net.start_flow("h0", "h2", 1e6)

    def stopper(env):
        yield env.timeout(80 * US)
        net.stop_flow(a.flow_id)

    net.env.process(stopper(net.env))
    net.env.run()
    assert a.value.stopped and a.value.sent_bytes == pytest.approx(500_000, rel=1e-12)
    assert b.value.end_s == pytest.approx(120 * US, rel=1e-12)
    with pytest.raises(FlowError, match="flow_id=0 is not running"):
        net.stop_flow(a.flow_id)


def test_network_simultaneous_events_are_batched(net):
    # Ten equal flows out of h0 start at t = 0 and all end together at 10 x 80 us: one re-solve
    # for the ten arrivals and one for the ten departures.
    recs = run_flows(net, [("h0", f"h{i}", 1e6) for i in range(1, 11)])
    assert len({r.end_s for r in recs}) == 1
    assert recs[0].end_s == pytest.approx(800 * US, rel=1e-12)
    assert net.resolves == 2


def test_network_link_utilisation_is_recorded():
    # The capacity-drop timeline on link 0: full (1.0) from 0, still full at 25 Gbps from 40 us,
    # full again from 60 us, idle from 95 us.
    network = Network(star(4, capacity_bps=100 * GBPS, latency_s=0.0), monitor_links=True)
    network.schedule_link_capacity(40 * US, 0, 25 * GBPS)
    network.schedule_link_capacity(60 * US, 0, 100 * GBPS)
    run_flows(network, [("h0", "h1", 1e6)])
    times, frac = network.link_utilisation(0)
    assert times == pytest.approx([0.0, 40 * US, 60 * US, 95 * US], rel=1e-12)
    assert frac.tolist() == [1.0, 1.0, 1.0, 0.0]
    times, load = network.link_load(0)
    assert load.tolist() == [100 * GBPS, 25 * GBPS, 100 * GBPS, 0.0]


def test_network_link_load_needs_monitoring(net):
    with pytest.raises(FlowError, match="monitor_links=True"):
        net.link_load(0)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("s0", "h1", 1e6), {}, FlowError, "src='s0' is a switch"),
        (("h0", "nope", 1e6), {}, UnknownNodeError, "unknown node 'nope'"),
        (("h0", "h0", 1e6), {}, FlowError, "both 'h0'"),
        (("h0", "h1", 0), {}, FlowError, "size_bytes=0"),
        (("h0", "h1", -5.0), {}, FlowError, "size_bytes=-5.0"),
        (("h0", "h1", math.nan), {}, FlowError, "size_bytes=nan"),
        (("h0", "h1", 1e6), {"weight": 0.0}, FlowError, "weight=0.0"),
        (("h0", "h1", 1e6), {"path": [0, 5]}, RoutingError, "path"),
    ],
)
def test_network_start_flow_rejects_bad_requests(net, args, kwargs, error, match):
    with pytest.raises(error, match=match):
        net.start_flow(*args, **kwargs)


def test_network_capacity_changes_reject_bad_values(net):
    with pytest.raises(FlowError, match="capacity_bps=-1"):
        net.set_link_capacity(0, -1)
    with pytest.raises(UnknownLinkError):
        net.set_link_capacity(999, 1.0)
    net.env.run(until=1.0)
    with pytest.raises(FlowError, match="in the past"):
        net.schedule_link_capacity(0.5, 0, 1.0)


def test_network_explicit_path_is_used(net):
    ev = net.start_flow("h0", "h1", 1e6, path=[0, 3])
    net.env.run()
    assert ev.value.path == (0, 3)


# -- incremental re-solve agrees with a solve from scratch -----------------------------------


@every_regime
@pytest.mark.parametrize("seed", range(6))
def test_network_rates_match_a_fresh_solve_after_every_change(seed, small_flows, list_flows):
    # Random arrivals (some weighted, some long-lived), stops and capacity changes on a small
    # leaf-spine; after every change the engine's rates must equal max-min computed from scratch.
    # Run with the default choice of re-solve (few flows: the plain-Python path), the numpy
    # solve with the per-flow state in lists, numpy only, and thresholds of 4 and 8 flows, so
    # that the engine switches between all three during the run.
    rng = random.Random(seed)
    topo, network = small_leaf_spine(seed, small_flows, list_flows)
    hosts = topo.hosts
    checked = []

    def driver(env):
        events = []
        for _step in range(60):
            action = rng.random()
            if action < 0.55 or not events:
                src, dst = rng.sample(hosts, 2)
                size = math.inf if rng.random() < 0.1 else rng.uniform(1e5, 3e6)
                events.append(network.start_flow(src, dst, size, port=rng.randrange(8),
                                                 weight=rng.choice([1.0, 1.0, 2.0, 0.5])))
            elif action < 0.7:
                live = [e for e in events if not e.triggered]
                if live:
                    network.stop_flow(rng.choice(live).flow_id)
            else:
                link = rng.randrange(len(topo.links))
                cap = rng.choice([0.0, 10 * GBPS, 40 * GBPS, topo.links[link].capacity_bps])
                network.set_link_capacity(link, cap)
            if rng.random() < 0.6:
                yield env.timeout(rng.uniform(0, 200 * US))
            flows = network.active_flows()
            if flows:
                routes = {f.flow_id: f.path for f in flows}
                caps = {i: network.link_capacity_bps(i) for i in range(len(topo.links))}
                expected = max_min_rates(routes, caps, {f.flow_id: f.weight for f in flows})
                for f in flows:
                    assert f.rate_bps == pytest.approx(expected[f.flow_id], rel=1e-9, abs=1e-3)
                checked.append(len(flows))

    network.env.process(driver(network.env))
    network.env.run(until=0.05)
    assert sum(checked) > 100


# -- determinism -----------------------------------------------------------------------------

_WORKLOAD = textwrap.dedent(
    """
    import random
    from flowsim.network import Network
    from flowsim.topologies import leaf_spine

    def workload(seed=7):
        topo = leaf_spine(leaves=4, spines=3, hosts_per_leaf=4)
        net = Network(topo, seed=seed)
        rng = random.Random(seed)
        hosts = topo.hosts

        def job(env, k):
            for _ in range(5):
                src, dst = rng.sample(hosts, 2)
                yield net.start_flow(src, dst, rng.uniform(1e5, 5e6), port=k, tag=f"job{k}")
                yield env.timeout(rng.uniform(0, 1e-4))

        for k in range(12):
            net.env.process(job(net.env, k))
        net.schedule_link_capacity(2e-4, 0, 3e10)
        net.env.run()
        return net.records
    """
)


def _workload():
    namespace = {}
    exec(compile(_WORKLOAD, "<workload>", "exec"), namespace)
    return namespace["workload"]()


def test_network_small_and_array_paths_give_identical_records(monkeypatch):
    # The plain-Python re-solve (few flows), the compiled fill with the state in lists (tens to
    # hundreds of flows) and with the state in arrays (more) do the same arithmetic in the same
    # order, so which one runs never changes a result: records are equal bit for bit.
    import flowsim.network

    def run(small: int, lists: int) -> list[str]:
        monkeypatch.setattr(flowsim.network, "_SMALL_FLOWS", small)
        monkeypatch.setattr(flowsim.network, "_LIST_FLOWS", lists)
        return [repr(r) for r in _workload()]

    default = [repr(r) for r in _workload()]
    python_only = run(10**9, 10**9)
    compiled_list_state = run(0, 10**9)
    compiled_only = run(0, 0)
    switching = run(3, 6)  # crosses both thresholds during the run
    assert default == python_only == compiled_list_state == compiled_only == switching


def test_network_is_deterministic_within_a_process():
    first = _workload()
    assert len(first) == 60
    assert _workload() == first
    assert [repr(r) for r in _workload()] == [repr(r) for r in first]


def test_network_is_deterministic_across_processes():
    code = _WORKLOAD + "\nprint('\\n'.join(repr(r) for r in workload()))\n"
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": str(seed), "PATH": ""}).stdout
        for seed in (1, 2)
    ]
    assert runs[0] == runs[1] == "\n".join(repr(r) for r in _workload()) + "\n"


def test_network_runs_uncompiled_with_the_same_records():
    # NUMBA_DISABLE_JIT=1 runs the kernels as the plain Python they are written in (to debug
    # or profile them): the same arithmetic in the same order, so the same records, bit for bit.
    code = ("import flowsim.network\nflowsim.network._SMALL_FLOWS = 0\n" + _WORKLOAD
            + "\nprint('\\n'.join(repr(r) for r in workload()))\n")
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env, timeout=300)
    assert done.stdout == "\n".join(repr(r) for r in _workload()) + "\n"


def test_network_records_are_in_completion_order():
    ends = [r.end_s for r in _workload()]
    assert ends == sorted(ends)


# -- which flows a change reaches ------------------------------------------------------------

def _two_flow_fabric():
    # a1 -m(8)-> s1 -l(10)-> s2 -> a2 ; b1 -k(1)-> s1 -l-> s2 -> b2 (Gbps; the last hops 100).
    from flowsim.topology import Link, Node, Topology

    nodes = tuple(Node(h, "host") for h in ("a1", "a2", "b1", "b2")) + (
        Node("s1", "switch"), Node("s2", "switch"))
    ends = [("a1", "s1", 8), ("b1", "s1", 1), ("s1", "s2", 10), ("s2", "a2", 100),
            ("s2", "b2", 100)]
    # The way back (every host must reach every other), unused by the flows.
    ends += [("s1", "a1", 100), ("s1", "b1", 100), ("s2", "s1", 100), ("a2", "s2", 100),
             ("b2", "s2", 100)]
    links = tuple(Link(i, a, b, c * GBPS, 0.0) for i, (a, b, c) in enumerate(ends))
    return Network(Topology(nodes, links, name="two-flows"))


def test_network_change_reaches_a_flow_through_a_link_it_fills():
    # A (a1->a2) crosses m (8) and l (10); B (b1->b2) crosses k (1) and l. At first B = 1 (k)
    # and A = 8 (m); l carries 9 of 10, so it is no bottleneck and links A to nothing. Raising k
    # to 100 lets B grow until l is full, and on l the two must meet: progressive filling from
    # scratch gives A = B = 5 (l fills at level 5, before m's 8). A engine that re-solved only
    # the flows the change reaches through saturated links (B) would leave A at 8 and give B 2.
    net = _two_flow_fabric()
    a = net.start_flow("a1", "a2", math.inf)
    b = net.start_flow("b1", "b2", math.inf)
    net.env.run(until=1e-6)
    assert {f.flow_id: f.rate_bps for f in net.active_flows()} == {
        a.flow_id: 8 * GBPS, b.flow_id: 1 * GBPS}
    net.set_link_capacity(1, 100 * GBPS)
    net.env.run(until=2e-6)
    rates = {f.flow_id: f.rate_bps for f in net.active_flows()}
    assert rates[a.flow_id] == pytest.approx(5 * GBPS, rel=1e-12)
    assert rates[b.flow_id] == pytest.approx(5 * GBPS, rel=1e-12)
