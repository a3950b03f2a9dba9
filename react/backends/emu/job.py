"""One job of real rank processes on an emulated network: the emulator's TunedBackend.

An :class:`EmuJob` runs one job the way the paper's prototype does (§6): one process per rank
(:mod:`react.runtime.rank`) in its host's namespace, RCollective over the chosen transport, and
RTuner's leader (:mod:`react.runtime.tuner`) as a separate process in rank 0's namespace that
gathers every rank's flow timings, runs the controller, and tells every rank the new pattern and
the epoch at which all of them switch.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from react.backends.emu.errors import EmuError
from react.backends.emu.network import EmuNetwork
from react.backends.emu.spec import EmuSpec
from react.control.backend import JobRun
from react.control.controller import Controller
from react.model.pattern import Pattern
from react.model.verify import verify
from react.runtime.launcher import Progress, process_tail, run_info
from react.runtime.rank import job_spec

__all__ = ["DATA_PORT_BASE", "EmuJob"]

DATA_PORT_BASE = 29500
"""Rank ``r`` of the ``j``-th job listens on ``DATA_PORT_BASE + 100 * j + r`` (jobs may share
hosts); each job's tuner on a free port of rank 0's host."""

class EmuJob:
    """One job of real rank processes on an emulated network (a TunedBackend)."""

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
        self._procs: list[subprocess.Popen[Any]] = []
        self.tuner: subprocess.Popen[Any] | None = None
        """The running job's tuner process (tests kill it to check that the job still ends)."""

    def run_job(self, name: str, pattern: Pattern, epochs: int, controller: Controller | None,
                on_epoch: Callable[[str, int], None] | None = None) -> JobRun:
        from react.runtime.tuner import read_result, spawn_leader

        verify(pattern)  # refused here, before any process starts or any byte is sent
        if controller is not None and type(controller) is not Controller:
            raise EmuError(f"job {name!r}: the tuner on real ranks runs REACT's own controller; "
                           f"{type(controller).__name__} runs on the simulator only for now")
        hosts = self.hosts
        net = self.network
        emu = self.emu
        files = self.workdir / f"job-{self.index}"
        files.mkdir(parents=True, exist_ok=True)
        out = files / "result.json"
        tuner_file = files / "tuner.json"
        tuner_file.write_text(json.dumps({
            "pattern": pattern.to_dict(), "world_size": len(hosts),
            "message_bytes": emu.message_bytes,
            "react": None if controller is None else asdict(controller.config),
            "apply_delay_epochs": emu.apply_delay_epochs, "host": net.host_ip(hosts[0]),
            "port": 0, "timeout_s": emu.timeout_s,
        }))
        tuner, tuner_addr = spawn_leader(
            tuner_file, out, popen=lambda argv, **kw: net.popen(hosts[0], argv, **kw),
            timeout_s=emu.timeout_s)
        self._procs.append(tuner)
        self.tuner = tuner
        addresses = [(net.host_ip(h), DATA_PORT_BASE + 100 * self.index + r)
                     for r, h in enumerate(hosts)]
        rank_file = files / "job.json"
        rank_file.write_text(json.dumps(job_spec(
            job=name, pattern=pattern, epochs=epochs, message_bytes=emu.message_bytes,
            transport=emu.transport, addresses=addresses, tuner=tuner_addr,
            connections=self.connections, seed=self.seed,
            timeout_s=emu.timeout_s, compute_gap_s=self.compute_gap_s,
        )))
        logs = [files / f"rank{r}.log" for r in range(len(hosts))]
        ranks = []
        for r, h in enumerate(hosts):
            with open(logs[r], "wb") as log:  # a file, not a pipe: a chatty rank never blocks
                ranks.append(net.popen(h, [sys.executable, "-m", "react.runtime.rank",
                                           str(rank_file), str(r)],
                                       stdout=subprocess.DEVNULL, stderr=log))
        self._procs.extend(ranks)
        progress = Progress(tuner, name, epochs, on_epoch)
        try:
            self._wait(name, ranks, logs, tuner, epochs)
        finally:
            progress.finish()
            self.close()
        results, patterns, decisions = read_result(out)
        return JobRun(name, results, patterns, decisions, info=run_info(out, results,
                                                                        patterns))

    def _wait(self, name: str, ranks: list[subprocess.Popen[Any]], logs: list[Path],
              tuner: subprocess.Popen[Any], epochs: int) -> None:
        deadline = time.monotonic() + self.emu.timeout_s * max(1.0, epochs / 10)
        while True:
            codes = [p.poll() for p in ranks]
            failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                r, code = failed[0]
                text = logs[r].read_text(encoding="utf-8", errors="replace").strip()
                raise EmuError(f"job {name!r}: rank {r} failed (exit {code}): "
                               f"{text[-600:] or '(no output)'}")
            if all(c == 0 for c in codes):
                break
            if time.monotonic() > deadline:
                raise EmuError(f"job {name!r}: ranks still running after "
                               f"{self.emu.timeout_s * max(1.0, epochs / 10):.0f} s")
            time.sleep(0.05)
        try:
            code = tuner.wait(timeout=self.emu.timeout_s)
        except subprocess.TimeoutExpired:
            raise EmuError(f"job {name!r}: the tuner did not finish within "
                           f"{self.emu.timeout_s:g} s of the last rank") from None
        if code < 0:
            raise EmuError(f"job {name!r}: the tuner died (signal {-code}); every rank finished "
                           f"its {epochs} epochs on its pattern, but the timings it had gathered "
                           "died with it")
        if code not in (0, 3):  # 3: a partial result (its events say why), still readable
            raise EmuError(f"job {name!r}: the tuner failed (exit {code}): {process_tail(tuner)}")

    def close(self) -> None:
        """Kill whatever of this job still runs; idempotent."""
        from react.runtime.local import kill_processes

        kill_processes(self._procs, 5)
        self._procs = []
