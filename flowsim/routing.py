"""Routing: equal-cost shortest paths between hosts, and ECMP choice among them by a stable hash.

Paths are tuples of link ids (``Topology.links`` indices), in travel order.

Equal cost
    Cost is hop count: every link costs 1 whatever its capacity or latency, as in a data-centre
    fabric running ECMP over a Clos. The equal-cost paths of ``(src, dst)`` are all paths of the
    minimum number of links whose intermediate nodes are switches: **hosts never forward**, so a
    multi-homed host is not a transit node. They are listed in a fixed order, ascending as tuples
    of link ids, so that the i-th path is the same on every run and machine.

ECMP
    A flow's path is ``paths[ecmp_hash(src, dst, port, seed) % len(paths)]``. The hash is
    BLAKE2b (8-byte digest, personalisation ``b"flowsim-ecmp"``) of the compact JSON encoding of
    ``[src, dst, port, seed]``, read as a big-endian unsigned integer. It depends on nothing but
    its arguments (never on Python's per-process salted ``hash()``), so the same 5-tuple takes
    the same path in every process, and different ports of one host pair spread over the paths
    about evenly. This models per-flow hashing over whole paths (like a NIC choosing a source
    port), not per-hop hashing; both pick each shortest path of a symmetric Clos equally often.

Cost and memory
    Nothing is computed for all pairs up front (a 1,024-host fat-tree has a million pairs of up to
    64 paths each). For each destination-side switch the router keeps one breadth-first distance
    map over the switch graph (size: number of switches), and for each requested host pair the
    enumerated paths, in a least-recently-used cache of ``cache_pairs`` entries.
"""

from __future__ import annotations

import hashlib
import json
import numbers
from collections import OrderedDict, deque
from collections.abc import Sequence

from flowsim.errors import RoutingError
from flowsim.topology import Topology

__all__ = ["Path", "Router", "ecmp_hash"]

Path = tuple[int, ...]
"""A path: link ids in travel order."""

_ECMP_PERSON = b"flowsim-ecmp"

# Forwarding state towards one switch: hop distances, and per switch its downhill (link, next).
_Table = tuple[dict[str, int], dict[str, tuple[tuple[int, str], ...]]]


def _check_int(func: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise RoutingError(f"{func}: {name} must be an integer, got {name}={value!r}")
    return int(value)


def ecmp_hash(src: str, dst: str, port: int, seed: int) -> int:
    """The ECMP hash of a flow: a 64-bit integer that depends only on its arguments.

    BLAKE2b with an 8-byte digest and personalisation ``b"flowsim-ecmp"`` over the UTF-8 compact
    JSON text ``["<src>","<dst>",<port>,<seed>]``, read big-endian. JSON makes the encoding
    unambiguous whatever characters node names hold.

    Examples
    --------
    >>> ecmp_hash("h0", "h5", 0, 0) == ecmp_hash("h0", "h5", 0, 0)
    True
    """
    port = _check_int("ecmp_hash", "port", port)
    seed = _check_int("ecmp_hash", "seed", seed)
    key = json.dumps([str(src), str(dst), port, seed], separators=(",", ":")).encode("utf-8")
    digest = hashlib.blake2b(key, digest_size=8, person=_ECMP_PERSON).digest()
    return int.from_bytes(digest, "big")


class _LRU:
    """Path lists by host pair, least recently used dropped first: bounds the router's memory."""

    __slots__ = ("_data", "_maxsize")

    def __init__(self, maxsize: int) -> None:
        self._data: OrderedDict[tuple[str, str], tuple[Path, ...]] = OrderedDict()
        self._maxsize = maxsize

    def get(self, key: tuple[str, str]) -> tuple[Path, ...] | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: tuple[str, str], value: tuple[Path, ...]) -> None:
        self._data[key] = value
        if len(self._data) > self._maxsize:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


class Router:
    """Equal-cost shortest paths of a topology, and the ECMP choice of a flow among them.

    Parameters
    ----------
    topology : Topology
        The fabric to route over.
    seed : int
        Mixed into every ECMP hash; another seed gives another (equally balanced) assignment of
        flows to paths, as re-seeding switch hash functions would.
    cache_pairs : int
        Host pairs whose path lists are kept (least recently used are dropped first).

    Examples
    --------
    >>> from flowsim.topologies import leaf_spine
    >>> router = Router(leaf_spine(2, 2, 2), seed=1)
    >>> len(router.paths("h0", "h2"))
    2
    >>> router.route("h0", "h2", port=7) in router.paths("h0", "h2")
    True
    """

    def __init__(self, topology: Topology, *, seed: int = 0, cache_pairs: int = 4096) -> None:
        if not isinstance(topology, Topology):
            raise RoutingError(f"Router: topology must be a Topology, got {topology!r}")
        self._topology = topology
        self._seed = _check_int("Router", "seed", seed)
        cache_pairs = _check_int("Router", "cache_pairs", cache_pairs)
        if cache_pairs <= 0:
            raise RoutingError(
                f"Router: cache_pairs must be a positive integer, got cache_pairs={cache_pairs}"
            )
        self._links = topology.links
        self._is_switch = {n.name: n.kind == "switch" for n in topology.nodes}
        self._link_ends = [(lk.src, lk.dst) for lk in topology.links]
        # Per node: (link id, neighbour) of outgoing / incoming links. Built once, O(links).
        out: dict[str, list[tuple[int, str]]] = {n.name: [] for n in topology.nodes}
        inn: dict[str, list[tuple[int, str]]] = {n.name: [] for n in topology.nodes}
        for link in self._links:
            out[link.src].append((link.id, link.dst))
            inn[link.dst].append((link.id, link.src))
        self._out = {k: tuple(v) for k, v in out.items()}
        self._in = {k: tuple(v) for k, v in inn.items()}
        self._tables: dict[str, _Table] = {}
        self._paths = _LRU(cache_pairs)
        # Chosen path by (src, dst, port): skips re-hashing a 5-tuple seen before. Bounded like the
        # path cache (oldest entry dropped first); a dropped entry is recomputed identically.
        self._routes: dict[tuple[str, str, int], Path] = {}
        self._routes_max = 4 * cache_pairs
        self._checked: dict[tuple[str, str, Path], Path] = {}

    @property
    def topology(self) -> Topology:
        return self._topology

    @property
    def seed(self) -> int:
        return self._seed

    # -- equal-cost paths ----------------------------------------------------------------------
    def paths(self, src: str, dst: str) -> tuple[Path, ...]:
        """All minimum-hop paths from host ``src`` to host ``dst``, ascending by link ids.

        Computed on first request for the pair and cached.

        Raises
        ------
        UnknownNodeError
            If either name is not in the topology.
        RoutingError
            If an endpoint is a switch, ``src == dst``, or no path through switches exists.
        """
        key = (src, dst)
        cached = self._paths.get(key)
        if cached is not None:
            return cached
        self._check_endpoints(src, dst)
        found = self._enumerate(src, dst)
        self._paths.put(key, found)
        return found

    def route(self, src: str, dst: str, port: int = 0) -> Path:
        """The ECMP path of the flow ``(src, dst, port)`` under this router's seed.

        ``paths(src, dst)[ecmp_hash(src, dst, port, seed) % len(paths)]``; see the module notes.
        """
        memo = type(port) is int  # bool or float ports go the checked way (ecmp_hash rejects)
        key = (src, dst, port)
        if memo:
            hit = self._routes.get(key)
            if hit is not None:
                return hit
        options = self.paths(src, dst)
        if len(options) == 1:
            path = options[0]
        else:
            path = options[ecmp_hash(src, dst, port, self._seed) % len(options)]
        if memo:
            routes = self._routes
            if len(routes) >= self._routes_max:
                del routes[next(iter(routes))]
            routes[key] = path
        return path

    def _check_endpoints(self, src: str, dst: str) -> None:
        topo = self._topology
        for role, name in (("src", src), ("dst", dst)):
            if topo.node(name).kind != "host":  # raises UnknownNodeError for unknown names
                raise RoutingError(
                    f"{role}={name!r} is a switch; only hosts send and receive flows"
                )
        if src == dst:
            raise RoutingError(f"src and dst are both {src!r}; a route needs two different hosts")

    def _table(self, target: str) -> _Table:
        """Forwarding state towards switch ``target``, over switches only, built once and kept.

        Returns the hop distance of every switch that can reach ``target`` and, for each, its
        "downhill" links (those one hop closer), like a switch's ECMP next-hop group. Walking only
        downhill links enumerates the shortest paths without testing any other link.
        """
        table = self._tables.get(target)
        if table is None:
            dist = {target: 0}
            down: dict[str, list[tuple[int, str]]] = {}
            queue = deque([target])
            is_switch = self._is_switch
            inn = self._in
            while queue:
                node = queue.popleft()
                step = dist[node] + 1
                for hop in inn[node]:
                    lid, prev = hop
                    if not is_switch[prev]:
                        continue
                    seen = dist.get(prev)
                    if seen is None:
                        dist[prev] = step
                        queue.append(prev)
                        seen = step
                    if seen == step:
                        down.setdefault(prev, []).append((lid, node))
            table = (dist, {k: tuple(v) for k, v in down.items()})
            self._tables[target] = table
        return table

    def _enumerate(self, src: str, dst: str) -> tuple[Path, ...]:
        # A direct host-host cable is the unique one-hop path (parallel links are not allowed).
        for lid, nxt in self._out[src]:
            if nxt == dst:
                return ((lid,),)
        is_switch = self._is_switch
        firsts = [(lid, sw) for lid, sw in self._out[src] if is_switch[sw]]
        lasts = [(lid, sw) for lid, sw in self._in[dst] if is_switch[sw]]
        best: int | None = None
        combos: list[tuple[int, str, int, str]] = []
        for last_lid, last_sw in lasts:
            dist = self._table(last_sw)[0]
            for first_lid, first_sw in firsts:
                d = dist.get(first_sw)
                if d is None:
                    continue
                if best is None or d < best:
                    best, combos = d, []
                if d == best:
                    combos.append((first_lid, first_sw, last_lid, last_sw))
        if best is None:
            raise RoutingError(
                f"no route from {src!r} to {dst!r} through switches (hosts do not forward)"
            )
        found: list[Path] = []
        for first_lid, first_sw, last_lid, last_sw in combos:
            down = self._table(last_sw)[1]
            # Depth-first over downhill links only: every branch reaches last_sw.
            stack: list[tuple[str, Path]] = [(first_sw, (first_lid,))]
            while stack:
                node, prefix = stack.pop()
                if node == last_sw:
                    found.append((*prefix, last_lid))
                    continue
                for lid, nxt in down[node]:
                    stack.append((nxt, (*prefix, lid)))
        found.sort()
        return tuple(found)

    # -- explicit paths ------------------------------------------------------------------------
    def check_path(self, src: str, dst: str, path: Sequence[int]) -> Path:
        """Validate an explicit path of link ids from ``src`` to ``dst``; return it as a tuple.

        The path need not be a shortest one, but it must be a simple path: non-empty, made of
        known link ids, contiguous, starting at ``src``, ending at ``dst``, visiting no node twice
        and crossing only switches in between (hosts do not forward).

        Raises
        ------
        RoutingError
            Naming the first problem found.
        """
        # Paths checked before are returned from a bounded memo (replayed workloads repeat
        # them); a list or tuple of plain ints takes a fast pass; anything else, and any path
        # the fast pass rejects, the careful one that names the problem.
        if type(path) is tuple or type(path) is list:
            key = (src, dst, tuple(path))
            hit = self._checked.get(key)
            # (True == 1 with the same hash, so a hit must still be made of plain ints.)
            if hit is not None and all(type(lid) is int for lid in key[2]):
                return hit
            result = self._fast_check(src, dst, key[2])
            if result is not None:
                checked = self._checked
                if len(checked) >= self._routes_max:
                    del checked[next(iter(checked))]
                checked[key] = result
                return result
        return self._check_path(src, dst, path)

    def _fast_check(self, src: str, dst: str, path: tuple) -> Path | None:
        """``path`` if it is valid and made of plain ints, else None (the careful check decides)."""
        is_switch = self._is_switch
        if src == dst or is_switch.get(src, True) or is_switch.get(dst, True) or not path:
            return None
        ends = self._link_ends
        n_links = len(ends)
        at = src
        seen = {src}
        for lid in path:
            if type(lid) is not int or not 0 <= lid < n_links:
                return None
            a, b = ends[lid]
            if a != at or (a != src and not is_switch[a]) or b in seen:
                return None
            seen.add(b)
            at = b
        return path if at == dst else None

    def _check_path(self, src: str, dst: str, path: Sequence[int]) -> Path:
        self._check_endpoints(src, dst)
        if isinstance(path, str | bytes) or not isinstance(path, Sequence):
            raise RoutingError(
                f"path must be a sequence of link ids, got {type(path).__name__} {path!r}"
            )
        if len(path) == 0:
            raise RoutingError(f"path from {src!r} to {dst!r} is empty; expected link ids")
        links = self._links
        ids: list[int] = []
        for i, lid in enumerate(path):
            if (
                isinstance(lid, bool)
                or not isinstance(lid, numbers.Integral)
                or not 0 <= lid < len(links)
            ):
                raise RoutingError(
                    f"path[{i}]={lid!r} is not a link id of this topology; expected an integer "
                    f"in [0, {len(links)})"
                )
            ids.append(int(lid))
        first = links[ids[0]]
        if first.src != src:
            raise RoutingError(
                f"path starts with link {ids[0]} ({first.src!r} -> {first.dst!r}), which does not "
                f"leave src={src!r}"
            )
        seen = {src}
        for prev_id, lid in zip(ids, ids[1:], strict=False):
            prev, link = links[prev_id], links[lid]
            if link.src != prev.dst:
                raise RoutingError(
                    f"path is not contiguous: link {prev_id} ends at {prev.dst!r} but the next "
                    f"link {lid} starts at {link.src!r}"
                )
            if not self._is_switch[link.src]:
                raise RoutingError(
                    f"path passes through host {link.src!r} (link {prev_id} -> {lid}); "
                    f"hosts do not forward"
                )
            seen.add(link.src)
            if link.dst in seen:
                raise RoutingError(f"path visits node {link.dst!r} twice (at link {lid})")
        last = links[ids[-1]]
        if last.dst != dst:
            raise RoutingError(
                f"path ends with link {ids[-1]} ({last.src!r} -> {last.dst!r}), which does not "
                f"reach dst={dst!r}"
            )
        return tuple(ids)

    def path_nodes(self, path: Sequence[int]) -> tuple[str, ...]:
        """The nodes a path of link ids visits, from its source to its destination."""
        if len(path) == 0:
            return ()
        links = self._links
        return (links[path[0]].src, *(links[lid].dst for lid in path))
