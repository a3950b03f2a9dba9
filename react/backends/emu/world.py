"""A scenario on the emulator: its topology as namespaces, its jobs as real rank processes.

:func:`scenario_jobs` (what :func:`react.scenario.open_jobs` calls for ``backend = "emu"``)
builds an :class:`~react.backends.emu.EmuNetwork` holding only the hosts the scenario uses (and
the switches between them), starts the background senders, schedules the link failures, and
yields one :class:`EmuJob` per job; the network, the senders and every process are gone when the
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
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from react.backends.base import JobRun
from react.backends.emu import EmuError, EmuInputError, EmuNetwork, traffic
from react.backends.emu.cleanup import ScratchDir
from react.controller import Controller
from react.pattern import Pattern
from react.runtime.rank import job_spec
from react.verify import verify

if TYPE_CHECKING:
    from react.scenario import EmuSpec, JobSpec, Scenario

DATA_PORT_BASE = 29500
"""Rank ``r`` of the ``j``-th job listens on ``DATA_PORT_BASE + 100 * j + r`` (jobs may share
hosts); each job's tuner on a free port of rank 0's host."""
BACKGROUND_MAX_S = 1800.0
"""Upper bound on any background sender's life when the scenario gives no ``stop_s``."""
BACKGROUND_PORT_BASE = 20000
"""The ``k``-th flow of background source ``i`` (scenario port ``p``) has its sink on
``BACKGROUND_PORT_BASE + 100 * i + p + k`` (sources may share a destination host)."""


class EmuJob:
    """One job of real rank processes on an emulated network (a TunedBackend)."""

    def __init__(self, network: EmuNetwork, spec: JobSpec, emu: EmuSpec, index: int,
                 workdir: Path) -> None:
        self.network = network
        self.spec = spec
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
        hosts = self.spec.hosts
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
            connections=self.spec.connections, seed=self.spec.seed,
            timeout_s=emu.timeout_s, compute_gap_s=self.spec.compute_gap_s,
        )))
        logs = [files / f"rank{r}.log" for r in range(len(hosts))]
        ranks = []
        for r, h in enumerate(hosts):
            with open(logs[r], "wb") as log:  # a file, not a pipe: a chatty rank never blocks
                ranks.append(net.popen(h, [sys.executable, "-m", "react.runtime.rank",
                                           str(rank_file), str(r)],
                                       stdout=subprocess.DEVNULL, stderr=log))
        self._procs.extend(ranks)
        progress = _Progress(tuner, name, epochs, on_epoch)
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
            raise EmuError(f"job {name!r}: the tuner failed (exit {code}): {_tail(tuner)}")

    def close(self) -> None:
        """Kill whatever of this job still runs; idempotent."""
        from react.runtime.local import kill_processes

        kill_processes(self._procs, 5)
        self._procs = []


class _Progress:
    """Forwards the tuner's per-epoch progress lines (JSON on its stdout) to ``on_epoch``."""

    def __init__(self, tuner: subprocess.Popen[Any], name: str, epochs: int,
                 on_epoch: Callable[[str, int], None] | None) -> None:
        self.name, self.epochs, self.on_epoch = name, epochs, on_epoch
        self.seen = 0
        self._thread = threading.Thread(target=self._read, args=(tuner,), daemon=True)
        self._thread.start()

    def _read(self, tuner: subprocess.Popen[Any]) -> None:
        assert tuner.stdout is not None
        for line in tuner.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and isinstance(msg.get("epoch"), int):
                self._tick(msg["epoch"] + 1)

    def _tick(self, upto: int) -> None:
        while self.seen < min(upto, self.epochs):
            if self.on_epoch is not None:
                self.on_epoch(self.name, self.seen)
            self.seen += 1

    def finish(self) -> None:
        self._thread.join(timeout=2)
        self._tick(self.epochs)


def _tail(proc: subprocess.Popen[Any], limit: int = 600) -> str:
    err: Any = b""
    if proc.stderr is not None:
        try:
            err = proc.stderr.read() or b""
        except (OSError, ValueError):
            pass
    text = (err.decode("utf-8", "replace") if isinstance(err, bytes) else str(err)).strip()
    return text[-limit:] if text else "(no output)"


def run_info(path: Path, results: list[Any], patterns: list[Pattern]) -> dict[str, Any]:
    """What the real run measured beyond the epochs: the tuner's cost, waits, offsets, and the
    switching cost (a switch epoch's time against the median of the next three on the same
    pattern; with the socket transport every connection exists already, so this is warm-up)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    overhead = [d["overhead_s"] for d in doc["decisions"] if d.get("overhead_s") is not None]
    switch = []
    times = [r.collective_time_s for r in results]
    for e in range(1, len(patterns)):
        if patterns[e] != patterns[e - 1]:
            after = [times[k] for k in range(e + 1, min(e + 4, len(times)))
                     if patterns[k] == patterns[e]]
            if after:
                switch.append(times[e] - sorted(after)[len(after) // 2])
    return {
        "complete": doc["complete"],
        "tuner_overhead_s": overhead,
        "epochs_waited": doc["epochs_waited"],
        "offsets_s": doc["offsets_s"],
        "switch_cost_s": switch,
        "events": doc["events"],
    }


def used_hosts(scenario: Scenario) -> list[str]:
    """Hosts that run a rank or send or sink background traffic, in topology order."""
    used = {h for j in scenario.jobs for h in j.hosts}
    used |= {b.src for b in scenario.background} | {b.dst for b in scenario.background}
    return [h for h in scenario.topology.hosts if h in used]


@contextmanager
def scenario_jobs(scenario: Scenario, *, react: bool | None = None) -> Iterator[list[Any]]:
    """The scenario's jobs on a freshly built emulated network (module docstring)."""
    from react.jobs import Job
    from react.scenario import controllers

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
            backend = EmuJob(net, spec, scenario.emu, index, workdir)
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
