"""Starting a job of real ranks: a leader process (RTuner) and one process per rank.

The emulator's job (:class:`~react.backends.emu.job.EmuJob`) and the GPU job
(:class:`~react.backends.gpu.job.GpuJob`) run their processes through one :class:`RankLauncher`:
write the tuner's spec (:meth:`RankLauncher.tuner_spec`, which carries the controller by
reference) and start its leader, start every rank with its log in a file, watch the ranks to
their end (the first that fails is named with its own last line, and a deadline bounds them),
wait for the tuner, kill whatever is left, and read the result. A job gives only what is its own,
as plain values: how a process starts on its host (inside a network namespace, or with a rank's
environment), each rank's command, the deadlines and the error class its callers catch.

Also here: forwarding the leader's per-epoch progress to a progress bar (:class:`Progress`),
reading what a run measured beyond its epochs (:func:`run_info`), and a failed process's last
words (:func:`process_tail`).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from react.control.backend import JobRun
from react.model.errors import ReactError
from react.model.pattern import Pattern

__all__ = ["Progress", "RankLauncher", "process_tail", "run_info"]

Popen = Callable[..., "subprocess.Popen[Any]"]
"""How a process starts: ``popen(argv, **popen_kwargs)`` (the tuner) or ``popen(rank, argv,
**popen_kwargs)`` (a rank), returning a :class:`subprocess.Popen`."""


def _local(rank: int, argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    return subprocess.Popen(argv, **kwargs)


class RankLauncher:
    """The processes of one job of real ranks, from start to kill (module docstring).

    Call, in this order: :meth:`tuner_spec` (before anything is written: it refuses a controller
    the leader cannot make again) and :meth:`start_tuner`, or neither (ranks without a tuner);
    :meth:`write_json` for the ranks' own spec; :meth:`start_ranks`; :meth:`wait`; and
    :meth:`result` when there was a tuner. Every process stays listed in :attr:`processes` after
    it was killed, so a caller can check that none is left.

    Parameters
    ----------
    name : str
        The job's name, in every error.
    folder : path
        Where ``tuner.json``, ``result.json``, the ranks' spec and ``rank{r}.log`` go (made on
        the first write).
    error : exception class
        What a failure raises (the backend's own, e.g. ``EmuError``), with a message naming the
        job and what failed.
    kill_timeout_s : float
        How long each killed process is waited for.
    """

    def __init__(self, name: str, folder: str | Path, *, error: type[ReactError],
                 kill_timeout_s: float) -> None:
        self.name = name
        self.folder = Path(folder)
        self.error = error
        self.kill_timeout_s = float(kill_timeout_s)
        self.tuner: subprocess.Popen[Any] | None = None
        """The leader's process once started (tests kill it to check that the job still ends)."""
        self.ranks: list[subprocess.Popen[Any]] = []
        self.logs: list[Path] = []
        self.result_file = self.folder / "result.json"

    @property
    def processes(self) -> list[subprocess.Popen[Any]]:
        """Every process started, the tuner first; those killed stay listed."""
        return ([] if self.tuner is None else [self.tuner]) + list(self.ranks)

    def tuner_spec(self, pattern: Pattern, controller: Any, *, message_bytes: float,
                   apply_delay_epochs: int, host: str, timeout_s: float,
                   flow_bytes: Sequence[float] | None = None) -> dict[str, Any]:
        """:func:`react.runtime.tuner.tuner_spec`; a controller that cannot be carried to the
        leader's process raises ``error`` naming the job and the controller."""
        from react.control.policies import ControllerLoadError
        from react.runtime.tuner import tuner_spec

        try:
            return tuner_spec(pattern, controller, message_bytes=message_bytes,
                              apply_delay_epochs=apply_delay_epochs, host=host,
                              timeout_s=timeout_s, flow_bytes=flow_bytes)
        except ControllerLoadError as exc:
            raise self.error(f"job {self.name!r}: {exc}") from None

    def write_json(self, filename: str, doc: Any) -> Path:
        """Write ``doc`` as ``folder/filename``; its path."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / filename
        path.write_text(json.dumps(doc), encoding="utf-8")
        return path

    def start_tuner(self, spec: Mapping[str, Any], *, popen: Popen,
                    timeout_s: float) -> tuple[str, int]:
        """Start the leader with ``spec`` (``popen(argv, **kwargs)``); the address it listens on.

        Raises :class:`~react.model.errors.ReactError` if it does not start within
        ``timeout_s`` (:func:`react.runtime.tuner.spawn_leader`).
        """
        from react.runtime.tuner import spawn_leader

        spec_file = self.write_json("tuner.json", dict(spec))
        self.tuner, address = spawn_leader(spec_file, self.result_file, popen=popen,
                                           timeout_s=timeout_s)
        return address

    def start_ranks(self, commands: Sequence[Sequence[str]], *, popen: Popen | None = None,
                    envs: Sequence[Mapping[str, str]] | None = None) -> None:
        """Start rank ``r`` as ``popen(r, commands[r], ...)`` (default: on this host), its
        stderr into ``rank{r}.log`` and with ``envs[r]`` as its environment when given."""
        self.folder.mkdir(parents=True, exist_ok=True)
        start = popen or _local
        for r, argv in enumerate(commands):
            log_path = self.folder / f"rank{r}.log"
            kwargs: dict[str, Any] = {} if envs is None else {"env": dict(envs[r])}
            with open(log_path, "wb") as log:  # a file, not a pipe: a chatty rank never blocks
                proc = start(r, list(argv), stdout=subprocess.DEVNULL, stderr=log, **kwargs)
            self.ranks.append(proc)
            self.logs.append(log_path)

    def wait(self, epochs: int, *, deadline_s: float, tuner_timeout_s: float,
             on_epoch: Callable[[str, int], None] | None = None) -> None:
        """Watch every rank to its end, then the tuner; kill whatever is left, whatever happens.

        ``on_epoch(name, epoch)`` follows the tuner's progress (with no tuner it is not called).

        Raises
        ------
        error
            When a rank exits non-zero (the first one, with its last line), ranks still run
            ``deadline_s`` after this call, or the tuner does not end within
            ``tuner_timeout_s`` of the last rank, is killed, or fails (exit 3, a partial result
            whose events say why, is not a failure).
        """
        progress = None if self.tuner is None else Progress(self.tuner, self.name, epochs,
                                                           on_epoch)
        try:
            self._wait_ranks(deadline_s)
            if self.tuner is not None:
                self._wait_tuner(self.tuner, epochs, tuner_timeout_s)
        finally:
            if progress is not None:
                progress.finish()
            self.kill()

    def _wait_ranks(self, deadline_s: float) -> None:
        deadline = time.monotonic() + deadline_s
        while True:
            codes = [p.poll() for p in self.ranks]
            failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                r, code = failed[0]
                raise self.error(f"job {self.name!r}: rank {r} failed (exit {code}): "
                                 f"{self.rank_failure(r)}")
            if all(c == 0 for c in codes):
                return
            if time.monotonic() > deadline:
                raise self.error(f"job {self.name!r}: ranks still running after "
                                 f"{deadline_s:.0f} s; killed every rank")
            time.sleep(0.05)

    def rank_failure(self, rank: int) -> str:
        """Why ``rank`` failed, from its log: the last line it wrote as ``rank {rank}: ...``
        (what a rank prints before it exits non-zero), else the log's last 600 characters."""
        text = self.logs[rank].read_text(encoding="utf-8", errors="replace").strip()
        own = [line for line in text.splitlines() if line.startswith(f"rank {rank}:")]
        return (own[-1] if own else text[-600:]) or "(no output)"

    def _wait_tuner(self, tuner: subprocess.Popen[Any], epochs: int, timeout_s: float) -> None:
        try:
            code = tuner.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise self.error(f"job {self.name!r}: the tuner did not finish within "
                             f"{timeout_s:g} s of the last rank") from None
        if code < 0:
            raise self.error(f"job {self.name!r}: the tuner died (signal {-code}); every rank "
                             f"finished its {epochs} epochs on its pattern, but the timings it "
                             "had gathered died with it")
        if code not in (0, 3):  # 3: a partial result (its events say why), still readable
            raise self.error(f"job {self.name!r}: the tuner failed (exit {code}): "
                             f"{process_tail(tuner)}")

    def kill(self) -> None:
        """Kill every process still running and reap them all; idempotent."""
        from react.runtime.local import kill_processes

        kill_processes(self.processes, self.kill_timeout_s)

    def result(self) -> JobRun:
        """The job as the tuner recorded it (:func:`~react.runtime.tuner.read_result`), with
        :func:`run_info` as its ``info``."""
        from react.runtime.tuner import read_result

        results, patterns, decisions = read_result(self.result_file)
        return JobRun(self.name, results, patterns, decisions,
                      info=run_info(self.result_file, results, patterns))


class Progress:
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


def process_tail(proc: subprocess.Popen[Any], limit: int = 600) -> str:
    """The last ``limit`` characters ``proc`` wrote on its stderr pipe, or ``(no output)``."""
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
