"""A scenario on ns-3: :class:`Ns3Backend` runs a job's epochs in a persistent ns-3 child.

:func:`scenario_jobs` (what :func:`react.scenario.open_jobs` calls for ``backend = "ns3"``)
checks the scenario (:mod:`react.backends.ns3.plan`), starts a child process (or reuses the one
:func:`~react.backends.ns3.process.shared_child` keeps), builds the world in it, and yields one
:class:`~react.jobs.Job` per job whose backend is an :class:`Ns3Backend`. The controller decides
between batches in simulated time: the child stops its simulator when a batch's last epoch
ends, the driver hands the results to the job's tuning loop, and the next batch starts in the
same simulation, background flows still running, ``compute_gap_s`` after the last one ended.

Each epoch runs the pattern with the design's execution rule
(:meth:`react.pattern.Pattern.dependencies`, as :class:`~react.backends.sim.SimBackend`): a flow
starts on a fresh TCP connection the moment the flows it depends on have delivered their last
byte, and ends when its own last byte is delivered. Per-epoch port choices draw from the same
seeded generator as the simulator's, so both backends send each flow on the same ECMP path.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from react.backends.base import EpochResult, FlowTiming
from react.backends.ns3.errors import Ns3Error, Ns3MissingError
from react.backends.ns3.plan import Fabric, world_request
from react.backends.ns3.process import Ns3Process, current_shared
from react.backends.ns3.spec import Ns3Spec
from react.errors import ReactError
from react.pattern import Pattern

if TYPE_CHECKING:
    from react.scenario import Scenario

__all__ = ["Ns3Backend", "require_ns3", "scenario_jobs"]

INSTALL_HINT = "pip install 'react-collectives[ns3]' (the PyPI package ns3, e.g. ns3==3.44.post0)"


def require_ns3() -> None:
    """Raise :class:`Ns3MissingError` unless the optional ``ns3`` package is importable."""
    if importlib.util.find_spec("ns3") is None:
        raise Ns3MissingError(f"the ns-3 backend needs the optional package ns3: {INSTALL_HINT}")


class Ns3Backend:
    """One job in an ns-3 world held by a child process (module docstring).

    Parameters
    ----------
    child : Ns3Process
        The child holding the world (already built).
    fabric : Fabric
        The scenario's topology as the child knows it; its router picks the paths.
    routed : set
        ``(src, dst, port)`` triples whose routes the child has already (shared with the world).
    hosts : sequence of str
        ``hosts[i]`` runs the pattern's ``i``-th rank.
    message_bytes, connections, compute_gap_s, seed
        As :class:`react.backends.sim.SimBackend`'s.
    spec : Ns3Spec
        ``warmup_s`` (when the first epoch starts) and ``timeout_s`` (bound on one batch).
    """

    def __init__(self, child: Ns3Process, fabric: Fabric, routed: set[tuple[str, str, int]],
                 hosts: Sequence[str], message_bytes: float, *, connections: int = 4,
                 compute_gap_s: float = 0.0, seed: int = 0, spec: Ns3Spec = Ns3Spec(),
                 tenant: str = "job") -> None:
        hosts = tuple(hosts)
        if len(set(hosts)) != len(hosts):
            raise ReactError(f"Ns3Backend: hosts must be distinct, got {hosts!r}")
        self.child = child
        self.fabric = fabric
        self.hosts = hosts
        self.message_bytes = float(message_bytes)
        self.connections = connections
        self.compute_gap_s = float(compute_gap_s)
        self.spec = spec
        self.tenant = tenant
        self._routed = routed
        self._rng = np.random.default_rng(seed)
        self._epochs_run = 0
        self._next_start_s = spec.warmup_s
        self.batches: list[dict[str, Any]] = []
        """Per batch: simulated events, wall seconds, drops and ECN marks in the child."""

    def run_epochs(self, pattern: Pattern, epochs: int) -> list[EpochResult]:
        """Run ``epochs`` epochs of ``pattern`` back to back in the child's simulation."""
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
        index = self.fabric.index
        pairs = {(host[f.src], host[f.dst], int(p)) for row in ports for f, p in zip(flows, row)}
        deps = [[i, j] for i, d in enumerate(pattern.dependencies()) for j in d]
        request = {
            "op": "run",
            "flows": [[index[host[f.src]], index[host[f.dst]], max(1, round(s))]
                      for f, s in zip(flows, sizes, strict=True)],
            "deps": deps,
            "ports": [[int(p) for p in row] for row in ports],
            "start_s": self._next_start_s,
            "gap_s": self.compute_gap_s,
            "routes": self.fabric.routes(sorted(pairs), self._routed),
        }
        first = self._epochs_run
        reply = self.child.call(
            request, timeout_s=self.spec.timeout_s,
            what=f"job {self.tenant}: epochs {first}..{first + epochs - 1} in ns-3")
        results = []
        for k, ep in enumerate(reply["epochs"]):
            t0 = ep["start_s"]
            if ep["end_s"] < 0 or any(e < 0 for _, e in ep["flows"]):
                stuck = sum(1 for _, e in ep["flows"] if e < 0)
                raise Ns3Error(
                    f"job {self.tenant}: epoch {first + k} did not finish in ns-3: {stuck} flows "
                    f"never delivered their last byte (route misses: {reply['route_misses']}, "
                    f"drops: {reply['drops']})")
            timings = tuple(FlowTiming(f, s - t0, e - t0, sizes[i])
                            for i, (f, (s, e)) in enumerate(zip(flows, ep["flows"], strict=True)))
            results.append(EpochResult(first + k, ep["end_s"] - t0, timings, self.message_bytes))
        self._epochs_run += epochs
        self._next_start_s = reply["epochs"][-1]["end_s"] + self.compute_gap_s
        self.batches.append({key: reply[key] for key in
                             ("wall_s", "events", "drops", "marks", "route_misses")}
                            | {"epochs": epochs})
        return results

    def close(self) -> None:
        """Nothing of its own to release: the child belongs to :func:`scenario_jobs`."""


@contextmanager
def scenario_jobs(scenario: Scenario, *, react: bool | None = None) -> Iterator[list[Any]]:
    """The scenario's jobs in one fresh ns-3 world (see :func:`react.scenario.open_jobs`)."""
    from react.jobs import Job
    from react.scenario import controllers

    spec: Ns3Spec = getattr(scenario, "ns3", None) or Ns3Spec()
    fabric = Fabric.build(scenario.topology, scenario.seed)
    routed: set[tuple[str, str, int]] = set()
    world = world_request(scenario, spec, fabric, routed)  # checks before starting anything
    require_ns3()
    with ExitStack() as stack:
        child = current_shared()
        if child is None:
            child = stack.enter_context(Ns3Process())
        child.call({"op": "build", "world": world}, timeout_s=spec.timeout_s,
                   what=f"building {scenario.source} in ns-3")
        jobs = []
        for job, (pattern, controller) in zip(scenario.jobs, controllers(scenario, react),
                                              strict=True):
            backend = Ns3Backend(child, fabric, routed, job.hosts, job.message_bytes,
                                 connections=job.connections, compute_gap_s=job.compute_gap_s,
                                 seed=job.seed, spec=spec, tenant=job.name)
            jobs.append(Job(job.name, backend, pattern, job.epochs, controller))
        yield jobs
