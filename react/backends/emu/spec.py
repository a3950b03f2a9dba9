"""The ``[emu]`` table of a scenario: how the emulator scales and runs a scenario.

Pure data and validation (no namespace is touched), so that a scenario file is checked on any
machine. What each key means is in :mod:`react.run.worlds.emu` (scaling) and ``docs/emulator.md``.

::

    [emu]
    link_rate_bps = 200e6        # the fastest link's emulated rate; others scale with it
    message_bytes = 4194304      # every job's message on the emulator
    transport = "socket"         # or "torch" (Gloo; extra [torch])
    apply_delay_epochs = 5       # epochs a new pattern takes to reach every rank (§6.3)
    timeout_s = 120              # bound on any wait of a rank or of the tuner
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["EMU_TRANSPORTS", "EmuSpec", "parse_emu_table"]

EMU_TRANSPORTS: tuple[str, ...] = ("socket", "torch")

_KEYS = ("link_rate_bps", "message_bytes", "transport", "apply_delay_epochs", "timeout_s")


@dataclass(frozen=True, slots=True)
class EmuSpec:
    """How the emulator scales and runs a scenario (the ``[emu]`` table; module docstring)."""

    link_rate_bps: float = 200e6
    message_bytes: float = 4 * 1024 * 1024
    transport: str = "socket"
    apply_delay_epochs: int = 5
    timeout_s: float = 120.0


def parse_emu_table(t: Any) -> EmuSpec:
    """Validate a scenario's ``[emu]`` table (a :class:`react.run.scenario` table reader)."""
    d = EmuSpec()
    spec = EmuSpec(
        link_rate_bps=t.number("link_rate_bps", d.link_rate_bps, positive=True),
        message_bytes=t.number("message_bytes", d.message_bytes, positive=True),
        transport=t.string("transport", d.transport, choices=EMU_TRANSPORTS),
        apply_delay_epochs=t.integer("apply_delay_epochs", d.apply_delay_epochs, minimum=0),
        timeout_s=t.number("timeout_s", d.timeout_s, positive=True),
    )
    t.done(_KEYS)
    return spec
