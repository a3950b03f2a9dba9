"""The flowsim backend: a job's ranks placed on hosts of a shared simulated network.

One :class:`SimBackend` is one job. It executes a pattern with an execution rule of
:mod:`react.model.execution`: by default the paper's Algorithm 2, as RCollective runs it (per chunk
graph, a rank's step-t operations block its next step; a flow runs only when both its ends reached
its step), or, as a named option, the looser dataflow rule (a flow starts once the flows whose data
it needs have ended). A flow starts the moment its rule allows; the collective ends when its last
flow ends. Several backends (jobs) and background traffic may share one
:class:`flowsim.network.Network`: each job's epochs are SimPy processes on the network's clock, so
everything advances together in simulated time.

Connections and ECMP (paper §7.3): each ``(src, dst)`` pair of a job has ``connections`` transport
connections on ports ``0 .. connections-1``; in every epoch each flow picks one of them at random
(a numpy ``Generator`` seeded from the job's seed), so the ECMP hash, and with it the path,
changes from epoch to epoch. With ``connections=1`` every flow keeps one path for the whole run.

Pipelining (off by default, ``slices=1``): with ``slices=S`` every flow is cut into ``S`` equal
slices sent one after another on its connection, NCCL-style; slice ``k`` of a flow may start once
its rule's conditions hold for slice ``k`` (slice ``k`` of every flow it waits for has ended) and
its own slice ``k-1`` has been sent. A flow's observed start is its first slice's start and its
end its last slice's end.

Switching cost (off by default): real runtimes set up connections (NCCL communicators) for a new
pattern before its first epoch. The first epoch that runs a pattern other than the previous
epoch's starts with ``switch_cost_s + switch_cost_epochs x (the previous epoch's time)`` of idle
set-up: its flows start that much later and its collective time includes it, so the controller
sees the cost in the batch after a change, and the recorded results carry it.

Measurement noise (off by default): with ``noise_sigma = s`` each flow's time as the ranks observe
it is its simulated time times ``1 + s z``, ``z`` standard normal clipped to +-3, one draw per flow
and epoch from a stream seeded by the job (so runs repeat bit for bit). The epoch's timeline is
then replayed under the execution rule with those times (:func:`react.model.execution.replay`), so
starts, ends and the collective time stay consistent: the collective time is what the ranks would
observe. The network itself is not perturbed (other tenants and the next epoch see the noiseless
transfers). docs/deviations.md says why.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import numpy as np
import simpy

from flowsim.network import Network
from flowsim.records import FlowRecord
from react.backends.sim.spec import MAX_NOISE_SIGMA
from react.model.errors import ReactError
from react.model.execution import (
    DEFAULT_EXECUTION,
    ExecutionError,
    Gates,
    check_execution,
    gates,
    replay,
)
from react.model.observation import EpochResult, FlowTiming
from react.model.pattern import Pattern

NOISE_CLIP = 3.0
_NOISE_STREAM = 0x6E6F697365  # "noise": the noise's own seed stream, apart from the ports'


@dataclass(frozen=True, slots=True)
class _Plan:
    """A pattern made ready for one backend: built on its first epoch, reused while it runs."""

    pattern: Pattern
    src: tuple[str, ...]  # host of each flow's source
    dst: tuple[str, ...]
    unit_bytes: tuple[float, ...]  # bytes of one slice of each flow
    sizes: tuple[float, ...]  # bytes of each flow
    gates: Gates
    unit_waits: tuple[int, ...]  # per unit: gates (and earlier slice) it waits for
    gate_members: tuple[int, ...]  # per gate slot: flows that open it


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
        Seeds the per-epoch port choice (and the noise, unless ``noise_seed`` is given).
    tenant : str
        Label of this job's flows in ``network.records``.
    slices : int
        NCCL-style pipelining: each flow is sent as this many sequential slices (module
        docstring); 1 (default) sends whole flows, which is what the other backends do.
    execution : {"algorithm2", "dataflow"}
        The execution rule (:mod:`react.model.execution`): the paper's Algorithm 2 (default) or the
        looser dataflow rule.
    switch_cost_s, switch_cost_epochs : float
        What a pattern change costs (module docstring): the first epoch on a new pattern starts
        with ``switch_cost_s`` plus ``switch_cost_epochs`` times the previous epoch's time of
        idle set-up. 0 by default.
    noise_sigma : float
        Relative standard deviation of the multiplicative noise on every flow's time (module
        docstring), in ``[0, 0.3]``; 0 (default) is no noise.
    noise_seed : int or sequence of int, optional
        Seeds the noise (a stream of its own, so noise never changes the port choices); default
        ``seed``.
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
        execution: str = DEFAULT_EXECUTION,
        switch_cost_s: float = 0.0,
        switch_cost_epochs: float = 0.0,
        noise_sigma: float = 0.0,
        noise_seed: int | Sequence[int] | None = None,
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
        for name, value in (("compute_gap_s", compute_gap_s), ("switch_cost_s", switch_cost_s),
                            ("switch_cost_epochs", switch_cost_epochs)):
            if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                    and math.isfinite(value) and value >= 0):
                raise ReactError(
                    f"SimBackend: {name} must be a non-negative number, got {value!r}"
                )
        if not (isinstance(noise_sigma, (int, float)) and not isinstance(noise_sigma, bool)
                and 0 <= noise_sigma <= MAX_NOISE_SIGMA):
            raise ReactError(
                f"SimBackend: noise_sigma must be a number in [0, {MAX_NOISE_SIGMA}], got "
                f"{noise_sigma!r}"
            )
        if not (isinstance(slices, int) and slices >= 1):
            raise ReactError(f"SimBackend: slices must be a positive integer, got {slices!r}")
        try:
            self.execution = check_execution(execution, "SimBackend: execution")
        except ExecutionError as exc:
            raise ReactError(str(exc)) from None
        self.network = network
        self.hosts = hosts
        self.message_bytes = float(message_bytes)
        self.connections = connections
        self.compute_gap_s = float(compute_gap_s)
        self.tenant = tenant
        self.slices = slices
        self.switch_cost_s = float(switch_cost_s)
        self.switch_cost_epochs = float(switch_cost_epochs)
        self.noise_sigma = float(noise_sigma)
        self._rng = np.random.default_rng(seed)
        noise_key = (seed,) if noise_seed is None else (
            (noise_seed,) if isinstance(noise_seed, int) else tuple(noise_seed))
        self._noise_rng = np.random.default_rng([*noise_key, _NOISE_STREAM])
        self._epochs_run = 0
        self._plan: _Plan | None = None
        self._last_pattern: Pattern | None = None
        self._last_run_s = 0.0
        self.switch_costs_s: list[float] = []
        """The set-up charged at each pattern change so far, in order (seconds)."""

    @property
    def env(self) -> simpy.Environment:
        return self.network.env

    def _plan_for(self, pattern: Pattern) -> _Plan:
        plan = self._plan
        if plan is not None and plan.pattern is pattern:
            return plan
        if len(pattern.ranks) > len(self.hosts):
            raise ReactError(
                f"SimBackend: the pattern has {len(pattern.ranks)} ranks but the job was placed "
                f"on {len(self.hosts)} hosts"
            )
        host = dict(zip(pattern.ranks, self.hosts, strict=False))
        slices = self.slices
        gs = gates(pattern, self.execution)
        sizes = tuple(pattern.flow_bytes(f, self.message_bytes) for f in pattern.flows)
        plan = _Plan(
            pattern,
            tuple(host[f.src] for f in pattern.flows),
            tuple(host[f.dst] for f in pattern.flows),
            tuple(size / slices for size in sizes),
            sizes,
            gs,
            tuple(len(w) + (k > 0) for w in gs.waits for k in range(slices)),
            tuple(len(m) for m in gs.members for _ in range(slices)),
        )
        self._plan = plan
        return plan

    def _switch_cost(self, pattern: Pattern) -> float:
        """The set-up this epoch starts with: nonzero on the first epoch of a new pattern."""
        last = self._last_pattern
        self._last_pattern = pattern
        if last is None or last is pattern or last == pattern:
            return 0.0
        cost = self.switch_cost_s + self.switch_cost_epochs * self._last_run_s
        self.switch_costs_s.append(cost)
        return cost

    def epoch(self, pattern: Pattern) -> Generator[simpy.Event, Any, EpochResult]:
        """A SimPy process body running one epoch of ``pattern``; returns its EpochResult.

        Use it as ``result = yield env.process(backend.epoch(pattern))`` from a job's process.
        """
        env = self.env
        plan = self._plan_for(pattern)
        flows = pattern.flows
        slices = self.slices
        opens, released = plan.gates.opens, plan.gates.released
        network, tenant, src, dst, unit_bytes = (self.network, self.tenant, plan.src, plan.dst,
                                                 plan.unit_bytes)
        ports = self._rng.integers(0, self.connections, size=len(flows)).tolist()
        setup_s = self._switch_cost(pattern)
        t0 = float(env.now)
        if setup_s > 0:
            yield env.timeout(setup_s)
        units = len(plan.unit_waits)
        waiting = list(plan.unit_waits)
        gate_left = list(plan.gate_members)
        start = [0.0] * units
        end = [0.0] * units
        left = [units]
        done = env.event()
        tag = f"epoch{self._epochs_run}"

        def launch(unit: int) -> None:
            i = unit // slices
            start[unit] = float(env.now)
            event = network.start_flow(src[i], dst[i], unit_bytes[i], port=ports[i], tag=tag,
                                       tenant=tenant)
            event.callbacks.append(partial(on_done, unit))

        def on_done(unit: int, event: simpy.Event) -> None:
            end[unit] = cast(FlowRecord, event.value).end_s
            i, k = divmod(unit, slices)
            if k + 1 < slices:
                waiting[unit + 1] -= 1
                if waiting[unit + 1] == 0:
                    launch(unit + 1)
            for g in opens[i]:
                slot = g * slices + k
                gate_left[slot] -= 1
                if gate_left[slot] == 0:
                    for w in released[g]:
                        nxt = w * slices + k
                        waiting[nxt] -= 1
                        if waiting[nxt] == 0:
                            launch(nxt)
            left[0] -= 1
            if left[0] == 0:
                done.succeed()

        if units:
            for unit, count in enumerate(waiting):
                if count == 0:
                    launch(unit)
            yield done
        finish = max(end, default=t0 + setup_s)
        self._last_run_s = finish - t0 - setup_s
        if self.noise_sigma > 0:
            start, end = self._perturbed(plan, start, end)
            finish = max(end, default=t0 + setup_s)
        last = slices - 1
        sizes = plan.sizes
        timings = tuple(
            FlowTiming(f, start[i * slices] - t0, end[i * slices + last] - t0, sizes[i])
            for i, f in enumerate(flows)
        )
        result = EpochResult(self._epochs_run, finish - t0, timings, self.message_bytes)
        self._epochs_run += 1
        if self.compute_gap_s > 0:
            yield env.timeout(self.compute_gap_s)
        return result

    def _perturbed(self, plan: _Plan, start: list[float], end: list[float]
                   ) -> tuple[list[float], list[float]]:
        """The epoch as the ranks observe it with noise on every flow's time (module docstring).

        One draw per flow, whatever the pattern, so two runs of one collective on one seed see
        the same draws epoch by epoch.
        """
        z = np.clip(self._noise_rng.standard_normal(len(plan.sizes)), -NOISE_CLIP, NOISE_CLIP)
        factor = (1.0 + self.noise_sigma * z).tolist()
        slices = self.slices
        durations = [(end[u] - start[u]) * factor[u // slices] for u in range(len(start))]
        first = start[::slices]
        return replay(plan.gates, durations, first, slices)

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
