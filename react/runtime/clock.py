"""The clock every rank stamps its flows with.

``now_s()`` is ``time.monotonic()`` (CLOCK_MONOTONIC). Network namespaces share the host's
monotonic clock, so on one machine (the emulator) stamps from different ranks compare directly.
Real clusters do not share it: the tuner estimates each rank's offset from its own clock at
connection time (NTP-style, :mod:`react.runtime.tuner`) and maps every stamp onto the leader's
clock before merging. A rank whose :func:`clock_id` equals the leader's reads the same clock, and
its offset is exactly 0: estimated, it would be off by the ping's asymmetry (microseconds, more
under load), which moves its flows against the other ranks' and made decisions that depend on
flow overlaps change from run to run.
"""

from __future__ import annotations

import time
from functools import cache

now_s = time.monotonic


@cache
def clock_id() -> str | None:
    """What identifies this machine's monotonic clock (Linux's boot id), or None if unknown."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip() or None
    except OSError:
        return None
