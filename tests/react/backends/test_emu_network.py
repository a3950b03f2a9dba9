"""The emulated network on real namespaces (marker ``emu``: needs root and iproute2).

Every test uses its own run prefix ``rctt<pid><n>`` and removes only its own namespaces (other
emulator runs may be alive on the machine). Transfers are small (1-4 MiB at 200 Mbit/s); every
wait has a timeout. Truth comes from the configuration: TCP goodput on a link shaped at R is
R x 1448/1514 (payload per full frame, timestamps on), a fair share of a port among k senders
is 1/k, bytes counted on a link are at least the bytes sent. CPU contention (other jobs on the
machine) can only slow a transfer, never push it past its shaper, so rate checks take the
fastest of up to three tries.
"""

import argparse
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from flowsim.topologies import fat_tree, leaf_spine, star
from flowsim.traffic import source_seed
from react.backends.emu import EmuError, EmuInputError, EmuNetwork, clean, transfer
from react.backends.emu.cleanup import list_namespaces
from react.commands.emu import cmd_clean

pytestmark = [
    pytest.mark.emu,
    pytest.mark.skipif(os.geteuid() != 0, reason="the emulator needs root (network namespaces)"),
    pytest.mark.skipif(shutil.which("ip") is None or shutil.which("tc") is None,
                       reason="the emulator needs iproute2 (ip, tc)"),
]

MIB = 1 << 20
RATE = 200e6
GOODPUT = RATE * 1448 / 1514  # TCP payload per 1514-byte frame
ROOT = Path(__file__).resolve().parents[3]
_seq = itertools.count()


@pytest.fixture
def prefix():
    name = f"rctt{os.getpid()}x{next(_seq)}"
    yield name
    clean(name)  # only this test's namespaces


def ours(prefix):
    return [n for n in list_namespaces() if n.startswith(prefix + "-")]


def fastest(net, src, dst, size, *, port, expect_bps, tries=3):
    """The fastest of up to ``tries`` transfers, stopping at one within 15% of ``expect_bps``."""
    results = []
    for i in range(tries):
        results.append(transfer(net, src, dst, size, port=port + i))
        if results[-1].goodput_bps == pytest.approx(expect_bps, rel=0.15):
            break
    return max(results, key=lambda r: r.goodput_bps)


def test_star_builds_and_tears_down(prefix):
    with EmuNetwork(star(16), prefix=prefix) as net:
        assert len(ours(prefix)) == 17
        ip = subprocess.run(["ip", "-n", net.netns("h5"), "-j", "addr", "show", "eth0"],
                            capture_output=True, text=True, timeout=10, check=True).stdout
        assert json.loads(ip)[0]["addr_info"][0]["local"] == net.host_ip("h5") == "10.1.0.21"
        result = transfer(net, "h0", "h15", MIB, port=5001)
        assert result.size_bytes == MIB
    assert ours(prefix) == []
    print(f"\nstar-16: setup {net.setup_s:.3f} s, teardown {net.teardown_s:.3f} s")


def test_leaf_spine_builds_only_used_nodes_and_routes_across_leaves(prefix):
    hosts = ["h0", "h1", "h8", "h9", "h16", "h17", "h24", "h25"]
    with EmuNetwork(leaf_spine(4, 2, 8), hosts=hosts, prefix=prefix) as net:
        assert len(ours(prefix)) == 8 + 4 + 2
        transfer(net, "h0", "h25", MIB, port=5001)
    assert ours(prefix) == []
    print(f"\nleaf-spine 4x2, 8 hosts: setup {net.setup_s:.3f} s, teardown {net.teardown_s:.3f} s")


def test_fat_tree_routes_across_pods_through_the_core(prefix):
    # k=4: h0 (pod 0) and h15 (pod 3) are 6 links apart: edge, agg, core, agg, edge
    with EmuNetwork(fat_tree(4), hosts=["h0", "h1", "h15"], prefix=prefix) as net:
        path = net.path("h0", "h15", src_port=40000, dst_port=5001)
        assert len(path) == 7 and path[3].startswith("core")
        assert [net.topology.node(n).kind for n in path[1:-1]] == ["switch"] * 5
        for a, b in itertools.pairwise(path):  # consecutive nodes are cabled
            net.topology.link(a, b)
        transfer(net, "h0", "h15", MIB, port=5001, src_port=40000)
        # the bytes went where path() said (frames of 1 MiB of payload: > 1 MiB)
        assert net.link_tx_bytes(path[2], path[3]) > MIB
    assert ours(prefix) == []


def test_transfer_runs_at_the_shaped_rate_and_counters_see_it(prefix):
    with EmuNetwork(star(4), link_rate_bps=RATE, prefix=prefix) as net:
        before = net.link_tx_bytes("h0", "s0"), net.link_tx_bytes("s0", "h1")
        result = transfer(net, "h0", "h1", 4 * MIB, port=5001)
        after = net.link_tx_bytes("h0", "s0"), net.link_tx_bytes("s0", "h1")
        every = net.tx_bytes()
        if result.goodput_bps != pytest.approx(GOODPUT, rel=0.15):
            result = fastest(net, "h0", "h1", 4 * MIB, port=5002, expect_bps=GOODPUT)
    assert set(every) == {(h, "s0") for h in ("h0", "h1", "h2", "h3")} | {
        ("s0", h) for h in ("h0", "h1", "h2", "h3")}
    # the same counters read together (the network was idle in between; allow an ARP or two)
    assert 0 <= every[("h0", "s0")] - after[0] < 1000
    assert 0 <= every[("s0", "h1")] - after[1] < 1000
    assert result.goodput_bps == pytest.approx(GOODPUT, rel=0.15)
    for b, a in zip(before, after, strict=True):
        # payload plus headers (~5%) and nothing else of size on an idle network
        assert 4 * MIB <= a - b <= 4 * MIB * 1.10
    cpu = result.sender_cpu_s + result.sink_cpu_s
    print(f"\n4 MiB at {RATE / 1e6:g} Mbit/s: {result.goodput_bps / 1e6:.1f} Mbit/s goodput "
          f"(expected {GOODPUT / 1e6:.1f}), sender+sink CPU {cpu:.3f} s in {result.fct_s:.3f} s")


def test_slower_fabric_links_scale_too(prefix):
    # 100G hosts, 50G fabric at 200 Mbit/s for the fastest: the spine links run at 100 Mbit/s
    topo = leaf_spine(2, 2, 1, host_bps=100e9, fabric_bps=50e9)
    with EmuNetwork(topo, link_rate_bps=RATE, prefix=prefix) as net:
        assert net.scale == pytest.approx(2e-3)
        result = fastest(net, "h0", "h1", 2 * MIB, port=5001, expect_bps=GOODPUT / 2)
    assert result.goodput_bps == pytest.approx(GOODPUT / 2, rel=0.15)


def test_link_capacity_change_mid_run(prefix):
    with EmuNetwork(star(4), link_rate_bps=RATE, prefix=prefix) as net:
        full = fastest(net, "h0", "h1", 2 * MIB, port=5001, expect_bps=GOODPUT)
        net.set_link_capacity("s0", "h1", 25e9)  # a quarter of 100 Gbps
        assert net.link_rate_bps("s0", "h1") == pytest.approx(RATE / 4)
        quarter = fastest(net, "h0", "h1", 1 * MIB, port=5010, expect_bps=GOODPUT / 4)
        other = fastest(net, "h0", "h2", 2 * MIB, port=5020, expect_bps=GOODPUT)  # untouched
    assert full.goodput_bps == pytest.approx(GOODPUT, rel=0.15)
    assert quarter.goodput_bps == pytest.approx(GOODPUT / 4, rel=0.15)
    assert other.goodput_bps == pytest.approx(GOODPUT, rel=0.15)


def test_failed_link_stalls_and_recovers(prefix):
    with EmuNetwork(star(3), link_rate_bps=RATE, prefix=prefix) as net:
        net.set_link_capacity("s0", "h1", 0)  # down, as a flowsim failure at 0 bps
        with pytest.raises(EmuError, match="did not finish|delivered"):
            transfer(net, "h0", "h1", MIB, port=5001, timeout_s=1.0)
        net.set_link_capacity("s0", "h1", 100e9)
        back = fastest(net, "h0", "h1", 2 * MIB, port=5002, expect_bps=GOODPUT)
    assert back.goodput_bps == pytest.approx(GOODPUT, rel=0.15)


def test_two_background_flows_into_a_host_make_a_transfer_three_times_slower(prefix):
    # three senders share s0 -> h1 fairly: the probe gets 1/3 of it, so its FCT triples
    with EmuNetwork(star(4), link_rate_bps=RATE, prefix=prefix) as net:
        alone = fastest(net, "h0", "h1", 4 * MIB, port=5001, expect_bps=GOODPUT)
        for i, src in enumerate(("h2", "h3")):
            net.start_background("long_lived", src, "h1", port=6000 + i, duration_s=8.0,
                                 max_bytes=300 * MIB)
        time.sleep(0.3)  # let them fill the port
        congested = fastest(net, "h0", "h1", 4 * MIB, port=5010, expect_bps=GOODPUT / 3)
    slowdown = congested.fct_s / alone.fct_s
    print(f"\n4 MiB alone {alone.fct_s:.3f} s, with 2 background flows {congested.fct_s:.3f} s: "
          f"{slowdown:.2f}x")
    assert 2.5 <= slowdown <= 3.5


def test_ecmp_source_ports_pick_different_spines(prefix):
    with EmuNetwork(leaf_spine(2, 2, 1), link_rate_bps=RATE, prefix=prefix) as net:
        used = set()
        for src_port in range(40000, 40016):
            before = [net.link_tx_bytes("leaf0", s) for s in ("spine0", "spine1")]
            transfer(net, "h0", "h1", MIB // 2, port=5001, src_port=src_port)
            delta = [net.link_tx_bytes("leaf0", s) - b
                     for s, b in zip(("spine0", "spine1"), before, strict=True)]
            # one connection, one path: all its bytes on one spine, (next to) none on the other
            assert max(delta) >= MIB // 2 and min(delta) < MIB // 100, delta
            spine = delta.index(max(delta))
            used.add(spine)
            # the kernel's route lookup names the spine the counters saw
            path = net.path("h0", "h1", src_port=src_port, dst_port=5001)
            assert path == ("h0", "leaf0", f"spine{spine}", "leaf1", "h1")
            if len(used) == 2:
                break
    # 16 ports all hashed onto one spine would happen with probability 2^-15
    assert used == {0, 1}


def test_ecmp_seed_makes_paths_reproducible(prefix):
    def paths(seed, run):
        with EmuNetwork(leaf_spine(2, 4, 1), prefix=f"{prefix}{run}", ecmp_seed=seed) as net:
            return [net.path("h0", "h1", src_port=p, dst_port=5001)[2] for p in range(40000, 40024)]

    try:
        first, again, other = paths(7, "a"), paths(7, "b"), paths(8, "c")
    finally:
        for run in "abc":
            clean(f"{prefix}{run}")
    assert first == again
    assert first != other  # 24 ports over 4 spines: a different seed reshuffles them
    assert len(set(first)) == 4


def test_background_senders_are_bounded_in_time_and_bytes(prefix):
    with EmuNetwork(star(4), link_rate_bps=RATE, prefix=prefix) as net:
        start = time.monotonic()
        by_bytes = net.start_background("long_lived", "h0", "h1", port=6000, duration_s=5.0,
                                        max_bytes=MIB)
        # as a scenario file gives them: flowsim's default port 0, a float size
        by_time = net.start_background("periodic_bulk", "h0", "h2", port=0, duration_s=0.6,
                                       max_bytes=100 * MIB, size_bytes=65536.0, period_s=0.1)
        assert by_time.port == 20000  # a port below 1024 is offset
        on_off = net.start_background("poisson_on_off", "h3", "h2", port=6002, duration_s=0.8,
                                      max_bytes=100 * MIB, mean_on_s=0.05, mean_off_s=0.05,
                                      seed=3)
        reports = [json.loads(bg.sender.communicate(timeout=10)[0])
                   for bg in (by_bytes, by_time, on_off)]
        elapsed = time.monotonic() - start
        sunk = json.loads(by_bytes.sink.communicate(timeout=10)[0])
    assert reports[0]["bytes"] == MIB and sunk["bytes"] == MIB
    assert elapsed < 5.0  # the long-lived one stopped at max_bytes, long before its duration
    # 64 KiB due at 0, 0.1, ..., 0.5 s (0.6 is the end), each delivered well within 0.1 s
    assert reports[1]["transfers"] == 6
    assert reports[1]["bytes"] == 6 * 64 * 1024
    assert reports[1]["end_s"] - reports[1]["start_s"] < 0.6 + 0.2
    # on periods as flowsim draws them for this source: off, on, off, on, ... within 0.8 s
    rng = np.random.default_rng(source_seed(3, "h3", "h2", 6002))
    t, periods, last_end = 0.0, 0, 0.0
    while True:
        t += rng.exponential(0.05)
        if t >= 0.8:
            break
        periods += 1
        t += rng.exponential(0.05)
        last_end = min(t, 0.8)
    on_off_report = reports[2]
    assert abs(on_off_report["transfers"] - periods) <= 1, on_off_report  # jitter at the end
    # The periods are laid out from the sender's start, so that delays do not accumulate; a
    # connection that a loaded machine delays past the last on period sends nothing, rightly.
    if on_off_report["connect_s"] - on_off_report["start_s"] < last_end - 0.05:
        assert on_off_report["bytes"] > 0, on_off_report
    assert on_off_report["end_s"] - on_off_report["start_s"] < 0.8 + 0.2, on_off_report


def test_two_networks_at_once(prefix):
    other = prefix + "b"
    try:
        with EmuNetwork(star(2), prefix=prefix) as a, EmuNetwork(star(2), prefix=other) as b:
            assert a.host_ip("h0") == b.host_ip("h0")  # same addresses, separate namespaces
            ra = transfer(a, "h0", "h1", MIB, port=5001)
            rb = transfer(b, "h0", "h1", MIB, port=5001)
            assert ra.size_bytes == rb.size_bytes == MIB
    finally:
        clean(other)
    assert ours(prefix) == ours(other) == []


def test_bad_input_on_a_live_network(prefix):
    with EmuNetwork(star(3), prefix=prefix) as net:
        with pytest.raises(EmuInputError, match="unknown host 'h9'"):
            net.host_ip("h9")
        with pytest.raises(EmuInputError, match="unknown node 'x'"):
            net.popen("x", ["true"])
        with pytest.raises(EmuInputError, match="no link 'h0' -> 'h1'"):
            net.link_tx_bytes("h0", "h1")
        with pytest.raises(EmuInputError, match="capacity_bps"):
            net.set_link_capacity("s0", "h1", -1.0)
        with pytest.raises(EmuInputError, match="kind"):
            net.start_background("incast", "h0", "h1", port=6000, duration_s=1, max_bytes=1)
        with pytest.raises(EmuInputError, match="periodic_bulk needs size_bytes and period_s"):
            net.start_background("periodic_bulk", "h0", "h1", port=6000, duration_s=1,
                                 max_bytes=1)
        net.start_background("long_lived", "h0", "h1", port=6000, duration_s=2,
                             max_bytes=200 * MIB)
        with pytest.raises(EmuError, match="cannot listen on port 6000"):
            net.start_background("long_lived", "h2", "h1", port=6000, duration_s=2, max_bytes=1)
    with pytest.raises(EmuError, match="is closed"):
        net.popen("h0", ["true"])
    with pytest.raises(EmuError, match="in use"):
        with EmuNetwork(star(2), prefix=prefix), EmuNetwork(star(2), prefix=prefix):
            pass
    assert ours(prefix) == []


CHILD = textwrap.dedent("""
    import subprocess, sys, time
    from flowsim.topologies import star
    from react.backends.emu import EmuNetwork
    net = EmuNetwork(star(int(sys.argv[2])), prefix=sys.argv[1])
    # a process in its own session survives a kill of this process group
    sleeper = net.popen("h1", ["sleep", "30"], start_new_session=True)
    net.start_background("long_lived", "h0", "h1", port=6000, duration_s=20, max_bytes=10**9)
    print(sleeper.pid, flush=True)
    time.sleep(30)
""")


def _child(prefix, hosts):
    return subprocess.Popen([sys.executable, "-c", CHILD, prefix, str(hosts)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)


def _gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_crash_mid_run_then_clean_leaves_nothing(prefix):
    child = _child(prefix, 3)
    try:
        line = child.stdout.readline()  # built, sleeper and background running
        assert line.strip().isdigit(), line
        sleeper = int(line)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        assert len(ours(prefix)) == 4  # no teardown ran
        assert not _gone(sleeper)
        assert sorted(clean(prefix)) == sorted(f"{prefix}-{n}" for n in ("h0", "h1", "h2", "s0"))
        assert ours(prefix) == []
        deadline = time.monotonic() + 5
        while not _gone(sleeper) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(sleeper)  # clean killed what was left inside the namespaces
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)


def test_crash_mid_build_then_clean_leaves_nothing(prefix):
    child = _child(prefix, 16)
    try:
        deadline = time.monotonic() + 10
        while not ours(prefix) and time.monotonic() < deadline:
            time.sleep(0.005)
        os.killpg(child.pid, signal.SIGKILL)  # namespaces exist, the build is not finished
        child.wait(timeout=10)
        assert ours(prefix)
        clean(prefix)
        assert ours(prefix) == []
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)


def test_sigterm_tears_the_network_down(prefix):
    child = _child(prefix, 3)
    try:
        assert child.stdout.readline().strip().isdigit()
        assert len(ours(prefix)) == 4
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=10) == -signal.SIGTERM
        assert ours(prefix) == []  # the handler closed it: no clean() needed
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)


def test_react_emu_clean_lists_and_removes_by_prefix(prefix, capsys):
    # a run made by hand, as a crashed one would leave it
    subprocess.run(["ip", "netns", "add", f"{prefix}-h0"], check=True, timeout=10)

    cmd_clean(argparse.Namespace(dry_run=True, prefix=None), sys.stdout)
    assert f"would remove {prefix}-h0" in capsys.readouterr().out  # the project-wide listing
    assert ours(prefix) == [f"{prefix}-h0"]
    cmd_clean(argparse.Namespace(dry_run=False, prefix=prefix), sys.stdout)
    out = capsys.readouterr().out
    assert f"removed {prefix}-h0" in out and "removed 1 namespace" in out
    assert ours(prefix) == []
