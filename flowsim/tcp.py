"""A TCP-aware sharing mode: max-min flows corrected by what a packet-level DCTCP run shows.

Exact max-min (:class:`flowsim.network.Network`) is a fluid ideal. A packet-level reference
(ns-3, DCTCP over RED/ECN switches, fresh connection per flow; :mod:`react.backends.ns3`) differs
from it in the ways below that matter for collectives, none of them losses (there are none).
Each was isolated by a reference case (``docs/results/crossval.md``):

1. **Headers**: a link carries ``segment + headers`` bytes per ``segment`` bytes of payload, so
   the goodput of a saturated link is ``goodput`` times its capacity (1448 / 1502 with a 1500
   byte MTU, TCP timestamps and a point-to-point frame: 3.6% less).
2. **Start-up**: a fresh connection spends a handshake and a few round trips of slow start
   before it takes its share; modelled as ``startup_s`` of idle time before the flow starts
   sending (its observed start is still the moment it was asked for). The fitted value (15 µs
   on 2 µs links) is an effective one: it also absorbs the window's ramp.
3. **Data both ways**: two hosts exchanging data both ways at once reach only about 70% of a
   link per direction in ns-3, because each direction's ACKs queue behind the other
   direction's data. Modelled with the engine's per-flow rate caps: while a finite flow
   u -> v and a finite flow v -> u of the same job (``tenant``) both send, each is capped at
   ``reverse_share`` times the capacity of its path's slowest link. A cap only matters where
   the flow would get more: two flows into one host (a tree's fan-in) get half a link each
   whatever comes back.
4. **Round trips**: on a common bottleneck a flow of a shorter round trip grows its window
   faster and takes more (two 2 MB flows from one host, one within its leaf and one across a
   spine: the first gets about 85% of the link). Every flow's weight is multiplied by
   ``(rtt_ref / rtt) ** rtt_exponent``, its round trip being twice its path's latency plus a
   standing queue at its slowest link (:func:`round_trip_s`).
5. **Ramp**: when a flow's share grows (a competitor ended), TCP takes it only as fast as its
   window grows, about ``ramp_segments`` segments per round trip per round trip, and the link
   is partly idle meanwhile (the flow across the spine above needs another 290 µs once the
   other has ended, where the whole link would send what it has left in about 140). Modelled
   by holding each rate rise back: a flow whose rate would rise by ``d`` keeps its old rate
   for ``d / (2 a)`` seconds, ``a`` its ramp's slope (the bytes a linear ramp loses), then
   takes its share. The rise that ends a hold is not held again.
6. **Young flows and DCTCP's latecomer penalty**: a new flow starts with ``alpha = 1`` and
   halves its window at the first ECN mark, while a flow that has run for long has learnt a
   small alpha and keeps most of its window. A finite flow's weight is multiplied by
   ``young_weight`` for its first ``young_s`` seconds of sending; the first long-lived flow
   into a host also has the weight ``1 + long_lived_extra`` (long-lived flows together take
   more than their number says, on the star whatever their number).

:class:`TcpNetwork` applies these to every flow and changes nothing else: it is a
:class:`~flowsim.network.Network` whose :meth:`TcpNetwork.start_flow` turns a request into a
(bigger, delayed, weighted, capped) max-min flow, and whose re-solves hold rate rises back.
The parameters' defaults (:data:`FITTED`) were fitted once against ns-3 by ``python3 -m
experiments.fit_tcp`` (which reproduces them from the committed ns-3 measurements,
``docs/results/ns3_reference.csv``) and are documented with their fit in
``docs/results/crossval.md``: the mode is within 10% of ns-3 on every reference case (stars,
pairs and an oversubscribed leaf-spine with ECMP, trees and single flows). It is fitted to
100G DCTCP with 1-2 µs links; other rates and latencies are extrapolation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import simpy

from flowsim.errors import FlowError
from flowsim.network import FlowDone, Network, _Meta
from flowsim.records import FlowRecord
from flowsim.topology import Topology

__all__ = ["FITTED", "MAXMIN", "QUEUE_BITS", "SEGMENT_BITS", "TcpModel", "TcpNetwork",
           "round_trip_s"]

_RISE_RTOL = 1e-9
"""A rate rise smaller than this, relative, is round-off and not held back."""


@dataclass(frozen=True, slots=True)
class TcpModel:
    """The corrections of the TCP-aware mode (module docstring).

    Parameters
    ----------
    goodput : float
        Payload bytes per byte on the wire, in (0, 1].
    startup_s : float
        Idle time of every finite flow before it starts sending, >= 0.
    long_lived_extra : float
        The extra max-min weight, >= 0, that the long-lived flows into one host share: a
        long-lived flow started while no other one into its destination runs has its weight
        multiplied by ``1 + long_lived_extra``, no other flow. (If that flow stops while later
        ones still run, the extra is gone until they all have stopped: background flows that
        start and stop together, the case fitted, are modelled exactly.)
    reverse_share : float
        In (0, 1]: the rate cap, as a fraction of its path's slowest link, of a finite flow
        while a finite flow of the same job runs the other way between the same two hosts
        (1: no cap).
    rtt_exponent : float
        >= 0: every flow's max-min weight is multiplied by ``(rtt_ref / rtt) ** rtt_exponent``
        (:func:`round_trip_s`; ``rtt_ref`` only sets the scale), so that on a common bottleneck
        a flow of a shorter round trip takes more (0: no effect).
    ramp_segments : float
        > 0: how fast a flow takes a larger share, as TCP's window growth in segments per round
        trip: a rate rise of ``d`` bits/s is held back for ``d / (2 * a)`` seconds with
        ``a = ramp_segments * segment bits / rtt ** 2`` (the bytes a linear ramp of slope ``a``
        loses); ``math.inf``: at once, as max-min.
    young_weight, young_s : float
        In (0, 1] and >= 0: a finite flow's weight is multiplied by ``young_weight`` for its
        first ``young_s`` seconds of sending (1 or 0: no effect).
    """

    goodput: float = 1.0
    startup_s: float = 0.0
    long_lived_extra: float = 0.0
    reverse_share: float = 1.0
    rtt_exponent: float = 0.0
    ramp_segments: float = math.inf
    young_weight: float = 1.0
    young_s: float = 0.0

    def __post_init__(self) -> None:
        if not (isinstance(self.goodput, (int, float)) and 0 < self.goodput <= 1):
            raise FlowError(f"TcpModel: goodput must be in (0, 1], got goodput={self.goodput!r}")
        if not (isinstance(self.startup_s, (int, float)) and math.isfinite(self.startup_s)
                and self.startup_s >= 0):
            raise FlowError(f"TcpModel: startup_s must be a finite number >= 0, got "
                            f"startup_s={self.startup_s!r}")
        if not (isinstance(self.long_lived_extra, (int, float))
                and math.isfinite(self.long_lived_extra) and self.long_lived_extra >= 0):
            raise FlowError(f"TcpModel: long_lived_extra must be a finite number >= 0, got "
                            f"long_lived_extra={self.long_lived_extra!r}")
        if not (isinstance(self.reverse_share, (int, float)) and 0 < self.reverse_share <= 1):
            raise FlowError(f"TcpModel: reverse_share must be in (0, 1], got "
                            f"reverse_share={self.reverse_share!r}")
        if not (isinstance(self.rtt_exponent, (int, float))
                and math.isfinite(self.rtt_exponent) and self.rtt_exponent >= 0):
            raise FlowError(f"TcpModel: rtt_exponent must be a finite number >= 0, got "
                            f"rtt_exponent={self.rtt_exponent!r}")
        if not (isinstance(self.ramp_segments, (int, float)) and self.ramp_segments > 0):
            raise FlowError(f"TcpModel: ramp_segments must be a number > 0 (math.inf: no "
                            f"ramp), got ramp_segments={self.ramp_segments!r}")
        if not (isinstance(self.young_weight, (int, float)) and 0 < self.young_weight <= 1):
            raise FlowError(f"TcpModel: young_weight must be in (0, 1], got "
                            f"young_weight={self.young_weight!r}")
        if not (isinstance(self.young_s, (int, float)) and math.isfinite(self.young_s)
                and self.young_s >= 0):
            raise FlowError(f"TcpModel: young_s must be a finite number >= 0, got "
                            f"young_s={self.young_s!r}")


SEGMENT_BITS = 1448 * 8
"""TCP payload bits per packet of the reference setup (1500-byte MTU, timestamps on)."""
QUEUE_BITS = 32 * 1502 * 8
"""The standing queue a DCTCP flow sees at its bottleneck: RED's marking threshold of the
reference setup, 32 packets of 1502 bytes on the wire (:func:`round_trip_s`)."""


def round_trip_s(topology: Topology, path: Sequence[int]) -> float:
    """A flow's round trip on ``path``: twice its links' latency plus the queueing delay of
    :data:`QUEUE_BITS` at its slowest link (3.84 µs at 100 Gb/s)."""
    links = topology.links
    latency = sum(links[lk].latency_s for lk in path)
    return 2 * latency + QUEUE_BITS / min(links[lk].capacity_bps for lk in path)


MAXMIN = TcpModel()
"""No correction: a :class:`TcpNetwork` with this model behaves as a plain Network."""

FITTED = TcpModel(goodput=1448 / 1502, startup_s=15e-6, long_lived_extra=0.5, reverse_share=0.69,
                  rtt_exponent=1.5, ramp_segments=2.5, young_weight=0.4, young_s=1.2e-3)
"""Fitted against ns-3 (DCTCP g = 1/16, RED 32/60 packets, 1500-byte MTU) by
``experiments/fit_tcp.py``; see the module docstring."""


class TcpNetwork(Network):
    """A :class:`~flowsim.network.Network` in the TCP-aware sharing mode (module docstring).

    Parameters
    ----------
    topology : Topology
    model : TcpModel
        The corrections; :data:`FITTED` by default.
    **kwargs
        Everything else :class:`~flowsim.network.Network` takes (``env``, ``router``, ``seed``,
        ``monitor_links``).

    Notes
    -----
    ``network.records`` hold what the wire carried: ``size_bytes`` is the payload divided by
    ``goodput``, ``start_s`` is when the flow started sending and ``weight`` includes the
    model's factors; the record the flow's event fires with gives the payload size and the
    moment the flow was asked for.
    """

    def __init__(self, topology: Topology, *, model: TcpModel = FITTED, **kwargs: Any) -> None:
        if not isinstance(model, TcpModel):
            raise FlowError(f"TcpNetwork: model must be a TcpModel, got {model!r}")
        super().__init__(topology, **kwargs)
        self.model = model
        self._long_lived_into: dict[str, int] = {}  # running long-lived flows per destination
        # Finite flows sending, per (tenant, src, dst), and the flows now pair-capped.
        self._sending: dict[tuple[str, str, str], list[int]] = {}
        # Per finite flow: its (tenant, src, dst) and its pair cap (bits/s).
        self._pair_cap: dict[int, tuple[tuple[str, str, str], float]] = {}
        self._capped: set[int] = set()
        # Caps per running flow: its own (start_flow's rate_cap_bps) and a ramp's hold (bits/s).
        self._own_cap: dict[int, float | None] = {}
        self._hold: dict[int, float] = {}
        self._rtt: dict[int, float] = {}  # round trip per running flow, when the ramp is on
        self._ramp = model.ramp_segments != math.inf
        self._rises: list[tuple[int, float, float]] = []  # (slot, old, new rate in bytes/s)
        self._released: set[int] = set()  # holds lifted at this instant: their rise is not held
        self._rtt_ref: float | None = None
        self._rtt_of_path: dict[tuple[int, ...], float] = {}
        # Per finite flow: the event start_flow returned, its payload and when it was asked for.
        self._relays: dict[int, tuple[FlowDone, float, float]] = {}
        young = model.young_weight != 1 and model.young_s > 0
        self._young = model.young_weight if young else 1.0
        # Calls due at one instant (flows asked together start together, and grow up together):
        # one SimPy event runs them all, in the order they were asked for.
        self._due: dict[float, list[Any]] = {}

    def start_flow(self, src: str, dst: str, size_bytes: float, *, port: int = 0,
                   path: Sequence[int] | None = None, tag: str = "", tenant: str = "",
                   weight: float = 1.0, rate_cap_bps: float | None = None) -> FlowDone:
        """Start a flow with the model's corrections; see :meth:`Network.start_flow`.

        A long-lived flow (``size_bytes = math.inf``) starts at once, with its weight multiplied
        by ``1 + long_lived_extra`` if it is the first into its host; it can be stopped with the
        returned event's ``flow_id``. A finite flow carries ``size_bytes / goodput`` bytes from
        ``startup_s`` on, capped while a flow of its job runs the other way (``reverse_share``);
        its event's ``flow_id`` is -1 until then (finite flows are not meant to be stopped).
        Every flow's weight is multiplied by its round trip's factor (``rtt_exponent``).
        A ``rate_cap_bps`` applies to the bytes on the wire; with the pair cap, the lower one.
        """
        model = self.model
        size = float(size_bytes)
        if rate_cap_bps is not None and not rate_cap_bps > 0:  # also NaN
            super().start_flow(src, dst, 1.0, rate_cap_bps=rate_cap_bps)  # raises, naming it
        own = None if rate_cap_bps is None or rate_cap_bps == math.inf else float(rate_cap_bps)
        if size == math.inf:
            into = self._long_lived_into
            first = into.get(dst, 0) == 0
            w = weight * (1 + model.long_lived_extra * first) * self._rtt_factor(src, dst, port,
                                                                                path)
            event = super().start_flow(src, dst, size, port=port, path=path, tag=tag,
                                       tenant=tenant, weight=w, rate_cap_bps=rate_cap_bps)
            into[dst] = into.get(dst, 0) + 1
            event.callbacks.append(lambda _ev: into.__setitem__(dst, into[dst] - 1))
            self._track(event.flow_id, own)
            return event
        if not size > 0:  # also NaN; the same words as Network.start_flow
            raise FlowError(f"start_flow: size_bytes={size_bytes!r}, expected a positive number "
                            "of bytes (math.inf for a long-lived flow)")
        wire = size / model.goodput
        if model.startup_s == 0:
            w = weight * self._rtt_factor(src, dst, port, path)
            inner = super().start_flow(src, dst, wire, port=port, path=path, tag=tag,
                                       tenant=tenant, weight=w * self._young,
                                       rate_cap_bps=rate_cap_bps)
            self._track(inner.flow_id, own)
            self._grow_up(inner.flow_id, w)
            self._sends(inner.flow_id, tenant, src, dst)
            return self._relay(inner, size, float(self.env.now))
        # Check the endpoints and the path now, not when the flow starts sending.
        if path is None:
            self.router.route(src, dst, port)
        else:
            self.router.check_path(src, dst, path)
        if src == dst:
            raise FlowError(f"start_flow: src and dst are both {src!r}; expected distinct hosts")
        w = weight * self._rtt_factor(src, dst, port, path)
        outer = FlowDone(self.env, -1)
        asked = float(self.env.now)

        def begin(_event: simpy.Event) -> None:
            inner = super(TcpNetwork, self).start_flow(src, dst, wire, port=port, path=path,
                                                       tag=tag, tenant=tenant,
                                                       weight=w * self._young,
                                                       rate_cap_bps=rate_cap_bps)
            outer.flow_id = inner.flow_id
            self._track(inner.flow_id, own)
            self._grow_up(inner.flow_id, w)
            self._sends(inner.flow_id, tenant, src, dst)
            self._relays[inner.flow_id] = (outer, size, asked)

        self._after(model.startup_s, begin)
        return outer

    def _after(self, delay: float, call: Any) -> None:
        """Run ``call(None)`` after ``delay`` seconds, sharing the event of the calls due then."""
        at = self.env.now + delay
        calls = self._due.get(at)
        if calls is None:
            self._due[at] = [call]
            self.env.timeout(delay).callbacks.append(partial(self._run_due, at))
        else:
            calls.append(call)

    def _run_due(self, at: float, _event: simpy.Event) -> None:
        for call in self._due.pop(at):
            call(None)

    # -- round trips: weights and ramps -------------------------------------------------------
    def _rtt_factor(self, src: str, dst: str, port: int, path: Sequence[int] | None) -> float:
        """The weight factor of a flow's round trip, ``(rtt_ref / rtt) ** rtt_exponent``.

        ``rtt_ref`` is the round trip between the first and the last host (the longest path in
        the builders' fabrics): only a scale, chosen so that most flows keep weight 1.
        """
        k = self.model.rtt_exponent
        if k == 0:
            return 1.0
        if self._rtt_ref is None:
            hosts = self.topology.hosts
            self._rtt_ref = self._round_trip(tuple(self.router.route(hosts[0], hosts[-1], 0)))
        links = tuple(self.router.route(src, dst, port) if path is None
                      else self.router.check_path(src, dst, path))
        rtt = self._round_trip(links)
        return 1.0 if rtt == self._rtt_ref else (self._rtt_ref / rtt) ** k

    def _round_trip(self, path: tuple[int, ...]) -> float:
        rtt = self._rtt_of_path.get(path)
        if rtt is None:
            rtt = self._rtt_of_path[path] = round_trip_s(self.topology, path)
        return rtt

    def _grow_up(self, flow_id: int, weight: float) -> None:
        """After ``young_s``, give a young flow its full ``weight`` (if it still runs)."""
        if self._young == 1.0:
            return

        def grown(_event: simpy.Event) -> None:
            if flow_id in self._slot_of:
                self.set_weight(flow_id, weight)

        self._after(self.model.young_s, grown)

    def _track(self, flow_id: int, own: float | None) -> None:
        self._own_cap[flow_id] = own
        if self._ramp:
            path = self._meta[self._slot_of[flow_id]].path  # type: ignore[union-attr]
            self._rtt[flow_id] = self._round_trip(path)

    def _apply_rates(self, now: float, solve: list[int], rates: list[float]) -> None:
        """Note every running flow's rate rise (for the ramp), then apply the rates."""
        if self._ramp:
            rt, rises = self._rt, self._rises
            for s, r in zip(solve, rates, strict=True):
                old = rt[s]
                if old > 0 and r > old * (1 + _RISE_RTOL):
                    rises.append((s, old, r))
        super()._apply_rates(now, solve, rates)

    def _apply_arrays(self, now: float, solve: np.ndarray, rates: np.ndarray) -> None:
        """Note every running flow's rate rise (for the ramp), then apply the rates."""
        if self._ramp:
            old = self._rate[solve]
            up = ((old > 0) & (rates > old * (1 + _RISE_RTOL))).nonzero()[0]
            self._rises.extend(zip(solve[up].tolist(), old[up].tolist(), rates[up].tolist(),
                                   strict=True))
        super()._apply_arrays(now, solve, rates)

    def _resolve_now(self) -> None:
        """Re-solve; then hold back each flow whose rate rose at its old rate for a while
        (``ramp_segments``): it is capped there, the rates re-solved with the holds at once
        (as the next event of this instant would), and the cap lifted after the hold."""
        super()._resolve_now()
        released = self._released
        while self._rises:
            rises, self._rises = self._rises, []
            segments = self.model.ramp_segments
            held = False
            for slot, old, new in rises:
                m = self._meta[slot]
                if m is None:
                    continue
                fid = m.flow_id
                if fid in self._hold or fid in released:
                    continue
                rtt = self._rtt[fid]
                hold = (new - old) * 8.0 * rtt * rtt / (2.0 * segments * SEGMENT_BITS)
                if not hold > 0:
                    continue
                if not held:  # the caps' re-solve runs below, not as an event of its own
                    held = self._pending = True
                self._hold[fid] = old * 8.0
                self._apply_cap(fid)
                self.env.timeout(hold).callbacks.append(partial(self._release, fid))
            released.clear()
            if held:
                super()._resolve_now()
        released.clear()

    def _release(self, flow_id: int, _event: simpy.Event | None = None) -> None:
        """End a flow's hold: back to its other caps (its rise then is not held again)."""
        if self._hold.pop(flow_id, None) is not None and flow_id in self._slot_of:
            self._released.add(flow_id)
            self._apply_cap(flow_id)

    # -- caps -----------------------------------------------------------------------------------
    def _apply_cap(self, flow_id: int) -> None:
        """Give the flow the lowest of its own cap, its pair cap and its ramp's hold."""
        caps = [c for c in (self._own_cap.get(flow_id), self._hold.get(flow_id)) if c is not None]
        if flow_id in self._capped:
            caps.append(self._pair_cap[flow_id][1])
        self.set_rate_cap(flow_id, min(caps) if caps else None)

    def _sends(self, flow_id: int, tenant: str, src: str, dst: str) -> None:
        """A finite flow starts sending: cap it and its job's flows the other way, if any."""
        if self.model.reverse_share == 1:
            return
        key = (tenant, src, dst)
        path = self._meta[self._slot_of[flow_id]].path  # type: ignore[union-attr]
        links = self.topology.links
        cap = self.model.reverse_share * min(links[lk].capacity_bps for lk in path)
        self._pair_cap[flow_id] = (key, cap)
        self._sending.setdefault(key, []).append(flow_id)
        back = self._sending.get((tenant, dst, src))
        if back:
            for fid in (*back, flow_id):
                if fid not in self._capped:
                    self._capped.add(fid)
                    self._apply_cap(fid)

    def _depart(self, slot: int, now: float, *, stopped: bool) -> None:
        """Remove the flow; when it was the last of its job one way, lift the pair caps of
        the flows the other way (back to their own caps)."""
        flow_id = self._meta[slot].flow_id  # type: ignore[union-attr]
        super()._depart(slot, now, stopped=stopped)
        self._own_cap.pop(flow_id, None)
        self._hold.pop(flow_id, None)
        self._rtt.pop(flow_id, None)
        entry = self._pair_cap.pop(flow_id, None)
        if entry is None:
            return
        key = entry[0]
        self._capped.discard(flow_id)
        same = self._sending[key]
        same.remove(flow_id)
        if same:
            return
        del self._sending[key]
        tenant, src, dst = key
        for fid in self._sending.get((tenant, dst, src), ()):
            if fid in self._capped:  # no flow of its job the other way any more
                self._capped.discard(fid)
                self._apply_cap(fid)

    def _relay(self, inner: FlowDone, size: float, asked: float) -> FlowDone:
        outer = FlowDone(self.env, inner.flow_id)
        self._relays[inner.flow_id] = (outer, size, asked)
        return outer

    def _deliver(self, m: _Meta, sent: float, end: float, stopped: bool, delay: float) -> None:
        """A finite flow's caller gets its record translated back to the payload asked for,
        on the event :meth:`start_flow` returned (the engine's own event is never fired for
        it); the wire record is built only when records are kept."""
        relay = self._relays.pop(m.flow_id, None)
        if relay is None:
            super()._deliver(m, sent, end, stopped, delay)
            return
        outer, size, asked = relay
        if self.keep_records:
            self._keep_when_fired(outer, self._record(m, sent, end, stopped))
        outer.succeed_after(
            FlowRecord(m.flow_id, m.src, m.dst, size, min(size, sent * self.model.goodput),
                       asked, end, m.path, m.port, m.tag, m.tenant, m.weight, stopped), delay)
