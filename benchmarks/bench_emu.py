"""Benchmark: the emulated network (react.backends.emu) against its configuration.

Prints, in one run (needs root; ~1 minute):

1. namespace setup and teardown time of a 16-host star, an 8-host-used leaf-spine (4 leaves x
   2 spines) and a 64-host star (median, min and max of ``--repeats`` builds);
2. goodput of one transfer against the configured rate (expected: rate x 1448/1514, the TCP
   payload of a full frame) at 100, 200 and 400 Mbit/s;
3. the slowdown of a 4 MiB transfer into a host receiving 2 background flows, with fair
   sharing per source host (the default) and with one FIFO per port;
4. ECMP spread: connections with successive source ports across a 2-leaf, 4-spine fabric, the
   bytes each spine carried, and whether ``EmuNetwork.path`` predicted each one's spine;
5. CPU headroom: sender + sink CPU time of a 32 MiB transfer at 200 Mbit/s against its wall
   time, the machine's busy cores during it against just before, and the goodput of each of
   1-12 host pairs transferring 16 MiB at once (where it falls below the rate, the CPU binds);
6. the limits of react.backends.emu.limits on this machine.

Usage: sudo python benchmarks/bench_emu.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time

from flowsim.topologies import leaf_spine, star
from react.backends.emu import EmuNetwork, limits, traffic, transfer

MIB = 1 << 20
PAYLOAD = 1448 / 1514


def _busy_cores() -> tuple[int, int]:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def _cores_between(a: tuple[int, int], b: tuple[int, int]) -> float:
    return (b[0] - a[0]) / max(1, b[1] - a[1]) * limits.cores()


def setup_teardown(repeats: int) -> None:
    print("1. setup / teardown (s): median [min, max]")
    cases = [
        ("star-16", star(16), None),
        ("leaf-spine 4x2, 8 hosts", leaf_spine(4, 2, 8),
         ["h0", "h1", "h8", "h9", "h16", "h17", "h24", "h25"]),
        ("star-64", star(64), None),
    ]
    for label, topo, hosts in cases:
        up, down = [], []
        for _ in range(repeats):
            net = EmuNetwork(topo, hosts=hosts)
            net.close()
            up.append(net.setup_s)
            down.append(net.teardown_s)
        print(f"   {label:24s} setup {statistics.median(up):.3f} [{min(up):.3f}, {max(up):.3f}]"
              f"  teardown {statistics.median(down):.3f} [{min(down):.3f}, {max(down):.3f}]")


def rates() -> None:
    print("2. goodput vs configured rate (Mbit/s)")
    for rate in (100e6, 200e6, 400e6):
        with EmuNetwork(star(2), link_rate_bps=rate) as net:
            for size in (4 * MIB, 16 * MIB):
                r = transfer(net, "h0", "h1", size, port=5000 + size // MIB)
                want = rate * PAYLOAD
                print(f"   rate {rate / 1e6:5.0f}: {size // MIB:2d} MiB -> "
                      f"{r.goodput_bps / 1e6:6.1f} (expected {want / 1e6:.1f}, "
                      f"{(r.goodput_bps / want - 1) * 100:+.1f}%)")


def congestion(repeats: int) -> None:
    print("3. 4 MiB into a host with 2 background flows (fair share: 3.00x)")
    for fair in (True, False):
        ratios = []
        for _ in range(repeats):
            with EmuNetwork(star(4), fair_share=fair) as net:
                alone = transfer(net, "h0", "h1", 4 * MIB, port=5001)
                for i, src in enumerate(("h2", "h3")):
                    net.start_background("long_lived", src, "h1", port=6000 + i, duration_s=8.0,
                                         max_bytes=500 * MIB)
                time.sleep(0.5)
                busy = transfer(net, "h0", "h1", 4 * MIB, port=5002)
                ratios.append(busy.fct_s / alone.fct_s)
        print(f"   {'fair per source host' if fair else 'one FIFO per port':22s} slowdown "
              + ", ".join(f"{x:.2f}x" for x in ratios))


def ecmp(connections: int, spines: int = 4) -> None:
    print(f"4. ECMP: {connections} connections h0 -> h1 across {spines} spines, source ports "
          "41000+i")
    with EmuNetwork(leaf_spine(2, spines, 1)) as net:
        names = [f"spine{k}" for k in range(spines)]
        before = [net.link_tx_bytes("leaf0", s) for s in names]
        picks, agree = [], 0
        for i in range(connections):
            b = [net.link_tx_bytes("leaf0", s) for s in names]
            transfer(net, "h0", "h1", MIB // 4, port=5001, src_port=41000 + i)
            a = [net.link_tx_bytes("leaf0", s) for s in names]
            delta = [y - x for x, y in zip(b, a, strict=True)]
            picks.append(delta.index(max(delta)))
            predicted = net.path("h0", "h1", src_port=41000 + i, dst_port=5001)[2]
            agree += predicted == names[picks[-1]]
        after = [net.link_tx_bytes("leaf0", s) for s in names]
    print(f"   spine per connection: {''.join(str(p) for p in picks)}")
    print(f"   connections per spine {[picks.count(k) for k in range(spines)]}, MB per spine "
          f"{[round((a - b) / 1e6, 1) for a, b in zip(after, before, strict=True)]}; "
          f"path() named the counters' spine for {agree} of {connections}")


def _concurrent(pairs: int, size: int) -> tuple[float, float, float, float]:
    """Pairs h0->h1, h2->h3, ... each sending ``size`` at once: (slowest and mean per-pair
    goodput, aggregate goodput over the whole span, how late the last sender started)."""
    with EmuNetwork(star(2 * pairs)) as net:
        sinks = [net.popen(f"h{2 * i + 1}", traffic.sink_argv(5000, 30.0, size),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(pairs)]
        for s in sinks:
            traffic.wait_ready(s, "sink")
        # every sender waits for the same moment, so that slow interpreter starts on a busy
        # machine do not stagger the transfers
        at = time.monotonic() + 1.0 + 0.3 * pairs
        senders = [net.popen(f"h{2 * i}", traffic.sender_argv(
            "long_lived", net.host_ip(f"h{2 * i + 1}"), 5000, duration_s=30.0, max_bytes=size,
            start_at_s=at), stdout=subprocess.PIPE, text=True) for i in range(pairs)]
        sent = [json.loads(p.communicate(timeout=60)[0]) for p in senders]
        got = [json.loads(p.communicate(timeout=60)[0]) for p in sinks]
    rates = [size * 8 / (g["last_s"] - s["connect_s"]) for s, g in zip(sent, got, strict=True)]
    span = max(g["last_s"] for g in got) - min(s["connect_s"] for s in sent)
    late = max(s["start_s"] for s in sent) - at
    return min(rates), sum(rates) / pairs, pairs * size * 8 / span, late


def cpu() -> None:
    print("5. CPU headroom at 200 Mbit/s")
    with EmuNetwork(star(2)) as net:
        small = min((transfer(net, "h0", "h1", 64 * 1024, port=5100 + i) for i in range(3)),
                    key=lambda r: r.sender_cpu_s + r.sink_cpu_s)
        startup = small.sender_cpu_s + small.sink_cpu_s
        a = _busy_cores()
        time.sleep(1.0)
        idle = _cores_between(a, _busy_cores())
        a = _busy_cores()
        r = transfer(net, "h0", "h1", 32 * MIB, port=5200)
        during = _cores_between(a, _busy_cores())
    own = r.sender_cpu_s + r.sink_cpu_s - startup
    print(f"   32 MiB in {r.fct_s:.2f} s at {r.goodput_bps / 1e6:.1f} Mbit/s: sender+sink "
          f"{r.sender_cpu_s + r.sink_cpu_s:.3f} s CPU ({startup:.3f} s of it interpreter "
          f"startup) -> {own / r.fct_s:.2f} core while sending")
    print(f"   machine busy {during:.2f} cores during the transfer vs {idle:.2f} just before "
          f"(other users included), of {limits.cores()}")
    want = 200e6 * PAYLOAD
    for pairs in (1, 2, 4, 8, 12):
        slowest, mean, agg, late = _concurrent(pairs, 16 * MIB)
        print(f"   {pairs:2d} pairs at once: per pair slowest {slowest / 1e6:5.1f}, mean "
              f"{mean / 1e6:5.1f} Mbit/s ({mean / want * 100:.0f}% of {want / 1e6:.1f}); "
              f"aggregate {agg / 1e6:6.1f}; last sender {late:.2f} s late")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    # every network closes itself (with blocks, atexit, signals); no project-wide clean here:
    # other emulator runs may be alive on the machine
    setup_teardown(args.repeats)
    rates()
    congestion(args.repeats)
    ecmp(32)
    cpu()
    print("6. limits")
    for line in limits.explain().splitlines():
        print(f"   {line}")


if __name__ == "__main__":
    main()
