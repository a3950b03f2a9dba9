"""Builders for common data-centre fabrics, each a plain function returning a frozen Topology.

Every builder is named for the object it builds (as ``networkx.cycle_graph`` is), takes all counts
and rates as parameters with defaults, and returns an immutable :class:`~flowsim.topology.Topology`
whose cables are full duplex (two directed links, one each way, of the same capacity).

Node names (fixed, so that placing ranks on hosts is easy and reproducible)
--------------------------------------------------------------------------
- Hosts are ``h0 .. h{N-1}``, numbered switch by switch: the hosts under the first ToR / leaf /
  edge switch come first, then those under the second, and so on. Consecutive hosts therefore
  share a rack, and ``h{i}`` sits under switch ``i // hosts_per_switch``.
- Switches are named by tier and numbered from 0 within the tier:

  ============== ============================================
  builder        switches
  ============== ============================================
  star           ``s0``
  leaf_spine     ``leaf0..``, ``spine0..``
  fat_tree       ``edge0..``, ``agg0..``, ``core0..``
  alibaba_fabric ``tor0..``, ``agg0..``
  ============== ============================================

Node order in ``Topology.nodes`` is hosts first, then switches tier by tier from the hosts up;
link ids follow the order in which cables are listed (host cables first, then upward tiers), each
cable giving ``a -> b`` then ``b -> a``.

Default rates and latencies
---------------------------
Every link defaults to 100 Gbps, the rate the paper's simulations use (§2 example: β = 1/100 Gbps),
and to 1 µs one-way latency per link, standing for a short cable plus one switch's forwarding
delay. A host pair under one switch is then 2 µs apart, a core path of a fat-tree 6 µs; the paper's
per-step α = 4 µs lies between. Pass ``latency_s=0`` for a pure-bandwidth model (as the SimGrid
reference workloads use).
"""

from __future__ import annotations

import math
import numbers

from flowsim.errors import TopologyError
from flowsim.topology import Topology

__all__ = ["alibaba_fabric", "fat_tree", "leaf_spine", "star"]

DEFAULT_BPS = 100e9
"""Default capacity of every link, in bits per second (100 Gbps)."""

DEFAULT_LATENCY_S = 1e-6
"""Default one-way latency of every link, in seconds (1 µs: cable plus one switch hop)."""

_Cable = tuple[str, str, float, float]


# -- argument checks (each names the builder, the argument, the value and what was expected) ------
def _count(builder: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise TopologyError(f"{builder}: {name} must be a positive integer, got {name}={value!r}")
    return int(value)


def _rate(builder: str, name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise TopologyError(
            f"{builder}: {name} must be a positive finite number, got {name}={value!r}"
        )
    return float(value)


def _latency(builder: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value < 0
    ):
        raise TopologyError(
            f"{builder}: latency_s must be a non-negative finite number of seconds, "
            f"got latency_s={value!r}"
        )
    return float(value)


def _hosts(count: int) -> list[str]:
    return [f"h{i}" for i in range(count)]


# -- builders --------------------------------------------------------------------------------------
def star(
    n: int = 8, *, capacity_bps: float = DEFAULT_BPS, latency_s: float = DEFAULT_LATENCY_S
) -> Topology:
    """``n`` hosts on one switch: the single-rack topology of the paper's star experiments.

    Every flow crosses exactly two links (host -> ``s0`` -> host), so only the host links can be
    congested; this is the setting where routing has no choice and congestion is "steady".

    Parameters
    ----------
    n : int
        Number of hosts, ``h0 .. h{n-1}``; at least 1.
    capacity_bps : float
        Capacity of each direction of each host cable, bits/s.
    latency_s : float
        One-way latency of each link, seconds.

    Returns
    -------
    Topology
        Named ``star(n=...)``.

    Raises
    ------
    TopologyError
        On a non-positive ``n`` or capacity, or a negative latency.

    Examples
    --------
    >>> topo = star(4)
    >>> topo.hosts, topo.switches
    (('h0', 'h1', 'h2', 'h3'), ('s0',))
    """
    b = "star"
    n = _count(b, "n", n)
    cap = _rate(b, "capacity_bps", capacity_bps)
    lat = _latency(b, latency_s)
    hosts = _hosts(n)
    cables: list[_Cable] = [(h, "s0", cap, lat) for h in hosts]
    return Topology.from_lists(hosts, ["s0"], cables, name=f"star(n={n})")


def leaf_spine(
    leaves: int = 4,
    spines: int = 2,
    hosts_per_leaf: int = 8,
    *,
    host_bps: float = DEFAULT_BPS,
    fabric_bps: float | None = None,
    oversubscription: float | None = None,
    latency_s: float = DEFAULT_LATENCY_S,
) -> Topology:
    """A two-tier leaf-spine (folded Clos): every leaf is cabled to every spine.

    Hosts ``h0 ..`` are numbered leaf by leaf (``h{i}`` is under ``leaf{i // hosts_per_leaf}``).
    A path between leaves goes leaf -> spine -> leaf, so there are ``spines`` equal-cost paths.

    The leaf-to-spine rate is given either directly (``fabric_bps``) or as an oversubscription
    ratio: ``oversubscription = (hosts_per_leaf * host_bps) / (spines * fabric_bps)``, i.e. the
    host-facing capacity of a leaf over its spine-facing capacity (1 = non-blocking). With neither,
    every link runs at ``host_bps`` (the common "all links equal" fabric, oversubscribed
    ``hosts_per_leaf / spines`` to 1).

    Parameters
    ----------
    leaves, spines, hosts_per_leaf : int
        Switch and host counts, all positive.
    host_bps : float
        Capacity of each host cable (each direction), bits/s.
    fabric_bps : float, optional
        Capacity of each leaf-spine cable, bits/s. Exclusive with ``oversubscription``.
    oversubscription : float, optional
        Leaf oversubscription ratio (> 0); sets ``fabric_bps`` as above.
    latency_s : float
        One-way latency of each link, seconds.

    Raises
    ------
    TopologyError
        On a non-positive count, rate or ratio, a negative latency, or both ``fabric_bps`` and
        ``oversubscription`` given.

    Examples
    --------
    >>> topo = leaf_spine(2, 2, 2, oversubscription=1.0)
    >>> topo.link("leaf0", "spine0").capacity_bps
    100000000000.0
    """
    b = "leaf_spine"
    leaves = _count(b, "leaves", leaves)
    spines = _count(b, "spines", spines)
    per = _count(b, "hosts_per_leaf", hosts_per_leaf)
    hcap = _rate(b, "host_bps", host_bps)
    lat = _latency(b, latency_s)
    if fabric_bps is not None and oversubscription is not None:
        raise TopologyError(
            f"{b}: give fabric_bps or oversubscription, not both "
            f"(got fabric_bps={fabric_bps!r}, oversubscription={oversubscription!r})"
        )
    if oversubscription is not None:
        ratio = _rate(b, "oversubscription", oversubscription)
        fcap = per * hcap / (spines * ratio)
    elif fabric_bps is not None:
        fcap = _rate(b, "fabric_bps", fabric_bps)
    else:
        fcap = hcap
    hosts = _hosts(leaves * per)
    leaf_names = [f"leaf{i}" for i in range(leaves)]
    spine_names = [f"spine{i}" for i in range(spines)]
    cables: list[_Cable] = [(h, leaf_names[i // per], hcap, lat) for i, h in enumerate(hosts)]
    cables += [(leaf, spine, fcap, lat) for leaf in leaf_names for spine in spine_names]
    return Topology.from_lists(
        hosts,
        leaf_names + spine_names,
        cables,
        name=f"leaf_spine(leaves={leaves}, spines={spines}, hosts_per_leaf={per})",
    )


def fat_tree(
    k: int = 4,
    *,
    host_bps: float = DEFAULT_BPS,
    edge_agg_bps: float | None = None,
    agg_core_bps: float | None = None,
    latency_s: float = DEFAULT_LATENCY_S,
) -> Topology:
    """The k-ary fat-tree of Al-Fares et al. (SIGCOMM 2008), a three-tier Clos.

    ``k`` pods, each with ``k/2`` edge and ``k/2`` aggregation switches (every edge switch cabled
    to every aggregation switch of its pod); ``(k/2)^2`` core switches; ``k/2`` hosts per edge
    switch, ``k^3/4`` hosts in all (k=4: 16, k=8: 128 — the paper's Clos —, k=16: 1,024).

    Wiring: edge ``p*k/2 + i`` and aggregation ``p*k/2 + j`` belong to pod ``p``; core
    ``j*k/2 + m`` is cabled to aggregation switch ``j`` of every pod (its "column"). Hosts are
    numbered edge switch by edge switch, so ``h{i}`` is under ``edge{i // (k/2)}`` and pod
    ``i // (k/2)^2``. Between pods there are ``(k/2)^2`` equal-cost paths, within a pod ``k/2``.

    With equal rates at all tiers the tree is non-blocking. Oversubscribe a tier by lowering its
    rate: e.g. ``edge_agg_bps = host_bps / 2`` makes the edge tier 2:1 oversubscribed.

    Parameters
    ----------
    k : int
        Switch radix; a positive even integer.
    host_bps : float
        Capacity of each host-edge cable, bits/s.
    edge_agg_bps : float, optional
        Capacity of each edge-aggregation cable; defaults to ``host_bps``.
    agg_core_bps : float, optional
        Capacity of each aggregation-core cable; defaults to ``edge_agg_bps``.
    latency_s : float
        One-way latency of each link, seconds.

    Raises
    ------
    TopologyError
        On odd or non-positive ``k``, a non-positive rate or a negative latency.

    Examples
    --------
    >>> topo = fat_tree(8)
    >>> len(topo.hosts), len(topo.switches)
    (128, 80)
    """
    b = "fat_tree"
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k <= 0 or k % 2:
        raise TopologyError(f"{b}: k must be a positive even integer, got k={k!r}")
    k = int(k)
    half = k // 2
    hcap = _rate(b, "host_bps", host_bps)
    eacap = hcap if edge_agg_bps is None else _rate(b, "edge_agg_bps", edge_agg_bps)
    accap = eacap if agg_core_bps is None else _rate(b, "agg_core_bps", agg_core_bps)
    lat = _latency(b, latency_s)
    hosts = _hosts(k * half * half)
    edges = [f"edge{i}" for i in range(k * half)]
    aggs = [f"agg{i}" for i in range(k * half)]
    cores = [f"core{i}" for i in range(half * half)]
    cables: list[_Cable] = [(h, edges[i // half], hcap, lat) for i, h in enumerate(hosts)]
    for pod in range(k):
        for i in range(half):
            for j in range(half):
                cables.append((edges[pod * half + i], aggs[pod * half + j], eacap, lat))
    for pod in range(k):
        for j in range(half):
            for m in range(half):
                cables.append((aggs[pod * half + j], cores[j * half + m], accap, lat))
    return Topology.from_lists(hosts, edges + aggs + cores, cables, name=f"fat_tree(k={k})")


def alibaba_fabric(
    tors: int = 48,
    aggs: int = 3,
    hosts_per_tor: int = 15,
    *,
    host_bps: float = DEFAULT_BPS,
    fabric_bps: float = DEFAULT_BPS,
    latency_s: float = DEFAULT_LATENCY_S,
) -> Topology:
    """The paper's Alibaba-trace fabric (§7.1): ToRs each cabled to every aggregation switch.

    Defaults give the paper's 48 ToRs x 3 aggregation switches x 15 servers = 720 servers. The
    paper describes no tier above the aggregation switches and none is added: every inter-rack
    path is ToR -> agg -> ToR, so a host pair in different racks has ``aggs`` equal-cost paths and
    the ToR-agg links are where jobs without shared servers contend ("Spine-ToR congestion", Fig 7).

    The paper gives no rates; all links default to 100 Gbps, which oversubscribes each ToR
    ``hosts_per_tor * host_bps / (aggs * fabric_bps)`` = 5:1. Pass ``fabric_bps=500e9`` for a
    non-blocking fabric.

    Parameters
    ----------
    tors, aggs, hosts_per_tor : int
        Counts, all positive. Hosts ``h{i}`` sit under ``tor{i // hosts_per_tor}``.
    host_bps : float
        Capacity of each server-ToR cable, bits/s.
    fabric_bps : float
        Capacity of each ToR-aggregation cable, bits/s.
    latency_s : float
        One-way latency of each link, seconds.

    Raises
    ------
    TopologyError
        On a non-positive count or rate or a negative latency.

    Examples
    --------
    >>> topo = alibaba_fabric()
    >>> len(topo.hosts), len(topo.switches)
    (720, 51)
    """
    b = "alibaba_fabric"
    tors = _count(b, "tors", tors)
    aggs = _count(b, "aggs", aggs)
    per = _count(b, "hosts_per_tor", hosts_per_tor)
    hcap = _rate(b, "host_bps", host_bps)
    fcap = _rate(b, "fabric_bps", fabric_bps)
    lat = _latency(b, latency_s)
    hosts = _hosts(tors * per)
    tor_names = [f"tor{i}" for i in range(tors)]
    agg_names = [f"agg{i}" for i in range(aggs)]
    cables: list[_Cable] = [(h, tor_names[i // per], hcap, lat) for i, h in enumerate(hosts)]
    cables += [(tor, agg, fcap, lat) for tor in tor_names for agg in agg_names]
    return Topology.from_lists(
        hosts,
        tor_names + agg_names,
        cables,
        name=f"alibaba_fabric(tors={tors}, aggs={aggs}, hosts_per_tor={per})",
    )
