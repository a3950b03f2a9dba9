"""A scenario's network and jobs on the simulator: what :func:`react.run.scenario_runs.open_jobs`
calls for ``backend = "sim"`` (the other backends' counterparts are ``react.run.worlds.emu``,
``react.run.worlds.ns3`` and ``react.run.worlds.gpu``).

Kept apart from :mod:`react.backends.sim.engine` so that the backend itself knows nothing of
scenario files or the job driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from flowsim.network import Network
from react.backends.sim.engine import SimBackend

if TYPE_CHECKING:
    from react.run.scenario import Scenario


def build_network(scenario: Scenario) -> Network:
    """A fresh network carrying the scenario's link failures and background traffic."""
    from flowsim.traffic import long_lived, periodic_bulk, ping_pong, poisson_on_off

    if scenario.sim.sharing == "tcp":
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
            elif bg.kind == "ping_pong":
                assert bg.size_bytes is not None  # parse checked
                ping_pong(net, bg.src, bg.dst, bg.size_bytes, port=port, **common)
            else:
                assert bg.mean_on_s is not None and bg.mean_off_s is not None
                poisson_on_off(net, bg.src, bg.dst, mean_on_s=bg.mean_on_s,
                               mean_off_s=bg.mean_off_s, seed=scenario.seed + i, port=port,
                               **common)
    return net


@contextmanager
def scenario_jobs(scenario: Scenario, *, react: bool | None = None) -> Iterator[list[Any]]:
    """The scenario's jobs on one fresh simulated network (see
    :func:`react.run.scenario_runs.open_jobs`)."""
    from react.run.driver import Job
    from react.run.scenario import controllers

    net = build_network(scenario)
    sim = scenario.sim
    jobs = []
    for i, (spec, (pattern, controller)) in enumerate(
            zip(scenario.jobs, controllers(scenario, react), strict=True)):
        backend = SimBackend(net, spec.hosts, spec.message_bytes, connections=spec.connections,
                             compute_gap_s=spec.compute_gap_s, seed=spec.seed, tenant=spec.name,
                             execution=sim.execution, switch_cost_s=sim.switch_cost_s,
                             switch_cost_epochs=sim.switch_cost_epochs,
                             noise_sigma=sim.noise_sigma,
                             noise_seed=(scenario.seed, spec.seed, i))
        jobs.append(Job(spec.name, backend, pattern, spec.epochs, controller))
    yield jobs
