"""One measured transfer between two hosts of a running network: throughput, FCT and CPU.

Used by the tests and by ``benchmarks/emu_network.py`` to check the emulator against its
configuration (rate limits, congestion, ECMP) with the same bounded sender and sink as the
background traffic (:mod:`react.backends.emu.traffic`).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

from react.backends.emu import traffic
from react.backends.emu.errors import EmuError

if TYPE_CHECKING:
    from react.backends.emu.network import EmuNetwork


@dataclass(frozen=True, slots=True)
class TransferResult:
    """A finished transfer; times on the shared monotonic clock.

    ``start_s`` is when the sender's connection was established, ``end_s`` when the sink
    received the last byte; CPU seconds are each process's own (user + system, which includes
    the kernel's network work done on its behalf).
    """

    size_bytes: int
    start_s: float
    end_s: float
    sender_cpu_s: float
    sink_cpu_s: float

    @property
    def fct_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def goodput_bps(self) -> float:
        return self.size_bytes * 8 / self.fct_s


def transfer(net: EmuNetwork, src: str, dst: str, size_bytes: int, *, port: int,
             src_port: int | None = None, timeout_s: float = 30.0) -> TransferResult:
    """Send ``size_bytes`` from ``src`` to ``dst:port`` over one TCP connection and time it.

    ``src_port`` pins the connection's source port (and so its ECMP path). Raises
    :class:`EmuError` if the transfer does not complete within ``timeout_s``.
    """
    sink = net.popen(dst, traffic.sink_argv(port, timeout_s, expect_bytes=size_bytes),
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    traffic.wait_ready(sink, f"sink on {dst}:{port}")
    sender = net.popen(src, traffic.sender_argv("long_lived", net.host_ip(dst), port,
                                                duration_s=timeout_s, max_bytes=size_bytes,
                                                src_port=src_port),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sent_out, sent_err = sender.communicate(timeout=timeout_s + traffic.GRACE_S + 2)
        sink_out, sink_err = sink.communicate(timeout=timeout_s + traffic.GRACE_S + 2)
    except subprocess.TimeoutExpired:
        sender.kill()
        sink.kill()
        raise EmuError(f"transfer {src} -> {dst}:{port} did not finish in {timeout_s:g} s"
                       ) from None
    try:
        sent, got = json.loads(sent_out), json.loads(sink_out)
    except json.JSONDecodeError:
        raise EmuError(f"transfer {src} -> {dst}:{port} failed: "
                       f"{(sent_err + sink_err).strip() or 'no report'}") from None
    if got["bytes"] < size_bytes or sent["connect_s"] is None:
        raise EmuError(f"transfer {src} -> {dst}:{port} delivered {got['bytes']} of "
                       f"{size_bytes} bytes in {timeout_s:g} s")
    return TransferResult(size_bytes, sent["connect_s"], got["last_s"], sent["cpu_s"],
                          got["cpu_s"])
