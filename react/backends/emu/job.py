"""One job of real rank processes on an emulated network: the emulator's TunedBackend.

An :class:`EmuJob` runs one job the way the paper's prototype does (§6): one process per rank
(:mod:`react.runtime.rank`) in its host's namespace, RCollective over the chosen transport, and
RTuner's leader (:mod:`react.runtime.tuner`) as a separate process in rank 0's namespace that
gathers every rank's flow timings, runs the controller, and tells every rank the new pattern and
the epoch at which all of them switch.

The processes are started, watched and killed by :class:`~react.runtime.launcher.RankLauncher`,
as the GPU job's are; what is the emulator's own is here: every process starts inside its
host's namespace (:meth:`EmuNetwork.popen <react.backends.emu.network.EmuNetwork.popen>`), the
ranks' data ports, and a deadline of ``timeout_s`` per 10 epochs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from react.backends.emu.errors import EmuError
from react.backends.emu.network import EmuNetwork
from react.backends.emu.spec import EmuSpec
from react.control.backend import JobRun
from react.model.pattern import Pattern
from react.model.verify import verify
from react.runtime.launcher import RankLauncher
from react.runtime.rank import job_spec

__all__ = ["DATA_PORT_BASE", "EmuJob"]

DATA_PORT_BASE = 29500
"""Rank ``r`` of the ``j``-th job listens on ``DATA_PORT_BASE + 100 * j + r`` (jobs may share
hosts); each job's tuner on a free port of rank 0's host."""


class EmuJob:
    """One job of real rank processes on an emulated network (a TunedBackend).

    Its controller may be any that :func:`react.control.policies.make_controller` made (REACT, a
    baseline, a user's factory): the leader makes it again from its reference.
    """

    def __init__(self, network: EmuNetwork, hosts: Sequence[str], emu: EmuSpec, index: int,
                 workdir: Path, *, connections: int = 1, seed: int = 0,
                 compute_gap_s: float = 0.0) -> None:
        self.network = network
        self.hosts = tuple(hosts)
        self.connections = connections
        self.seed = seed
        self.compute_gap_s = compute_gap_s
        self.emu = emu
        self.index = index
        self.workdir = workdir
        self.launcher: RankLauncher | None = None
        """The running (or last) job's processes (:class:`~react.runtime.launcher.RankLauncher`)."""

    @property
    def tuner(self) -> Any:
        """The running job's tuner process (tests kill it to check that the job still ends)."""
        return None if self.launcher is None else self.launcher.tuner

    def run_job(self, name: str, pattern: Pattern, epochs: int, controller: Any,
                on_epoch: Callable[[str, int], None] | None = None) -> JobRun:
        verify(pattern)  # refused here, before any process starts or any byte is sent
        hosts, net, emu = self.hosts, self.network, self.emu
        launcher = RankLauncher(name, self.workdir / f"job-{self.index}", error=EmuError,
                                kill_timeout_s=5)
        spec = launcher.tuner_spec(pattern, controller, message_bytes=emu.message_bytes,
                                   apply_delay_epochs=emu.apply_delay_epochs,
                                   host=net.host_ip(hosts[0]), timeout_s=emu.timeout_s)
        self.launcher = launcher
        tuner = launcher.start_tuner(
            spec, popen=lambda argv, **kw: net.popen(hosts[0], argv, **kw),
            timeout_s=emu.timeout_s)
        addresses = [(net.host_ip(h), DATA_PORT_BASE + 100 * self.index + r)
                     for r, h in enumerate(hosts)]
        rank_file = launcher.write_json("job.json", job_spec(
            job=name, pattern=pattern, epochs=epochs, message_bytes=emu.message_bytes,
            transport=emu.transport, addresses=addresses, tuner=tuner,
            connections=self.connections, seed=self.seed,
            timeout_s=emu.timeout_s, compute_gap_s=self.compute_gap_s,
        ))
        launcher.start_ranks(
            [[sys.executable, "-m", "react.runtime.rank", str(rank_file), str(r)]
             for r in range(len(hosts))],
            popen=lambda r, argv, **kw: net.popen(hosts[r], argv, **kw))
        launcher.wait(epochs, deadline_s=emu.timeout_s * max(1.0, epochs / 10),
                      tuner_timeout_s=emu.timeout_s, on_epoch=on_epoch)
        return launcher.result()

    def close(self) -> None:
        """Kill whatever of this job still runs; idempotent."""
        if self.launcher is not None:
            self.launcher.kill()
