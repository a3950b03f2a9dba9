"""``tc`` lines that shape one egress port: an htb class at the link's rate over a byte-limited
bfifo.

Why this shape: the kernel here has no netem, fq, sfq or red, but has htb and bfifo. htb alone
queues up to its default 1000 packets of 64 KB GSO super-packets, so a short transfer waits
behind seconds of a long flow's data; a bfifo of a few milliseconds under the htb class (and
``gso_max_segs`` capped on every veth, see :mod:`react.backends.emu.network`) keeps queues short
and makes competing flows share the link fairly (issue 9: two background flows made a 4 MiB
transfer 2.98x slower, the fair share).
"""

from __future__ import annotations

ROOT = "1:"
CLASS = "1:1"
LEAF = "10:"


def _burst_bytes(rate_bps: float) -> int:
    # enough for a few capped GSO packets (8 x 1514 B) at any rate; 1 ms at high rates
    return max(32_000, int(rate_bps / 8 / 1000))


def _class_args(rate_bps: float) -> str:
    rate = max(1, round(rate_bps))
    burst = _burst_bytes(rate_bps)
    # explicit quantum: the default (rate / r2q) exceeds htb's limit and floods the kernel log
    return f"rate {rate}bit ceil {rate}bit burst {burst} cburst {burst} quantum 60000"


def shape_lines(ifname: str, rate_bps: float, queue_bytes: int) -> list[str]:
    """``tc -batch`` lines installing the shaper on ``ifname``."""
    return [
        f"qdisc replace dev {ifname} root handle {ROOT} htb default 1",
        f"class add dev {ifname} parent {ROOT} classid {CLASS} htb {_class_args(rate_bps)}",
        f"qdisc add dev {ifname} parent {CLASS} handle {LEAF} bfifo limit {queue_bytes}",
    ]


def change_lines(ifname: str, rate_bps: float, queue_bytes: int) -> list[str]:
    """``tc -batch`` lines changing the rate (and queue) of an installed shaper."""
    return [
        f"class change dev {ifname} parent {ROOT} classid {CLASS} htb {_class_args(rate_bps)}",
        f"qdisc change dev {ifname} parent {CLASS} handle {LEAF} bfifo limit {queue_bytes}",
    ]
