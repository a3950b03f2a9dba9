"""Tests of flowsim.routing: equal-cost paths, ECMP hashing, explicit-path checks."""

import os
import random
import subprocess
import sys
from collections import Counter

import pytest

from flowsim import RoutingError, Topology, UnknownNodeError
from flowsim.routing import Router, ecmp_hash
from flowsim.topologies import alibaba_fabric, fat_tree, leaf_spine, star


@pytest.fixture(scope="module")
def ft8() -> Topology:
    return fat_tree(8)


def _nodes(router: Router, path: tuple[int, ...]) -> tuple[str, ...]:
    return router.path_nodes(path)


def test_star_has_one_path_through_the_switch():
    router = Router(star(3))
    (path,) = router.paths("h0", "h2")
    assert _nodes(router, path) == ("h0", "s0", "h2")
    assert router.route("h0", "h2", port=123) == path


def test_leaf_spine_paths_go_through_each_spine_once():
    topo = leaf_spine(2, 3, 2)
    router = Router(topo)
    paths = router.paths("h0", "h3")
    assert [_nodes(router, p) for p in paths] == [
        ("h0", "leaf0", f"spine{i}", "leaf1", "h3") for i in range(3)
    ]
    # Same leaf: one path, no spine.
    assert [_nodes(router, p) for p in router.paths("h0", "h1")] == [("h0", "leaf0", "h1")]


@pytest.mark.parametrize(
    ("dst", "count", "hops"),
    [("h1", 1, 2), ("h4", 4, 4), ("h127", 16, 6)],  # same edge, same pod, other pod (k=8)
)
def test_fat_tree_equal_cost_path_counts(ft8, dst, count, hops):
    # k=8: 4 aggs per pod -> 4 paths within a pod; 4 aggs x 4 cores -> 16 between pods.
    paths = Router(ft8).paths("h0", dst)
    assert len(paths) == count
    assert {len(p) for p in paths} == {hops}
    assert len(set(paths)) == count


def test_paths_are_sorted_valid_and_cover_distinct_cores(ft8):
    router = Router(ft8)
    paths = router.paths("h3", "h100")
    assert list(paths) == sorted(paths)
    for path in paths:
        assert router.check_path("h3", "h100", path) == path
    cores = {_nodes(router, p)[3] for p in paths}
    assert cores == {f"core{i}" for i in range(16)}


def test_paths_do_not_depend_on_the_seed_or_cache(ft8):
    a = Router(ft8, seed=1, cache_pairs=1)
    b = Router(ft8, seed=2)
    first = a.paths("h0", "h127")
    a.paths("h1", "h126")  # evicts (h0, h127) from a one-entry cache
    assert a.paths("h0", "h127") == first == b.paths("h0", "h127")


def test_alibaba_fabric_has_one_path_per_aggregation_switch():
    router = Router(alibaba_fabric())
    paths = router.paths("h0", "h719")
    assert [_nodes(router, p)[2] for p in paths] == ["agg0", "agg1", "agg2"]


def test_hosts_never_forward():
    # h1 is cabled to both switches; the only switch-only route from h0 to h2 is s0 - s1,
    # though h0 - s0 - h1 - s1 - h2 would be as short if h1 forwarded.
    topo = Topology.from_lists(
        ["h0", "h1", "h2"],
        ["s0", "s1"],
        [
            ("h0", "s0", 1e9, 0),
            ("h1", "s0", 1e9, 0),
            ("h1", "s1", 1e9, 0),
            ("h2", "s1", 1e9, 0),
            ("s0", "s1", 1e9, 0),
        ],
    )
    router = Router(topo)
    assert [_nodes(router, p) for p in router.paths("h0", "h2")] == [("h0", "s0", "s1", "h2")]


def test_no_route_when_only_a_host_connects_the_two_sides():
    # s0 and s1 are joined only through host h1, which does not forward.
    topo = Topology.from_lists(
        ["h0", "h1", "h2"],
        ["s0", "s1"],
        [("h0", "s0", 1e9, 0), ("h1", "s0", 1e9, 0), ("h1", "s1", 1e9, 0), ("h2", "s1", 1e9, 0)],
    )
    with pytest.raises(RoutingError, match="no route from 'h0' to 'h2'"):
        Router(topo).paths("h0", "h2")


def test_directly_cabled_hosts_use_the_cable():
    topo = Topology.from_lists(
        ["h0", "h1"], ["s0"], [("h0", "h1", 1e9, 0), ("h0", "s0", 1e9, 0), ("h1", "s0", 1e9, 0)]
    )
    router = Router(topo)
    assert router.paths("h0", "h1") == ((topo.link("h0", "h1").id,),)


def test_bad_endpoints_are_named(ft8):
    router = Router(ft8)
    with pytest.raises(UnknownNodeError, match="'h999'"):
        router.paths("h0", "h999")
    with pytest.raises(RoutingError, match="dst='core0' is a switch"):
        router.route("h0", "core0")
    with pytest.raises(RoutingError, match="src and dst are both 'h5'"):
        router.route("h5", "h5")


def test_ecmp_hash_is_a_pure_function_of_its_arguments():
    base = ecmp_hash("h0", "h1", 0, 0)
    assert ecmp_hash("h0", "h1", 0, 0) == base
    others = {
        ecmp_hash("h1", "h0", 0, 0),
        ecmp_hash("h0", "h1", 1, 0),
        ecmp_hash("h0", "h1", 0, 1),
    }
    assert base not in others and len(others) == 3
    assert 0 <= base < 2**64


def test_ecmp_hash_encoding_is_unambiguous():
    # A naive "src|dst" join would collide on these two.
    assert ecmp_hash("a|b", "c", 0, 0) != ecmp_hash("a", "b|c", 0, 0)


def test_ecmp_hash_rejects_non_integer_port_or_seed():
    with pytest.raises(RoutingError, match="port must be an integer, got port='80'"):
        ecmp_hash("h0", "h1", "80", 0)  # type: ignore[arg-type]
    with pytest.raises(RoutingError, match="seed=1.5"):
        Router(star(2), seed=1.5)  # type: ignore[arg-type]


# The documented hash, recomputed from its definition in a fresh interpreter (whose str hash
# salt differs), must agree with this process.
_CHILD = """
import hashlib, json, sys
from flowsim.routing import ecmp_hash
key = json.dumps(["h0", "h127", 4791, 7], separators=(",", ":")).encode()
spec = int.from_bytes(hashlib.blake2b(key, digest_size=8, person=b"flowsim-ecmp").digest(), "big")
print(ecmp_hash("h0", "h127", 4791, 7), spec)
"""


def test_ecmp_hash_is_identical_across_processes_and_matches_its_definition():
    out = subprocess.run(
        [sys.executable, "-c", _CHILD],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    ).stdout.split()
    assert int(out[0]) == int(out[1]) == ecmp_hash("h0", "h127", 4791, 7)


def test_route_is_stable_and_picks_the_hashed_path(ft8):
    router = Router(ft8, seed=3)
    paths = router.paths("h0", "h127")
    for port in range(20):
        expected = paths[ecmp_hash("h0", "h127", port, 3) % len(paths)]
        assert router.route("h0", "h127", port) == expected
        assert Router(ft8, seed=3).route("h0", "h127", port) == expected


def test_different_ports_spread_evenly_over_fat_tree_paths(ft8):
    # 16 paths, 3,200 ports: 200 expected per path. Binomial sd ~ 13.7, so [120, 280] is a
    # bound of ~6 sd: it only fails if the hash is badly biased (e.g. always one path).
    router = Router(ft8)
    counts = Counter(router.route("h0", "h127", port) for port in range(3200))
    assert len(counts) == 16
    assert min(counts.values()) >= 120
    assert max(counts.values()) <= 280


def test_seed_changes_the_assignment(ft8):
    a = [Router(ft8, seed=0).route("h0", "h127", p) for p in range(64)]
    b = [Router(ft8, seed=1).route("h0", "h127", p) for p in range(64)]
    assert a != b


def test_large_fat_tree_routes_lazily():
    # 1,024 hosts: routing a few pairs must not enumerate all pairs.
    router = Router(fat_tree(16))
    assert len(router.paths("h0", "h1023")) == 64
    assert len(router._paths) == 1
    assert len(router._tables) == 1  # one forwarding table, towards edge127


# -- explicit paths ------------------------------------------------------------------------------
@pytest.fixture
def ls() -> Router:
    return Router(leaf_spine(2, 2, 2))


def _ids(router: Router, *nodes: str) -> list[int]:
    topo = router.topology
    return [topo.link(a, b).id for a, b in zip(nodes, nodes[1:], strict=False)]


def test_check_path_accepts_a_valid_path_as_a_tuple(ls):
    ids = _ids(ls, "h0", "leaf0", "spine1", "leaf1", "h2")
    assert ls.check_path("h0", "h2", ids) == tuple(ids)


def test_check_path_accepts_a_longer_than_shortest_simple_path():
    # Three leaves: h0 -> leaf0 -> spine0 -> leaf2 -> spine1 -> leaf1 -> h2 is a simple detour
    # (6 links where the shortest path has 4); explicit paths need not be shortest.
    router = Router(leaf_spine(3, 2, 2))
    ids = _ids(router, "h0", "leaf0", "spine0", "leaf2", "spine1", "leaf1", "h2")
    assert router.check_path("h0", "h2", ids) == tuple(ids)


def test_check_path_rejects_loops(ls):
    ids = _ids(ls, "h0", "leaf0", "spine0", "leaf1", "spine1", "leaf0", "h1")
    with pytest.raises(RoutingError, match="visits node 'leaf0' twice"):
        ls.check_path("h0", "h1", ids)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ([], "is empty"),
        ("0,1", "must be a sequence of link ids"),
        ([0, 999], r"path\[1\]=999 is not a link id"),
        ([0, -1], r"path\[1\]=-1 is not a link id"),
        ([0, 1.0], r"path\[1\]=1.0 is not a link id"),
    ],
)
def test_check_path_rejects_malformed_paths(ls, path, message):
    with pytest.raises(RoutingError, match=message):
        ls.check_path("h0", "h2", path)


def test_check_path_names_wrong_start_end_and_gaps(ls):
    with pytest.raises(RoutingError, match="does not leave src='h0'"):
        ls.check_path("h0", "h2", _ids(ls, "h1", "leaf0", "spine0", "leaf1", "h2"))
    with pytest.raises(RoutingError, match="does not reach dst='h2'"):
        ls.check_path("h0", "h2", _ids(ls, "h0", "leaf0", "spine0", "leaf1", "h3"))
    gap = _ids(ls, "h0", "leaf0") + _ids(ls, "spine0", "leaf1", "h2")
    with pytest.raises(RoutingError, match="not contiguous: link 0 ends at 'leaf0'"):
        ls.check_path("h0", "h2", gap)


def test_check_path_rejects_transit_through_a_host(ls):
    # h0 -> leaf0 -> h1 -> leaf0 ... : passes through host h1.
    ids = _ids(ls, "h0", "leaf0", "h1", "leaf0")
    with pytest.raises(RoutingError, match="passes through host 'h1'"):
        ls.check_path("h0", "h2", ids)


def test_check_path_memo_does_not_accept_bools_for_link_ids(ls):
    # True == 1 and hashes alike, so a memoised int path must not answer for a bool one.
    ids = _ids(ls, "h0", "leaf0", "spine1", "leaf1", "h2")
    assert ls.check_path("h0", "h2", ids) == tuple(ids)
    assert ids[0] in (0, 1), "the test needs a first link id that a bool can alias"
    with pytest.raises(RoutingError, match=r"path\[0\]=(True|False) is not a link id"):
        ls.check_path("h0", "h2", [bool(ids[0]), *ids[1:]])


@pytest.mark.parametrize("seed", range(5))
def test_check_path_fast_pass_agrees_with_the_careful_check(seed):
    # Random walks over the links (contiguous or not, through hosts or not, looping or not):
    # the fast pass accepts exactly the paths the careful check accepts, with the same result.
    rng = random.Random(seed)
    topo = leaf_spine(3, 2, 2)
    router = Router(topo)
    out: dict[str, list[int]] = {}
    for lk in topo.links:
        out.setdefault(lk.src, []).append(lk.id)
    hosts = topo.hosts
    accepted = 0
    for _ in range(400):
        src = rng.choice(hosts)
        node, path, seen = src, [], {src}
        for _hop in range(rng.randint(1, 7)):
            fresh = [lid for lid in out[node] if topo.links[lid].dst not in seen]
            if fresh and rng.random() < 0.9:
                lid = rng.choice(fresh)
            else:
                lid = rng.randrange(len(topo.links))
            path.append(lid)
            node = topo.links[lid].dst
            seen.add(node)
            if node in hosts and rng.random() < 0.8:
                break
        dst = node if node in hosts and rng.random() < 0.8 else rng.choice(hosts)
        try:
            careful = router._check_path(src, dst, path)
        except RoutingError:
            careful = None
        assert router._fast_check(src, dst, tuple(path)) == careful
        accepted += careful is not None
    assert 50 <= accepted <= 350  # both sides exercised


# -- against an independent reference -----------------------------------------------------------
def _random_fabric(rng: random.Random) -> Topology:
    """A random connected switch graph; each host cabled to one or two switches."""
    n_sw = rng.randint(2, 9)
    switches = [f"s{i}" for i in range(n_sw)]
    cables = {(f"s{i}", f"s{rng.randrange(i)}") for i in range(1, n_sw)}  # a random tree
    for _ in range(rng.randint(0, 2 * n_sw)):
        a, b = rng.sample(switches, 2)
        if (b, a) not in cables:
            cables.add((a, b))
    hosts = [f"h{i}" for i in range(rng.randint(2, 6))]
    for h in hosts:
        for sw in rng.sample(switches, rng.choice([1, 1, 2])):
            cables.add((h, sw))
    links = [(a, b, 1e9, 0.0) for a, b in sorted(cables)]
    return Topology.from_lists(hosts, switches, links)


@pytest.mark.parametrize("seed", range(25))
def test_paths_equal_networkx_all_shortest_paths_through_switches(seed):
    # Reference: networkx on a graph where hosts have no transit links, i.e. for (src, dst)
    # only switch-switch links plus src's out-links and dst's in-links.
    import networkx as nx

    topo = _random_fabric(random.Random(seed))
    router = Router(topo)
    switches = set(topo.switches)
    for src in topo.hosts:
        for dst in topo.hosts:
            if src == dst:
                continue
            graph = nx.DiGraph()
            for lk in topo.links:
                if (lk.src in switches or lk.src == src) and (lk.dst in switches or lk.dst == dst):
                    graph.add_edge(lk.src, lk.dst, id=lk.id)
            try:
                node_paths = list(nx.all_shortest_paths(graph, src, dst))
            except (nx.NetworkXNoPath, nx.NodeNotFound):
                with pytest.raises(RoutingError, match="no route"):
                    router.paths(src, dst)
                continue
            expected = sorted(
                tuple(graph.edges[a, b]["id"] for a, b in zip(p, p[1:], strict=False))
                for p in node_paths
            )
            assert list(router.paths(src, dst)) == expected


def test_thousands_of_flows_on_a_1024_host_fat_tree_route_to_valid_shortest_paths():
    topo = fat_tree(16)
    router = Router(topo, cache_pairs=512)
    rng = random.Random(0)
    for port in range(2000):
        src, dst = rng.sample(topo.hosts, 2)
        path = router.route(src, dst, port)
        assert router.check_path(src, dst, path) == path
        # Hop count from the hosts' positions: same edge 2, same pod 4, otherwise 6.
        a, b = int(src[1:]), int(dst[1:])
        assert len(path) == (2 if a // 8 == b // 8 else 4 if a // 64 == b // 64 else 6)
    assert len(router._paths) <= 512


def test_docstring_examples_run():
    import doctest

    import flowsim.routing

    result = doctest.testmod(flowsim.routing)
    assert result.attempted >= 3 and result.failed == 0


def test_router_route_memo_is_bounded_and_consistent():
    # Routes are memoised per (src, dst, port), at most 4 x cache_pairs of them; an entry dropped
    # and recomputed is the same path, and non-int ports are still checked, not memoised.
    topo = fat_tree(4)
    router = Router(topo, seed=2, cache_pairs=2)
    first = [router.route("h0", "h15", port) for port in range(20)]
    assert len(router._routes) <= 8
    assert [router.route("h0", "h15", port) for port in range(20)] == first
    assert first == [Router(topo, seed=2).route("h0", "h15", port) for port in range(20)]
    with pytest.raises(RoutingError, match="port must be an integer"):
        router.route("h0", "h15", True)
