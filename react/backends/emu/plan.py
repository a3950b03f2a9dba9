"""What to build for a topology: namespaces, veth cables, addresses, routes and rate limits.

Pure data, no side effects (testable without root): :func:`plan_network` picks the nodes that
the used hosts need (the hosts themselves and every switch on a shortest path between two of
them, so a k=8 fat-tree scenario with a few ranks stays small), names every port, assigns
addresses and computes every router's ECMP next hops.

Addressing. Host ``h`` with index ``i`` in ``topology.hosts`` owns ``10.1.0.0 + 4 i + 1``
whatever is built, so addresses are stable across runs. With a single switch (a star) that
switch is a Linux bridge and every host sits in ``10.1.0.0/16``. With several switches every
switch is a router: each host cable is the /30 ``10.1.0.0 + 4 i`` (the switch end is ``+ 2``)
and the k-th switch-to-switch cable is the /30 ``10.2.0.0 + 4 k``. A router has a /32 route to
every used host not attached to it, with one next hop per neighbour on a shortest path
(kernel multipath, hashed on the L4 five-tuple).

Rates. Capacities scale linearly: the topology's fastest link runs at ``link_rate_bps``, so
``scale = link_rate_bps / max capacity``; a directed link ``a -> b`` is shaped on ``a``'s port
towards ``b`` (both ends of every cable are shaped, one per direction). Switch ports share
their rate fairly between source hosts (:mod:`react.backends.emu.tc`) unless ``fair_share`` is
off.
"""

from __future__ import annotations

import ipaddress
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from flowsim.topology import Topology
from react.backends.emu.errors import EmuInputError
from react.backends.emu.names import HOST_IFNAME, switch_port
from react.backends.emu.tc import BUCKETS

QUEUE_S = 0.012
"""Default queue of a shaped link, in seconds at its rate (300 KB at 200 Mbit/s: the issue's
measurement; short transfers starve behind GSO bursts with much longer queues)."""

MIN_QUEUE_BYTES = 32_000
"""Smallest default queue (about 20 full-size packets), for slow scaled links."""

_HOST_BASE = int(ipaddress.IPv4Address("10.1.0.0"))
_FABRIC_BASE = int(ipaddress.IPv4Address("10.2.0.0"))
_MAX_INDEX = 1 << 14  # /30 blocks in a /16


def default_queue_bytes(rate_bps: float) -> int:
    """The queue of a link shaped at ``rate_bps`` when none is given: :data:`QUEUE_S` of it."""
    return max(MIN_QUEUE_BYTES, int(rate_bps * QUEUE_S / 8))


@dataclass(frozen=True, slots=True)
class Cable:
    """A veth pair: ``a``'s port ``a_ifname`` (address ``a_cidr``) to ``b``'s port ``b_ifname``."""

    a: str
    a_ifname: str
    a_cidr: str | None
    b: str
    b_ifname: str
    b_cidr: str | None


@dataclass(frozen=True, slots=True)
class Egress:
    """The shaper of the directed link ``src -> dst``: on ``src``'s port ``ifname``."""

    src: str
    dst: str
    ifname: str
    rate_bps: float
    queue_bytes: int
    buckets: tuple[int, ...] = ()
    """Source-host buckets with a fair leaf each (:mod:`react.backends.emu.tc`); empty on
    host ports and without fair sharing."""


@dataclass(frozen=True, slots=True)
class Route:
    """``dest`` reached from ``node`` through ``nexthops`` (``(gateway, ifname)`` pairs)."""

    node: str
    dest: str
    nexthops: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything :class:`~react.backends.emu.network.EmuNetwork` creates, as data."""

    mode: Literal["bridge", "routed"]
    hosts: tuple[str, ...]
    switches: tuple[str, ...]
    cables: tuple[Cable, ...]
    egress: dict[tuple[str, str], Egress]
    routes: tuple[Route, ...]
    host_ips: dict[str, str]
    scale: float

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.hosts + self.switches


def _ip(value: int) -> str:
    return str(ipaddress.IPv4Address(value))


def _check_rate(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and value > 0
    ):
        raise EmuInputError(f"{name} must be a positive finite number of bit/s, got {value!r}")
    return float(value)


def _adjacency(topology: Topology) -> dict[str, list[str]]:
    adj: dict[str, list[str]] = {n.name: [] for n in topology.nodes}
    for link in topology.links:
        adj[link.src].append(link.dst)
    return adj


def _bfs(adj: dict[str, list[str]], source: str, hosts: set[str], allowed: set[str] | None
         ) -> dict[str, int]:
    # hosts never forward: a host other than the source is reached but not expanded
    dist = {source: 0}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        if node != source and node in hosts:
            continue
        for nxt in adj[node]:
            if nxt not in dist and (allowed is None or nxt in allowed):
                dist[nxt] = dist[node] + 1
                queue.append(nxt)
    return dist


def _used_nodes(topology: Topology, hosts: Sequence[str], adj: dict[str, list[str]]) -> set[str]:
    names = [n.name for n in topology.nodes]
    col = {n: i for i, n in enumerate(names)}
    all_hosts = set(topology.hosts)
    big = 1 << 30
    dist = np.full((len(hosts), len(names)), big, dtype=np.int64)
    for r, h in enumerate(hosts):
        for node, d in _bfs(adj, h, all_hosts, None).items():
            dist[r, col[node]] = d
    host_cols = np.array([col[h] for h in hosts])
    used = np.zeros(len(names), dtype=bool)
    for r in range(len(hosts)):
        # node v lies on a shortest r -> t path iff d(r, v) + d(t, v) == d(r, t)
        through = dist[r][None, :] + dist == dist[r, host_cols][:, None]
        used |= through.any(axis=0)
    return {names[i] for i in np.flatnonzero(used)} | set(hosts)


def _check_hosts(topology: Topology, hosts: Sequence[str] | None) -> tuple[str, ...]:
    all_hosts = topology.hosts
    hosts = all_hosts if hosts is None else tuple(hosts)
    if not hosts:
        raise EmuInputError("hosts must name at least one host, got an empty list")
    known = set(all_hosts)
    for h in hosts:
        if h not in known:
            sample = ", ".join(all_hosts[:4]) + (", ..." if len(all_hosts) > 4 else "")
            raise EmuInputError(
                f"unknown host {h!r}; topology {topology.name or '?'} has hosts {sample}"
            )
    if len(set(hosts)) != len(hosts):
        dup = sorted({h for h in hosts if hosts.count(h) > 1})
        raise EmuInputError(f"hosts must be distinct, got {dup} more than once")
    if len(all_hosts) > _MAX_INDEX:
        raise EmuInputError(f"the emulator addresses at most {_MAX_INDEX} hosts per topology, "
                            f"got {len(all_hosts)}")
    return tuple(hosts)


def _cable_pairs(topology: Topology, used: set[str],
                 used_hosts: Sequence[str]) -> list[tuple[str, str]]:
    """Undirected cables among the used nodes, in link order; every host has exactly one."""
    seen: set[frozenset[str]] = set()
    pairs: list[tuple[str, str]] = []
    for link in topology.links:
        key = frozenset((link.src, link.dst))
        if link.src in used and link.dst in used and key not in seen:
            seen.add(key)
            pairs.append((link.src, link.dst))
    for h in used_hosts:
        deg = sum(1 for a, b in pairs if h in (a, b))
        if deg != 1:
            raise EmuInputError(
                f"host {h!r} has {deg} cables in the built network; the emulator supports hosts "
                "with exactly one cable (to a switch)"
            )
    return pairs


_Ports = dict[tuple[str, str], str]  # (node, neighbour) -> the node's port towards it
_Cidrs = dict[tuple[str, str], str | None]  # (node, neighbour) -> that port's address


def _cables(pairs: Sequence[tuple[str, str]], index: dict[str, int], used: set[str],
            mode: str) -> tuple[list[Cable], _Ports, _Cidrs]:
    """Name every port and address every cable (module docstring, Addressing)."""
    port_index: dict[str, int] = {n: 0 for n in used}
    ifname_of: _Ports = {}
    cidr_of: _Cidrs = {}
    cables: list[Cable] = []
    fabric = 0
    for a, b in pairs:
        for x, y in ((a, b), (b, a)):
            if x in index:
                ifname_of[(x, y)] = HOST_IFNAME
            else:
                ifname_of[(x, y)] = switch_port(y, port_index[x])
                port_index[x] += 1
        if a in index or b in index:
            host, sw = (a, b) if a in index else (b, a)
            if sw in index:
                raise EmuInputError(f"hosts {a!r} and {b!r} are cabled directly; the emulator "
                                    "needs a switch between hosts")
            base = _HOST_BASE + 4 * index[host]
            if mode == "bridge":
                cidr_of[(host, sw)] = f"{_ip(base + 1)}/16"
                cidr_of[(sw, host)] = None
            else:
                cidr_of[(host, sw)] = f"{_ip(base + 1)}/30"
                cidr_of[(sw, host)] = f"{_ip(base + 2)}/30"
        else:
            base = _FABRIC_BASE + 4 * fabric
            fabric += 1
            cidr_of[(a, b)] = f"{_ip(base + 1)}/30"
            cidr_of[(b, a)] = f"{_ip(base + 2)}/30"
        cables.append(Cable(a, ifname_of[(a, b)], cidr_of[(a, b)],
                            b, ifname_of[(b, a)], cidr_of[(b, a)]))
    return cables, ifname_of, cidr_of


def _routes(pairs: Sequence[tuple[str, str]], hosts: Sequence[str], used: set[str],
            used_hosts: Sequence[str], used_switches: Sequence[str], host_ips: dict[str, str],
            ifname_of: _Ports, cidr_of: _Cidrs) -> list[Route]:
    """Every host's default route, and every router's /32 to each used host not attached to
    it through each neighbour on a shortest path (ECMP)."""
    routes: list[Route] = []
    built_adj: dict[str, list[str]] = {n: [] for n in used}
    for a, b in pairs:
        built_adj[a].append(b)
        built_adj[b].append(a)
    for h in used_hosts:
        (sw,) = built_adj[h]
        gw = cidr_of[(sw, h)]
        assert gw is not None
        routes.append(Route(h, "default", ((gw.split("/")[0], HOST_IFNAME),)))
    host_set = set(used_hosts)
    for h in hosts:
        dist = _bfs(built_adj, h, host_set, used)
        for sw in used_switches:
            if h in built_adj[sw] or sw not in dist:
                continue
            hops = []
            for n in built_adj[sw]:
                if n not in host_set and dist.get(n) == dist[sw] - 1:
                    via = cidr_of[(n, sw)]
                    assert via is not None
                    hops.append((via.split("/")[0], ifname_of[(sw, n)]))
            routes.append(Route(sw, f"{host_ips[h]}/32", tuple(hops)))
    return routes


def plan_network(topology: Topology, hosts: Sequence[str] | None = None, *,
                 link_rate_bps: float = 200e6, queue_bytes: int | None = None,
                 fair_share: bool = True) -> Plan:
    """Plan the emulated network of ``topology`` restricted to ``hosts`` (all hosts if None).

    Raises
    ------
    EmuInputError
        On an unknown or repeated host, a switch used as a host, a host with more than one
        cable, a bad rate or queue size.
    """
    rate = _check_rate("link_rate_bps", link_rate_bps)
    if queue_bytes is not None and (
        isinstance(queue_bytes, bool) or not isinstance(queue_bytes, int) or queue_bytes < 1500
    ):
        raise EmuInputError(
            f"queue_bytes must be an integer >= 1500 (one packet), got {queue_bytes!r}"
        )
    hosts = _check_hosts(topology, hosts)
    index = {h: i for i, h in enumerate(topology.hosts)}
    used = _used_nodes(topology, hosts, _adjacency(topology))
    used_hosts = tuple(h for h in topology.hosts if h in used)
    used_switches = tuple(s for s in topology.switches if s in used)
    mode: Literal["bridge", "routed"] = "bridge" if len(used_switches) <= 1 else "routed"
    scale = rate / max(link.capacity_bps for link in topology.links)
    pairs = _cable_pairs(topology, used, used_hosts)
    cables, ifname_of, cidr_of = _cables(pairs, index, used, mode)

    egress: dict[tuple[str, str], Egress] = {}
    for a, b in pairs:
        for x, y in ((a, b), (b, a)):
            r = topology.link(x, y).capacity_bps * scale
            q = queue_bytes if queue_bytes is not None else default_queue_bytes(r)
            buckets: tuple[int, ...] = ()
            if fair_share and x not in index:
                buckets = tuple(sorted({index[h] % BUCKETS for h in used_hosts if h != y}))
            egress[(x, y)] = Egress(x, y, ifname_of[(x, y)], r, q, buckets)

    host_ips = {h: _ip(_HOST_BASE + 4 * index[h] + 1) for h in used_hosts}
    routes = [] if mode == "bridge" else _routes(pairs, hosts, used, used_hosts, used_switches,
                                                 host_ips, ifname_of, cidr_of)
    return Plan(mode, used_hosts, used_switches, tuple(cables), egress, tuple(routes), host_ips,
                scale)
