"""Background traffic: SimPy processes that start and stop flows on a shared Network.

Each function here starts one *source* between two hosts and returns a :class:`TrafficSource`
handle, to stop it early and to read the flows it made. Every flow a source starts carries the
source's ``tenant`` (who owns the traffic: a job, "storage", "background", ...) and ``tag`` (what
kind of traffic it is), so several jobs and background sources can share one network and still be
told apart in ``network.records``.

The three sources model the congestion the paper injects (§7.1, §7.2):

- :func:`long_lived` — one flow of unbounded size (``math.inf`` bytes) that takes its max-min share
  until it is stopped: a competing bulk transfer that never ends during the run.
- :func:`periodic_bulk` — a transfer of ``size_bytes`` every ``period_s`` (the testbed's "RDMA
  ping-pong" flows, 1 GB at a time). At most one transfer is in flight: one that is due while the
  previous is still running starts the moment the previous ends (so an overloaded source becomes
  back-to-back, like a ping-pong that waits for its reply). Due times stay on the grid
  ``start_s + i * period_s``; pass ``overlap=True`` to start every transfer on time instead.
- :func:`ping_pong` — ``size_bytes`` from ``src`` to ``dst``, then the same back, then again,
  each transfer starting when the previous one ends (plus an optional ``gap_s``): the testbed's
  ping-pong taken literally, loading the receiver's inbound link and its outbound link in turn.
- :func:`poisson_on_off` — alternating off and on periods with exponentially distributed lengths
  (means ``mean_off_s``, ``mean_on_s``), starting with an off period; during an on period one
  unbounded flow runs, stopped when the period ends. Random draws come from a numpy ``Generator``
  seeded from ``(seed, src, dst, port)`` through a stable hash, so a source repeats exactly for a
  seed, in any process, whatever other sources exist.

Stopping: at ``stop_s`` (or on :meth:`TrafficSource.stop`) a source starts nothing more and stops
its running flows with ``Network.stop_flow``; their records then have ``stopped=True``.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import simpy

from flowsim.errors import FlowError

if TYPE_CHECKING:
    from flowsim.network import FlowDone, Network
    from flowsim.records import FlowRecord

__all__ = ["TrafficSource", "long_lived", "periodic_bulk", "ping_pong", "poisson_on_off",
           "source_seed"]

DEFAULT_TENANT = "background"


def source_seed(seed: int, src: str, dst: str, port: int) -> int:
    """The 64-bit seed of a random source's generator, from a stable hash of its identity.

    BLAKE2b (8-byte digest, personalisation ``b"flowsim-traffic"``) of the compact JSON text of
    ``[seed, src, dst, port]``, read big-endian. Independent of Python's salted ``hash()``, so the
    same source draws the same periods in every process.
    """
    key = json.dumps([int(seed), str(src), str(dst), int(port)], separators=(",", ":"))
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8, person=b"flowsim-traffic")
    return int.from_bytes(digest.digest(), "big")


class TrafficSource:
    """Handle on one running background source: its flows, and a way to stop it.

    Built by :func:`long_lived`, :func:`periodic_bulk`, :func:`ping_pong` and
    :func:`poisson_on_off`; not meant to be constructed directly.

    Attributes
    ----------
    kind : str
        The builder's name, e.g. ``"periodic_bulk"``.
    src, dst, tenant, tag : str
        As given to the builder; every flow of the source carries ``tenant`` and ``tag``.
    process : simpy.Process
        The SimPy process driving the source; yield it to wait until the source has finished.
    """

    def __init__(
        self, network: Network, kind: str, src: str, dst: str, *, tenant: str, tag: str
    ) -> None:
        self.network = network
        self.kind = kind
        self.src = src
        self.dst = dst
        self.tenant = tenant
        self.tag = tag
        self._flow_ids: list[int] = []
        self._records: list[FlowRecord] = []
        self._running: dict[int, simpy.Event] = {}
        self._stop_event: simpy.Event = network.env.event()
        self.process: simpy.Process  # set by _launch

    # -- inspection ----------------------------------------------------------------------------
    @property
    def flow_ids(self) -> tuple[int, ...]:
        """Ids of every flow this source has started, in start order."""
        return tuple(self._flow_ids)

    @property
    def records(self) -> tuple[FlowRecord, ...]:
        """Records of this source's flows that have ended (completed or stopped), in end order."""
        return tuple(self._records)

    @property
    def running_flow_ids(self) -> tuple[int, ...]:
        """Ids of this source's flows still running."""
        return tuple(self._running)

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` has been called (directly or at ``stop_s``)."""
        return bool(self._stop_event.triggered)

    def __repr__(self) -> str:
        return (
            f"TrafficSource({self.kind}, {self.src!r}->{self.dst!r}, tenant={self.tenant!r}, "
            f"flows={len(self._flow_ids)}, running={len(self._running)}, stopped={self.stopped})"
        )

    # -- control -------------------------------------------------------------------------------
    def stop(self) -> None:
        """Start no more flows and stop the running ones now. Calling it again does nothing."""
        if self._stop_event.triggered:
            return
        self._stop_event.succeed()
        for flow_id in list(self._running):
            self._stop_flow(flow_id)

    # -- helpers for the processes below -------------------------------------------------------
    def _stop_flow(self, flow_id: int) -> None:
        # A flow whose last byte is sent but not yet arrived (path latency) is no longer running
        # in the network, though its record is still to come: there is nothing left to stop.
        try:
            self.network.stop_flow(flow_id)
        except FlowError:
            if flow_id not in self._running:
                raise

    def _start(self, size_bytes: float, port: int, path: Sequence[int] | None, *,
               back: bool = False) -> FlowDone:
        event = self.network.start_flow(
            self.dst if back else self.src,
            self.src if back else self.dst,
            size_bytes,
            port=port,
            path=path,
            tag=self.tag,
            tenant=self.tenant,
        )
        flow_id = event.flow_id
        self._flow_ids.append(flow_id)
        self._running[flow_id] = event
        event.callbacks.append(self._ended)
        return event

    def _ended(self, event: simpy.Event) -> None:
        if event.ok:
            record = cast("FlowRecord", event.value)
            self._running.pop(record.flow_id, None)
            self._records.append(record)
        # A failed flow event is left to fail loudly in the environment (never swallowed).

    def _sleep(self, delay_s: float) -> simpy.Event:
        """An event that fires after ``delay_s`` or when the source is stopped, whichever first."""
        env = self.network.env
        return env.any_of([env.timeout(max(delay_s, 0.0)), self._stop_event])

    def _until(self, event: simpy.Event) -> simpy.Event:
        """An event that fires with ``event`` or when the source is stopped, whichever first."""
        return self.network.env.any_of([event, self._stop_event])

    def _launch(self, body: Callable[[], Generator[simpy.Event, Any, None]], stop_s: float | None):
        env = self.network.env
        self.process = env.process(body())
        if stop_s is not None:
            env.process(self._stop_at(stop_s))

    def _stop_at(self, stop_s: float) -> Generator[simpy.Event, Any, None]:
        yield self._sleep(stop_s - self.network.env.now)
        self.stop()


# -- argument checks -------------------------------------------------------------------------------
def _positive(func: str, name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise FlowError(f"{func}: {name} must be a positive finite number, got {name}={value!r}")
    return float(value)


def _window(
    func: str, network: Network, start_s: float | None, stop_s: float | None
) -> tuple[float, float | None]:
    now = network.env.now
    if start_s is None:
        start = now
    else:
        if (
            isinstance(start_s, bool)
            or not isinstance(start_s, numbers.Real)
            or not math.isfinite(start_s)
            or start_s < now
        ):
            raise FlowError(
                f"{func}: start_s must be a finite time not before now ({now} s), "
                f"got start_s={start_s!r}"
            )
        start = float(start_s)
    if stop_s is None:
        return start, None
    if isinstance(stop_s, bool) or not isinstance(stop_s, numbers.Real) or not stop_s > start:
        raise FlowError(
            f"{func}: stop_s must be a time after start_s={start}, got stop_s={stop_s!r}"
        )
    return start, float(stop_s)


def _endpoints(func: str, network: Network, src: str, dst: str) -> None:
    topo = network.topology
    for role, name in (("src", src), ("dst", dst)):
        if topo.node(name).kind != "host":  # raises UnknownNodeError for unknown names
            raise FlowError(f"{func}: {role}={name!r} is a switch; traffic runs between hosts")
    if src == dst:
        raise FlowError(f"{func}: src and dst are both {src!r}; expected two different hosts")


def _count(func: str, count: object) -> None:
    if count is not None and (
        isinstance(count, bool) or not isinstance(count, numbers.Integral) or count <= 0
    ):
        raise FlowError(f"{func}: count must be a positive integer or None, got count={count!r}")


def _port(func: str, port: object) -> int:
    if isinstance(port, bool) or not isinstance(port, numbers.Integral):
        raise FlowError(f"{func}: port must be an integer, got port={port!r}")
    return int(port)


def _checked(func: str, network: Network, src: str, dst: str, start_s: float | None,
             stop_s: float | None, port: object) -> tuple[float, float | None, int]:
    """Every source's common arguments, checked: ``(start, stop, port)``."""
    start, stop = _window(func, network, start_s, stop_s)
    _endpoints(func, network, src, dst)
    return start, stop, _port(func, port)


# -- sources ---------------------------------------------------------------------------------------
def long_lived(
    network: Network,
    src: str,
    dst: str,
    *,
    start_s: float | None = None,
    stop_s: float | None = None,
    port: int = 0,
    path: Sequence[int] | None = None,
    tenant: str = DEFAULT_TENANT,
    tag: str = "long_lived",
) -> TrafficSource:
    """One flow of unbounded size from ``src`` to ``dst``, from ``start_s`` until ``stop_s``.

    It takes its max-min fair share of every link on its path for as long as it runs, which is how
    a long competing transfer (checkpointing, data loading, another tenant's bulk copy) looks to a
    collective.

    Parameters
    ----------
    network : Network
        The network to run on.
    src, dst : str
        Host names.
    start_s : float, optional
        Absolute simulation time to start; default now.
    stop_s : float, optional
        Absolute time to stop the flow; default never (stop it with the handle).
    port : int
        ECMP port of the flow (chooses its path among equal-cost ones).
    path : sequence of int, optional
        Explicit path of link ids instead of ECMP.
    tenant, tag : str
        Carried by the flow's record.

    Returns
    -------
    TrafficSource
        Its single flow appears in ``flow_ids`` once started.

    Raises
    ------
    FlowError
        On a bad time window, port, or endpoints.

    Examples
    --------
    A 1 MB flow into ``h2`` shares ``s0 -> h2`` (1 GB/s) with a long-lived flow: it gets half,
    0.5 GB/s, and ends after 2 ms.

    >>> from flowsim.network import Network
    >>> from flowsim.topologies import star
    >>> net = Network(star(3, capacity_bps=8e9, latency_s=0.0))
    >>> storage = long_lived(net, "h0", "h2", tenant="storage")
    >>> record = net.env.run(until=net.start_flow("h1", "h2", 1e6))
    >>> round(record.end_s * 1e3, 9)
    2.0
    >>> len(storage.running_flow_ids), storage.records   # still running, nothing ended
    (1, ())
    """
    func = "long_lived"
    start, stop, port = _checked(func, network, src, dst, start_s, stop_s, port)
    source = TrafficSource(network, func, src, dst, tenant=tenant, tag=tag)

    def body() -> Generator[simpy.Event, Any, None]:
        yield source._sleep(start - network.env.now)
        if source.stopped:
            return
        source._start(math.inf, port, path)

    source._launch(body, stop)
    return source


def periodic_bulk(
    network: Network,
    src: str,
    dst: str,
    size_bytes: float,
    period_s: float,
    *,
    start_s: float | None = None,
    stop_s: float | None = None,
    count: int | None = None,
    overlap: bool = False,
    port: int = 0,
    path: Sequence[int] | None = None,
    tenant: str = DEFAULT_TENANT,
    tag: str = "periodic_bulk",
) -> TrafficSource:
    """A transfer of ``size_bytes`` due every ``period_s``, as the paper's ping-pong flows.

    Transfer ``i`` is due at ``start_s + i * period_s``. Without ``overlap`` it starts at the later
    of its due time and the end of transfer ``i - 1`` (at most one in flight); with ``overlap`` it
    starts on time even if earlier ones are still running. All transfers use the same ``port``,
    hence the same ECMP path, as one long-lived connection would.

    Parameters
    ----------
    network : Network
    src, dst : str
        Host names.
    size_bytes : float
        Bytes per transfer; positive and finite.
    period_s : float
        Seconds between due times; positive.
    start_s, stop_s : float, optional
        Absolute times: the first transfer is due at ``start_s`` (default now); no transfer starts
        at or after ``stop_s``, and one still running then is stopped.
    count : int, optional
        Number of transfers; default unbounded (until ``stop_s`` or :meth:`TrafficSource.stop`).
    overlap : bool
        Start every transfer on time, even while earlier ones run.
    port, path, tenant, tag
        As for :func:`long_lived`.

    Raises
    ------
    FlowError
        On a non-positive size, period or count, a bad window, port or endpoints.
    """
    func = "periodic_bulk"
    size = _positive(func, "size_bytes", size_bytes)
    period = _positive(func, "period_s", period_s)
    start, stop, port = _checked(func, network, src, dst, start_s, stop_s, port)
    _count(func, count)
    source = TrafficSource(network, func, src, dst, tenant=tenant, tag=tag)
    env = network.env

    def body() -> Generator[simpy.Event, Any, None]:
        previous: simpy.Event | None = None
        i = 0
        while count is None or i < count:
            due = start + i * period
            if stop is not None and due >= stop:
                return
            yield source._sleep(due - env.now)
            if source.stopped:
                return
            if previous is not None and not overlap and not previous.processed:
                yield source._until(previous)
                if source.stopped:
                    return
            previous = source._start(size, port, path)
            i += 1

    source._launch(body, stop)
    return source


def ping_pong(
    network: Network,
    src: str,
    dst: str,
    size_bytes: float,
    *,
    gap_s: float = 0.0,
    start_s: float | None = None,
    stop_s: float | None = None,
    count: int | None = None,
    port: int = 0,
    tenant: str = DEFAULT_TENANT,
    tag: str = "ping_pong",
) -> TrafficSource:
    """``size_bytes`` from ``src`` to ``dst``, then back from ``dst`` to ``src``, and so on.

    Each transfer starts ``gap_s`` after the previous one ended (the reply waits for the
    request), so the source loads ``dst``'s inbound link and then its outbound link in turn, at
    whatever rate the network gives it. Both directions use ``port`` (one connection).

    Parameters
    ----------
    network : Network
    src, dst : str
        Host names; the first transfer goes from ``src`` to ``dst``.
    size_bytes : float
        Bytes per transfer; positive and finite.
    gap_s : float
        Idle seconds between the end of one transfer and the start of the next; >= 0.
    start_s, stop_s : float, optional
        Absolute times: the first transfer starts at ``start_s`` (default now); none starts at or
        after ``stop_s``, and one still running then is stopped.
    count : int, optional
        Number of transfers (both directions counted); default unbounded.
    port, tenant, tag
        As for :func:`long_lived`.

    Raises
    ------
    FlowError
        On a non-positive size or count, a negative gap, a bad window, port or endpoints.
    """
    func = "ping_pong"
    size = _positive(func, "size_bytes", size_bytes)
    if (isinstance(gap_s, bool) or not isinstance(gap_s, numbers.Real)
            or not math.isfinite(gap_s) or gap_s < 0):
        raise FlowError(f"{func}: gap_s must be a finite number >= 0, got gap_s={gap_s!r}")
    gap = float(gap_s)
    start, stop, port = _checked(func, network, src, dst, start_s, stop_s, port)
    _count(func, count)
    source = TrafficSource(network, func, src, dst, tenant=tenant, tag=tag)
    env = network.env

    def body() -> Generator[simpy.Event, Any, None]:
        yield source._sleep(start - env.now)
        i = 0
        while not source.stopped and (count is None or i < count):
            if stop is not None and env.now >= stop:
                return
            yield source._until(source._start(size, port, None, back=i % 2 == 1))
            i += 1
            if gap > 0 and not source.stopped:
                yield source._sleep(gap)

    source._launch(body, stop)
    return source


def poisson_on_off(
    network: Network,
    src: str,
    dst: str,
    *,
    mean_on_s: float,
    mean_off_s: float,
    start_s: float | None = None,
    stop_s: float | None = None,
    seed: int = 0,
    port: int = 0,
    path: Sequence[int] | None = None,
    tenant: str = DEFAULT_TENANT,
    tag: str = "poisson_on_off",
) -> TrafficSource:
    """An on/off source with exponential period lengths: bursty cross-traffic.

    From ``start_s`` it alternates an off period (length ~ Exp(mean ``mean_off_s``)) and an on
    period (~ Exp(mean ``mean_on_s``)) during which one unbounded flow runs; the flow is stopped
    when the on period ends, so its record has ``stopped=True`` and ``end_s`` the end of the
    period. Flow starts thus form a Poisson process slowed by the on periods.

    The draws come from ``numpy.random.default_rng(source_seed(seed, src, dst, port))``: the same
    arguments give the same periods in every run and process; another seed, or another port of
    the same pair, gives independent ones.

    Parameters
    ----------
    network : Network
    src, dst : str
        Host names.
    mean_on_s, mean_off_s : float
        Mean on and off period lengths in seconds; positive.
    start_s, stop_s : float, optional
        Absolute times; an on period running at ``stop_s`` is cut there.
    seed : int
        Seed of the source's random stream (combined with src, dst and port).
    port, path, tenant, tag
        As for :func:`long_lived`.

    Raises
    ------
    FlowError
        On non-positive means, a bad window, seed, port or endpoints.
    """
    func = "poisson_on_off"
    mean_on = _positive(func, "mean_on_s", mean_on_s)
    mean_off = _positive(func, "mean_off_s", mean_off_s)
    start, stop, port = _checked(func, network, src, dst, start_s, stop_s, port)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise FlowError(f"{func}: seed must be an integer, got seed={seed!r}")
    rng = np.random.default_rng(source_seed(int(seed), src, dst, port))
    source = TrafficSource(network, func, src, dst, tenant=tenant, tag=tag)
    env = network.env

    def body() -> Generator[simpy.Event, Any, None]:
        yield source._sleep(start - env.now)
        while not source.stopped:
            yield source._sleep(float(rng.exponential(mean_off)))
            if source.stopped:
                return
            flow_id = source._start(math.inf, port, path).flow_id
            yield source._sleep(float(rng.exponential(mean_on)))
            if source.stopped:
                return  # stop() has stopped the flow already
            source._stop_flow(flow_id)

    source._launch(body, stop)
    return source
