"""Making a :class:`~react.backends.emu.plan.Plan` real: namespaces, veth cables, addresses,
bridges or routers, routes and shapers, with batched ``ip`` and ``tc`` commands.

Every node gets its sysctls before its ports exist (so that ``default`` settings reach them);
switches bring their ports up before hosts (a port whose peer is still down gets its carrier at
once through the kernel's urgent link-watch path; the other order waits up to 1 s), and the
build returns only when every port is up (:func:`wait_links_up`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

from react.backends.emu import shell, tc
from react.backends.emu.errors import EmuError
from react.backends.emu.names import BRIDGE_IFNAME
from react.backends.emu.plan import Plan

__all__ = ["HASH_SEED", "LINKS_UP_S", "build", "wait_links_up"]

LINKS_UP_S = 5.0
"""How long a build waits for every port to be up (and forwarding, on a bridge)."""


def _sysctl_script(settings: Sequence[tuple[str, int]]) -> str:
    return "; ".join(f"echo {v} > /proc/sys/{k.replace('.', '/')}" for k, v in settings)


_COMMON_SYSCTLS: tuple[tuple[str, int], ...] = (
    ("net.ipv6.conf.all.disable_ipv6", 1),  # no neighbour discovery chatter on the counters
    ("net.ipv6.conf.default.disable_ipv6", 1),
)
HASH_SEED = "net.ipv4.fib_multipath_hash_seed"
"""The sysctl of a router's multipath hash seed (Linux >= 6.11)."""
_ROUTER_SYSCTLS: tuple[tuple[str, int], ...] = (
    ("net.ipv4.ip_forward", 1),
    # Hash the five-tuple. Policy 1 (L4) would do it for routed packets, but short-cuts to the
    # skb's existing L4 hash when there is one, and a packet from a local socket carries the
    # socket's random txhash across the veth: the path would follow that random number (and
    # change after a retransmission timeout), not the source port. Policy 3 (custom fields)
    # always dissects the packet: src/dst address, protocol, src/dst port = 0x37.
    ("net.ipv4.fib_multipath_hash_policy", 3),
    ("net.ipv4.fib_multipath_hash_fields", 0x37),
    ("net.ipv4.conf.all.rp_filter", 0),  # ECMP makes paths asymmetric
    ("net.ipv4.conf.default.rp_filter", 0),
)


def build(plan: Plan, netns: Callable[[str], str], *, gso_max_segs: int,
          ecmp_seed: int | None) -> None:
    """Create every namespace, cable, address, route and shaper of ``plan`` (``netns(node)``
    names a node's namespace) and return once every port is up; raises EmuError naming the
    command that failed."""
    nodes = plan.nodes
    names = [netns(n) for n in nodes]
    shell.batch("ip", (f"netns add {n}" for n in names))
    routers = set(plan.switches) if plan.mode == "routed" else set()
    seed = ((HASH_SEED, ecmp_seed),) if ecmp_seed is not None else ()
    # sysctls before the links exist, so that 'default' settings reach the new ports
    shell.batch("ip", (
        f"netns exec {netns(n)} sh -c '"
        + _sysctl_script(_COMMON_SYSCTLS + (_ROUTER_SYSCTLS + seed if n in routers else ()))
        + "'" for n in nodes))
    segs = gso_max_segs
    shell.batch("ip", (
        f"link add name {c.a_ifname} netns {netns(c.a)} gso_max_segs {segs} type veth "
        f"peer name {c.b_ifname} netns {netns(c.b)} gso_max_segs {segs}"
        for c in plan.cables))
    ports: dict[str, list[tuple[str, str | None]]] = {n: [] for n in nodes}
    for c in plan.cables:
        ports[c.a].append((c.a_ifname, c.a_cidr))
        ports[c.b].append((c.b_ifname, c.b_cidr))
    bridge = plan.switches[0] if plan.mode == "bridge" and plan.switches else None
    # switches first: a port whose peer is still down gets its carrier later through the
    # kernel's urgent link-watch path (at once); the other end would wait up to 1 s
    for node in plan.switches + plan.hosts:
        lines = ["link set lo up"]
        if node == bridge:
            lines.append(f"link add {BRIDGE_IFNAME} type bridge stp_state 0 forward_delay 0")
            lines.append(f"link set {BRIDGE_IFNAME} gso_max_segs {segs} up")
        for ifname, cidr in ports[node]:
            if cidr:
                lines.append(f"addr add {cidr} dev {ifname}")
            if node == bridge:
                lines.append(f"link set {ifname} master {BRIDGE_IFNAME}")
            lines.append(f"link set {ifname} up")
        shell.batch("ip", lines, netns=netns(node))
    routes: dict[str, list[str]] = {}
    for r in plan.routes:
        hops = " ".join(f"nexthop via {gw} dev {dev}" for gw, dev in r.nexthops)
        if len(r.nexthops) == 1:
            hops = f"via {r.nexthops[0][0]} dev {r.nexthops[0][1]}"
        routes.setdefault(r.node, []).append(f"route add {r.dest} {hops}")
    for node, lines in routes.items():
        shell.batch("ip", lines, netns=netns(node))
    shaped: dict[str, list[str]] = {}
    for e in plan.egress.values():
        shaped.setdefault(e.src, []).extend(
            tc.shape_lines(e.ifname, e.rate_bps, e.queue_bytes, e.buckets))
    for node, lines in shaped.items():
        shell.batch("tc", lines, netns=netns(node))
    wait_links_up(nodes, netns)


def wait_links_up(nodes: Sequence[str], netns: Callable[[str], str]) -> None:
    """Return once every port of every node has its carrier (and forwards, on a bridge).

    The kernel reports a new veth's carrier (and so lets a bridge port forward) through its
    link-watch work, up to a second after 'link set up'; until then the first ARP or SYN is
    dropped and a connection loses a 1 s retransmission timeout.
    """
    waiting = list(nodes)
    deadline = time.monotonic() + LINKS_UP_S
    while True:
        waiting = [n for n in waiting if not _links_up(netns(n))]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise EmuError(f"links of {waiting[:4]} not up after {LINKS_UP_S:g} s")
        time.sleep(0.05)


def _links_up(netns: str) -> bool:
    for link in json.loads(shell.run(["ip", "-n", netns, "-d", "-j", "link", "show"])):
        if link.get("ifname") == "lo":
            continue
        if "LOWER_UP" not in link.get("flags", ()):  # carrier, known at once (operstate lags)
            return False
        port = link.get("linkinfo", {}).get("info_slave_data")
        if port is not None and port.get("state") != "forwarding":
            return False
    return True
