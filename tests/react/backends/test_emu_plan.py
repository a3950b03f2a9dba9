"""The emulator's plan, shaper lines, names and argument checks: no root needed, nothing built.

Expected values are derived from the addressing rules of react/backends/emu/plan.py (host ``i``
owns ``10.1.0.0 + 4 i + 1``) and, for the switches a subset of hosts needs, from networkx's
own shortest paths.
"""

import itertools

import networkx as nx
import pytest

from flowsim.topologies import fat_tree, leaf_spine, star
from react.backends.emu import EmuError, EmuInputError, EmuNetwork, cleanup, limits, names, shell
from react.backends.emu import network as network_mod
from react.backends.emu.plan import default_queue_bytes, plan_network
from react.backends.emu.tc import change_lines, down_lines, shape_lines
from react.model.errors import ReactError


def test_star_is_one_bridge_with_a_stable_address_per_host():
    plan = plan_network(star(16), link_rate_bps=200e6)
    assert plan.mode == "bridge" and plan.switches == ("s0",) and len(plan.cables) == 16
    # h13: 10.1.0.0 + 4*13 + 1 = 10.1.0.53
    assert plan.host_ips["h13"] == "10.1.0.53"
    # 100 Gbps links emulated at 200 Mbit/s
    assert plan.scale == pytest.approx(2e-3)
    assert not plan.routes
    assert all(e.rate_bps == pytest.approx(200e6) for e in plan.egress.values())
    assert len(plan.egress) == 32  # both directions of 16 cables


def test_subset_keeps_addresses_and_only_needed_nodes():
    plan = plan_network(star(16), ["h3", "h9"])
    assert plan.hosts == ("h3", "h9") and plan.host_ips["h9"] == "10.1.0.37"


def test_leaf_spine_subset_builds_used_leaves_and_every_spine_with_ecmp():
    topo = leaf_spine(4, 2, 8)
    hosts = ["h0", "h1", "h8", "h16"]  # leaves 0, 1, 2 used; leaf3 not
    plan = plan_network(topo, hosts)
    assert plan.mode == "routed"
    assert set(plan.switches) == {"leaf0", "leaf1", "leaf2", "spine0", "spine1"}
    by = {(r.node, r.dest): r for r in plan.routes}
    # leaf1 reaches h0 through both spines; h1 is local to leaf0 so leaf0 has no route to it
    hops = by[("leaf1", "10.1.0.1/32")].nexthops
    assert sorted(dev for _, dev in hops) == ["to-spine0", "to-spine1"]
    assert ("leaf0", "10.1.0.5/32") not in by
    # the spine has a single next hop: the leaf of the host
    assert [dev for _, dev in by[("spine0", "10.1.0.65/32")].nexthops] == ["to-leaf2"]
    assert by[("h8", "default")].nexthops == (("10.1.0.34", "eth0"),)


def test_fabric_links_scale_with_the_fastest_link():
    topo = leaf_spine(2, 2, 4, host_bps=100e9, fabric_bps=25e9)
    plan = plan_network(topo, link_rate_bps=400e6)
    assert plan.egress[("leaf0", "spine1")].rate_bps == pytest.approx(100e6)
    assert plan.egress[("h0", "leaf0")].rate_bps == pytest.approx(400e6)


def test_fat_tree_subset_matches_networkx_shortest_paths():
    topo = fat_tree(8)
    hosts = ["h0", "h1", "h37", "h127"]
    graph = nx.Graph((link.src, link.dst) for link in topo.links)
    expected = set(hosts)
    for s, t in itertools.combinations(hosts, 2):
        for path in nx.all_shortest_paths(graph, s, t):
            expected.update(path)
    plan = plan_network(topo, hosts)
    assert set(plan.nodes) == expected
    # every used host pair on different pods has one route per core-facing choice at the edge
    routes = [r for r in plan.routes if r.node == "edge0" and r.dest == "10.1.1.253/32"]
    assert len(routes) == 1 and len(routes[0].nexthops) == 4  # k/2 aggregation switches


def test_switch_ports_share_fairly_per_source_host_and_host_ports_do_not():
    plan = plan_network(star(4))
    assert plan.egress[("h0", "s0")].buckets == ()
    assert plan.egress[("s0", "h1")].buckets == (0, 2, 3)  # every host but h1
    flat = plan_network(star(4), fair_share=False)
    assert flat.egress[("s0", "h1")].buckets == ()


def test_default_queue_is_12_ms_at_the_rate():
    assert default_queue_bytes(200e6) == 300_000
    assert default_queue_bytes(1e6) == 32_000  # floor: about 20 packets


@pytest.mark.parametrize("bad, match", [
    ({"hosts": ["h0", "h99"]}, "unknown host 'h99'"),
    ({"hosts": ["h0", "h0"]}, "distinct"),
    ({"hosts": []}, "at least one host"),
    ({"link_rate_bps": 0}, "link_rate_bps"),
    ({"link_rate_bps": float("nan")}, "link_rate_bps"),
    ({"queue_bytes": 100}, "queue_bytes"),
])
def test_plan_rejects_bad_input(bad, match):
    with pytest.raises(EmuInputError, match=match):
        plan_network(star(4), **bad)


def test_shaper_lines_have_a_leaf_and_filter_per_bucket():
    plain = shape_lines("eth0", 200e6, 300_000)
    assert len(plain) == 3 and "rate 200000000bit" in plain[1] and "limit 300000" in plain[2]
    fair = shape_lines("to-h1", 200e6, 300_000, (0, 2, 3))
    leaves = [line for line in fair if "class add" in line and "parent 1:1 " in line]
    assert len(leaves) == 3 and all("ceil 200000000bit" in line for line in leaves)
    assert sum("bfifo" in line for line in fair) == 3
    assert sum("flowid" in line for line in fair) == 3
    assert len(change_lines("to-h1", 1e8, 150_000, (0, 2, 3))) == 1 + 2 * 3
    # a failed port: every bfifo at limit 0, the htb rates untouched
    down = down_lines("to-h1", (0, 2, 3))
    assert len(down) == 3 and all(line.endswith("bfifo limit 0") for line in down)
    assert down_lines("eth0") == ["qdisc change dev eth0 parent 1:1 handle 10: bfifo limit 0"]


def test_prefixes_are_unique_and_checked():
    a, b = names.new_run_prefix(), names.new_run_prefix()
    assert a != b and names.check_prefix(a) == a
    for bad in ("abc", "rct", "rct-x", "RCTx", "rct" + "a" * 17):
        with pytest.raises(EmuInputError, match="prefix"):
            names.check_prefix(bad)


def test_namespace_ownership_by_prefix():
    assert names.belongs("rctab1-h0", "rctab1")
    assert not names.belongs("rctab12-h0", "rctab1")  # another run whose tag starts alike
    assert names.belongs("rctab12-h0", None)
    assert not names.belongs("rctx", None) and not names.belongs("other-h0", None)


def test_switch_port_names_fit_the_kernel_limit():
    assert names.switch_port("spine1", 0) == "to-spine1"
    assert names.switch_port("a-very-long-switch-name", 7) == "p7"


def test_emu_error_is_a_react_error():
    assert issubclass(EmuError, ReactError) and issubclass(EmuInputError, ValueError)


def test_not_root_is_one_clear_error_and_builds_nothing(monkeypatch):
    monkeypatch.setattr(shell, "is_root", lambda: False)
    made = []
    monkeypatch.setattr(shell, "batch", lambda *a, **k: made.append(a))
    with pytest.raises(EmuError, match="needs root"):
        EmuNetwork(star(4))
    assert made == []


def test_too_many_hosts_is_refused_before_building(monkeypatch):
    monkeypatch.setattr(network_mod, "max_hosts", lambda: 4)
    made = []
    monkeypatch.setattr(shell, "batch", lambda *a, **k: made.append(a))
    with pytest.raises(EmuError, match="8 hosts requested but this machine can emulate at most 4"):
        EmuNetwork(star(8))
    assert made == []


def test_max_hosts_is_derived_from_memory(monkeypatch):
    # half of 20.3 GB at 101.5 MB per host -> 100 hosts
    monkeypatch.setattr(limits, "_mem_available_bytes", lambda: 20_300_000_000)
    assert limits.max_hosts() == int(0.5 * 20_300_000_000 // limits.HOST_BUDGET_BYTES) == 100
    monkeypatch.setattr(limits, "_mem_available_bytes", lambda: 10**13)
    assert limits.max_hosts() == limits.HARD_CAP
    monkeypatch.setattr(limits, "cores", lambda: 2)
    # 2 cores * 0.8 / 0.2 core per host = 8 at 200 Mbit/s; 16 at 100 Mbit/s
    assert limits.line_rate_hosts(200e6) == 8 and limits.line_rate_hosts(100e6) == 16


def test_clean_without_namespaces_needs_nothing(monkeypatch):
    monkeypatch.setattr(cleanup, "list_namespaces", lambda: ["other-h0", "rctzz9-h0"])
    monkeypatch.setattr(shell, "is_root", lambda: False)
    assert cleanup.clean("rctzz8") == []
    with pytest.raises(EmuError, match="needs root"):
        cleanup.clean("rctzz9")


def test_react_emu_info_and_a_bad_prefix(capsys):
    from react.cli import main

    assert main(["emu", "info"]) == 0
    out = capsys.readouterr().out
    assert "max hosts:" in out and "line rate:" in out
    assert main(["emu", "clean", "--prefix", "nope"]) == 2
    assert "prefix must be 'rct'" in capsys.readouterr().err


def test_a_simulator_only_background_is_refused_before_building(monkeypatch):
    from react.run.scenario import parse_scenario
    from react.run.scenario_runs import open_jobs
    made = []
    monkeypatch.setattr(shell, "batch", lambda *a, **k: made.append(a))
    doc = {"name": "x", "backend": "emu", "topology": {"name": "star", "n": 4},
           "jobs": [{"name": "t", "collective": "allreduce_ring", "ranks": 2, "epochs": 2,
                     "message_bytes": 1e6}],
           "background": [{"kind": "ping_pong", "src": "h3", "dst": "t:1", "size_bytes": 1e6}]}
    with pytest.raises(EmuError, match="background\\[0\\] is 'ping_pong'"), \
            open_jobs(parse_scenario(doc)):
        pass
    assert made == []
