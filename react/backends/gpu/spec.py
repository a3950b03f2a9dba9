"""The ``[gpu]`` table of a scenario: how the GPU backend runs a scenario.

Pure data and validation (no torch import), so that a scenario file is checked on a machine
without GPUs. What each key means is in :mod:`react.run.worlds.gpu` and ``docs/results/gpu.md``.

::

    [gpu]
    apply_delay_epochs = 5       # epochs a new pattern takes to reach every rank (§6.3)
    timeout_s = 120              # bound on every NCCL operation and every tuner wait
    lanes = 4                    # NCCL communicators for chunk graphs
    copy_bytes = 67108864        # bytes per copy of a background copy stream
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["GpuSpec", "parse_gpu_table"]

_KEYS = ("apply_delay_epochs", "timeout_s", "lanes", "copy_bytes")


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """How the GPU backend runs a scenario (the ``[gpu]`` table; module docstring)."""

    apply_delay_epochs: int = 5
    timeout_s: float = 120.0
    lanes: int = 4
    copy_bytes: int = 64 * 1024 * 1024


def parse_gpu_table(t: Any) -> GpuSpec:
    """Validate a scenario's ``[gpu]`` table (a :class:`react.run.scenario` table reader)."""
    d = GpuSpec()
    spec = GpuSpec(
        apply_delay_epochs=t.integer("apply_delay_epochs", d.apply_delay_epochs, minimum=0),
        timeout_s=t.number("timeout_s", d.timeout_s, positive=True),
        lanes=t.integer("lanes", d.lanes, minimum=1),
        copy_bytes=t.integer("copy_bytes", d.copy_bytes, minimum=4),
    )
    t.done(_KEYS)
    return spec
