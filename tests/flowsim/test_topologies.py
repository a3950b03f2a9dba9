"""Tests of the topology builders: counts, wiring, rates, names, round-trips and bad input."""

from collections import Counter

import pytest

from flowsim import Topology, TopologyError
from flowsim.topologies import alibaba_fabric, fat_tree, leaf_spine, star

BUILDERS = {
    "star": lambda: star(5),
    "leaf_spine": lambda: leaf_spine(3, 2, 4, oversubscription=2.0),
    "fat_tree": lambda: fat_tree(4, edge_agg_bps=40e9),
    "alibaba_fabric": lambda: alibaba_fabric(4, 3, 5, fabric_bps=200e9),
}


def _degree(topo: Topology, name: str) -> int:
    return len(topo.out_links(name))


@pytest.mark.parametrize("builder", sorted(BUILDERS))
def test_every_builder_round_trips_through_json(builder, tmp_path):
    topo = BUILDERS[builder]()
    path = tmp_path / f"{builder}.json"
    topo.save(path)
    again = Topology.load(path)
    assert again == topo
    assert again.name == topo.name


@pytest.mark.parametrize("builder", sorted(BUILDERS))
def test_every_builder_makes_full_duplex_cables(builder):
    topo = BUILDERS[builder]()
    for link in topo.links:
        back = topo.link(link.dst, link.src)
        assert back.capacity_bps == link.capacity_bps
        assert back.latency_s == link.latency_s


@pytest.mark.parametrize("builder", sorted(BUILDERS))
def test_every_builder_numbers_hosts_h0_upwards(builder):
    hosts = BUILDERS[builder]().hosts
    assert hosts == tuple(f"h{i}" for i in range(len(hosts)))


def test_star_wires_every_host_to_s0():
    topo = star(3, capacity_bps=25e9, latency_s=2e-6)
    assert topo.switches == ("s0",)
    assert [(lk.src, lk.dst) for lk in topo.links] == [
        ("h0", "s0"), ("s0", "h0"), ("h1", "s0"), ("s0", "h1"), ("h2", "s0"), ("s0", "h2"),
    ]  # fmt: skip
    assert {lk.capacity_bps for lk in topo.links} == {25e9}
    assert {lk.latency_s for lk in topo.links} == {2e-6}


def test_leaf_spine_defaults_to_equal_rates_everywhere():
    topo = leaf_spine()
    assert (len(topo.hosts), topo.switches[:1], topo.switches[-1]) == (32, ("leaf0",), "spine1")
    assert {lk.capacity_bps for lk in topo.links} == {100e9}
    # h9 is the second host of leaf1 (8 hosts per leaf).
    assert topo.link("h9", "leaf1").capacity_bps == 100e9


def test_leaf_spine_oversubscription_sets_the_fabric_rate():
    # 8 hosts x 100 Gbps per leaf over 2 spine links at 4:1 -> 800 / (2 * 4) = 100 Gbps each.
    topo = leaf_spine(2, 2, 8, oversubscription=4.0)
    assert topo.link("leaf0", "spine1").capacity_bps == pytest.approx(100e9)
    # Non-blocking: 800 / 2 = 400 Gbps per leaf-spine cable.
    topo = leaf_spine(2, 2, 8, oversubscription=1.0)
    assert topo.link("spine0", "leaf1").capacity_bps == pytest.approx(400e9)


def test_leaf_spine_rejects_both_fabric_rate_and_ratio():
    with pytest.raises(TopologyError, match="not both"):
        leaf_spine(2, 2, 2, fabric_bps=1e9, oversubscription=2.0)


def test_leaf_spine_wires_every_leaf_to_every_spine():
    topo = leaf_spine(3, 4, 2)
    for leaf in ("leaf0", "leaf1", "leaf2"):
        assert _degree(topo, leaf) == 2 + 4


@pytest.mark.parametrize(("k", "hosts", "switches"), [(2, 2, 5), (4, 16, 20), (8, 128, 80)])
def test_fat_tree_counts(k, hosts, switches):
    # k^3/4 hosts; k^2/2 edge + k^2/2 agg + k^2/4 core = 5k^2/4 switches.
    topo = fat_tree(k)
    assert len(topo.hosts) == hosts
    assert len(topo.switches) == switches
    # Every switch has k ports, all cabled (k/2 down, k/2 up; core: k down).
    assert {_degree(topo, s) for s in topo.switches} == {k}


def test_fat_tree_k16_has_1024_hosts():
    topo = fat_tree(16)
    assert len(topo.hosts) == 1024
    assert len(topo.links) == 2 * (1024 + 3 * 1024 - 1024)  # 3 tiers of 1,024 cables each


def test_fat_tree_wiring_follows_pods_and_core_columns():
    topo = fat_tree(4)
    # k=4: pod p holds edge2p, edge2p+1, agg2p, agg2p+1; core 2j, 2j+1 hang off agg j of each pod.
    assert topo.link("h5", "edge2").dst == "edge2"
    assert {topo.links[i].dst for i in topo.out_links("edge3")} == {"h6", "h7", "agg2", "agg3"}
    assert {topo.links[i].dst for i in topo.out_links("core1")} == {"agg0", "agg2", "agg4", "agg6"}
    assert {topo.links[i].dst for i in topo.out_links("core2")} == {"agg1", "agg3", "agg5", "agg7"}


def test_fat_tree_per_tier_rates():
    topo = fat_tree(4, host_bps=100e9, edge_agg_bps=50e9, agg_core_bps=25e9)
    assert topo.link("h0", "edge0").capacity_bps == 100e9
    assert topo.link("edge0", "agg1").capacity_bps == 50e9
    assert topo.link("core3", "agg1").capacity_bps == 25e9
    # agg_core_bps defaults to edge_agg_bps.
    assert fat_tree(4, edge_agg_bps=40e9).link("agg0", "core0").capacity_bps == 40e9


@pytest.mark.parametrize("k", [3, 0, -2, 2.0, True, "4"])
def test_fat_tree_rejects_bad_k_naming_it(k):
    with pytest.raises(TopologyError, match=f"k must be a positive even integer, got k={k!r}"):
        fat_tree(k)


def test_fat_tree_message_matches_the_style_guide():
    with pytest.raises(TopologyError) as info:
        fat_tree(3)
    assert str(info.value) == "fat_tree: k must be a positive even integer, got k=3"


def test_alibaba_fabric_defaults_are_the_papers_720_servers():
    topo = alibaba_fabric()
    assert len(topo.hosts) == 720
    assert topo.switches == tuple(f"tor{i}" for i in range(48)) + ("agg0", "agg1", "agg2")
    # Each ToR: 15 servers + 3 aggregation switches; each aggregation switch: 48 ToRs.
    assert _degree(topo, "tor47") == 18
    assert _degree(topo, "agg2") == 48
    assert topo.link("h719", "tor47").capacity_bps == 100e9
    # No tier above the aggregation switches: aggs only reach ToRs.
    assert {topo.links[i].dst[:3] for i in topo.out_links("agg0")} == {"tor"}


def test_alibaba_fabric_rates_are_parameters():
    topo = alibaba_fabric(2, 2, 3, host_bps=25e9, fabric_bps=400e9, latency_s=0)
    assert topo.link("h3", "tor1").capacity_bps == 25e9
    assert topo.link("tor0", "agg1").capacity_bps == 400e9
    assert Counter(lk.latency_s for lk in topo.links) == {0.0: len(topo.links)}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: star(0), "star: n must be a positive integer, got n=0"),
        (lambda: star(2, capacity_bps=0), "star: capacity_bps must be a positive finite number"),
        (lambda: star(2, latency_s=-1.0), "latency_s=-1.0"),
        (lambda: leaf_spine(0, 2, 2), "leaves=0"),
        (lambda: leaf_spine(2, -1, 2), "spines=-1"),
        (lambda: leaf_spine(2, 2, 2.5), "hosts_per_leaf=2.5"),
        (lambda: leaf_spine(2, 2, 2, host_bps=-5.0), "host_bps=-5.0"),
        (lambda: leaf_spine(2, 2, 2, oversubscription=0), "oversubscription=0"),
        (lambda: leaf_spine(2, 2, 2, fabric_bps=float("inf")), "fabric_bps=inf"),
        (lambda: fat_tree(4, agg_core_bps=0.0), "agg_core_bps=0.0"),
        (lambda: alibaba_fabric(tors=0), "tors=0"),
        (lambda: alibaba_fabric(hosts_per_tor=-15), "hosts_per_tor=-15"),
        (lambda: alibaba_fabric(fabric_bps=-1), "fabric_bps=-1"),
    ],
)
def test_builders_reject_bad_parameters_naming_the_value(call, message):
    with pytest.raises(TopologyError, match=message.replace("(", r"\(").replace(".", r"\.")):
        call()


def test_docstring_examples_run():
    import doctest

    import flowsim.topologies

    result = doctest.testmod(flowsim.topologies)
    assert result.attempted >= 4 and result.failed == 0
