"""The ns-3 engine: :class:`Ns3Backend` runs a job's epochs in a persistent ns-3 child.

The controller decides between batches in simulated time: the child stops its simulator when a
batch's last epoch ends, the driver hands the results to the job's tuning loop, and the next
batch starts in the same simulation, background flows still running, ``compute_gap_s`` after the
last one ended. Several jobs share one world (:class:`Ns3World`): the simulation advances only
while every job with epochs left has handed in its next batch, and stops whenever one batch
ends. A scenario becomes such a world in :mod:`react.run.worlds.ns3`.

Each epoch runs the pattern with the scenario's execution rule (``[sim] execution``, by default
the paper's Algorithm 2; :func:`react.model.execution.flow_dependencies`, as
:class:`~react.backends.sim.engine.SimBackend`): a flow starts on a fresh TCP connection the moment
the flows it waits for have delivered their last byte, and ends when its own last byte is
delivered. Per-epoch port choices draw from the same
seeded generator as the simulator's, so both backends send each flow on the same ECMP path.
"""


from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from react.backends.ns3.errors import Ns3Error, Ns3MissingError, Ns3TimeoutError
from react.backends.ns3.plan import Fabric
from react.backends.ns3.process import Ns3Process
from react.backends.ns3.spec import Ns3Spec
from react.model.errors import ReactError
from react.model.execution import DEFAULT_EXECUTION, check_execution, flow_dependencies
from react.model.observation import EpochResult, FlowTiming
from react.model.pattern import Pattern

__all__ = ["INSTALL_HINT", "Ns3Backend", "Ns3World", "require_ns3"]

INSTALL_HINT = "pip install 'react-collectives[ns3]' (the PyPI package ns3, e.g. ns3==3.44.post0)"


def require_ns3() -> None:
    """Raise :class:`Ns3MissingError` unless the optional ``ns3`` package is importable."""
    if importlib.util.find_spec("ns3") is None:
        raise Ns3MissingError(f"the ns-3 backend needs the optional package ns3: {INSTALL_HINT}")


class Ns3World:
    """One scenario's ns-3 world: the child holding it, and the jobs that share it.

    Several jobs advance together in simulated time: the world runs the child only when every
    job that still has epochs to run has handed in its next batch (so that no job's controller
    is overtaken by the clock), and stops it as soon as one batch has ended; that job's thread
    gets its results and decides its next batch while the others wait. With one job this is
    just a call to the child.

    Parameters
    ----------
    child : Ns3Process
        The child holding the world (already built).
    fabric : Fabric
        The scenario's topology as the child knows it; its router picks the paths.
    spec : Ns3Spec
        ``timeout_s`` bounds every call to the child and every wait for the other jobs.
    epochs : dict
        Epochs each job will run (a job that has run them no longer holds the others back).
    """

    def __init__(self, child: Ns3Process, fabric: Fabric, spec: Ns3Spec,
                 epochs: dict[str, int], routed: set[tuple[str, str, int]] | None = None
                 ) -> None:
        self.child = child
        self.fabric = fabric
        self.spec = spec
        self.routed: set[tuple[str, str, int]] = set() if routed is None else routed
        self._remaining = dict(epochs)
        self._pending: dict[str, dict[str, Any]] = {}
        self._inflight: set[str] = set()
        self._done: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {}
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        self.calls: list[dict[str, Any]] = []
        """Per call to the child: simulated events, wall seconds, drops and ECN marks."""

    def run_batch(self, job: str, batch: dict[str, Any]
                  ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Hand in ``job``'s next batch; return its epochs (as the child reports them) once it
        has ended, and the statistics of the child call that ended it."""
        with self._cond:
            if job not in self._remaining:
                raise ReactError(f"Ns3World: unknown job {job!r}; jobs are "
                                 f"{sorted(self._remaining)}")
            self._pending[job] = batch
            while job not in self._done:
                if self._error is not None:
                    raise Ns3Error(f"job {job}: the ns-3 world it shares failed: "
                                   f"{self._error}") from None
                if self._ready():
                    self._advance()
                elif not self._cond.wait(timeout=self.spec.timeout_s):
                    waiting = sorted(j for j, n in self._remaining.items()
                                     if n > 0 and j not in self._pending
                                     and j not in self._inflight)
                    raise Ns3TimeoutError(
                        f"job {job}: waited {self.spec.timeout_s:g} s for the jobs sharing its "
                        f"ns-3 world to hand in their next batches ({', '.join(waiting)})")
            return self._done.pop(job)

    def fail(self, job: str, exc: BaseException) -> None:
        """``job`` failed outside the child (bad results): release the jobs waiting for it."""
        with self._cond:
            if self._error is None:
                self._error = exc
            self._remaining[job] = 0
            self._cond.notify_all()

    def _ready(self) -> bool:
        active = [j for j, n in self._remaining.items() if n > 0]
        return all(j in self._pending or j in self._inflight for j in active)

    def _advance(self) -> None:
        batches = [dict(batch, id=job) for job, batch in self._pending.items()]
        self._inflight.update(self._pending)
        self._pending.clear()
        names = ", ".join(sorted(self._inflight))
        try:
            reply = self.child.call({"op": "run", "batches": batches},
                                    timeout_s=self.spec.timeout_s,
                                    what=f"epochs of job {names} in ns-3")
        except BaseException as exc:
            self._error = exc
            self._cond.notify_all()
            raise
        stats = {key: reply[key] for key in ("wall_s", "events", "drops", "marks",
                                             "route_misses")}
        self.calls.append(stats)
        for job, epochs in reply["done"].items():
            self._inflight.discard(job)
            self._done[job] = (epochs, stats)
            self._remaining[job] -= len(epochs)
        self._cond.notify_all()


class Ns3Backend:
    """One job in an :class:`Ns3World` (module docstring).

    Parameters
    ----------
    world : Ns3World
        The world the job runs in (maybe with other jobs).
    hosts : sequence of str
        ``hosts[i]`` runs the pattern's ``i``-th rank.
    message_bytes, connections, compute_gap_s, seed
        As :class:`react.backends.sim.engine.SimBackend`'s.
    tenant : str
        The job's name (its key in the world).
    execution : {"algorithm2", "dataflow"}
        The execution rule (:mod:`react.model.execution`).
    """

    def __init__(self, world: Ns3World, hosts: Sequence[str], message_bytes: float, *,
                 connections: int = 4, compute_gap_s: float = 0.0, seed: int = 0,
                 tenant: str = "job", execution: str = DEFAULT_EXECUTION) -> None:
        hosts = tuple(hosts)
        if len(set(hosts)) != len(hosts):
            raise ReactError(f"Ns3Backend: hosts must be distinct, got {hosts!r}")
        self.world = world
        self.hosts = hosts
        self.message_bytes = float(message_bytes)
        self.connections = connections
        self.compute_gap_s = float(compute_gap_s)
        self.tenant = tenant
        self.execution = check_execution(execution, "Ns3Backend: execution")
        self._rng = np.random.default_rng(seed)
        self._epochs_run = 0
        self._next_start_s = world.spec.warmup_s
        self.batches: list[dict[str, Any]] = []
        """Per batch: the statistics of the child call that ended it (wall seconds, events,
        drops, ECN marks; shared with the jobs whose batches ran in the same call)."""

    def run_epochs(self, pattern: Pattern, epochs: int) -> list[EpochResult]:
        """Run ``epochs`` epochs of ``pattern`` back to back in the world's simulation."""
        if not (isinstance(epochs, int) and epochs >= 0):
            raise ReactError(f"run_epochs: epochs must be a non-negative integer, got {epochs!r}")
        if epochs == 0:
            return []
        if len(pattern.ranks) > len(self.hosts):
            raise ReactError(
                f"Ns3Backend: the pattern has {len(pattern.ranks)} ranks but the job was placed "
                f"on {len(self.hosts)} hosts")
        host = dict(zip(pattern.ranks, self.hosts, strict=False))
        flows = pattern.flows
        sizes = [pattern.flow_bytes(f, self.message_bytes) for f in flows]
        ports = [self._rng.integers(0, self.connections, size=len(flows)) for _ in range(epochs)]
        fabric = self.world.fabric
        index = fabric.index
        pairs = {(host[f.src], host[f.dst], int(p))
                 for row in ports for f, p in zip(flows, row, strict=True)}
        batch = {
            "flows": [[index[host[f.src]], index[host[f.dst]], max(1, round(s))]
                      for f, s in zip(flows, sizes, strict=True)],
            "deps": [[i, j] for i, d in enumerate(flow_dependencies(pattern, self.execution))
                     for j in d],
            "ports": [[int(p) for p in row] for row in ports],
            "start_s": self._next_start_s,
            "gap_s": self.compute_gap_s,
            "routes": fabric.routes(sorted(pairs), self.world.routed),
        }
        first = self._epochs_run
        reply, stats = self.world.run_batch(self.tenant, batch)
        try:
            results = self._results(reply, stats, flows, sizes, first)
        except Ns3Error as exc:
            self.world.fail(self.tenant, exc)
            raise
        self._epochs_run += epochs
        self._next_start_s = reply[-1]["end_s"] + self.compute_gap_s
        self.batches.append(stats | {"epochs": epochs})
        return results

    def _results(self, reply: list[dict[str, Any]], stats: dict[str, Any], flows: Any,
                 sizes: list[float], first: int) -> list[EpochResult]:
        results = []
        for k, ep in enumerate(reply):
            t0 = ep["start_s"]
            if ep["end_s"] < 0 or any(e < 0 for _, e in ep["flows"]):
                stuck = sum(1 for _, e in ep["flows"] if e < 0)
                raise Ns3Error(
                    f"job {self.tenant}: epoch {first + k} did not finish in ns-3: {stuck} flows "
                    f"never delivered their last byte (packets without a route so far: "
                    f"{stats['route_misses']}, drops: {stats['drops']})")
            timings = tuple(FlowTiming(f, s - t0, e - t0, sizes[i])
                            for i, (f, (s, e)) in enumerate(zip(flows, ep["flows"], strict=True)))
            results.append(EpochResult(first + k, ep["end_s"] - t0, timings, self.message_bytes))
        return results

    def close(self) -> None:
        """Nothing of its own to release: the child belongs to :func:`scenario_jobs`."""
