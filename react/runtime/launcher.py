"""Starting a job of real ranks: a leader process (RTuner) and one process per rank.

What the emulator's and the GPU backend's jobs share: forwarding the leader's per-epoch progress
to a progress bar, reading what a run measured beyond its epochs, and naming why a process
failed.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from react.model.pattern import Pattern

__all__ = ["Progress", "process_tail", "run_info"]


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
