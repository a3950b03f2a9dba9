"""How many hosts this machine can emulate, and how many can send at line rate at once.

Building is cheap: a host costs a namespace, one veth pair and a few htb classes, measured at
0.3-1.5 MB of kernel memory per host (MemAvailable drop over a 64-host star) and 25-65 ms of
setup. What a host really costs is the process that runs on it: a Python rank with numpy
is 55 MB resident before it allocates its buffers, so :data:`HOST_BUDGET_BYTES` budgets
100 MB per host. :func:`max_hosts` lets the hosts take at most half of the memory available
now, and never more than :data:`HARD_CAP` (a 64-host star builds in 1.5-4 s; the address plan
allows 16384). With 22.7-24.3 GB available (this machine kind) that is 111-119 hosts.

Running is what limits accuracy. Host pairs sending 16 MiB each at 200 Mbit/s at once
through one bridge, all starting at the same instant: with 4 and 8 pairs every pair still ran at
94-97% of the 191 Mbit/s goodput (8 pairs: slowest 178, mean 185, aggregate 1418 Mbit/s), on 2
cores that other jobs kept busy (load average 7-13); with 12 pairs the mean fell to 94% and the
slowest to 88%, and the interpreters alone took 1.3 s to start. A sender and its sink cost
~0.1 core in their own processes; veth, bridge and htb work runs in softirq on top.
:data:`CORES_PER_FLOW` (0.2 core per 200 Mbit/s flow, all included) is what 8 flows on 2 cores
at line rate imply with 20% to spare. Emulated rates are only trustworthy while the CPU is not
the bottleneck: :func:`line_rate_hosts` is how many hosts can each send at line rate at once
keeping 20% of the cores idle: 8 on 2 cores at 200 Mbit/s, 16 at 100 Mbit/s.
:class:`~react.backends.emu.network.EmuNetwork` refuses more hosts than :func:`max_hosts` and
warns beyond :func:`line_rate_hosts`. ``benchmarks/bench_emu.py`` re-measures all of it.
"""

from __future__ import annotations

import os

HOST_KERNEL_BYTES = 1_500_000
"""Kernel memory of one emulated host (namespace, veth pair, shapers), measured upper bound."""

HOST_BUDGET_BYTES = 100_000_000 + HOST_KERNEL_BYTES
"""Memory budget of one host: its rank process (numpy, buffers) and its kernel objects."""

HARD_CAP = 256
"""Never build more hosts than this, whatever the memory."""

CORES_PER_FLOW = 0.2
"""Cores busy per host sending at 200 Mbit/s (and its receiver), machine-wide."""

REFERENCE_BPS = 200e6
IDLE_FRACTION = 0.2


def _mem_available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4_000_000_000  # unknown: assume a small machine


def cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def max_hosts() -> int:
    """How many hosts this machine can build: half the available memory, at most HARD_CAP."""
    return max(2, min(HARD_CAP, int(0.5 * _mem_available_bytes() // HOST_BUDGET_BYTES)))


def line_rate_hosts(link_rate_bps: float = REFERENCE_BPS) -> int:
    """How many hosts can send at ``link_rate_bps`` at once before the CPU is the bottleneck."""
    per_host = CORES_PER_FLOW * link_rate_bps / REFERENCE_BPS
    return max(1, int(cores() * (1 - IDLE_FRACTION) / per_host))


def explain(link_rate_bps: float = REFERENCE_BPS) -> str:
    """The limits on this machine, in words (``react emu info``)."""
    mem = _mem_available_bytes()
    return (
        f"max hosts:  {max_hosts()} (half of {mem / 1e9:.1f} GB available at "
        f"{HOST_BUDGET_BYTES / 1e6:.0f} MB per host, at most {HARD_CAP})\n"
        f"line rate:  {line_rate_hosts(link_rate_bps)} hosts can send at "
        f"{link_rate_bps / 1e6:g} Mbit/s at once on {cores()} cores "
        f"({CORES_PER_FLOW} core per host at {REFERENCE_BPS / 1e6:g} Mbit/s, 20% kept idle)"
    )
