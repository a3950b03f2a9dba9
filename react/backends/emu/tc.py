"""``tc`` lines that shape one egress port: htb at the link's rate over byte-limited bfifos,
optionally one class per source host so that senders share the port fairly.

Why this shape: the kernel here has no netem, fq, sfq, codel or red, only htb, bfifo/pfifo and
the u32 classifier. htb alone queues 1000 packets of 64 KB GSO super-packets, so a short
transfer waits behind seconds of a long flow's data; a bfifo of a few milliseconds under each
htb class (and ``gso_max_segs`` capped on every veth, :mod:`react.backends.emu.network`) keeps
queues short. In one shared FIFO, though, a newly started BBR flow took 145 of 192 Mbit/s from
two established ones (a 16 MiB transfer), and a 4 MiB Reno transfer still got ~95 instead of
the fair 64 (slow-start overshoot). Switch ports therefore get fair queueing per source host:
a u32 hash on the source address (host ``i`` owns ``10.1.0.0 + 4 i + 1``, so bits 2-7 of the
last byte are ``i mod 64``) sends each source host to its own htb leaf; sibling leaves of equal
rate and quantum share the port round-robin, the max-min share flowsim assumes. Flows of one
source host share that host's leaf in FIFO order (they share its uplink anyway).
"""

from __future__ import annotations

from collections.abc import Sequence

ROOT = "1:"
CLASS = "1:1"
LEAF = "10:"
HASH_TABLE = "2:"
BUCKETS = 64
"""Source-host buckets of a fair port (host index mod 64)."""

QUANTUM_BYTES = 12_112
"""Round-robin quantum of a fair leaf: one capped GSO packet (8 x 1514 B)."""


def _burst_bytes(rate_bps: float) -> int:
    # enough for a few capped GSO packets (8 x 1514 B) at any rate; 1 ms at high rates
    return max(32_000, int(rate_bps / 8 / 1000))


def _class_args(rate_bps: float, ceil_bps: float, quantum: int) -> str:
    rate, ceil = max(8, round(rate_bps)), max(8, round(ceil_bps))
    burst = _burst_bytes(ceil_bps)
    # explicit quantum: the default (rate / r2q) exceeds htb's limit and floods the kernel log
    return f"rate {rate}bit ceil {ceil}bit burst {burst} cburst {burst} quantum {quantum}"


def _leaf(bucket: int) -> tuple[str, str]:
    return f"1:{0x100 + bucket:x}", f"{0x100 + bucket:x}:"


def shape_lines(ifname: str, rate_bps: float, queue_bytes: int,
                buckets: Sequence[int] = ()) -> list[str]:
    """``tc -batch`` lines installing the shaper on ``ifname``.

    With ``buckets`` (source-host buckets that may send through this port, each in
    ``[0, BUCKETS)``) the port gets one fair leaf per bucket, each with its own
    ``queue_bytes`` bfifo; without, a single class and bfifo.
    """
    dev = f"dev {ifname}"
    if len(buckets) < 2:
        return [
            f"qdisc replace {dev} root handle {ROOT} htb default 1",
            f"class add {dev} parent {ROOT} classid {CLASS} htb "
            f"{_class_args(rate_bps, rate_bps, 60_000)}",
            f"qdisc add {dev} parent {CLASS} handle {LEAF} bfifo limit {queue_bytes}",
        ]
    default = _leaf(buckets[0])[0].split(":")[1]
    lines = [
        f"qdisc replace {dev} root handle {ROOT} htb default {default}",
        f"class add {dev} parent {ROOT} classid {CLASS} htb "
        f"{_class_args(rate_bps, rate_bps, 60_000)}",
    ]
    share = rate_bps / len(buckets)
    for b in buckets:
        classid, handle = _leaf(b)
        lines.append(f"class add {dev} parent {CLASS} classid {classid} htb "
                     f"{_class_args(share, rate_bps, QUANTUM_BYTES)}")
        lines.append(f"qdisc add {dev} parent {classid} handle {handle} bfifo limit {queue_bytes}")
    lines.append(f"filter add {dev} parent {ROOT} prio 1 handle {HASH_TABLE} protocol ip u32 "
                 f"divisor {BUCKETS}")
    lines.append(f"filter add {dev} parent {ROOT} prio 1 protocol ip u32 ht 800:: "
                 f"match ip src 10.1.0.0/16 hashkey mask 0x000000fc at 12 link {HASH_TABLE}")
    for b in buckets:
        lines.append(f"filter add {dev} parent {ROOT} prio 1 protocol ip u32 "
                     f"ht {HASH_TABLE}{b:x}: match u32 0 0 flowid {_leaf(b)[0]}")
    return lines


def down_lines(ifname: str, buckets: Sequence[int] = ()) -> list[str]:
    """``tc -batch`` lines failing a shaped port: every bfifo drops everything (limit 0).

    The htb rates stay: a tiny rate instead would leave the classes in token debt (up to a
    minute) after the link comes back, and :func:`change_lines` restores the limits.
    """
    dev = f"dev {ifname}"
    if len(buckets) < 2:
        return [f"qdisc change {dev} parent {CLASS} handle {LEAF} bfifo limit 0"]
    return [f"qdisc change {dev} parent {_leaf(b)[0]} handle {_leaf(b)[1]} bfifo limit 0"
            for b in buckets]


def change_lines(ifname: str, rate_bps: float, queue_bytes: int,
                 buckets: Sequence[int] = ()) -> list[str]:
    """``tc -batch`` lines changing the rate (and queues) of a shaper installed as above."""
    dev = f"dev {ifname}"
    lines = [f"class change {dev} parent {ROOT} classid {CLASS} htb "
             f"{_class_args(rate_bps, rate_bps, 60_000)}"]
    if len(buckets) < 2:
        lines.append(f"qdisc change {dev} parent {CLASS} handle {LEAF} bfifo limit {queue_bytes}")
        return lines
    share = rate_bps / len(buckets)
    for b in buckets:
        classid, handle = _leaf(b)
        lines.append(f"class change {dev} parent {CLASS} classid {classid} htb "
                     f"{_class_args(share, rate_bps, QUANTUM_BYTES)}")
        lines.append(f"qdisc change {dev} parent {classid} handle {handle} "
                     f"bfifo limit {queue_bytes}")
    return lines
