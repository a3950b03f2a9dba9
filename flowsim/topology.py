"""Topologies as plain, immutable data: nodes (hosts and switches) and directed links.

A :class:`Topology` is a description, kept apart from any running simulation (as Mininet keeps
``Topo`` apart from the network it starts). Builders for common fabrics live in
:mod:`flowsim.topologies`; routing over a topology lives in :mod:`flowsim.routing`.

Links are directed: a full-duplex cable is two links, one each way. Each link has an integer id
equal to its index in ``Topology.links``; the engine and the solver index arrays by these ids.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Literal

from flowsim.errors import TopologyError, UnknownLinkError, UnknownNodeError

NodeKind = Literal["host", "switch"]
_NODE_KINDS = ("host", "switch")


@dataclass(frozen=True, slots=True)
class Node:
    """A host (a traffic endpoint) or a switch (forwards only)."""

    name: str
    kind: NodeKind


@dataclass(frozen=True, slots=True)
class Link:
    """A directed link ``src -> dst`` with its id (index in ``Topology.links``)."""

    id: int
    src: str
    dst: str
    capacity_bps: float
    latency_s: float


@dataclass(frozen=True, slots=True)
class Topology:
    """An immutable network description.

    Parameters
    ----------
    nodes : sequence of Node
        Unique names. Only hosts may send or receive flows.
    links : sequence of Link
        Directed links; ``links[i].id`` must equal ``i``. Capacities must be positive and finite
        (a link that is down is modelled at run time by a capacity change, not here); latencies
        non-negative.
    name : str
        A label for tables and plots.

    Raises
    ------
    TopologyError
        On duplicate names, bad ids, non-positive capacity, negative latency, a link touching an
        unknown node, parallel links, or hosts that cannot reach each other.
    """

    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    name: str = ""
    _node_index: dict[str, Node] = field(init=False, repr=False, compare=False)
    _link_by_pair: dict[tuple[str, str], int] = field(init=False, repr=False, compare=False)
    _out_links: dict[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        nodes = tuple(self.nodes)
        links = tuple(self.links)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "links", links)
        index: dict[str, Node] = {}
        for node in nodes:
            if not isinstance(node, Node):
                raise TopologyError(f"Topology: nodes must be Node objects, got {node!r}")
            if node.kind not in _NODE_KINDS:
                raise TopologyError(
                    f"Topology: node {node.name!r} has kind={node.kind!r}, expected one of "
                    f"{_NODE_KINDS}"
                )
            if node.name in index:
                raise TopologyError(f"Topology: duplicate node name {node.name!r}")
            index[node.name] = node
        by_pair: dict[tuple[str, str], int] = {}
        out: dict[str, list[int]] = {name: [] for name in index}
        for i, link in enumerate(links):
            if link.id != i:
                raise TopologyError(f"Topology: link at index {i} has id={link.id}, expected {i}")
            for end in (link.src, link.dst):
                if end not in index:
                    raise UnknownNodeError(
                        f"Topology: link {i} ({link.src!r} -> {link.dst!r}) names unknown node "
                        f"{end!r}"
                    )
            if link.src == link.dst:
                raise TopologyError(f"Topology: link {i} is a self-loop on {link.src!r}")
            if not (math.isfinite(link.capacity_bps) and link.capacity_bps > 0):
                raise TopologyError(
                    f"Topology: link {i} ({link.src!r} -> {link.dst!r}) has "
                    f"capacity_bps={link.capacity_bps!r}, expected a positive finite number"
                )
            if not (math.isfinite(link.latency_s) and link.latency_s >= 0):
                raise TopologyError(
                    f"Topology: link {i} ({link.src!r} -> {link.dst!r}) has "
                    f"latency_s={link.latency_s!r}, expected a non-negative finite number"
                )
            pair = (link.src, link.dst)
            if pair in by_pair:
                raise TopologyError(
                    f"Topology: parallel links {by_pair[pair]} and {i} both go "
                    f"{link.src!r} -> {link.dst!r}; merge them into one link of the summed capacity"
                )
            by_pair[pair] = i
            out[link.src].append(i)
        object.__setattr__(self, "_node_index", index)
        object.__setattr__(self, "_link_by_pair", by_pair)
        object.__setattr__(self, "_out_links", {k: tuple(v) for k, v in out.items()})
        self._check_hosts_connected()

    def _check_hosts_connected(self) -> None:
        hosts = self.hosts
        if len(hosts) < 2:
            return
        # Every host must reach every other host along directed links (one BFS per host would be
        # quadratic; instead check strong connectivity of the subgraph reachable from the hosts).
        import networkx as nx

        graph = nx.DiGraph()
        graph.add_nodes_from(self._node_index)
        graph.add_edges_from((link.src, link.dst) for link in self.links)
        reach = nx.descendants(graph, hosts[0]) | {hosts[0]}
        back = nx.ancestors(graph, hosts[0]) | {hosts[0]}
        for host in hosts:
            if host not in reach or host not in back:
                raise TopologyError(
                    f"Topology: host {host!r} is disconnected from host {hosts[0]!r}; "
                    f"every host must reach every other host in both directions"
                )

    # -- lookups -------------------------------------------------------------------------------
    @property
    def hosts(self) -> tuple[str, ...]:
        """Host names in declaration order."""
        return tuple(n.name for n in self.nodes if n.kind == "host")

    @property
    def switches(self) -> tuple[str, ...]:
        """Switch names in declaration order."""
        return tuple(n.name for n in self.nodes if n.kind == "switch")

    def node(self, name: str) -> Node:
        """The node called ``name``; raises :class:`UnknownNodeError` if there is none."""
        try:
            return self._node_index[name]
        except KeyError:
            raise UnknownNodeError(f"unknown node {name!r}; {self._known_nodes_hint()}") from None

    def has_node(self, name: str) -> bool:
        return name in self._node_index

    def is_host(self, name: str) -> bool:
        return self.node(name).kind == "host"

    def link(self, src: str, dst: str) -> Link:
        """The directed link ``src -> dst``."""
        try:
            return self.links[self._link_by_pair[(src, dst)]]
        except KeyError:
            self.node(src)
            self.node(dst)
            raise UnknownLinkError(f"no link {src!r} -> {dst!r}") from None

    def link_by_id(self, link_id: int) -> Link:
        if not (isinstance(link_id, int) and 0 <= link_id < len(self.links)):
            raise UnknownLinkError(
                f"unknown link id {link_id!r}; expected an integer in [0, {len(self.links)})"
            )
        return self.links[link_id]

    def out_links(self, name: str) -> tuple[int, ...]:
        """Ids of the links leaving ``name``."""
        self.node(name)
        return self._out_links[name]

    def _known_nodes_hint(self) -> str:
        hosts = self.hosts
        sample = ", ".join(repr(h) for h in hosts[:3])
        return f"the topology has {len(hosts)} hosts ({sample}{', ...' if len(hosts) > 3 else ''})"

    # -- construction helpers ------------------------------------------------------------------
    @classmethod
    def from_lists(
        cls,
        hosts: list[str] | tuple[str, ...],
        switches: list[str] | tuple[str, ...],
        links: list[tuple[str, str, float, float]] | tuple[tuple[str, str, float, float], ...],
        *,
        duplex: bool = True,
        name: str = "",
    ) -> Topology:
        """Build a topology from explicit node and link lists.

        ``links`` holds ``(a, b, capacity_bps, latency_s)``; with ``duplex=True`` (default) each
        entry makes two directed links, ``a -> b`` then ``b -> a``.
        """
        nodes = [Node(h, "host") for h in hosts] + [Node(s, "switch") for s in switches]
        out: list[Link] = []
        for entry in links:
            if len(entry) != 4:
                raise TopologyError(
                    f"Topology.from_lists: link entry {entry!r} must be (a, b, capacity_bps, "
                    f"latency_s)"
                )
            a, b, cap, lat = entry
            out.append(Link(len(out), a, b, float(cap), float(lat)))
            if duplex:
                out.append(Link(len(out), b, a, float(cap), float(lat)))
        return cls(tuple(nodes), tuple(out), name=name)

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "flowsim-topology/1",
            "name": self.name,
            "nodes": [[n.name, n.kind] for n in self.nodes],
            "links": [[lk.src, lk.dst, lk.capacity_bps, lk.latency_s] for lk in self.links],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Topology:
        if not isinstance(data, dict) or data.get("format") != "flowsim-topology/1":
            got = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise TopologyError(
                f"Topology.from_dict: expected format 'flowsim-topology/1', got {got!r}"
            )
        try:
            nodes = tuple(Node(str(name), kind) for name, kind in data["nodes"])
            links = tuple(
                Link(i, str(s), str(d), float(c), float(lat))
                for i, (s, d, c, lat) in enumerate(data["links"])
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TopologyError(f"Topology.from_dict: malformed topology data ({exc})") from None
        return cls(nodes, links, name=str(data.get("name", "")))

    def save(self, path: str | PathLike[str]) -> None:
        """Write the topology as JSON."""
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.to_dict(), fh, indent=1)

    @classmethod
    def load(cls, path: str | PathLike[str]) -> Topology:
        """Read a topology written by :meth:`save`."""
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # bad text or not text at all
            raise TopologyError(f"Topology.load: {str(path)!r} is not valid JSON ({exc})") from None
        return cls.from_dict(data)
