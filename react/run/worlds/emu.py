"""A scenario on the emulator: its topology as namespaces, its jobs as real rank processes.

:func:`scenario_jobs` (what :func:`react.run.scenario_runs.open_jobs` calls for ``backend = "emu"``)
builds an :class:`~react.backends.emu.EmuNetwork` holding only the hosts the scenario uses (and
the switches between them), starts the background senders, schedules the link failures, and
yields one job per scenario job; the network, the senders and every process are gone when the
block exits, however it exits.

Scaling (the ``[emu]`` table): link capacities scale linearly so that the fastest link runs at
``link_rate_bps`` (200 Mbit/s by default, so that two cores are not the bottleneck), and every
job's message is ``message_bytes`` (4 MiB by default) instead of the file's, so that an epoch
takes a fraction of a second. Scenario times (``start_s``, ``stop_s``, ``at_s``) are read as
wall-clock seconds from the moment the network is up. Link latencies are not emulated (the
kernel here has no netem). Switch ports share their rate fairly among source *hosts*
(:mod:`react.backends.emu.tc`: the kernel has no per-flow fair queue), so ``p`` parallel
background flows from one host take one share where flowsim gives them ``p``; the run warns, and
one flow from each of ``p`` hosts gives the per-flow shares. Background sources are flowsim's
three kinds, each on one TCP connection (:meth:`~react.backends.emu.EmuNetwork.start_background`).

Each job is an :class:`~react.backends.emu.job.EmuJob` (real rank processes and RTuner's
leader).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from react.backends.emu import EmuInputError, EmuNetwork, traffic
from react.backends.emu.cleanup import ScratchDir
from react.backends.emu.job import EmuJob

if TYPE_CHECKING:
    from react.run.scenario import Scenario

BACKGROUND_MAX_S = 1800.0
"""Upper bound on any background sender's life when the scenario gives no ``stop_s``."""
BACKGROUND_PORT_BASE = 20000
"""The ``k``-th flow of background source ``i`` (scenario port ``p``) has its sink on
``BACKGROUND_PORT_BASE + 100 * i + p + k`` (sources may share a destination host)."""


def used_hosts(scenario: Scenario) -> list[str]:
    """Hosts that run a rank or send or sink background traffic, in topology order."""
    used = {h for j in scenario.jobs for h in j.hosts}
    used |= {b.src for b in scenario.background} | {b.dst for b in scenario.background}
    return [h for h in scenario.topology.hosts if h in used]


@contextmanager
def scenario_jobs(scenario: Scenario, *, react: bool | None = None) -> Iterator[list[Any]]:
    """The scenario's jobs on a freshly built emulated network (module docstring)."""
    from react.run.driver import Job
    from react.run.scenario import controllers

    for i, bg in enumerate(scenario.background):
        if bg.kind not in traffic.KINDS:
            raise EmuInputError(
                f"{scenario.source}: background[{i}] is {bg.kind!r}; the emulator runs "
                f"{', '.join(traffic.KINDS)} background only")
        if bg.p > 1:
            warnings.warn(f"{scenario.source}: background[{i}] has p = {bg.p} flows from one "
                          f"host ({bg.src}); the emulator shares each port fairly among source "
                          "hosts, so together they take one host's share (flowsim gives them "
                          f"{bg.p}); use {bg.p} source hosts for {bg.p} shares", stacklevel=3)
    with ExitStack() as stack:
        net = stack.enter_context(EmuNetwork(scenario.topology, hosts=used_hosts(scenario),
                                             link_rate_bps=scenario.emu.link_rate_bps))
        workdir = stack.enter_context(ScratchDir("react-emu-"))  # goes on signals too
        timers: list[threading.Timer] = []
        stack.callback(_cancel_all, timers)
        fastest_bps = net.scale * max(link.capacity_bps for link in scenario.topology.links)
        for i, bg in enumerate(scenario.background):
            duration = (bg.stop_s or BACKGROUND_MAX_S) - (bg.start_s or 0.0)
            for k in range(bg.p):
                kwargs = {"port": BACKGROUND_PORT_BASE + 100 * i + bg.port + k,
                          "duration_s": duration,
                          "max_bytes": int(fastest_bps * duration / 8),
                          # a periodic burst keeps its share of the link: scaled like rates
                          "size_bytes": (None if bg.size_bytes is None
                                         else max(1, int(bg.size_bytes * net.scale))),
                          "period_s": bg.period_s, "mean_on_s": bg.mean_on_s,
                          "mean_off_s": bg.mean_off_s, "seed": scenario.seed + i}
                start = _starter(net, bg.kind, bg.src, bg.dst, kwargs)
                if bg.start_s:
                    timers.append(threading.Timer(bg.start_s, start))
                else:
                    start()
        for f in scenario.failures:
            timers.append(threading.Timer(f.at_s, net.set_link_capacity,
                                          (f.src, f.dst, f.capacity_bps)))
            if f.recover_s is not None:
                original = scenario.topology.link(f.src, f.dst).capacity_bps
                timers.append(threading.Timer(f.recover_s, net.set_link_capacity,
                                              (f.src, f.dst, original)))
        for t in timers:
            t.daemon = True
            t.start()
        jobs = []
        for index, (spec, (pattern, controller)) in enumerate(
                zip(scenario.jobs, controllers(scenario, react), strict=True)):
            backend = EmuJob(net, spec.hosts, scenario.emu, index, workdir,
                             connections=spec.connections, seed=spec.seed,
                             compute_gap_s=spec.compute_gap_s)
            stack.callback(backend.close)
            jobs.append(Job(spec.name, backend, pattern, spec.epochs, controller))
        yield jobs


def _cancel_all(timers: list[threading.Timer]) -> None:
    for t in timers:
        t.cancel()


def _starter(net: EmuNetwork, kind: str, src: str, dst: str, kwargs: dict[str, Any]
             ) -> Callable[[], None]:
    def start() -> None:
        net.start_background(kind, src, dst, **kwargs)

    return start
