"""Tests of flowsim.topology: the immutable data model, its validation and JSON form."""

import dataclasses
import json

import pytest

from flowsim import Link, Node, Topology, TopologyError, UnknownLinkError, UnknownNodeError


def _pair() -> Topology:
    # h0 - s0 - h1, 10 Gbps, 1 us.
    return Topology.from_lists(
        ["h0", "h1"], ["s0"], [("h0", "s0", 10e9, 1e-6), ("s0", "h1", 10e9, 1e-6)]
    )


def test_from_lists_duplex_gives_two_directed_links_per_cable():
    topo = _pair()
    assert [(lk.id, lk.src, lk.dst) for lk in topo.links] == [
        (0, "h0", "s0"),
        (1, "s0", "h0"),
        (2, "s0", "h1"),
        (3, "h1", "s0"),
    ]
    assert topo.hosts == ("h0", "h1")
    assert topo.switches == ("s0",)
    assert topo.link("s0", "h1").id == 2
    assert topo.out_links("s0") == (1, 2)


def test_topology_is_frozen():
    topo = _pair()
    with pytest.raises(dataclasses.FrozenInstanceError):
        topo.name = "other"  # type: ignore[misc]


def test_unknown_node_in_link_is_named():
    with pytest.raises(UnknownNodeError, match="'s9'"):
        Topology.from_lists(["h0", "h1"], ["s0"], [("h0", "s0", 1e9, 0), ("h1", "s9", 1e9, 0)])


def test_unknown_node_lookup_is_a_key_error_naming_it():
    with pytest.raises(KeyError, match="'h7'"):
        _pair().node("h7")


@pytest.mark.parametrize("capacity", [0.0, -1e9, float("inf"), float("nan")])
def test_non_positive_or_infinite_capacity_is_rejected(capacity):
    with pytest.raises(TopologyError, match="capacity_bps="):
        Topology.from_lists(["h0", "h1"], ["s0"], [("h0", "s0", capacity, 0), ("h1", "s0", 1e9, 0)])


def test_negative_latency_is_rejected():
    with pytest.raises(TopologyError, match="latency_s=-1e-06"):
        Topology.from_lists(["h0", "h1"], ["s0"], [("h0", "s0", 1e9, -1e-6), ("h1", "s0", 1e9, 0)])


def test_disconnected_hosts_are_rejected_naming_the_host():
    # h2 hangs off s1, which is cabled to nothing else.
    with pytest.raises(TopologyError, match="'h2' is disconnected"):
        Topology.from_lists(
            ["h0", "h1", "h2"],
            ["s0", "s1"],
            [("h0", "s0", 1e9, 0), ("h1", "s0", 1e9, 0), ("h2", "s1", 1e9, 0)],
        )


def test_one_way_reachability_is_not_enough():
    # h0 -> s0 -> h1 exists, but nothing leads back to h0.
    with pytest.raises(TopologyError, match="disconnected"):
        Topology.from_lists(
            ["h0", "h1"], ["s0"], [("h0", "s0", 1e9, 0), ("s0", "h1", 1e9, 0)], duplex=False
        )


def test_duplicate_names_and_parallel_links_are_rejected():
    with pytest.raises(TopologyError, match="duplicate node name 'h0'"):
        Topology.from_lists(["h0", "h0"], ["s0"], [("h0", "s0", 1e9, 0)])
    with pytest.raises(TopologyError, match="parallel links"):
        Topology.from_lists(
            ["h0", "h1"], ["s0"], [("h0", "s0", 1e9, 0), ("h0", "s0", 1e9, 0), ("h1", "s0", 1e9, 0)]
        )


def test_link_id_must_equal_index():
    nodes = (Node("h0", "host"), Node("s0", "switch"))
    with pytest.raises(TopologyError, match="id=5, expected 0"):
        Topology(nodes, (Link(5, "h0", "s0", 1e9, 0.0),))


def test_bad_link_id_lookup_names_the_range():
    with pytest.raises(UnknownLinkError, match=r"\[0, 4\)"):
        _pair().link_by_id(4)


def test_json_round_trip_keeps_everything(tmp_path):
    topo = _pair()
    path = tmp_path / "t.json"
    topo.save(path)
    again = Topology.load(path)
    assert again == topo
    assert again.name == topo.name


def test_malformed_json_is_a_topology_error(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{ not json")
    with pytest.raises(TopologyError, match="not valid JSON"):
        Topology.load(path)


def test_binary_file_is_a_topology_error(tmp_path):
    path = tmp_path / "bin.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TopologyError, match="not valid JSON"):
        Topology.load(path)


def test_wrong_format_tag_is_named(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"format": "something-else", "nodes": [], "links": []}))
    with pytest.raises(TopologyError, match="'something-else'"):
        Topology.load(path)


def test_malformed_link_entries_are_a_topology_error(tmp_path):
    data = _pair().to_dict()
    data["links"][0] = ["h0", "s0"]  # capacity and latency missing
    path = tmp_path / "short.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TopologyError, match="malformed"):
        Topology.load(path)


def test_loaded_file_is_validated_like_a_built_one(tmp_path):
    data = _pair().to_dict()
    data["links"][2][2] = 0.0
    path = tmp_path / "zero.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TopologyError, match="capacity_bps=0.0"):
        Topology.load(path)
