"""The clock every rank stamps its flows with.

``now_s()`` is ``time.monotonic()`` (CLOCK_MONOTONIC). Network namespaces share the host's
monotonic clock, so on one machine (the emulator) stamps from different ranks compare directly.
Real clusters do not share it: the tuner estimates each rank's offset from its own clock at
connection time (NTP-style, :mod:`react.runtime.tuner`) and maps every stamp onto the leader's
clock before merging; on one host the estimated offsets are a few microseconds.
"""

from __future__ import annotations

import time

now_s = time.monotonic
