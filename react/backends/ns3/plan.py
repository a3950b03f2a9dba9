"""A topology as the ns-3 child's plain-number world: cables, routes, TCP defaults, background.

Pure Python (no ns-3): everything here is checked, and every unsupported feature refused with an
:class:`~react.backends.ns3.errors.Ns3UnsupportedError`, before a child process is started.

- **Nodes**: hosts are numbered ``0 .. H-1`` in the topology's host order (host ``i`` has the
  address 10.0.0.0 + i + 1), switches after them. Every host must hang on exactly one cable
  (the star, leaf-spine, fat-tree and Alibaba builders all do).
- **Cables**: flowsim's two directed links ``a -> b`` and ``b -> a`` become one ns-3
  point-to-point cable whose two devices transmit at the two links' capacities; both directions
  must have the same latency (an ns-3 channel has one delay).
- **Routes**: every flow (and its ACKs) follows the path flowsim's ECMP gives its
  ``(src, dst, port)`` (:meth:`flowsim.routing.Router.route`); the child's per-switch table maps
  ``(switch, src, dst, port)`` to the output interface of that path's next link.
- **Time**: ns-3 time = scenario time + ``warmup_s``, except that background flows starting at
  scenario time 0 start at ns-3 time 0, so that DCTCP has settled when the first epoch begins
  (as in the reference measurements: the collective starts 1 ms after the long-lived flows).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from flowsim.routing import Router
from flowsim.topology import Topology
from react.backends.ns3.errors import Ns3UnsupportedError
from react.backends.ns3.spec import Ns3Spec

__all__ = ["MAX_PORT", "Fabric", "tcp_defaults"]

MAX_PORT = 39_151
"""Largest scenario port: connection ``port`` listens on TCP port 10000 + port, below ns-3's
ephemeral range (49152 and up)."""

MAX_NODES = 65_535


@dataclass(frozen=True, slots=True)
class Fabric:
    """A topology as ns-3 nodes and cables, and the router that picks every flow's path."""

    topology: Topology
    index: dict[str, int]
    cables: tuple[tuple[int, int, float, float, float], ...]
    side: dict[int, tuple[int, int]]  # flowsim link id -> (cable, 0 for a->b or 1 for b->a)
    router: Router

    @classmethod
    def build(cls, topology: Topology, seed: int) -> Fabric:
        nodes = list(topology.hosts) + list(topology.switches)
        if len(nodes) > MAX_NODES:
            raise Ns3UnsupportedError(
                f"ns-3 backend: the topology has {len(nodes):,} nodes; at most {MAX_NODES:,} "
                "are supported")
        index = {name: i for i, name in enumerate(nodes)}
        cables: list[tuple[int, int, float, float, float]] = []
        side: dict[int, tuple[int, int]] = {}
        for link in topology.links:
            if link.id in side:
                continue
            try:
                back = topology.link(link.dst, link.src)
            except Exception:
                raise Ns3UnsupportedError(
                    f"ns-3 backend: link {link.src}->{link.dst} has no reverse link; ns-3 "
                    "cables are full duplex") from None
            if back.latency_s != link.latency_s:
                raise Ns3UnsupportedError(
                    f"ns-3 backend: the cable {link.src}<->{link.dst} has latencies "
                    f"{link.latency_s:g} s and {back.latency_s:g} s; an ns-3 channel has one")
            side[link.id] = (len(cables), 0)
            side[back.id] = (len(cables), 1)
            cables.append((index[link.src], index[link.dst], link.capacity_bps,
                           back.capacity_bps, link.latency_s))
        for host in topology.hosts:
            count = len(topology.out_links(host))
            if count != 1:
                raise Ns3UnsupportedError(
                    f"ns-3 backend: host {host} has {count} links; the ns-3 backend supports "
                    "single-homed hosts only")
        return cls(topology, index, tuple(cables), side, Router(topology, seed=seed))

    @property
    def hosts(self) -> int:
        return len(self.topology.hosts)

    @property
    def switches(self) -> int:
        return len(self.topology.switches)

    def routes(self, pairs: Iterable[tuple[str, str, int]], done: set[tuple[str, str, int]]
               ) -> list[list[int]]:
        """Table entries for each ``(src, dst, port)`` not in ``done`` (added to it), both ways.

        An entry is ``[switch, src host, dst host, port, cable, side]``.
        """
        out: list[list[int]] = []
        for src, dst, port in pairs:
            for a, b in ((src, dst), (dst, src)):
                key = (a, b, port)
                if key in done:
                    continue
                done.add(key)
                ia, ib = self.index[a], self.index[b]
                for link_id in self.router.route(a, b, port):
                    node = self.index[self.topology.links[link_id].src]
                    if node < self.hosts:
                        continue  # a host has one interface and needs no table
                    out.append([node, ia, ib, port, *self.side[link_id]])
        return out

    def cable_of(self, src: str, dst: str) -> tuple[int, int]:
        """``(cable, side)`` of the directed link ``src -> dst``."""
        return self.side[self.topology.link(src, dst).id]


def tcp_defaults(spec: Ns3Spec) -> dict[str, str]:
    """ns-3 attribute defaults for datacenter DCTCP with RED/ECN switches (module docstring).

    Delayed ACKs acknowledge every second segment or after 10 µs; the SYN timeout, the first RTO
    and the minimum RTO are a millisecond, not ns-3's wide-area seconds.
    """
    defaults = {
        "ns3::TcpL4Protocol::SocketType": "ns3::TcpDctcp",
        "ns3::TcpSocket::SegmentSize": str(spec.segment_bytes),
        "ns3::TcpSocket::SndBufSize": str(4 << 20),
        "ns3::TcpSocket::RcvBufSize": str(4 << 20),
        "ns3::TcpSocket::InitialCwnd": "10",
        "ns3::TcpSocket::DelAckCount": "2",
        "ns3::TcpSocket::DelAckTimeout": "10us",
        "ns3::TcpSocket::ConnTimeout": f"{spec.min_rto_s:.9g}s",
        "ns3::TcpSocketBase::MinRto": f"{spec.min_rto_s:.9g}s",
        "ns3::TcpSocketBase::ClockGranularity": "1us",
        "ns3::RttEstimator::InitialEstimation": "100us",
        "ns3::TcpDctcp::DctcpShiftG": repr(spec.dctcp_g),
        "ns3::RedQueueDisc::UseEcn": "true",
        "ns3::RedQueueDisc::UseHardDrop": "false",
        "ns3::RedQueueDisc::QW": "1",
        "ns3::RedQueueDisc::MeanPktSize": str(spec.segment_bytes + 52),
        "ns3::RedQueueDisc::MinTh": str(spec.red_min_packets),
        "ns3::RedQueueDisc::MaxTh": str(spec.red_max_packets),
        "ns3::RedQueueDisc::MaxSize": f"{spec.buffer_packets}p",
    }
    defaults.update(spec.attributes)
    return defaults
