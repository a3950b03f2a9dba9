"""The flow-level engine: flows share links max-min fairly, on a SimPy clock.

A :class:`Network` owns (or joins) a :class:`simpy.Environment`, a
:class:`~flowsim.topology.Topology` and the running flows. User code drives it with ordinary
SimPy processes::

    net = Network(star(16))
    def job(env):
        rec = yield net.start_flow("h0", "h1", 1e6)   # fires when the flow has arrived
        rec2 = yield net.start_flow("h1", "h2", 1e6)  # starts when the first one ended
    net.env.process(job(net.env))
    net.env.run()

Model
-----
- **Rates.** Every running flow gets its weighted max-min fair share (:mod:`flowsim.maxmin`) of
  the links on its path. Rates are re-solved on every arrival, departure and capacity change;
  all changes at one simulated instant are batched into one re-solve (a zero-delay event queued
  behind the events already due at that instant).
- **Latency.** A flow transmits from its start time; it *completes* when its last byte has been
  sent plus the sum of its path's link latencies (``end_s``). Its bandwidth is released when the
  last byte is sent. E.g. 1 MB alone on 100 Gbps with 2 x 2 us of links: 80 us + 4 us = 84 us.
- **Paths are fixed per flow** (static ECMP: ``Router.route(src, dst, port)``, or an explicit
  ``path=``). There is no rerouting.
- **Capacity changes** (:meth:`Network.set_link_capacity`, :meth:`Network.schedule_link_capacity`)
  take effect at once. Capacity 0 is a link that is *down*: flows crossing it get rate 0 and stall
  (keeping the bytes already sent) until the capacity returns, then resume on the same path.
  A stalled flow never completes on its own; stop it with :meth:`Network.stop_flow` if needed.
- **Long-lived flows** have ``size_bytes=math.inf`` and run until stopped.
- **Rate caps** (``start_flow(..., rate_cap_bps=)``, :meth:`Network.set_rate_cap`): a capped
  flow is solved as if it also crossed a link of its own with the cap as capacity, so the rates
  are max-min fair with caps (every flow at its cap or on a bottleneck) and the incremental
  re-solve below needs nothing new: a cap change is a capacity change of that link. Flows
  without a cap take exactly the path they took before caps existed.
- **Weight changes** (:meth:`Network.set_weight`): the flow is re-solved as if it had left and
  arrived again with its new weight (bytes sent, path and cap kept), so the incremental
  re-solve needs nothing new either.
- **Records** (``network.records``) are appended when each flow's event fires, so they are in
  ``end_s`` order (with ``keep_records`` off only the events carry them). A completion
  predicted earlier and then superseded leaves an idle internal timer in the queue (SimPy cannot
  cancel an event), so ``env.run()`` without ``until`` may stop a little after the last
  completion: read times from the records, not from ``env.now``.

Incremental re-solve
--------------------
Progressive filling raises a common level; a change (a departure, an arrival, a capacity change)
can only alter the filling at or above the lowest level at which a link it touches saturates, in
the old or the new system. Flows whose normalised rate ``rate / weight`` lies strictly below that
level keep their rates; only the others are re-solved on the residual capacities. For a
departure the level is the departing flow's own level; for a link gaining flows or changing
capacity it is computed exactly from the link's piecewise-linear fill curve
(:meth:`Network._safe_level`).

With few running flows (up to ``_CLOSURE_FLOWS``) the re-solve is narrowed further to the
*closure* of the change over saturated links (:meth:`Network._closure`): a flow whose bottleneck
carries no flow of the closure keeps its rate. The closure's solve is checked afterwards (a link
the new rates fill, shared with a flow outside, grows the closure), so the rates stay exact;
they may differ from a solve of every flow above the level cut by round-off only.

Which flows a re-solve touches is chosen in Python (the level cut, the closure). The filling of
up to ``_SMALL_FLOWS`` flows runs in plain Python (:func:`flowsim.maxmin.water_fill_lists`),
where a compiled call's fixed cost (and loading numba at all: 0.4 s and 125 MiB per process)
would outweigh the work; above, one compiled kernel (:func:`flowsim.kernels.fill_columns`: the
residual capacities, progressive filling, the closure's check), loaded on the first such
solve. Both do the same arithmetic in the same order, so the choice never changes a result,
bit for bit. Per-flow state (bytes left, bytes sent, t0) lives in Python lists up to
``_LIST_FLOWS`` running flows and in numpy arrays above, where the update after a solve is
vectorised (the same arithmetic either way, again).

Precision
---------
Each flow keeps ``(bytes left, time of last rate change, rate)``; bytes left are only updated when
its rate changes, so a flow's finish time carries no per-event round-off. One timer event stands
for the next completion; flows due within a relative 1e-12 of it finish together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import simpy

from flowsim.errors import FlowError
from flowsim.maxmin import water_fill_lists
from flowsim.records import FlowRecord, FlowState
from flowsim.topology import Topology

__all__ = ["FlowDone", "Network"]

# Flows finishing within this relative time of the due one finish together.
_FINISH_RTOL = 1e-12
# Flows whose level is within this relative distance of the safe level are re-solved anyway.
_SAFE_RTOL = 1e-9
# A link loaded within this relative distance of its capacity counts as saturated (a possible
# bottleneck) when the engine decides which flows a change can reach.
_SAT_RTOL = 1e-9
# Up to this many running flows a re-solve first looks for the flows a change can reach through
# saturated links (Network._closure); above it the level cut alone chooses. Measured
# (docs/benchmarks.md): with ~10 flows at once the closure is ~2 flows against ~7 above the cut
# (-20% run time); at ~100 (c100) and ~250 (a 3-job what-if) the closure is 2-7x smaller than the
# set above the cut, but finding it in Python costs more than the smaller solve saves (the
# numpy fill's cost is set by its rounds, not its size): +30-40% run time.
_CLOSURE_FLOWS = 48
# Up to this many running flows a re-solve runs in plain Python (lists and dicts), above it
# numpy chooses the flows and fills: below it numpy's per-call overhead costs more than the
# loops it saves. All paths give bit-for-bit the same rates, so the choice never changes a
# result. Chosen by measurement on the reference workloads (docs/benchmarks.md).
_SMALL_FLOWS = 24
# Up to this many running flows the per-flow state (bytes left, bytes sent, t0) lives in Python
# lists and the update after a numpy solve is a Python loop (few rates change per re-solve);
# above it the state lives in numpy arrays and the update is vectorised. Same arithmetic either
# way. Chosen by measurement (docs/benchmarks.md).
_LIST_FLOWS = 192
# Above _LIST_FLOWS, when at most this many rates changed, they are written by a Python loop
# with scalar reads and writes (Network._apply_rates) instead of a dozen vectorised calls (about
# 20 us whatever the count; the loop costs ~1-2 us per rate): in the 3-job what-ifs a re-solve
# of ~150-190 flows changes 6-14 rates on average. Same arithmetic either way.
_FEW_CHANGED = 16


def _cap_bytes(where: str, rate_cap_bps: float) -> float | None:
    """A rate cap in bytes per second (None for ``math.inf``: no cap); a bad one raises."""
    try:
        cap = float(rate_cap_bps)
    except (TypeError, ValueError):
        cap = math.nan
    if not cap > 0:  # also NaN
        raise FlowError(f"{where}: rate_cap_bps={rate_cap_bps!r}, expected a positive number of "
                        f"bits per second (None or math.inf for no cap)")
    return None if cap == math.inf else cap / 8.0


class FlowDone(simpy.Event):
    """The event :meth:`Network.start_flow` returns; it fires with the flow's :class:`FlowRecord`.

    It carries ``flow_id`` so the flow can be stopped with :meth:`Network.stop_flow`.
    """

    def __init__(self, env: simpy.Environment, flow_id: int) -> None:
        super().__init__(env)
        self.flow_id = flow_id

    def succeed_after(self, record: FlowRecord, delay: float) -> None:
        """Fire with ``record`` ``delay`` seconds from now (a flow's last byte arriving).

        One event, as :class:`simpy.Timeout` schedules itself, where a timeout whose callback
        succeeds this event would be two.
        """
        if self.triggered:
            raise RuntimeError(f"{self} has already been triggered")
        self._ok = True
        self._value = record
        self.env.schedule(self, simpy.events.NORMAL, delay)


class _Meta:
    """Per-flow Python-side data (the numeric state lives in the engine's arrays)."""

    __slots__ = ("flow_id", "src", "dst", "size", "start", "path", "links", "cap_link", "port",
                 "tag", "tenant", "weight", "event", "latency")

    def __init__(self, flow_id: int, src: str, dst: str, size: float, start: float,
                 path: tuple[int, ...], port: int, tag: str, tenant: str, weight: float,
                 event: FlowDone, latency: float) -> None:
        self.flow_id = flow_id
        self.src = src
        self.dst = dst
        self.size = size
        self.start = start
        self.path = path  # the topology's links, as the record reports them
        # The links the solver sees: the path, plus the flow's cap link when it has a rate cap.
        self.links = path
        self.cap_link = -1
        self.port = port
        self.tag = tag
        self.tenant = tenant
        self.weight = weight
        self.event = event
        self.latency = latency


class Network:
    """A running network of max-min fair flows on a SimPy clock.

    Parameters
    ----------
    topology : Topology
        The fabric. Link capacities are in bits per second; flow sizes in bytes.
    env : simpy.Environment, optional
        Join this environment (several networks or other models may share it); by default a new
        one, available as ``network.env``.
    router : flowsim.routing.Router, optional
        Chooses paths (``route``) and validates explicit ones (``check_path``); by default
        ``Router(topology, seed=seed)``, built on first use.
    seed : int
        ECMP seed of the default router.
    monitor_links : bool
        Record every link's load over time for :meth:`link_load` and :meth:`link_utilisation`.
    keep_records : bool
        Keep every finished flow's record in ``records`` (the default). A long run whose
        caller reads each flow's record from its event only (the job driver) turns it off:
        the records are more than half of what a what-if study keeps per flow and epoch.

    Attributes
    ----------
    records : list of FlowRecord
        Finished flows, in completion order (by ``end_s``; ties in the order they finished);
        empty while ``keep_records`` is off.
    keep_records : bool
        Whether finished flows are kept in ``records``; may be changed between flows.
    """

    def __init__(self, topology: Topology, *, env: simpy.Environment | None = None,
                 router: Any = None, seed: int = 0, monitor_links: bool = False,
                 keep_records: bool = True) -> None:
        self.topology = topology
        self.env = env if env is not None else simpy.Environment()
        self._router = router
        self.seed = seed
        self.records: list[FlowRecord] = []
        self.keep_records = keep_records
        links = topology.links
        self._n_links = n = len(links)
        # Rates are solved in bytes per second (capacity_bps / 8 is exact in binary floating point).
        # The engine's capacity array has one extra entry, a virtual link of infinite capacity
        # that pads short paths (id n); self._cap is a view without it. Per-flow rate caps add
        # cap links after it (ids n + 1, ...; see start_flow); every per-link list below has an
        # entry for each of them, and one (unused) for the padding link.
        self._cap_ext = np.append(np.array([lk.capacity_bps for lk in links], dtype=float) / 8.0,
                                  math.inf)
        self._cap = self._cap_ext[:n]
        self._link_lat = [lk.latency_s for lk in links]
        self._hosts = frozenset(topology.hosts)
        # Per-slot numeric state; a slot is reused after its flow ends.
        size = 64
        self._width = 4
        self._padding = self._paddings()  # _padding[k]: what fills a k-link path's column
        self._paths = np.full((self._width, size), n, dtype=np.intp)  # padding = n (virtual link)
        self._weight = np.ones(size)
        self._left = np.zeros(size)    # bytes left at _t0
        self._sent = np.zeros(size)    # bytes sent by _t0
        self._t0 = np.zeros(size)
        self._rate = np.zeros(size)    # bytes per second
        self._level = np.full(size, math.nan)  # rate / weight; NaN in a free slot
        self._end = np.full(size, math.inf)  # when the last byte will be sent at the current rate
        self._alive = np.zeros(size, dtype=bool)
        # Python mirrors of level / rate / weight and, per link, the slots crossing it: the safe
        # level reads a few links' flows, cheaper in Python than through numpy calls.
        self._lv: list[float] = [0.0] * size
        self._rt: list[float] = [0.0] * size
        self._wt: list[float] = [1.0] * size
        self._endl: list[float] = [math.inf] * size  # _end's mirror: the next finish, in Python
        # Bytes left, bytes sent and t0 live in Python lists while the plain-Python re-solve runs
        # (few flows) and in the arrays above while the numpy one runs; _sync_state moves them
        # when the engine switches (rarely: when the number of running flows crosses the
        # threshold).
        self._lists_mode = True
        self._t0l: list[float] = [0.0] * size
        self._leftl: list[float] = [0.0] * size
        self._sentl: list[float] = [0.0] * size
        self._members: list[set[int]] = [set() for _ in range(n + 1)]
        self._cap_list: list[float] = self._cap_ext.tolist()
        # Bytes per second on each link at the current rates (kept up to date as rates change;
        # round-off drift is far below _SAT_RTOL): which links are saturated, for the closure.
        self._load: list[float] = [0.0] * (n + 1)
        self._free_cap_links: list[int] = []  # cap links of flows that have ended, for reuse
        self._loads_valid = False  # kept up to date only while closures are looked for
        self._n_weighted = 0  # running flows of weight != 1 (0: the solver may count)
        self._meta: list[_Meta | None] = [None] * size
        self._free: list[int] = list(range(size - 1, -1, -1))
        self._slot_of: dict[int, int] = {}
        self._next_id = 0
        # Changes waiting for the next re-solve.
        self._pending = False
        self._dep_level = math.inf
        self._arrivals: list[int] = []
        self._cap_changed: list[int] = []
        self._pending_departed = False
        self._dep_links: list[int] = []  # links of the flows that left since the last re-solve
        self._timer: simpy.Event | None = None
        self._timer_at = math.inf
        # Monitoring: per re-solve, the links whose load changed and their new loads.
        self._monitor = monitor_links
        self._mon_times: list[float] = []
        self._mon_links: list[np.ndarray] = []
        self._mon_load: list[np.ndarray] = []
        self._mon_cap: list[np.ndarray] = []
        self._last_load: np.ndarray = np.zeros(n)
        self._last_cap = self._cap.copy()
        self._list_flows = _LIST_FLOWS
        self._small_flows = _SMALL_FLOWS
        self._fill_kernel: Any = None  # loaded on the first solve of more than _small_flows
        self._local_of = np.zeros(0, dtype=np.int64)  # the fill kernel's scratch
        self._solved = np.zeros(0, dtype=bool)
        self._closure_flows = _CLOSURE_FLOWS
        self.resolves = 0
        """Number of rate re-solves so far (a cost counter for benchmarks)."""

    # -- public API ----------------------------------------------------------------------------
    @property
    def router(self) -> Any:
        """The router (built on first use when none was given)."""
        if self._router is None:
            from flowsim.routing import Router

            self._router = Router(self.topology, seed=self.seed)
        return self._router

    def start_flow(self, src: str, dst: str, size_bytes: float, *, port: int = 0,
                   path: Sequence[int] | None = None, tag: str = "", tenant: str = "",
                   weight: float = 1.0, rate_cap_bps: float | None = None) -> FlowDone:
        """Start a flow now; return the event that fires with its :class:`FlowRecord`.

        Parameters
        ----------
        src, dst : str
            Distinct hosts.
        size_bytes : float
            Bytes to send, > 0; ``math.inf`` for a long-lived flow that runs until stopped.
        port : int
            Part of the ECMP hash: flows of one host pair on different ports may take different
            equal-cost paths.
        path : sequence of int, optional
            Explicit link ids from ``src`` to ``dst`` (validated), instead of ECMP.
        tag, tenant : str
            Labels copied to the record (which job, which background source).
        weight : float
            Max-min weight, > 0: a flow of weight 2 gets twice the share of a flow of weight 1 on a
            common bottleneck.
        rate_cap_bps : float, optional
            The most the flow may send, bits per second (> 0; None or ``math.inf``: no cap).
            The rates stay max-min fair: every flow is at its cap or crosses a saturated link
            where no flow has a higher ``rate / weight``. A capped flow is solved as if it also
            crossed a link of its own whose capacity is the cap (its *cap link*, invisible in
            records). :meth:`set_rate_cap` changes it while the flow runs.

        Raises
        ------
        FlowError
            On a bad size, weight or rate cap, ``src == dst``, or an endpoint that is a switch.
        UnknownNodeError, RoutingError
            On an unknown endpoint or an invalid explicit path.
        """
        hosts = self._hosts
        if src not in hosts or dst not in hosts:
            for name, node in (("src", src), ("dst", dst)):
                if node not in hosts:
                    self.topology.node(node)  # raises UnknownNodeError for an unknown name
                    raise FlowError(
                        f"start_flow: {name}={node!r} is a switch; flows go between hosts")
        if src == dst:
            raise FlowError(f"start_flow: src and dst are both {src!r}; expected distinct hosts")
        size = float(size_bytes)
        if not size > 0:  # also rejects NaN
            raise FlowError(
                f"start_flow: size_bytes={size_bytes!r}, expected a positive number of bytes "
                f"(math.inf for a long-lived flow)"
            )
        w = float(weight)
        if not (math.isfinite(w) and w > 0):
            raise FlowError(f"start_flow: weight={weight!r}, expected a positive finite number")
        cap_bytes = None if rate_cap_bps is None else _cap_bytes("start_flow", rate_cap_bps)
        if path is None:
            links = tuple(self.router.route(src, dst, port))
        else:
            links = tuple(self.router.check_path(src, dst, path))
        env = self.env
        fid = self._next_id
        self._next_id += 1
        event = FlowDone(env, fid)
        slot = self._alloc(len(links))
        now = float(env.now)
        self._paths[:, slot] = links + self._padding[len(links)]
        self._weight[slot] = w
        if self._lists_mode:
            self._leftl[slot] = size
            self._sentl[slot] = 0.0
            self._t0l[slot] = now
        else:
            self._left[slot] = size
            self._sent[slot] = 0.0
            self._t0[slot] = now
        # A new flow's rate is -1 until its first solve, so that the solve always records it
        # (even at rate 0); its level is inf so that it is never kept at an old rate.
        self._rate[slot] = -1.0
        self._level[slot] = math.inf
        self._end[slot] = self._endl[slot] = math.inf
        self._alive[slot] = True
        self._wt[slot] = w
        self._lv[slot] = math.inf
        self._rt[slot] = -1.0
        if w != 1.0:
            self._n_weighted += 1
        members, link_lat = self._members, self._link_lat
        latency = 0.0
        for lk in links:
            members[lk].add(slot)
            latency += link_lat[lk]
        m = self._meta[slot] = _Meta(fid, src, dst, size, now, links, port, tag, tenant, w,
                                     event, latency)
        if cap_bytes is not None:
            self._attach_cap_link(slot, m, cap_bytes)
        self._slot_of[fid] = slot
        self._arrivals.append(slot)
        self._schedule_resolve()
        return event

    def _running_slot(self, func: str, flow_id: int) -> int:
        """The slot of running flow ``flow_id``; a FlowError naming ``func`` if it is not one."""
        slot = self._slot_of.get(flow_id)
        if slot is None:
            raise FlowError(
                f"{func}: flow_id={flow_id!r} is not running (finished, stopped or unknown)"
            )
        return slot

    def set_rate_cap(self, flow_id: int, rate_cap_bps: float | None) -> None:
        """Change a running flow's rate cap now (bits per second; None or ``math.inf``: none).

        See ``rate_cap_bps`` in :meth:`start_flow`. The change is a capacity change of the
        flow's cap link, re-solved with the other changes of this instant.

        Raises
        ------
        FlowError
            If ``flow_id`` is not a running flow, or on a bad cap.
        """
        slot = self._running_slot("set_rate_cap", flow_id)
        cap = _cap_bytes("set_rate_cap", rate_cap_bps) if rate_cap_bps is not None else None
        m = self._flow(slot)
        lk = m.cap_link
        if lk < 0:
            if cap is None:
                return
            lk = self._attach_cap_link(slot, m, cap)
        else:
            cap = math.inf if cap is None else cap
            self._cap_ext[lk] = cap
            self._cap_list[lk] = cap
        self._cap_changed.append(lk)
        self._schedule_resolve()

    def set_weight(self, flow_id: int, weight: float) -> None:
        """Change a running flow's max-min weight now (> 0; see ``weight`` in
        :meth:`start_flow`).

        The flow is re-solved as if it had left and arrived again at this instant with the
        new weight, keeping its bytes sent, its path and its cap.

        Raises
        ------
        FlowError
            If ``flow_id`` is not a running flow, or on a bad weight.
        """
        slot = self._running_slot("set_weight", flow_id)
        w = float(weight)
        if not (math.isfinite(w) and w > 0):
            raise FlowError(f"set_weight: weight={weight!r}, expected a positive finite number")
        m = self._flow(slot)
        if w == m.weight:
            return
        rate = self._rt[slot]
        if rate >= 0:  # solved before: out as a departure, back in as an arrival
            now = float(self.env.now)
            t0: Any
            sent: Any
            left: Any
            if self._lists_mode:
                t0, sent, left = self._t0l, self._sentl, self._leftl
            else:
                t0, sent, left = self._t0, self._sent, self._left
            moved = rate * (now - float(t0[slot]))
            sent[slot] += moved
            left[slot] = float(left[slot]) - moved
            t0[slot] = now
            if self._lv[slot] < self._dep_level:
                self._dep_level = self._lv[slot]
            self._dep_links.extend(m.links)
            if self._loads_valid:
                load, members = self._load, self._members
                for lk in m.links:
                    load[lk] = load[lk] - rate if len(members[lk]) > 1 else 0.0
            self._pending_departed = True
            self._rate[slot] = self._rt[slot] = -1.0
            self._level[slot] = self._lv[slot] = math.inf
            self._end[slot] = self._endl[slot] = math.inf
            self._arrivals.append(slot)
        self._n_weighted += (w != 1.0) - (m.weight != 1.0)
        self._weight[slot] = self._wt[slot] = w
        m.weight = w
        self._schedule_resolve()

    def stop_flow(self, flow_id: int) -> None:
        """End a running flow now; its event fires now with ``stopped=True`` and the bytes sent.

        Raises
        ------
        FlowError
            If ``flow_id`` is not a running flow.
        """
        slot = self._running_slot("stop_flow", flow_id)
        self._depart(slot, float(self.env.now), stopped=True)
        self._schedule_resolve()

    def set_link_capacity(self, link_id: int, capacity_bps: float) -> None:
        """Set a link's capacity now (bits per second, >= 0; 0 takes the link down)."""
        self.topology.link_by_id(link_id)
        cap = float(capacity_bps)
        if not (math.isfinite(cap) and cap >= 0):
            raise FlowError(
                f"set_link_capacity: capacity_bps={capacity_bps!r} for link {link_id}, expected a "
                f"finite number >= 0"
            )
        self._cap[link_id] = cap / 8.0
        self._cap_list[link_id] = cap / 8.0
        self._cap_changed.append(link_id)
        self._schedule_resolve()

    def schedule_link_capacity(self, at_s: float, link_id: int, capacity_bps: float) -> None:
        """Set a link's capacity at time ``at_s`` (>= now); see :meth:`set_link_capacity`."""
        self.topology.link_by_id(link_id)
        if not (math.isfinite(capacity_bps) and capacity_bps >= 0):
            raise FlowError(
                f"schedule_link_capacity: capacity_bps={capacity_bps!r} for link {link_id}, "
                f"expected a finite number >= 0"
            )
        now = self.env.now
        if not at_s >= now:
            raise FlowError(
                f"schedule_link_capacity: at_s={at_s!r} is in the past (now is {now!r})"
            )
        ev = self.env.timeout(at_s - now)
        ev.callbacks.append(lambda _ev: self.set_link_capacity(link_id, capacity_bps))

    def link_capacity_bps(self, link_id: int) -> float:
        """A link's current capacity in bits per second."""
        self.topology.link_by_id(link_id)
        return float(self._cap[link_id] * 8.0)

    def active_flows(self) -> list[FlowState]:
        """Snapshots of the running flows, by flow id, with rates as of now."""
        self._resolve_now()
        now = self.env.now
        out = []
        for slot in sorted(np.flatnonzero(self._alive).tolist(),
                           key=lambda s: self._flow(s).flow_id):
            m = self._flow(slot)
            rate = self._rate[slot]
            out.append(FlowState(
                flow_id=m.flow_id, src=m.src, dst=m.dst, size_bytes=m.size,
                sent_bytes=float(self._sent_at(slot, now)),
                rate_bps=float(rate * 8.0), start_s=m.start, path=m.path, port=m.port,
                tag=m.tag, tenant=m.tenant, weight=m.weight,
            ))
        return out

    def link_load(self, link_id: int) -> tuple[np.ndarray, np.ndarray]:
        """A link's load over time, piecewise constant: ``(times_s, load_bps)``.

        ``load_bps[i]`` holds from ``times_s[i]`` until ``times_s[i + 1]`` (the last until now).
        Needs ``monitor_links=True``.
        """
        times, load, _cap = self._series(link_id)
        return times, load * 8.0

    def link_utilisation(self, link_id: int) -> tuple[np.ndarray, np.ndarray]:
        """A link's load as a fraction of its capacity at the time: ``(times_s, fraction)``.

        A link that is down (capacity 0) counts as 0 utilised. Needs ``monitor_links=True``.
        """
        times, load, cap = self._series(link_id)
        frac = np.divide(load, cap, out=np.zeros_like(load), where=cap > 0)
        return times, frac

    # -- internals -----------------------------------------------------------------------------
    def _series(self, link_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self._monitor:
            raise FlowError(
                "link load was not recorded; create the Network with monitor_links=True"
            )
        self.topology.link_by_id(link_id)
        self._resolve_now()
        times = [0.0]
        load = [0.0]
        cap = [self.topology.links[link_id].capacity_bps / 8.0]
        for t, lk, ld, cp in zip(self._mon_times, self._mon_links, self._mon_load, self._mon_cap,
                                 strict=True):
            hit = np.flatnonzero(lk == link_id)
            if hit.size:
                if times[-1] == t:
                    load[-1] = float(ld[hit[0]])
                    cap[-1] = float(cp[hit[0]])
                else:
                    times.append(t)
                    load.append(float(ld[hit[0]]))
                    cap.append(float(cp[hit[0]]))
        return np.array(times), np.array(load), np.array(cap)

    def _widen(self, path_len: int) -> None:
        extra = np.full((path_len - self._width, self._paths.shape[1]), self._n_links,
                        dtype=np.intp)
        self._paths = np.vstack([self._paths, extra])
        self._width = path_len
        self._padding = self._paddings()

    def _attach_cap_link(self, slot: int, m: _Meta, cap: float) -> int:
        """Give the flow in ``slot`` a cap link of capacity ``cap`` (bytes per second).

        The link is the last of the flow's links (its column's first padding entry). A running
        flow's current rate is put on it, so that its load is right for the closure.
        """
        if self._free_cap_links:
            lk = self._free_cap_links.pop()
            self._cap_ext[lk] = cap
            self._cap_list[lk] = cap
        else:
            lk = len(self._cap_list)
            self._cap_ext = np.append(self._cap_ext, cap)
            self._cap = self._cap_ext[: self._n_links]
            self._cap_list.append(cap)
            self._members.append(set())
            self._load.append(0.0)
        k = len(m.links)
        if k + 1 > self._width:
            self._widen(k + 1)
        self._paths[k, slot] = lk
        m.links = m.links + (lk,)
        m.cap_link = lk
        self._members[lk].add(slot)
        rate = self._rt[slot]
        self._load[lk] = rate if rate > 0 else 0.0
        return lk

    def _alloc(self, path_len: int) -> int:
        if path_len > self._width:
            self._widen(path_len)
        if not self._free:
            old = self._alive.shape[0]
            new = old * 2
            pad = np.full((self._width, new - old), self._n_links, dtype=np.intp)
            self._paths = np.hstack([self._paths, pad])
            for name, fill in (("_weight", 1.0), ("_left", 0.0), ("_sent", 0.0), ("_t0", 0.0),
                               ("_rate", 0.0), ("_level", math.nan), ("_end", math.inf)):
                arr = getattr(self, name)
                setattr(self, name, np.concatenate([arr, np.full(new - old, fill)]))
            self._alive = np.concatenate([self._alive, np.zeros(new - old, dtype=bool)])
            self._lv.extend([0.0] * (new - old))
            self._rt.extend([0.0] * (new - old))
            self._wt.extend([1.0] * (new - old))
            self._endl.extend([math.inf] * (new - old))
            self._t0l.extend([0.0] * (new - old))
            self._leftl.extend([0.0] * (new - old))
            self._sentl.extend([0.0] * (new - old))
            self._meta.extend([None] * (new - old))
            self._free = list(range(new - 1, old - 1, -1))
        return self._free.pop()

    def _paddings(self) -> list[tuple[int, ...]]:
        return [(self._n_links,) * (self._width - k) for k in range(self._width + 1)]

    def _sent_at(self, slot: int, now: float) -> float:
        """Bytes a running flow has sent by ``now``."""
        rate = max(self._rt[slot], 0.0)
        if self._lists_mode:
            return self._sentl[slot] + rate * (now - self._t0l[slot])
        return float(self._sent[slot] + rate * (now - self._t0[slot]))

    def _sync_state(self, lists_mode: bool) -> None:
        """Move bytes left, bytes sent and t0 to the lists (True) or the arrays (False)."""
        if lists_mode:
            self._t0l = self._t0.tolist()
            self._leftl = self._left.tolist()
            self._sentl = self._sent.tolist()
        else:
            self._t0[:] = self._t0l
            self._left[:] = self._leftl
            self._sent[:] = self._sentl
        self._lists_mode = lists_mode

    def _flow(self, slot: int) -> _Meta:
        m = self._meta[slot]
        assert m is not None, f"slot {slot} holds no running flow"
        return m

    def _schedule_resolve(self) -> None:
        if not self._pending:
            self._pending = True
            ev = self.env.event()
            ev.callbacks.append(self._on_resolve)
            ev.succeed()  # zero delay, queued behind the events already due now

    def _on_resolve(self, _event: simpy.Event) -> None:
        self._resolve_now()

    def _depart(self, slot: int, now: float, *, stopped: bool) -> None:
        """Remove a flow (finished or stopped) and fire its event (after latency if finished)."""
        m = self._flow(slot)
        if stopped:
            sent = float(self._sent_at(slot, now))
            if sent > m.size:
                sent = m.size
            end = now
        else:
            sent = m.size
            end = now + m.latency
        members = self._members
        rate = self._rt[slot]
        if rate < 0:  # started at this instant, never solved
            self._arrivals.remove(slot)
            for lk in m.links:
                members[lk].discard(slot)
        else:
            lvl = self._lv[slot]
            if lvl < self._dep_level:
                self._dep_level = lvl
            self._dep_links.extend(m.links)
            if self._loads_valid:
                load = self._load
                for lk in m.links:
                    ms = members[lk]
                    ms.discard(slot)
                    load[lk] = load[lk] - rate if ms else 0.0  # an empty link carries exactly 0
            else:
                for lk in m.links:
                    members[lk].discard(slot)
        if m.weight != 1.0:
            self._n_weighted -= 1
        if m.cap_link >= 0:
            self._free_cap_links.append(m.cap_link)
        self._alive[slot] = False
        self._end[slot] = self._endl[slot] = math.inf
        self._rate[slot] = 0.0
        self._level[slot] = math.nan
        self._meta[slot] = None
        del self._slot_of[m.flow_id]
        self._free.append(slot)
        self._pending_departed = True
        self._deliver(m, sent, end, stopped, end - now)

    @staticmethod
    def _record(m: _Meta, sent: float, end: float, stopped: bool) -> FlowRecord:
        return FlowRecord(m.flow_id, m.src, m.dst, m.size, sent, m.start, end, m.path, m.port,
                          m.tag, m.tenant, m.weight, stopped)

    def _deliver(self, m: _Meta, sent: float, end: float, stopped: bool, delay: float) -> None:
        """Fire the departed flow's event with its record ``delay`` seconds from now (its
        latency, or 0 if stopped); the record is kept, when records are, as the event fires,
        before its callbacks run."""
        record = self._record(m, sent, end, stopped)
        if self.keep_records:
            self._keep_when_fired(m.event, record)
        m.event.succeed_after(record, delay)

    def _keep_when_fired(self, event: FlowDone, record: FlowRecord) -> None:
        """Append ``record`` to :attr:`records` when ``event`` fires, before its callbacks."""
        event.callbacks.insert(0, lambda _ev: self.records.append(record))

    def _on_timer(self, event: simpy.Event) -> None:
        if event is not self._timer:
            return  # superseded by an earlier completion time
        self._timer = None
        self._timer_at = math.inf
        now = float(self.env.now)
        limit = now + _FINISH_RTOL * now
        running = self._slot_of
        if len(running) <= _LIST_FLOWS:
            endl = self._endl
            due = [s for s in running.values() if endl[s] <= limit]
        else:
            due = (self._end <= limit).nonzero()[0].tolist()
        if not due:
            self._arm_timer()
            return
        # Finish in flow-id order so that ties are deterministic and readable.
        for slot in sorted(due, key=lambda s: self._flow(s).flow_id):
            self._depart(int(slot), now, stopped=False)
        self._schedule_resolve()

    def _arm_timer(self) -> None:
        running = self._slot_of
        if len(running) <= _LIST_FLOWS:  # Python's min over few flows beats numpy's over all slots
            endl = self._endl
            t_next = min(map(endl.__getitem__, running.values()), default=math.inf)
        else:
            t_next = float(np.minimum.reduce(self._end))  # never empty: slots start at 64
        if t_next == math.inf or t_next >= self._timer_at:
            # An earlier (or equal) timer is already queued; it re-arms when it fires.
            return
        now = self.env.now
        self._timer_at = t_next
        self._timer = self.env.timeout(max(t_next - now, 0.0))
        self._timer.callbacks.append(self._on_timer)

    def _resolve_now(self) -> None:
        """Re-solve the rates touched by the changes since the last re-solve."""
        if not self._pending:
            return
        self._pending = False
        if not self._arrivals and not self._cap_changed and not self._pending_departed:
            return
        now = self.env.now
        # Flows whose level is below thr keep their rates (thr 0: none does).
        thr = self._safe_level() * (1.0 - _SAFE_RTOL)
        self.resolves += 1
        running = len(self._slot_of)
        lists = running <= self._list_flows
        if lists != self._lists_mode:
            self._sync_state(lists)
        solve, rates = self._solve(thr, running)
        if lists:
            if isinstance(rates, np.ndarray):
                solve_a = np.asarray(solve, dtype=np.intp)
                changed = (rates != self._rate[solve_a]).nonzero()[0]
                self._apply_rates(now, solve_a[changed].tolist(), rates[changed].tolist())
            else:
                self._apply_rates(now, solve, rates)
        else:
            solve_a = np.asarray(solve, dtype=np.intp)
            rates = np.asarray(rates)
            changed = (rates != self._rate[solve_a]).nonzero()[0]
            if changed.size <= _FEW_CHANGED:
                self._apply_rates(now, solve_a[changed].tolist(), rates[changed].tolist())
            else:
                self._apply_arrays(now, solve_a[changed], rates[changed])
        self._arrivals = []
        self._cap_changed = []
        self._dep_links = []
        self._dep_level = math.inf
        self._pending_departed = False
        self._arm_timer()
        if self._monitor:
            self._record_loads(now)

    def _solve(self, thr: float, running: int) -> tuple[Any, Any]:
        """Which flows to re-solve (slots, ascending) and their new rates.

        First the closure of the change over saturated links (:meth:`_closure`); when it is
        too large to pay, every flow at or above ``thr``. A closure is checked after its solve:
        a link outside it that the new rates fill and that carries a flow outside it makes
        that flow part of the change, and the grown closure is solved again.
        """
        comp = None
        if running <= self._closure_flows:
            if not self._loads_valid:
                self._recount_loads()
            comp = self._closure(thr, running)
        else:
            self._loads_valid = False
        rates: Any
        while comp is not None:
            members, seen = comp
            solve = sorted(members)
            if len(solve) <= self._small_flows:
                paths, residual, rates = self._fill_lists(solve, members)
                extra = self._filled_lists(paths, residual, rates, members, seen, thr)
            else:
                rates, extra = self._fill_arrays(np.array(solve, dtype=np.intp), members, seen,
                                                 thr)
            if not extra:
                return solve, rates
            comp = self._grow(members, seen, extra, thr, self._closure_limit(running))
        # Every flow at or above the cut (the level argument alone).
        if running <= self._small_flows:
            lv = self._lv
            solve = [s for s in sorted(self._slot_of.values()) if not lv[s] < thr]
            return solve, self._fill_lists(solve, set(solve))[2]
        level = self._level
        # Free slots have level NaN, which is neither below nor at/above the threshold.
        solve_a = (level >= thr).nonzero()[0]
        return solve_a, self._fill_arrays(solve_a, None, None, thr)[0]

    def _recount_loads(self) -> None:
        """Every link's load from the current rates (on entering the closure regime)."""
        load = [0.0] * len(self._cap_list)
        rt, meta = self._rt, self._meta
        for slot in sorted(self._slot_of.values()):
            r = rt[slot]
            if r > 0:
                for lk in meta[slot].links:  # type: ignore[union-attr]
                    load[lk] += r
        self._load = load
        self._loads_valid = True

    @staticmethod
    def _closure_limit(running: int) -> int:
        # Past this many flows a closure costs more than it saves over the level cut alone.
        return max(16, running * 3 // 4)

    def _closure(self, thr: float, running: int) -> tuple[set[int], set[int]] | None:
        """The flows a change can reach through saturated links, or None when too many.

        Start from every link a change touched (departures, arrivals, capacity changes) and
        take every flow crossing it at or above the cut; from each such flow, every link of it
        that is saturated; and so on. A flow outside this closure keeps its rate: its
        bottleneck (a saturated link where no flow has a higher level) carries no flow of the
        closure, so nothing the change does reaches it, unless the new rates fill a link the
        closure shares with it, which :meth:`_solve` checks afterwards.
        """
        start = set(self._dep_links)
        meta = self._meta
        for slot in self._arrivals:
            start.update(meta[slot].links)  # type: ignore[union-attr]
        start.update(self._cap_changed)
        return self._grow(set(), start, list(start), thr, self._closure_limit(running))

    def _grow(self, comp: set[int], seen: set[int], queue: list[int], thr: float,
              limit: int) -> tuple[set[int], set[int]] | None:
        """Grow ``comp`` from the links in ``queue`` (also marked in ``seen``); see _closure."""
        lv, members, meta, load, cap = self._lv, self._members, self._meta, self._load, \
            self._cap_list
        seen.update(queue)
        full = 1.0 - _SAT_RTOL
        while queue:
            for s in members[queue.pop()]:
                if s in comp or lv[s] < thr:
                    continue
                comp.add(s)
                if len(comp) > limit:
                    return None
                for lk in meta[s].links:  # type: ignore[union-attr]
                    if lk not in seen and load[lk] >= cap[lk] * full:
                        seen.add(lk)
                        queue.append(lk)
        return comp, seen

    def _fill_lists(self, solve: list[int], inside: set[int]
                    ) -> tuple[list[tuple[int, ...]], dict[int, float], list[float]]:
        """Rates of the flows ``solve`` in plain Python, the others (not in ``inside``) kept.

        Same arithmetic as :meth:`_fill_arrays`: per link, the kept flows' rates summed by path
        position then slot (``bincount``'s order), subtracted from the capacity once.
        """
        meta, rt, cap, members = self._meta, self._rt, self._cap_list, self._members
        paths = [meta[s].links for s in solve]  # type: ignore[union-attr]
        residual: dict[int, float] = {}
        for path in paths:
            for lk in path:
                if lk in residual:
                    continue
                ms = members[lk]
                if ms <= inside:  # every flow on it is re-solved
                    residual[lk] = cap[lk]
                    continue
                others = [o for o in ms if o not in inside]
                if others:
                    if len(others) > 1:
                        others.sort(key=lambda o: (meta[o].links.index(lk), o))  # type: ignore
                    used = 0.0
                    for o in others:
                        used += rt[o]
                    residual[lk] = cap[lk] - used
                else:
                    residual[lk] = cap[lk]
        wt = self._wt
        rates = water_fill_lists(paths, [wt[s] for s in solve], residual,
                                 unit_weights=self._n_weighted == 0)
        return paths, residual, rates

    def _filled_lists(self, paths: list[tuple[int, ...]], residual: dict[int, float],
                      rates: list[float], comp: set[int], seen: set[int], thr: float
                      ) -> list[int]:
        """Links outside the closure that the new rates fill and that carry flows outside it."""
        on: dict[int, float] = {}
        for path, r in zip(paths, rates, strict=True):
            for lk in path:
                on[lk] = on.get(lk, 0.0) + r
        return self._outside_filled(
            [lk for lk, u in on.items()
             if lk not in seen and u >= residual[lk] - _SAT_RTOL * self._cap_list[lk]],
            comp, thr)

    def _outside_filled(self, links: list[int], comp: set[int], thr: float) -> list[int]:
        lv, members = self._lv, self._members
        return [lk for lk in links
                if any(o not in comp and not lv[o] < thr for o in members[lk])]

    def _fill_arrays(self, solve: np.ndarray, comp: set[int] | None,
                     seen: set[int] | None, thr: float) -> tuple[np.ndarray, list[int]]:
        """Rates of the flows ``solve``, every other running flow at its rate (compiled:
        :func:`flowsim.kernels.fill_columns`).

        With a closure (``comp``, ``seen``), also the links outside it that the new rates fill
        and that carry flows outside it: those flows are part of the change after all.
        """
        if self._fill_kernel is None:
            from flowsim import kernels  # numba loads on the first large solve only

            kernels.warm_up()
            self._fill_kernel = kernels.fill_columns
        size = self._cap_ext.shape[0]
        if self._local_of.shape[0] != size:
            self._local_of = np.full(size, -1, dtype=np.int64)
        if self._solved.shape[0] != self._alive.shape[0]:
            self._solved = np.zeros(self._alive.shape[0], dtype=bool)
        rates, full = self._fill_kernel(
            self._paths, solve, self._alive, self._rate, self._weight, self._n_weighted == 0,
            self._cap_ext, comp is not None, _SAT_RTOL, self._n_links, self._local_of,
            self._solved)
        if comp is None or seen is None or not full.size:
            return rates, []
        links = [lk for lk in full.tolist() if lk not in seen]
        return rates, self._outside_filled(links, comp, thr) if links else []

    def _apply_rates(self, now: float, solve: list[int], rates: list[float]) -> None:
        """Give the flows in ``solve`` their new ``rates`` with a Python loop.

        At up to a few hundred running flows only a few dozen rates change per re-solve, and a
        loop over them (with scalar writes into the arrays the numpy selection reads) costs less
        than numpy's per-call overhead on each of the arrays a vectorised update touches. The
        per-flow time, sent and left bytes are read and written where they live: the lists in
        list mode, the arrays above it (:data:`_FEW_CHANGED`). The arithmetic is the same IEEE
        doubles either way, so the result does not depend on which update ran.
        """
        t0: list[float] | np.ndarray
        sent: list[float] | np.ndarray
        left_of: list[float] | np.ndarray
        if self._lists_mode:
            t0, sent, left_of = self._t0l, self._sentl, self._leftl
        else:
            t0, sent, left_of = self._t0, self._sent, self._left
        lv, rt, wt, meta, load = self._lv, self._rt, self._wt, self._meta, self._load
        valid = self._loads_valid
        rate_a, level_a, end_a, endl = self._rate, self._level, self._end, self._endl
        inf = math.inf
        for s, r in zip(solve, rates, strict=True):
            old = rt[s]
            if r != old:
                # A new flow's rate is -1 but its t0 is now: it moved -0.0 bytes, a no-op.
                moved = old * (now - float(t0[s]))
                sent[s] += moved
                left_of[s] = left = float(left_of[s]) - moved
                t0[s] = now
                rt[s] = rate_a[s] = r
                lv[s] = level_a[s] = r / wt[s]
                end_a[s] = endl[s] = now + left / r if r > 0 else inf
                if valid:
                    delta = r - old if old > 0 else r
                    for lk in meta[s].links:  # type: ignore[union-attr]
                        load[lk] += delta

    def _apply_arrays(self, now: float, solve: np.ndarray, rates: np.ndarray) -> None:
        """Give the flows in ``solve``, whose rates changed, their new ``rates``; per-flow state
        in the arrays. Same arithmetic as :meth:`_apply_rates`."""
        sl, new_rate = solve, rates
        old_rate = self._rate[sl]
        # A new flow's rate is -1 but its t0 is now: it moved -0.0 bytes, a no-op.
        moved = old_rate * (now - self._t0[sl])
        self._sent[sl] += moved
        left = self._left[sl] - moved
        self._left[sl] = left
        self._t0[sl] = now
        self._rate[sl] = new_rate
        # With every weight 1 a level is its rate (x / 1.0 is x).
        level = new_rate / self._weight[sl] if self._n_weighted else new_rate
        self._level[sl] = level
        # now + left / rate where the rate is positive, inf where it is 0.
        end = np.full(sl.size, math.inf)
        np.divide(left, new_rate, out=end, where=new_rate > 0)
        end += now
        self._end[sl] = end
        lv, rt, endl = self._lv, self._rt, self._endl
        if not self._loads_valid:
            for slot, x, r, e in zip(sl.tolist(), level.tolist(), new_rate.tolist(),
                                     end.tolist(), strict=True):
                lv[slot] = x
                endl[slot] = e
                rt[slot] = r
            return
        meta, load = self._meta, self._load
        for slot, x, r, e in zip(sl.tolist(), level.tolist(), new_rate.tolist(), end.tolist(),
                                 strict=True):
            old = rt[slot]
            lv[slot] = x
            endl[slot] = e
            rt[slot] = r
            delta = r - old if old > 0 else r
            for lk in meta[slot].links:  # type: ignore[union-attr]
                load[lk] += delta

    def _safe_level(self) -> float:
        """The level below which no flow's rate can change (0 = re-solve everything).

        Flows at a normalised rate strictly below it keep their rates: no link touched by a change
        saturates below it, in the old filling (a link saturates at or above the level of every
        flow on it) nor in the new one. The new saturation level of a link gaining flows (total
        weight ``A``) or changing capacity (to ``c``), with its other flows frozen at their old
        rates ``r_i`` (levels ``s_i`` ascending, weights ``w_i``), is the least ``x`` where the
        concave fill curve ``sum_i min(r_i, w_i x) + A x`` reaches ``c``. The curve is the minimum
        of the lines ``R_<j + x (W - W_<j)``, so that ``x`` is the largest of
        ``(c - R_<j) / (W - W_<j)``.
        """
        cut = self._dep_level
        if not self._arrivals and not self._cap_changed:
            return cut
        lv, rt, wt, members, cap = self._lv, self._rt, self._wt, self._members, self._cap_list
        meta = self._meta
        arriving: dict[int, float] = {}
        for slot in self._arrivals:
            w = wt[slot]
            for lk in meta[slot].links:  # type: ignore[union-attr]
                arriving[lk] = arriving.get(lk, 0.0) + w
        for lk in self._cap_changed:
            arriving.setdefault(lk, 0.0)
        new = set(self._arrivals)
        capped = set(self._cap_changed)
        level_of = lv.__getitem__
        unit = self._n_weighted == 0
        for lk, a in arriving.items():
            c = cap[lk]
            # The link's old flows by (level, slot): sorting the slots, then (stably) by level.
            items = sorted(sorted(members[lk] - new), key=level_of)
            if not items:
                sigma = c / a if a > 0 else math.inf
            else:
                if unit:
                    # Sums of ones: exact in any order, so the weight above flow j is a
                    # difference.
                    w_total = a + len(items)
                    rest = None
                else:
                    # The weight above each flow summed afresh from the top (a difference of
                    # running sums would lose a weight of 1e-9 beside one of 1).
                    rest = [0.0] * len(items)
                    acc = a
                    for j in range(len(items) - 1, -1, -1):
                        acc += wt[items[j]]
                        rest[j] = acc
                    w_total = acc
                r_before = 0.0
                w_before = 0.0
                sigma = -math.inf
                for j, s in enumerate(items):
                    t = (c - r_before) / (w_total - w_before if rest is None else rest[j])
                    if t > sigma:
                        sigma = t
                    if sigma <= lv[s]:
                        # The curve reaches c before this flow's level: every later line (it
                        # and the flows above it still rising) reaches c no later.
                        break
                    r_before += rt[s]
                    w_before += wt[s]
                else:
                    # The last line, past every old flow's level, has slope A (0: the link
                    # saturates only if its old flows alone already fill it).
                    if a > 0:
                        t = (c - r_before) / a
                    else:
                        t = math.inf if r_before < c else -math.inf
                    if t > sigma:
                        sigma = t
                if lk in capped:
                    # In the old filling the link saturated no lower than its top flow's level.
                    sigma = min(sigma, lv[items[-1]])
            if sigma < cut:
                cut = sigma
        return max(cut, 0.0)

    def _link_load(self, slots: np.ndarray) -> np.ndarray:
        """Bytes per second the flows in ``slots`` put on each link (the padding link last).

        Summed by path position, then slot (``bincount`` order, which the plain-Python path
        repeats). ``take`` along an axis costs a fifth of the fancy index ``[:, slots]``.
        """
        rate = self._rate.take(slots)
        return np.bincount(self._paths.take(slots, axis=1).ravel(),
                           weights=np.concatenate((rate,) * self._width),  # once per position
                           minlength=self._cap_ext.size)

    def _record_loads(self, now: float) -> None:
        alive = np.flatnonzero(self._alive)
        load = self._link_load(alive)[: self._n_links]
        diff = np.flatnonzero((load != self._last_load) | (self._cap != self._last_cap))
        if diff.size:
            self._mon_times.append(now)
            self._mon_links.append(diff)
            self._mon_load.append(load[diff])
            self._mon_cap.append(self._cap[diff].copy())
            self._last_load = load
            self._last_cap = self._cap.copy()
