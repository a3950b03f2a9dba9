"""How many hosts this machine can emulate, and how many can send at line rate at once.

Building is cheap: a host costs a namespace, one veth pair and a few htb classes, measured at
0.3-1.5 MB of kernel memory per host (MemAvailable drop over a 64-host star) and 25-65 ms of
setup. What a host really costs is the process that runs on it: a Python rank with numpy
is 55 MB resident before it allocates its buffers, so :data:`HOST_BUDGET_BYTES` budgets
100 MB per host. :func:`max_hosts` lets the hosts take at most half of the memory available
now, and never more than :data:`HARD_CAP` (a 64-host star builds in ~4 s; the address plan
allows 16384). With 23.8 GB available (this machine kind) that is 117 hosts.

Running is what limits accuracy. Host pairs each sending at 200 Mbit/s at once through one
bridge reached 99%, 93%, 91%, 76% and 57% of pairs x goodput for 1, 2, 4, 6 and 8 pairs on 2
busy cores (other users took about one core): the CPU saturates near 870 Mbit/s of goodput,
i.e. about 0.35 core per 200 Mbit/s flow counting the softirq work of veth, bridge and htb
(:data:`CORES_PER_FLOW`; the sender and sink processes alone account for ~0.1 core).
Emulated rates are only trustworthy while the CPU is not the bottleneck: :func:`line_rate_hosts`
is how many hosts can each send and receive at line rate at once keeping 20% of the cores
idle: 4 on 2 cores at 200 Mbit/s, 9 at 100 Mbit/s.
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

CORES_PER_FLOW = 0.35
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
