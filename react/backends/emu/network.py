"""EmuNetwork: a flowsim Topology built as Linux network namespaces, torn down whatever happens.

Hosts are namespaces with one veth (``eth0``). A star's switch is a Linux bridge in its own
namespace; in any fabric with several switches every switch is a router namespace with kernel
multipath routes hashed on the five-tuple (:mod:`react.backends.emu.build` says why not policy 1),
so a connection's source port picks its path, as flowsim's ECMP does. Every directed link is shaped
on its sending port (:mod:`react.backends.emu.tc`) at the topology's capacity times ``scale`` and
every veth has ``gso_max_segs`` capped (GSO stays on: without it 2 cores become the bottleneck; with
64 KB super-packets short transfers starve). What is built is planned first as data
(:mod:`react.backends.emu.plan`), then made by :mod:`react.backends.emu.build`.

The network is built in ``__init__`` and removed by ``close()`` (also on ``with`` exit, on a
failed build, at interpreter exit and on SIGINT/SIGTERM, :mod:`react.backends.emu.cleanup`).
Processes started with :meth:`EmuNetwork.popen` are killed on close, and so is anything else
left inside the namespaces.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import subprocess
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flowsim.topology import Topology
from flowsim.traffic import source_seed
from react.backends.emu import cleanup, shell, tc, traffic
from react.backends.emu.build import HASH_SEED, build
from react.backends.emu.errors import EmuError, EmuInputError
from react.backends.emu.limits import line_rate_hosts, max_hosts
from react.backends.emu.names import HOST_IFNAME, check_prefix, netns_name, new_run_prefix
from react.backends.emu.plan import Egress, Plan, default_queue_bytes, plan_network

LOW_PORT_OFFSET = 20000
"""A background port ``p < 1024`` is served on ``LOW_PORT_OFFSET + p`` (rank ports: 29500+)."""

MAX_BACKGROUND_S = 3600.0
"""Longest a background sender may run, seconds."""

KILL_WAIT_S = 1.0



@dataclass(frozen=True, slots=True)
class Background:
    """A running background flow: its sender and sink processes (killed on close)."""

    kind: str
    src: str
    dst: str
    port: int
    sender: subprocess.Popen
    sink: subprocess.Popen


class EmuNetwork:
    """A topology emulated with namespaces, veth links, bridges or routers, and tc shapers.

    Parameters
    ----------
    topology : flowsim.topology.Topology
        The network to build; hosts must have exactly one cable.
    hosts : sequence of str, optional
        Hosts actually used (ranks and background endpoints). Only they and the switches on
        shortest paths between them are built. Default: every host.
    link_rate_bps : float
        Emulated rate of the topology's fastest link; every capacity scales by the same
        factor (:attr:`scale`). 100-500 Mbit/s keeps two cores from being the bottleneck.
    prefix : str, optional
        Run prefix (``rct`` + up to 16 lower-case letters/digits); default a fresh unique one.
    queue_bytes : int, optional
        bfifo limit of every shaped port; default 12 ms at the port's rate.
    gso_max_segs : int
        Cap on the segments of one GSO super-packet on every veth.
    fair_share : bool
        Give every source host its own round-robin class on switch ports (max-min sharing, as
        flowsim assumes); off: one FIFO per port, where TCP dynamics decide the shares.
    ecmp_seed : int, optional
        Seed of every router's multipath hash (``net.ipv4.fib_multipath_hash_seed``, Linux
        >= 6.11), so that a given five-tuple takes the same path in every run; default: a
        random seed per router, as the kernel does.

    Raises
    ------
    EmuError
        Not root, iproute2 missing, more hosts than :func:`max_hosts`, the prefix already in
        use, or a command that failed (nothing is left behind).
    EmuInputError
        An unknown host, bad rate, queue or prefix (raised before anything is created).
    """

    def __init__(self, topology: Topology, *, hosts: Sequence[str] | None = None,
                 link_rate_bps: float = 200e6, prefix: str | None = None,
                 queue_bytes: int | None = None, gso_max_segs: int = 8,
                 fair_share: bool = True, ecmp_seed: int | None = None) -> None:
        if isinstance(gso_max_segs, bool) or not isinstance(gso_max_segs, int) or not (
            1 <= gso_max_segs <= 65535
        ):
            raise EmuInputError(f"gso_max_segs must be an integer in [1, 65535], "
                                f"got {gso_max_segs!r}")
        if ecmp_seed is not None:
            _check_int("ecmp_seed", ecmp_seed, 1, 2**32 - 1)
            if not os.path.exists(f"/proc/sys/{HASH_SEED.replace('.', '/')}"):
                raise EmuError(f"ecmp_seed needs {HASH_SEED} (Linux >= 6.11); this kernel is "
                               f"{os.uname().release}")
        self.plan: Plan = plan_network(topology, hosts, link_rate_bps=link_rate_bps,
                                       queue_bytes=queue_bytes, fair_share=fair_share)
        limit = max_hosts()
        if len(self.plan.hosts) > limit:
            raise EmuError(
                f"{len(self.plan.hosts)} hosts requested but this machine can emulate at most "
                f"{limit} (see react.backends.emu.limits or 'react emu info'); pass only the "
                "hosts the run uses"
            )
        if len(self.plan.hosts) > line_rate_hosts(link_rate_bps):
            warnings.warn(
                f"{len(self.plan.hosts)} hosts at {link_rate_bps / 1e6:g} Mbit/s: if more than "
                f"{line_rate_hosts(link_rate_bps)} send at once the CPU, not the emulated links, "
                "limits their rates (see react.backends.emu.limits)", RuntimeWarning, stacklevel=2)
        shell.require()
        self.topology = topology
        self.prefix = check_prefix(prefix) if prefix is not None else new_run_prefix()
        taken = [n for n in cleanup.list_namespaces() if n.startswith(self.prefix + "-")]
        if taken:
            raise EmuError(f"prefix {self.prefix!r} is in use by namespaces {taken[:3]}; "
                           f"pick another or run 'react emu clean' if that run is dead")
        self._queue_bytes = queue_bytes
        self._neighbour: dict[tuple[str, str], str] = {}  # (node, port) -> node at its end
        for c in self.plan.cables:
            self._neighbour[(c.a, c.a_ifname)] = c.b
            self._neighbour[(c.b, c.b_ifname)] = c.a
        self._port = {(n, peer): ifname for (n, ifname), peer in self._neighbour.items()}
        self._rates = {k: e.rate_bps for k, e in self.plan.egress.items()}
        self._procs: list[subprocess.Popen] = []
        self.background: list[Background] = []
        self._closed = False
        # popen vs close from timer threads; re-entrant: a signal handler may close the network
        # while this thread is inside popen
        self._lock = threading.RLock()
        self._owner_pid = os.getpid()  # a forked child must never tear its parent's network down
        self.setup_s = math.nan
        self.teardown_s = math.nan
        cleanup.register(self)
        start = time.monotonic()
        try:
            build(self.plan, self.netns, gso_max_segs=gso_max_segs, ecmp_seed=ecmp_seed)
        except BaseException:
            self.close()
            raise
        self.setup_s = time.monotonic() - start

    # -- lookups ---------------------------------------------------------------------------------
    @property
    def scale(self) -> float:
        """Emulated bit/s per topology bit/s."""
        return self.plan.scale

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts built, in topology order."""
        return self.plan.hosts

    def _check_node(self, node: str, *, host: bool = False) -> str:
        known = self.plan.hosts if host else self.plan.nodes
        if node not in known:
            sample = ", ".join(known[:6]) + (", ..." if len(known) > 6 else "")
            raise EmuInputError(f"unknown {'host' if host else 'node'} {node!r}; this network "
                                f"built {sample}")
        return node

    def netns(self, host: str) -> str:
        """Name of the namespace of ``host`` (any built node, switches too)."""
        return netns_name(self.prefix, self._check_node(host))

    def host_ip(self, host: str) -> str:
        """IPv4 address of ``host`` (on its interface ``eth0``)."""
        return self.plan.host_ips[self._check_node(host, host=True)]

    def _egress(self, src: str, dst: str) -> Egress:
        try:
            return self.plan.egress[(src, dst)]
        except KeyError:
            self._check_node(src)
            self._check_node(dst)
            raise EmuInputError(f"no link {src!r} -> {dst!r} in this network") from None

    def link_rate_bps(self, src: str, dst: str) -> float:
        """Current emulated rate of the directed link ``src -> dst``, bit/s."""
        self._egress(src, dst)
        return self._rates[(src, dst)]

    # -- running things --------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise EmuError(f"network {self.prefix} is closed")

    def popen(self, host: str, argv: list[str], **popen_kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` inside ``host``'s namespace; it is killed on :meth:`close`.

        Thread-safe (timers may start background flows): once :meth:`close` has begun, no new
        process starts.
        """
        netns = self.netns(host)
        with self._lock:
            self._check_open()
            proc = subprocess.Popen(["ip", "netns", "exec", netns, *argv], **popen_kwargs)
            self._procs.append(proc)
        return proc

    def path(self, src: str, dst: str, *, src_port: int, dst_port: int) -> tuple[str, ...]:
        """Nodes a TCP packet ``src:src_port -> dst:dst_port`` crosses, as the kernel routes
        it now (``ip route get`` in every router on the way: the ECMP choice, without traffic).
        """
        self._check_open()
        self._check_node(src, host=True)
        self._check_node(dst, host=True)
        if src == dst:
            raise EmuInputError(f"path needs two different hosts, got {src!r} twice")
        _check_int("src_port", src_port, 1, 65535)
        _check_int("dst_port", dst_port, 1, 65535)
        hops = [src, self._neighbour[(src, HOST_IFNAME)]]
        while hops[-1] != dst:
            node, prev = hops[-1], hops[-2]
            if self.plan.mode == "bridge":
                hops.append(dst)
                break
            out = shell.run(["ip", "-n", self.netns(node), "-j", "route", "get",
                             self.host_ip(dst), "from", self.host_ip(src), "iif",
                             self._port[(node, prev)], "ipproto", "tcp", "sport", str(src_port),
                             "dport", str(dst_port)])
            hops.append(self._neighbour[(node, json.loads(out)[0]["dev"])])
            if len(hops) > len(self.plan.nodes):
                raise EmuError(f"routing loop from {src} to {dst}: {hops}")
        return tuple(hops)

    def set_link_capacity(self, src: str, dst: str, capacity_bps: float) -> None:
        """Change the capacity of link ``src -> dst`` (topology units) now, mid-run.

        Capacity 0 is a failed link (as flowsim's failures at 0 bps): it stays up and routed
        but drops every packet, so connections on it stall until the capacity comes back (TCP
        then resumes at its next retransmission). The queue follows the new rate unless
        ``queue_bytes`` was fixed.
        """
        self._check_open()
        egress = self._egress(src, dst)
        if isinstance(capacity_bps, bool) or not isinstance(capacity_bps, numbers.Real) or not (
            math.isfinite(capacity_bps) and capacity_bps >= 0
        ):
            raise EmuInputError(f"capacity_bps must be a finite number >= 0, got "
                                f"capacity_bps={capacity_bps!r} for link {src!r} -> {dst!r}")
        rate = float(capacity_bps) * self.scale
        if rate == 0:
            lines = tc.down_lines(egress.ifname, egress.buckets)
        else:
            queue = self._queue_bytes or default_queue_bytes(rate)
            lines = tc.change_lines(egress.ifname, rate, queue, egress.buckets)
        shell.batch("tc", lines, netns=self.netns(src))
        self._rates[(src, dst)] = rate

    def link_tx_bytes(self, src: str, dst: str) -> int:
        """Bytes sent so far on the directed link ``src -> dst``: the tx counter of ``src``'s
        port, whole frames (Ethernet, IP and TCP headers included; about 1514/1448 of the
        payload for bulk TCP)."""
        self._check_open()
        egress = self._egress(src, dst)
        out = shell.run(["ip", "-n", self.netns(src), "-s", "-j", "link", "show", "dev",
                         egress.ifname])
        return int(json.loads(out)[0]["stats64"]["tx"]["bytes"])

    def tx_bytes(self) -> dict[tuple[str, str], int]:
        """:meth:`link_tx_bytes` of every directed link, one ``ip`` call per namespace."""
        self._check_open()
        out: dict[tuple[str, str], int] = {}
        for node in self.plan.nodes:
            stats = shell.run(["ip", "-n", self.netns(node), "-s", "-j", "link", "show"])
            for link in json.loads(stats):
                peer = self._neighbour.get((node, link["ifname"]))
                if peer is not None:
                    out[(node, peer)] = int(link["stats64"]["tx"]["bytes"])
        return out

    def start_background(self, kind: str, src: str, dst: str, *, port: int, duration_s: float,
                         max_bytes: int, size_bytes: float | None = None,
                         period_s: float | None = None, mean_on_s: float | None = None,
                         mean_off_s: float | None = None, seed: int = 0) -> Background:
        """Start a background flow ``src -> dst``: a sink on ``dst:port``, then the sender.

        Kinds as flowsim's (:mod:`flowsim.traffic`), each on one TCP connection (one path):
        ``long_lived`` sends as fast as it can; ``periodic_bulk`` sends ``size_bytes`` due
        every ``period_s``, each no earlier than the previous one's delivery (the sink acks
        it); ``poisson_on_off`` alternates exponential off and on periods (means
        ``mean_off_s``, ``mean_on_s``) drawn from flowsim's own seed for the source
        (:func:`flowsim.traffic.source_seed` of ``seed, src, dst, port``), sending during on
        periods (pass the simulator's ``seed`` and ``port`` for the simulator's periods: the
        scenario seed plus the source's index, and ``port + k``). Bounded in time
        (``duration_s``, at most :data:`MAX_BACKGROUND_S`) and bytes (``max_bytes``).

        ``port`` is the sink's TCP port; a port below 1024 (flowsim's ECMP port numbers, whose
        default is 0, name reserved system ports here) is served on :data:`LOW_PORT_OFFSET` +
        ``port``, which the returned record shows. ``size_bytes`` may be a float (scenario
        files give floats); it is rounded. Returns once the sink listens; raises
        :class:`EmuError` if it cannot (port taken). Both processes are killed on
        :meth:`close`.
        """
        self._check_open()
        if kind not in traffic.KINDS:
            raise EmuInputError(f"kind must be one of {traffic.KINDS}, got kind={kind!r}")
        self._check_node(src, host=True)
        self._check_node(dst, host=True)
        if src == dst:
            raise EmuInputError(f"background src and dst must differ, got {src!r} twice")
        _check_int("port", port, 0, 65535)
        flowsim_port = port  # what flowsim's source_seed hashes
        if port < 1024:
            port += LOW_PORT_OFFSET
        _check_int("max_bytes", max_bytes, 1, None)
        _check_seconds("duration_s", duration_s, MAX_BACKGROUND_S)
        needs = {"periodic_bulk": {"size_bytes": size_bytes, "period_s": period_s},
                 "poisson_on_off": {"mean_on_s": mean_on_s, "mean_off_s": mean_off_s}}
        for name, value in needs.get(kind, {}).items():
            if value is None:
                raise EmuInputError(f"{kind} needs {' and '.join(needs[kind])}, got "
                                    f"{name}=None")
            if name == "size_bytes":
                if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
                    math.isfinite(value) and round(value) >= 1
                ):
                    raise EmuInputError(f"size_bytes must be a positive number of bytes, got "
                                        f"size_bytes={value!r}")
            else:
                _check_seconds(name, value, None)
        _check_int("seed", seed, 0, None)
        size = None if size_bytes is None else round(size_bytes)
        ack = size if kind == "periodic_bulk" else None
        # the sink stops when the sender's byte budget arrived, or a second after its end
        sink = self.popen(dst, traffic.sink_argv(port, float(duration_s) + 1.0, max_bytes, ack),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        traffic.wait_ready(sink, f"background sink on {dst}:{port}")
        sender = self.popen(src, traffic.sender_argv(
            kind, self.host_ip(dst), port, duration_s=float(duration_s), max_bytes=max_bytes,
            size_bytes=size, period_s=_float(period_s), mean_on_s=_float(mean_on_s),
            mean_off_s=_float(mean_off_s),
            seed=source_seed(seed, src, dst, flowsim_port) if kind == "poisson_on_off" else None),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        bg = Background(kind, src, dst, port, sender, sink)
        self.background.append(bg)
        return bg

    # -- teardown --------------------------------------------------------------------------------
    def close(self) -> None:
        """Kill every process started here, delete every namespace. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if os.getpid() != self._owner_pid:
            return
        start = time.monotonic()
        try:
            for proc in self._procs:
                if proc.poll() is None:
                    proc.terminate()
            for proc in self._procs:
                try:
                    proc.wait(timeout=KILL_WAIT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=KILL_WAIT_S)
                for stream in (proc.stdout, proc.stderr, proc.stdin):
                    if stream is not None:
                        stream.close()
            ours = [n for n in cleanup.list_namespaces() if n.startswith(self.prefix + "-")]
            cleanup.delete_namespaces(ours)
        finally:
            cleanup.unregister(self)
            self.teardown_s = time.monotonic() - start

    def __enter__(self) -> EmuNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "up"
        return (f"EmuNetwork({self.topology.name!r}, prefix={self.prefix!r}, "
                f"{len(self.plan.hosts)} hosts, {len(self.plan.switches)} switches, {state})")


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _check_seconds(name: str, value: object, high: float | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
        math.isfinite(value) and value > 0 and (high is None or value <= high)
    ):
        want = f"in (0, {high:g}]" if high is not None else "positive and finite"
        raise EmuInputError(f"{name} must be {want} seconds, got {name}={value!r}")


def _check_int(name: str, value: object, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
        high is not None and value > high
    ):
        want = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise EmuInputError(f"{name} must be an integer {want}, got {name}={value!r}")
