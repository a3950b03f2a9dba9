"""The flowsim backend: a job's ranks placed on hosts of a shared simulated network.

One :class:`SimBackend` is one job. It executes a pattern with the design's execution rule: a flow
``(t, u -> v)`` starts the moment every flow it depends on has ended
(:meth:`react.pattern.Pattern.dependencies`; RCollective's per-chunk-graph streams, paper
Algorithm 2), and the collective ends when its last flow ends. Several backends (jobs) and
background traffic may share one :class:`flowsim.network.Network`: each job's epochs are SimPy
processes on the network's clock, so everything advances together in simulated time.

Connections and ECMP (paper §7.3): each ``(src, dst)`` pair of a job has ``connections`` transport
connections on ports ``0 .. connections-1``; in every epoch each flow picks one of them at random
(a numpy ``Generator`` seeded from the job's seed), so the ECMP hash, and with it the path,
changes from epoch to epoch. With ``connections=1`` every flow keeps one path for the whole run.

Pipelining (off by default, ``slices=1``): with ``slices=S`` every flow is cut into ``S`` equal
slices sent one after another on its connection, NCCL-style; slice ``k`` of a flow may start once
slice ``k`` of every flow it depends on has ended and its own slice ``k-1`` has been sent. A
flow's observed start is its first slice's start and its end its last slice's end.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import simpy

from flowsim.network import Network
from flowsim.records import FlowRecord
from react.backends.base import EpochResult, FlowTiming
from react.errors import ReactError
from react.pattern import Pattern

if TYPE_CHECKING:
    from react.scenario import Scenario


class SimBackend:
    """One job on a :class:`~flowsim.network.Network`.

    Parameters
    ----------
    network : Network
        The shared simulated network (may carry other jobs and background traffic).
    hosts : sequence of str
        ``hosts[i]`` runs the pattern's ``i``-th rank (``pattern.ranks[i]``); distinct hosts.
    message_bytes : float
        Size of the collective's message; a flow carries its chunks' fraction of it.
    connections : int
        Ports per rank pair; each epoch each flow uses one at random (ECMP re-hash). Default 4, as
        the paper's simulations.
    compute_gap_s : float
        Idle time after each epoch (the training step's compute), 0 by default.
    seed : int
        Seeds the per-epoch port choice.
    tenant : str
        Label of this job's flows in ``network.records``.
    slices : int
        NCCL-style pipelining: each flow is sent as this many sequential slices (module
        docstring); 1 (default) sends whole flows, which is what the other backends do.
    """

    def __init__(
        self,
        network: Network,
        hosts: Sequence[str],
        message_bytes: float,
        *,
        connections: int = 4,
        compute_gap_s: float = 0.0,
        seed: int = 0,
        tenant: str = "job",
        slices: int = 1,
    ) -> None:
        hosts = tuple(hosts)
        if len(set(hosts)) != len(hosts):
            raise ReactError(f"SimBackend: hosts must be distinct, got {hosts!r}")
        for host in hosts:
            if not network.topology.is_host(host):
                raise ReactError(f"SimBackend: {host!r} is a switch; ranks run on hosts")
        if not (isinstance(message_bytes, (int, float)) and message_bytes > 0):
            raise ReactError(
                f"SimBackend: message_bytes must be a positive number, got {message_bytes!r}"
            )
        if not (isinstance(connections, int) and connections >= 1):
            raise ReactError(
                f"SimBackend: connections must be a positive integer, got {connections!r}"
            )
        if not (isinstance(compute_gap_s, (int, float)) and compute_gap_s >= 0):
            raise ReactError(
                f"SimBackend: compute_gap_s must be a non-negative number, got {compute_gap_s!r}"
            )
        if not (isinstance(slices, int) and slices >= 1):
            raise ReactError(f"SimBackend: slices must be a positive integer, got {slices!r}")
        self.network = network
        self.hosts = hosts
        self.message_bytes = float(message_bytes)
        self.connections = connections
        self.compute_gap_s = float(compute_gap_s)
        self.tenant = tenant
        self.slices = slices
        self._rng = np.random.default_rng(seed)
        self._epochs_run = 0

    @property
    def env(self) -> simpy.Environment:
        return self.network.env

    def _host_of(self, pattern: Pattern) -> dict[int, str]:
        if len(pattern.ranks) > len(self.hosts):
            raise ReactError(
                f"SimBackend: the pattern has {len(pattern.ranks)} ranks but the job was placed "
                f"on {len(self.hosts)} hosts"
            )
        return dict(zip(pattern.ranks, self.hosts, strict=False))

    def epoch(self, pattern: Pattern) -> Generator[simpy.Event, Any, EpochResult]:
        """A SimPy process body running one epoch of ``pattern``; returns its EpochResult.

        Use it as ``result = yield env.process(backend.epoch(pattern))`` from a job's process.
        """
        env = self.env
        host = self._host_of(pattern)
        flows = pattern.flows
        deps = pattern.dependencies()
        slices = self.slices
        # A unit is slice k of flow i, numbered i * slices + k.
        waiting = [len(d) + (k > 0) for d in deps for k in range(slices)]
        dependents: list[list[int]] = [[] for _ in waiting]
        for i, d in enumerate(deps):
            for k in range(slices):
                for j in d:
                    dependents[j * slices + k].append(i * slices + k)
                if k + 1 < slices:
                    dependents[i * slices + k].append(i * slices + k + 1)
        ports = self._rng.integers(0, self.connections, size=len(flows))
        sizes = [pattern.flow_bytes(f, self.message_bytes) for f in flows]
        t0 = float(env.now)
        start = [0.0] * len(flows)
        end = [0.0] * len(flows)
        left = [len(waiting)]
        done = env.event()
        tag = f"epoch{self._epochs_run}"

        def launch(unit: int) -> None:
            i, k = divmod(unit, slices)
            f = flows[i]
            if k == 0:
                start[i] = float(env.now)
            event = self.network.start_flow(
                host[f.src], host[f.dst], sizes[i] / slices, port=int(ports[i]), tag=tag,
                tenant=self.tenant,
            )
            event.callbacks.append(partial(on_done, unit))

        def on_done(unit: int, event: simpy.Event) -> None:
            finished(unit, cast(FlowRecord, event.value).end_s)

        def finished(unit: int, end_s: float) -> None:
            i, k = divmod(unit, slices)
            if k == slices - 1:
                end[i] = end_s
            for nxt in dependents[unit]:
                waiting[nxt] -= 1
                if waiting[nxt] == 0:
                    launch(nxt)
            left[0] -= 1
            if left[0] == 0:
                done.succeed()

        if not flows:
            done.succeed()
        for unit, count in enumerate(waiting):
            if count == 0:
                launch(unit)
        yield done
        finish = max(end, default=t0)
        timings = tuple(
            FlowTiming(f, start[i] - t0, end[i] - t0, sizes[i]) for i, f in enumerate(flows)
        )
        result = EpochResult(self._epochs_run, finish - t0, timings, self.message_bytes)
        self._epochs_run += 1
        if self.compute_gap_s > 0:
            yield env.timeout(self.compute_gap_s)
        return result

    def run_epochs(self, pattern: Pattern, epochs: int) -> list[EpochResult]:
        """Run ``epochs`` epochs back to back, advancing the network's clock until they end.

        Other processes on the same environment (background traffic, other jobs) advance too.
        """
        if not (isinstance(epochs, int) and epochs >= 0):
            raise ReactError(f"run_epochs: epochs must be a non-negative integer, got {epochs!r}")
        results: list[EpochResult] = []

        def body() -> Generator[simpy.Event, Any, None]:
            for _ in range(epochs):
                results.append((yield self.env.process(self.epoch(pattern))))

        proc = self.env.process(body())
        self.env.run(until=proc)
        return results

    def close(self) -> None:
        """Nothing to release: the network belongs to the caller."""


def build_network(scenario: Scenario) -> Network:
    """A fresh network carrying the scenario's link failures and background traffic."""
    from flowsim.traffic import long_lived, periodic_bulk, poisson_on_off

    if getattr(scenario, "sharing", "maxmin") == "tcp":
        from flowsim.tcp import TcpNetwork

        net: Network = TcpNetwork(scenario.topology, seed=scenario.seed)
    else:
        net = Network(scenario.topology, seed=scenario.seed)
    for failure in scenario.failures:
        link = scenario.topology.link(failure.src, failure.dst)
        net.schedule_link_capacity(failure.at_s, link.id, failure.capacity_bps)
        if failure.recover_s is not None:
            net.schedule_link_capacity(failure.recover_s, link.id, link.capacity_bps)
    for i, bg in enumerate(scenario.background):
        common: dict[str, Any] = {"start_s": bg.start_s, "stop_s": bg.stop_s,
                                  "tenant": bg.tenant}
        for k in range(bg.p):
            port = bg.port + k
            if bg.kind == "long_lived":
                long_lived(net, bg.src, bg.dst, port=port, **common)
            elif bg.kind == "periodic_bulk":
                assert bg.size_bytes is not None and bg.period_s is not None  # parse checked
                periodic_bulk(net, bg.src, bg.dst, bg.size_bytes, bg.period_s, port=port,
                              **common)
            else:
                assert bg.mean_on_s is not None and bg.mean_off_s is not None
                poisson_on_off(net, bg.src, bg.dst, mean_on_s=bg.mean_on_s,
                               mean_off_s=bg.mean_off_s, seed=scenario.seed + i, port=port,
                               **common)
    return net


@contextmanager
def scenario_jobs(scenario: Scenario, *, react: bool | None = None) -> Iterator[list[Any]]:
    """The scenario's jobs on one fresh simulated network (see :func:`react.scenario.open_jobs`)."""
    from react.jobs import Job
    from react.scenario import controllers

    net = build_network(scenario)
    jobs = []
    for spec, (pattern, controller) in zip(scenario.jobs, controllers(scenario, react),
                                           strict=True):
        backend = SimBackend(net, spec.hosts, spec.message_bytes, connections=spec.connections,
                             compute_gap_s=spec.compute_gap_s, seed=spec.seed, tenant=spec.name)
        jobs.append(Job(spec.name, backend, pattern, spec.epochs, controller))
    yield jobs
