"""A scenario on ns-3: its fabric, failures and background as the child's world, its jobs.

:func:`scenario_jobs` (what :func:`react.run.scenario_runs.open_jobs` calls for ``backend = "ns3"``)
checks the scenario (:func:`world_request`, with :mod:`react.backends.ns3.plan`), starts a child
process (or reuses the one :func:`~react.backends.ns3.process.shared_child` keeps), builds the
world in it, and yields one :class:`~react.run.driver.Job` per job whose backend is an
:class:`~react.backends.ns3.engine.Ns3Backend` (:mod:`react.backends.ns3.engine`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from react.backends.ns3.engine import Ns3Backend, Ns3World, require_ns3
from react.backends.ns3.errors import Ns3UnsupportedError
from react.backends.ns3.plan import MAX_PORT, Fabric, tcp_defaults
from react.backends.ns3.process import Ns3Process, current_shared
from react.backends.ns3.spec import Ns3Spec

if TYPE_CHECKING:
    from react.run.scenario import Scenario

__all__ = ["scenario_jobs", "world_request"]


def world_request(scenario: Scenario, spec: Ns3Spec, fabric: Fabric,
                  done: set[tuple[str, str, int]]) -> dict[str, Any]:
    """The ``build`` request for ``scenario``: fabric, defaults, failures, background flows."""
    rate_changes = []
    for f in scenario.failures:
        if f.capacity_bps <= 0:
            raise Ns3UnsupportedError(
                f"ns-3 backend: {scenario.source}: the failure of {f.src}->{f.dst} sets "
                f"capacity_bps = {f.capacity_bps:g}; ns-3 models partial failures only (use a "
                "small positive capacity)")
        cable, side = fabric.cable_of(f.src, f.dst)
        rate_changes.append([cable, side, f.at_s + spec.warmup_s, f.capacity_bps])
        if f.recover_s is not None:
            original = scenario.topology.link(f.src, f.dst).capacity_bps
            rate_changes.append([cable, side, f.recover_s + spec.warmup_s, original])
    background = []
    pairs = []
    for i, bg in enumerate(scenario.background):
        if bg.kind != "long_lived":
            raise Ns3UnsupportedError(
                f"ns-3 backend: {scenario.source}: background[{i}] is {bg.kind!r}; the ns-3 "
                "backend runs long_lived background flows only")
        for k in range(bg.p):
            port = bg.port + k
            if port > MAX_PORT:
                raise Ns3UnsupportedError(
                    f"ns-3 backend: background[{i}] uses port {port}; at most {MAX_PORT}")
            start = 0.0 if not bg.start_s else bg.start_s + spec.warmup_s
            stop = None if bg.stop_s is None else bg.stop_s + spec.warmup_s
            background.append([fabric.index[bg.src], fabric.index[bg.dst], port, start, stop])
            pairs.append((bg.src, bg.dst, port))
    for job in scenario.jobs:
        if job.connections - 1 > MAX_PORT:
            raise Ns3UnsupportedError(
                f"ns-3 backend: job {job.name} has {job.connections} connections; at most "
                f"{MAX_PORT + 1}")
    return {
        "seed": scenario.seed,
        "hosts": fabric.hosts,
        "switches": fabric.switches,
        "cables": [list(c) for c in fabric.cables],
        "defaults": tcp_defaults(spec),
        "globals": {"ChecksumEnabled": "false"},
        "device_queue_packets": 1,
        "rate_changes": rate_changes,
        "routes": fabric.routes(pairs, done),
        "background": background,
    }


@contextmanager
def scenario_jobs(scenario: Scenario, *, react: bool | None = None) -> Iterator[list[Any]]:
    """The scenario's jobs in one fresh ns-3 world (see
    :func:`react.run.scenario_runs.open_jobs`)."""
    from react.run.driver import Job
    from react.run.scenario import controllers

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
        shared = Ns3World(child, fabric, spec, {job.name: job.epochs for job in scenario.jobs},
                          routed)
        jobs = []
        for job, (pattern, controller) in zip(scenario.jobs, controllers(scenario, react),
                                              strict=True):
            backend = Ns3Backend(shared, job.hosts, job.message_bytes,
                                 connections=job.connections, compute_gap_s=job.compute_gap_s,
                                 seed=job.seed, tenant=job.name,
                                 execution=scenario.sim.execution)
            jobs.append(Job(job.name, backend, pattern, job.epochs, controller))
        yield jobs
