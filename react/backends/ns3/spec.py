"""The ``[ns3]`` table of a scenario: how the packet-level backend sets up TCP and the switches.

Pure data and validation (no ns-3 import), so that every scenario file can be checked without
the optional package. The defaults are the paper's setup (§7.1: DCTCP with ECN marking at the
switches) with the datacenter TCP parameters made explicit: ns-3's defaults are wide-area ones
(a 1 s minimum RTO, a 3 s SYN timeout, 200 ms delayed ACKs), under which one lost SYN or one odd
last segment costs seconds.

::

    [ns3]
    warmup_s = 1e-3          # jobs start this long after the background flows that start at 0
    timeout_s = 900          # wall-clock bound on one batch of epochs in the child process
    segment_bytes = 1448     # TCP payload per packet (1500-byte MTU, timestamps on)
    dctcp_g = 0.0625         # DCTCP's EWMA gain g
    red_min_packets = 32     # RED marks ECN from this queue length (packets) ...
    red_max_packets = 60     # ... and every packet from this one
    buffer_packets = 10000   # queue capacity of every egress port (packets)
    min_rto_s = 1e-3         # TCP's minimum retransmission timeout
    [ns3.attributes]         # optional: raw ns-3 defaults, applied last (experts)
    "ns3::TcpSocket::InitialCwnd" = "10"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Ns3Spec", "parse_ns3_table"]


@dataclass(frozen=True, slots=True)
class Ns3Spec:
    """How the ns-3 backend runs a scenario (the ``[ns3]`` table; module docstring)."""

    warmup_s: float = 1e-3
    timeout_s: float = 900.0
    segment_bytes: int = 1448
    dctcp_g: float = 0.0625
    red_min_packets: int = 32
    red_max_packets: int = 60
    buffer_packets: int = 10_000
    min_rto_s: float = 1e-3
    attributes: tuple[tuple[str, str], ...] = ()


_KEYS = ("warmup_s", "timeout_s", "segment_bytes", "dctcp_g", "red_min_packets",
         "red_max_packets", "buffer_packets", "min_rto_s", "attributes")


def parse_ns3_table(t: Any) -> Ns3Spec:
    """Validate a scenario's ``[ns3]`` table (a :class:`react.run.scenario._Table`)."""
    d = Ns3Spec()
    spec = Ns3Spec(
        warmup_s=t.number("warmup_s", d.warmup_s),
        timeout_s=t.number("timeout_s", d.timeout_s, positive=True),
        segment_bytes=t.integer("segment_bytes", d.segment_bytes, minimum=64, maximum=8960),
        dctcp_g=t.number("dctcp_g", d.dctcp_g, positive=True),
        red_min_packets=t.integer("red_min_packets", d.red_min_packets, minimum=1),
        red_max_packets=t.integer("red_max_packets", d.red_max_packets, minimum=1),
        buffer_packets=t.integer("buffer_packets", d.buffer_packets, minimum=1),
        min_rto_s=t.number("min_rto_s", d.min_rto_s, positive=True),
        attributes=_attributes(t),
    )
    if spec.dctcp_g > 1:
        raise t.fail("dctcp_g", spec.dctcp_g, "a gain in (0, 1]")
    if spec.red_max_packets < spec.red_min_packets:
        raise t.fail("red_max_packets", spec.red_max_packets,
                     f"at least red_min_packets ({spec.red_min_packets})")
    if spec.buffer_packets <= spec.red_max_packets:
        raise t.fail("buffer_packets", spec.buffer_packets,
                     f"more than red_max_packets ({spec.red_max_packets}), so marking comes "
                     "before drops")
    t.done(_KEYS)
    return spec


def _attributes(t: Any) -> tuple[tuple[str, str], ...]:
    raw = t.raw("attributes", {})
    if not isinstance(raw, dict):
        raise t.fail("attributes", raw, 'a table of "ns3::Class::Attribute" = "value" strings')
    out = []
    for name, value in raw.items():
        if not (isinstance(name, str) and name.startswith("ns3::") and name.count("::") >= 2):
            raise t.fail(f"attributes.{name}", value,
                         'an ns-3 attribute path such as "ns3::TcpSocket::InitialCwnd"')
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise t.fail(f"attributes.{name}", value, "a string or a number")
        out.append((name, str(value)))
    return tuple(out)
