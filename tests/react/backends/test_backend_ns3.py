"""The ns-3 backend: reference numbers, per-flow ECMP, and every way it can fail readably.

Tests marked ``ns3`` need the optional package (skipped without it, see conftest.py) and share one
ns-3 child process per module (its import costs 8-60 s). The others run everywhere: they check
what is refused before any child starts, and how the parent handles a child that aborts or hangs
(with a stand-in child, so they need no ns-3).
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from flowsim.routing import Router
from flowsim.topologies import leaf_spine
from react.backends.ns3 import (
    Ns3CrashError,
    Ns3MissingError,
    Ns3Process,
    Ns3TimeoutError,
    Ns3UnsupportedError,
    shared_child,
)
from react.backends.ns3.plan import Fabric
from react.backends.ns3.process import current_shared
from react.run.scenario import ScenarioError, parse_scenario
from react.run.scenario_runs import run_scenario
from react.run.worlds.ns3 import world_request


def _star_tree(p: int, *, backend: str = "ns3", **extra: object) -> dict:
    """The reference case: 8-rank dual tree, 20 MB, 100G star with 2 µs links, p long-lived
    flows into rank 3 from p other hosts, one connection per rank pair."""
    data: dict = {
        "seed": 0, "backend": backend, "connections": 1,
        "topology": {"name": "star", "n": 8 + max(p, 1), "latency_s": 2e-6},
        "jobs": [{"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": 8,
                  "message_bytes": 20e6, "epochs": 1}],
        "background": [{"kind": "long_lived", "src": f"h{8 + k}", "dst": "tree:3"}
                       for k in range(p)],
    }
    data.update(extra)
    return data


# -- refused before anything starts (no ns-3 needed) ----------------------------------------------
class _FakeChild:
    """Stands in for the ns-3 child: a batch of E epochs of a job takes E x that job's epoch
    time; a run call ends at the earliest end among the batches in flight, as ns-3 stops."""

    def __init__(self, epoch_s):
        self.epoch_s = epoch_s
        self.inflight = {}
        self.calls = []

    def call(self, request, *, what, timeout_s):
        for b in request["batches"]:
            n = len(b["ports"])
            starts = [b["start_s"] + k * self.epoch_s[b["id"]] for k in range(n)]
            self.inflight[b["id"]] = [{"start_s": t, "end_s": t + self.epoch_s[b["id"]],
                                       "flows": [[t, t + self.epoch_s[b["id"]]]] * len(b["flows"])}
                                      for t in starts]
        first = min(self.inflight, key=lambda j: self.inflight[j][-1]["end_s"])
        self.calls.append((sorted(b["id"] for b in request["batches"]), first))
        done = {first: self.inflight.pop(first)}
        return {"done": done, "wall_s": 0.0, "events": 0, "drops": 0, "marks": 0,
                "route_misses": 0}


def test_jobs_sharing_a_world_advance_in_simulated_time_order():
    # Job a's epochs take 3 ms, b's 5 ms, 3 epochs each from t = 1 ms (warm-up): a ends epochs
    # at 4, 7, 10 ms and b at 6, 11, 16 ms. The world must run the child only once both have
    # handed in a batch (until one of them has no epochs left), and hand results back in that
    # order: a@4, b@6, a@7, a@10 (a done), b@11, b@16.
    from react.backends.ns3.engine import Ns3Backend, Ns3World
    from react.patterns import GENERATORS
    from react.run.driver import Job, run_jobs

    topo = leaf_spine(leaves=2, spines=2, hosts_per_leaf=2)
    fabric = Fabric.build(topo, seed=0)
    child = _FakeChild({"a": 3e-3, "b": 5e-3})
    world = Ns3World(child, fabric, parse_scenario(_star_tree(0)).ns3, {"a": 3, "b": 3})
    pattern = GENERATORS["allreduce_ring"](2)
    jobs = [Job(name, Ns3Backend(world, hosts, 1e6, connections=1, tenant=name), pattern, 3)
            for name, hosts in (("a", ("h0", "h2")), ("b", ("h1", "h3")))]
    runs = run_jobs(jobs)
    assert [who for _, who in child.calls] == ["a", "b", "a", "a", "b", "b"]
    # every call but the last three waited for both jobs, then for b alone once a was done
    assert [ids for ids, _ in child.calls][:2] == [["a", "b"], ["a"]]
    assert runs["a"].times_s() == pytest.approx([3e-3] * 3)
    assert runs["b"].times_s() == pytest.approx([5e-3] * 3)


def test_ns3_refuses_non_long_lived_background():
    data = _star_tree(1)
    data["background"] = [{"kind": "periodic_bulk", "src": "h8", "dst": "h3",
                           "size_bytes": 1e6, "period_s": 1e-3}]
    with pytest.raises(Ns3UnsupportedError, match="background\\[0\\] is 'periodic_bulk'"):
        run_scenario(parse_scenario(data))


def test_ns3_refuses_a_link_down():
    data = _star_tree(0, failures=[{"link": "s0->h3", "capacity_bps": 0}])
    with pytest.raises(Ns3UnsupportedError, match="capacity_bps = 0; ns-3 models partial"):
        run_scenario(parse_scenario(data))


def test_ns3_missing_package_is_one_clear_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ns3" else real(name, *a))
    with pytest.raises(Ns3MissingError, match=r"optional package ns3: pip install"):
        run_scenario(parse_scenario(_star_tree(0)))


def test_ns3_table_rejects_bad_values_by_key():
    with pytest.raises(ScenarioError, match=r"ns3.red_max_packets = 10: expected at least"):
        parse_scenario(_star_tree(0, ns3={"red_min_packets": 20, "red_max_packets": 10}))
    with pytest.raises(ScenarioError, match=r"unknown key 'ns3.red_min'"):
        parse_scenario(_star_tree(0, ns3={"red_min": 20}))
    with pytest.raises(ScenarioError, match=r"ns3.attributes.SegmentSize"):
        parse_scenario(_star_tree(0, ns3={"attributes": {"SegmentSize": "1000"}}))


def test_fabric_routes_follow_flowsims_ecmp_choice():
    # leaf-spine, 2 leaves x 2 spines, one host per leaf: h0 -> h1 on port k must leave leaf0
    # towards the spine flowsim's router picks for (h0, h1, k), and come back on its own path.
    topo = leaf_spine(leaves=2, spines=2, hosts_per_leaf=1)
    fabric = Fabric.build(topo, seed=3)
    router = Router(topo, seed=3)
    for port in range(6):
        entries = fabric.routes([("h0", "h1", port)], set())
        leaf0 = fabric.index["leaf0"]
        (out,) = [e for e in entries if e[0] == leaf0 and e[1] == fabric.index["h0"]]
        spine = topo.links[router.route("h0", "h1", port)[1]].dst
        assert (out[4], out[5]) == fabric.cable_of("leaf0", spine)


# -- the parent survives its child (a stand-in child; no ns-3 needed) ----------------------------
_HELLO = "import json, os, sys, time; print(json.dumps({'ok': True}), flush=True); "


def test_child_abort_becomes_one_readable_error():
    child = Ns3Process([sys.executable, "-c", _HELLO + "sys.stdin.readline(); "
                        "print('assert failed. cond=\"m_x > 0\"', file=sys.stderr, flush=True); "
                        "os.abort()"])
    with child, pytest.raises(Ns3CrashError) as info:
        child.call({"op": "run"}, what="epochs 0..5 in ns-3", timeout_s=30)
    message = str(info.value)
    assert "epochs 0..5 in ns-3" in message
    assert "SIGABRT" in message and "ns-3 assertion" in message
    assert 'cond="m_x > 0"' in message  # the child's last words are quoted


def test_child_that_hangs_is_stopped_after_its_timeout():
    child = Ns3Process([sys.executable, "-c", _HELLO + "time.sleep(60)"])
    with child, pytest.raises(Ns3TimeoutError, match=r"no answer within 0.5 s; the child was"):
        child.call({"op": "run"}, what="a batch", timeout_s=0.5)
    assert child.closed


def test_child_python_error_is_reported_with_its_message():
    child = Ns3Process([sys.executable, "-c", _HELLO + "sys.stdin.readline(); "
                        "print(json.dumps({'ok': False, 'error': 'KeyError: ports'}), "
                        "flush=True); time.sleep(5)"])
    with child, pytest.raises(Exception, match="a batch: KeyError: ports"):
        child.call({"op": "run"}, what="a batch", timeout_s=30)


# -- packet level (needs ns-3) -------------------------------------------------------------------
@pytest.fixture(scope="module")
def ns3_child():
    with shared_child():
        yield


@pytest.mark.ns3
@pytest.mark.slow
@pytest.mark.parametrize(("p", "reference_us"), [(0, 8_642), (1, 13_234), (2, 15_213)])
def test_ns3_star_dual_tree_matches_the_reference(ns3_child, p, reference_us):
    # Reference numbers measured with ns-3.44 and DCTCP (issue 11): 100G star, 2 µs links,
    # g = 1/16, RED 32/60 packets, fresh connection per flow, collective 1 ms after the
    # long-lived flows start. Max-min gives 8,024 / 9,624 / 11,755 µs here, 7-37% off.
    runs = run_scenario(parse_scenario(_star_tree(p)))
    assert runs["tree"].times_s()[0] * 1e6 == pytest.approx(reference_us, rel=0.03)


@pytest.mark.ns3
def test_ns3_per_flow_ecmp_spreads_ports_over_spines(ns3_child):
    # Eight 200 kB flows h0 -> h1 on ports 0..7 over a 2-leaf, 2-spine fabric: the ports flowsim's
    # hash sends over spine s must carry that share of the packets leaf0 forwards upwards
    # (every flow has the same size, so the same packet count up to a few control packets).
    topo_data = {"seed": 3, "backend": "ns3",
                 "topology": {"name": "leaf_spine", "leaves": 2, "spines": 2,
                              "hosts_per_leaf": 1},
                 "jobs": [{"name": "j", "collective": "allreduce_ring", "ranks": 2,
                           "message_bytes": 1e6, "epochs": 1}]}
    scenario = parse_scenario(topo_data)
    fabric = Fabric.build(scenario.topology, scenario.seed)
    routed: set = set()
    child = current_shared()
    child.call({"op": "build", "world": world_request(scenario, scenario.ns3, fabric, routed)},
               what="build", timeout_s=600)
    h0, h1 = fabric.index["h0"], fabric.index["h1"]
    ports = list(range(8))
    child.call({"op": "run", "batches": [{
        "id": "j", "flows": [[h0, h1, 200_000]] * 8, "deps": [], "ports": [ports],
        "start_s": 1e-3, "gap_s": 0.0,
        "routes": fabric.routes([("h0", "h1", p) for p in ports], routed)}]},
        what="run", timeout_s=600)
    up = ("spine0", "spine1")
    leaf0 = fabric.index["leaf0"]
    ifaces = {s: _leaf_interface(fabric, "leaf0", s) for s in up}
    counts = child.call({"op": "counters", "interfaces": [[leaf0, ifaces[s]] for s in up]},
                        what="counters", timeout_s=60)["forwarded"]
    router = Router(scenario.topology, seed=3)
    via = {s: sum(1 for p in ports
                  if scenario.topology.links[router.route("h0", "h1", p)[1]].dst == s)
           for s in up}
    assert via["spine0"] > 0 and via["spine1"] > 0  # this seed's hash uses both spines
    total = sum(counts)
    for s, count in zip(up, counts, strict=True):
        assert count == pytest.approx(total * via[s] / 8, rel=0.02)


def _leaf_interface(fabric: Fabric, node: str, neighbour: str) -> int:
    """Interface index of ``node`` towards ``neighbour``: ns-3 numbers a node's interfaces 1, 2,
    ... in the order its cables were added (0 is the loopback)."""
    me = fabric.index[node]
    k = 0
    for a, b, *_ in fabric.cables:
        if me in (a, b):
            k += 1
            if fabric.index[neighbour] in (a, b):
                return k
    raise AssertionError(f"no cable {node}<->{neighbour}")


@pytest.mark.ns3
def test_ns3_two_jobs_share_one_network(ns3_child):
    # Two 4-rank rings of 2 MB on one 100G star, 2 epochs each, on disjoint hosts: they share
    # no link (every ring flow stays on its own ranks' host links), so each must take what it
    # takes alone, give or take DCTCP's noise; both finish, each with its own epochs.
    data = {"seed": 0, "backend": "ns3", "connections": 1,
            "topology": {"name": "star", "n": 8, "latency_s": 2e-6},
            "jobs": [{"name": name, "collective": "allreduce_ring", "ranks": 4,
                      "message_bytes": 2e6, "epochs": 2} for name in ("a", "b")]}
    both = run_scenario(parse_scenario(data))
    alone = run_scenario(parse_scenario({**data, "jobs": data["jobs"][:1]}))
    assert len(both["a"].results) == len(both["b"].results) == 2
    for name in ("a", "b"):
        assert both[name].times_s() == pytest.approx(alone["a"].times_s(), rel=0.05)


@pytest.mark.ns3
def test_ns3_fatal_error_becomes_one_readable_error(ns3_child):
    # A bad raw attribute makes ns-3 itself fail (NS_FATAL_ERROR aborts the process).
    data = _star_tree(0, ns3={"attributes": {"ns3::TcpSocket::SegmentSize": "lots"}})
    with pytest.raises(Ns3CrashError,
                       match=r'(?s)building .* fatal error aborted it.*Attribute value "lots"'):
        run_scenario(parse_scenario(data))


@pytest.mark.ns3
def test_ns3_shorter_round_trip_wins_and_the_other_ramps_slowly(ns3_child):
    # Two 2 MB flows from h0 at once on the 4 x 2 x 5 leaf-spine, 1 µs links: to h1 (same leaf,
    # 2 links) and to h5 (across a spine, 4 links). Max-min gives both half of h0's link, so
    # both end together (324 µs). In ns-3 (measured: 207 and 497 µs) the short round trip
    # takes most of the link and the other needs far longer than the link's speed once alone.
    data = {"seed": 1, "backend": "ns3", "connections": 1,
            "topology": {"name": "leaf_spine", "leaves": 4, "spines": 2, "hosts_per_leaf": 5},
            "jobs": [{"name": f"f{k}", "collective": "broadcast_binary_tree", "ranks": 2,
                      "placement": ["h0", dst], "message_bytes": 2e6, "epochs": 1}
                     for k, dst in enumerate(("h1", "h5"))]}
    runs = run_scenario(parse_scenario(data))
    near, far = (runs[f"f{k}"].results[0].flows[0].end_s for k in (0, 1))
    assert near < 0.7 * 324e-6 and far > 1.3 * 324e-6
    assert (near, far) == pytest.approx((207e-6, 497e-6), rel=0.03)
    # the TCP-aware mode: the last flow within 10% of ns-3's
    tcp = run_scenario(parse_scenario(data).with_backend("sim").with_sharing("tcp"))
    last = max(r.results[0].flows[0].end_s for r in tcp.values())
    assert last == pytest.approx(far, rel=0.10)
