"""RTuner and its control channel, with fake ranks on 127.0.0.1 (no namespaces, no data path).

The fake ranks run a hand-made timing model instead of RCollective: every flow of the pattern
takes ``8 * bytes / rate`` seconds after the flows it depends on end, and flows into one slow
rank run at a third of the rate, so the controller has congestion to react to. Each rank
reports only its own ends of the flows, on its own clock, as RankEpochTimings. The independent
checks: the leader's merged epochs equal the model's (within the offset estimate), its
decisions equal those of an in-process TuningLoop fed the model's results, and every rank ran
the pattern that loop names for every epoch.
"""

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from react.control.controller import Controller, ControllerConfig
from react.control.loop import TuningLoop
from react.control.policies import ControllerLoadError, make_controller
from react.control.policies.baselines import NeverChange
from react.model.errors import PatternError, ReactError
from react.model.observation import EpochResult, FlowTiming
from react.model.pattern import Pattern
from react.patterns import allreduce_double_binary_tree, allreduce_ring
from react.run.driver import JobRun
from react.run.metrics import change_epochs, decision_lines
from react.runtime.channel import (
    Channel,
    ChannelError,
    ChannelTimeout,
    MessageError,
    decode,
    encode,
    listen,
)
from react.runtime.clock import clock_id, now_s
from react.runtime.timings import RankEpochTimings, RecvTiming, SendTiming, merge_epoch
from react.runtime.tuner import (
    TunerClient,
    TunerLeader,
    pattern_fingerprint,
    read_result,
    spawn_leader,
    tuner_spec,
)
from react.runtime.tuner.messages import PROTOCOL_VERSION

MESSAGE = 20e6
SLOW = 3
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


# -- the model and the fake ranks ------------------------------------------------------------
def model(pattern, epoch, slow=SLOW, rate_bps=1e9):
    """The truth: each flow starts when its dependencies end; flows into ``slow`` are 3x slower.

    Each rank pair's rate differs by a few percent, so that no two paths tie exactly (a tie
    would let the leader's microsecond offset estimates pick the controller's choice).
    """
    deps = pattern.dependencies()
    ends, timings = [], []
    for i, flow in enumerate(pattern.flows):
        size = pattern.flow_bytes(flow, MESSAGE)
        start = max((ends[j] for j in deps[i]), default=0.0)
        rate = rate_bps * (1 + 0.03 * ((3 * flow.src + 5 * flow.dst) % 7))
        end = start + 8 * size / (rate / 3 if flow.dst == slow else rate)
        ends.append(end)
        timings.append(FlowTiming(flow, start, end, size))
    return EpochResult(epoch, max(ends), tuple(timings), MESSAGE)


def rank_view(truth, pattern, rank, base_s):
    """What ``rank`` measures of ``truth`` when the epoch starts at ``base_s`` on its clock.

    Senders post early (the receiver is not ready yet) and only every other flow knows when its
    bytes started, so the merge has to take the receiver's post as the start.
    """
    sends, recvs = [], []
    last = 0.0
    for i, t in enumerate(truth.flows):
        if t.flow.src == rank:
            started = base_s + t.start_s if i % 2 else None
            sends.append(SendTiming(i, base_s + t.start_s * 0.5, started))
            last = max(last, t.start_s)
        if t.flow.dst == rank:
            recvs.append(RecvTiming(i, base_s + t.start_s, base_s + t.end_s))
            last = max(last, t.end_s)
    return RankEpochTimings(rank, truth.epoch, base_s, base_s + last, tuple(sends), tuple(recvs))


class FakeRank(threading.Thread):
    """One rank: asks the tuner for each epoch's pattern, 'runs' it, reports its timings."""

    def __init__(self, rank, address, pattern, epochs, *, period_s=0.025, shift_s=0.0,
                 timeout_s=10.0, on_epoch=None):
        super().__init__(daemon=True)
        self.rank, self.address, self.pattern, self.epochs = rank, address, pattern, epochs
        self.period_s, self.shift_s, self.timeout_s = period_s, shift_s, timeout_s
        self.on_epoch = on_epoch
        self.ran = []
        self.client = None
        self.error = None

    def clock(self):
        return now_s() + self.shift_s

    def run(self):
        try:
            self.client = TunerClient(self.rank, self.address, timeout_s=self.timeout_s,
                                      clock=self.clock)
            pattern = self.pattern
            for epoch in range(self.epochs):
                pattern = self.client.pattern_for(epoch, pattern)
                self.ran.append(pattern)
                # a synthetic timeline shared by all ranks: epoch e starts at 1000 + 2 e s
                base = 1000.0 + 2.0 * epoch + self.shift_s
                self.client.report(rank_view(model(pattern, epoch), pattern, self.rank, base))
                if self.on_epoch is not None:
                    self.on_epoch(self.rank, epoch)
                time.sleep(self.period_s)
            self.client.close()
        except BaseException as exc:  # the test thread reports it
            self.error = exc


def run_ranks(address, pattern, epochs, *, deadline_s=30.0, shift_fn=lambda r: 0.0, **kwargs):
    ranks = [FakeRank(r, address, pattern, epochs, shift_s=shift_fn(r), **kwargs)
             for r in pattern.ranks]
    for r in ranks:
        r.start()
    for r in ranks:
        r.join(timeout=deadline_s)
        assert not r.is_alive(), f"rank {r.rank} hangs"
        assert r.error is None, f"rank {r.rank} failed: {r.error!r}"
    return ranks


def start_leader_process(tmp_path, spec):
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    proc, (host, port) = spawn_leader(spec_path, tmp_path / "result.json",
                                      popen=lambda argv, **kw: subprocess.Popen(argv, cwd=ROOT,
                                                                                **kw))
    assert host == "127.0.0.1"
    return proc, (host, port)


def reference_loop(pattern, epochs, truth=model, controller=None):
    """The in-process closed loop the leader must reproduce (default: REACT, seed 0)."""
    if controller is None:
        controller = Controller(pattern, ControllerConfig(seed=0))
    loop = TuningLoop(pattern, controller, 5)
    ran, decisions = [], []
    for epoch in range(epochs):
        p = loop.pattern_for(epoch)
        ran.append(p)
        d = loop.record(epoch, truth(p, epoch))
        if d is not None:
            decisions.append((epoch, d))
    return ran, decisions


# -- the channel -----------------------------------------------------------------------------
def channel_pair(max_message_bytes=1024):
    a, b = socket.socketpair()
    return (Channel(a, timeout_s=2, max_message_bytes=max_message_bytes, peer="a"),
            Channel(b, timeout_s=2, max_message_bytes=max_message_bytes, peer="b"))


def test_channel_carries_json_objects_in_order():
    a, b = channel_pair()
    try:
        a.send({"type": "x", "n": 1})
        a.send({"type": "y", "values": [1.5, None, "z"]})
        assert b.recv(1) == {"type": "x", "n": 1}
        assert b.recv(1) == {"type": "y", "values": [1.5, None, "z"]}
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize(("line", "why"), [
    (b"{not json", "not JSON"),
    (b"[1, 2]", "expected a JSON object, got list"),
    (b'{"kind": "x"}', "without a string 'type'"),
    (b'{"type": "x", "v": NaN}', "NaN"),
    (b"\xff\xfe", "not JSON"),
    (b"[" * 100_000, "not JSON"),
], ids=["not-json", "list", "no-type", "nan", "not-utf8", "deep"])
def test_channel_rejects_malformed_lines(line, why):
    with pytest.raises(MessageError, match=why):
        decode(line, max_message_bytes=1_000_000)


def test_channel_rejects_oversize_lines_both_ways():
    a, b = channel_pair(max_message_bytes=100)
    raw, far = socket.socketpair()
    c = Channel(far, timeout_s=2, max_message_bytes=100, peer="c")
    try:
        with pytest.raises(MessageError, match="limit is 100"):
            a.send({"type": "x", "pad": "p" * 100})
        with pytest.raises(MessageError, match="NaN|not plain JSON"):
            encode({"type": "x", "v": float("nan")})
        raw.sendall(b"x" * 500)  # a peer that never ends its line
        with pytest.raises(MessageError, match="without a newline; the channel limit is 100"):
            c.recv(1)
    finally:
        for end in (a, b, c):
            end.close()
        raw.close()


def test_channel_eof_and_timeout_are_channel_errors():
    a, b = channel_pair()
    with pytest.raises(ChannelTimeout, match="within 0.05 s"):
        b.recv(0.05)
    a.close()
    with pytest.raises(ChannelError, match="closed the connection"):
        b.recv(1)
    b.close()


def test_listen_on_a_taken_port_names_it():
    sock = listen("127.0.0.1", 0)
    try:
        port = sock.getsockname()[1]
        with pytest.raises(ChannelError, match=f"cannot listen on 127.0.0.1:{port}"):
            listen("127.0.0.1", port)
    finally:
        sock.close()


# -- the leader with fake ranks --------------------------------------------------------------
def test_closed_loop_over_the_channel_matches_the_in_process_loop(tmp_path):
    tree = allreduce_double_binary_tree(8)
    epochs = 36
    proc, address = start_leader_process(tmp_path, {
        "pattern": tree.to_dict(), "message_bytes": MESSAGE, "react": {"seed": 0},
        "host": "127.0.0.1", "timeout_s": 20,
    })
    try:
        # 80 ms epochs: the leader has 5 x 80 ms to answer a batch; it needs about 30 ms (at
        # 40 ms epochs a host at load average 5 once made it miss the 200 ms)
        ranks = run_ranks(address, tree, epochs, period_s=0.08)
        assert proc.wait(timeout=20) == 0, proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    doc = json.loads((tmp_path / "result.json").read_text())
    results, patterns, decisions = read_result(tmp_path / "result.json")
    ran, expected = reference_loop(tree, epochs)

    # decisions: the same batches, actions and patterns as the loop fed in process
    assert [(d.batch, d.action, d.pattern.flows) for d in decisions] == [
        (d.batch, d.action, d.pattern.flows) for _, d in expected]
    assert [d["after_epoch"] for d in doc["decisions"]] == [e for e, _ in expected]
    assert any(d.action == "try" for d in decisions)  # the slow rank made REACT act
    # each decision carries the congestion report it acted on, across the process boundary
    assert [None if d.report is None else [c.flow for c in d.report.flows]
            for d in decisions] == [None if d.report is None else [c.flow for c in d.report.flows]
                                    for _, d in expected]
    assert any(d.report is not None and d.report.flows for d in decisions if d.action == "try")
    # every rank ran the loop's pattern at every epoch: the switch reached all at epoch e + 6
    for r in ranks:
        assert [p.flows for p in r.ran] == [p.flows for p in ran]
        assert [fp for _, fp in r.client.history] == [pattern_fingerprint(p) for p in ran]
    switches = [d["switch_epoch"] for d in doc["decisions"] if d["switch_epoch"] is not None]
    assert switches and all(s == d["after_epoch"] + 6 for d, s in zip(
        [d for d in doc["decisions"] if d["switch_epoch"] is not None], switches, strict=True))
    run = JobRun("tree", results, patterns, decisions)
    assert change_epochs(run) == switches
    assert any(" try " in line for line in decision_lines(run))
    # nobody waited for the tuner
    assert doc["epochs_waited"] == 0
    assert all(r.client.waited_epochs == 0 and r.client.failure is None for r in ranks)
    assert all(doc["ranks"][str(r)]["waited_epochs"] == 0 for r in tree.ranks)
    # merged epochs: equal to the model's truth within the offset estimate
    assert doc["complete"] and len(results) == epochs and doc["events"] == []
    for result, pattern in zip(results, ran, strict=True):
        truth = model(pattern, result.epoch)
        assert result.collective_time_s == pytest.approx(truth.collective_time_s, abs=2e-3)
        for got, want in zip(result.flows, truth.flows, strict=True):
            assert got.flow == want.flow and got.size_bytes == want.size_bytes
            assert got.start_s == pytest.approx(want.start_s, abs=2e-3)
            assert got.end_s == pytest.approx(want.end_s, abs=2e-3)
    # overhead recorded per batch: merge + decide + send, and the answer's latency
    for d in doc["decisions"]:
        assert d["overhead_s"] == pytest.approx(d["merge_s"] + d["decide_s"] + d["send_s"])
        assert 0 < d["decide_s"] < 2.0 and 0 < d["latency_s"] < 2.0
    overhead = [d["overhead_s"] for d in doc["decisions"]]
    print(f"\nper-batch leader overhead: max {max(overhead) * 1e3:.1f} ms, mean "
          f"{sum(overhead) / len(overhead) * 1e3:.1f} ms; answer latency max "
          f"{max(d['latency_s'] for d in doc['decisions']) * 1e3:.1f} ms; offsets max "
          f"{max(abs(o) for o in doc['offsets_s'].values()) * 1e6:.1f} us; client report() "
          f"{max(r.client.report_s / epochs for r in ranks) * 1e6:.1f} us/epoch")


GREEDY = os.path.join(ROOT, "experiments", "controllers", "greedy.py") + ":Greedy"


@pytest.mark.parametrize("ref", ["never", "random", GREEDY], ids=["never", "random", "file"])
def test_the_leader_makes_any_controller_again_from_its_reference(tmp_path, ref):
    # The job writes the controller into the leader's spec as a reference and a config; the
    # leader (its own process) makes it again, guarded. Its decisions must be that controller's:
    # those of the same factory fed the model's epochs in process.
    tree = allreduce_double_binary_tree(8)
    epochs = 36
    config = ControllerConfig(seed=0)
    spec = tuner_spec(tree, make_controller(ref, tree, config), message_bytes=MESSAGE,
                      apply_delay_epochs=5, host="127.0.0.1", timeout_s=20)
    assert (spec["controller"], spec["react"]["seed"]) == (ref, 0)
    proc, address = start_leader_process(tmp_path, spec)
    try:
        ranks = run_ranks(address, tree, epochs, period_s=0.08)
        assert proc.wait(timeout=20) == 0, proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    _, _, decisions = read_result(tmp_path / "result.json")
    ran, expected = reference_loop(tree, epochs, controller=make_controller(ref, tree, config))
    summary = [(d.batch, d.action, d.reason, d.pattern.flows) for d in decisions]
    assert summary == [(d.batch, d.action, d.reason, d.pattern.flows) for _, d in expected]
    if ref == "never":  # never a switch: a batch of 6 after epochs 5, 11, ..., 35
        assert [(d.action, d.reason) for d in decisions] == [
            ("keep", "baseline: never changes the pattern")] * 6
    else:  # the policy's own words, not REACT's
        word = "trying a random viable swap" if ref == "random" else "slowest flow"
        assert any(d.action == "try" and word in d.reason for d in decisions)
    for r in ranks:
        assert [p.flows for p in r.ran] == [p.flows for p in ran]


def test_a_controller_that_fails_in_the_leader_ends_it_naming_the_fault(tmp_path):
    policy = tmp_path / "faulty.py"
    policy.write_text("class Faulty:\n"
                      "    def __init__(self, pattern, config):\n"
                      "        self.pattern, self.config = pattern, config\n"
                      "    def observe(self, batch):\n"
                      "        raise ValueError('no idea')\n")
    ref = f"{policy}:Faulty"
    ring = allreduce_ring(4)
    spec = tuner_spec(ring, make_controller(ref, ring, ControllerConfig(seed=0)),
                      message_bytes=MESSAGE, apply_delay_epochs=5, host="127.0.0.1",
                      timeout_s=10)
    proc, address = start_leader_process(tmp_path, spec)
    try:
        ranks = run_ranks(address, ring, 12, period_s=0.02, timeout_s=5.0)
        assert proc.wait(timeout=20) == 1
        err = proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    assert f"error: controller {ref!r}, batch 0: observe raised ValueError: no idea" in err
    assert not (tmp_path / "result.json").exists()
    for r in ranks:  # every rank finished on the job's pattern
        assert len(r.ran) == 12 and all(p == ring for p in r.ran)
        assert "lost the leader" in r.client.failure


def test_a_controller_that_cannot_be_made_again_is_refused_by_name():
    ring = allreduce_ring(4)
    with pytest.raises(ControllerLoadError, match="controller NeverChange: no reference"):
        tuner_spec(ring, NeverChange(ring), message_bytes=MESSAGE, apply_delay_epochs=5,
                   host="127.0.0.1", timeout_s=10)


def test_the_leader_refuses_a_controller_that_does_not_load(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"pattern": allreduce_ring(4).to_dict(), "message_bytes": 1,
                                "controller": "no_such_module:Factory", "react": True}))
    proc = subprocess.run(
        [sys.executable, "-m", "react.runtime.tuner", "--spec", str(spec), "--out",
         str(tmp_path / "out.json")], cwd=ROOT, capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 2
    assert "controller 'no_such_module:Factory': cannot import module 'no_such_module'" in (
        proc.stderr)


def test_leader_merges_exactly_like_merge_epoch_and_estimates_a_shifted_clock(tmp_path):
    # rank 2's clock runs 5 s ahead: the leader (its own process, as deployed) must estimate
    # offset -5 s to < 1 ms, and its merge must equal merge_epoch with those offsets.
    ring = allreduce_ring(4)
    # whole elements: each chunk a few bytes off its fraction, a flow the sum of its chunks
    sizes = [sum(MESSAGE * ring.chunks[c].fraction + c for c in f.chunks) for f in ring.flows]
    proc, address = start_leader_process(tmp_path, {
        "pattern": ring.to_dict(), "message_bytes": MESSAGE, "flow_bytes": sizes,
        "host": "127.0.0.1", "timeout_s": 10,
    })
    shifts = {0: 0.0, 1: 0.0, 2: 5.0, 3: 0.0}
    try:
        run_ranks(address, ring, 4, period_s=0.0, shift_fn=shifts.get)
        assert proc.wait(timeout=15) == 0
    finally:
        proc.kill()
        proc.wait()
    doc = json.loads((tmp_path / "result.json").read_text())
    offsets = {int(r): o for r, o in doc["offsets_s"].items()}
    assert offsets[2] == pytest.approx(-5.0, abs=1e-3)
    assert all(abs(offsets[r]) < 1e-3 for r in (0, 1, 3))
    assert doc["decisions"] == [] and doc["batch_epochs"] is None  # no controller: collect only
    for row in doc["epochs"]:
        e = row["epoch"]
        records = [rank_view(model(ring, e), ring, r, 1000.0 + 2.0 * e + shifts[r])
                   for r in ring.ranks]
        merged = merge_epoch(ring, records, MESSAGE, offsets_s=offsets, flow_bytes=sizes)
        assert [t.size_bytes for t in merged.flows] == sizes
        assert row["collective_time_s"] == merged.collective_time_s
        assert row["flows"] == [[t.start_s, t.end_s, t.size_bytes] for t in merged.flows]
        assert row["collective_time_s"] == pytest.approx(model(ring, e).collective_time_s,
                                                         abs=1e-3)


def test_killing_the_leader_lets_every_rank_finish_on_its_pattern(tmp_path):
    tree = allreduce_double_binary_tree(8)
    proc, address = start_leader_process(tmp_path, {
        "pattern": tree.to_dict(), "message_bytes": MESSAGE, "react": True,
        "host": "127.0.0.1", "timeout_s": 20,
    })
    killed = threading.Event()
    at_epoch_3 = set()
    lock = threading.Lock()

    def kill_at_epoch_3(rank, epoch):  # once every rank is connected and running
        with lock:
            if epoch == 3:
                at_epoch_3.add(rank)
            if len(at_epoch_3) == tree.n and not killed.is_set():
                killed.set()
                os.kill(proc.pid, signal.SIGKILL)

    try:
        start = time.monotonic()
        ranks = run_ranks(address, tree, 30, period_s=0.02, timeout_s=5.0,
                          on_epoch=kill_at_epoch_3)
        elapsed = time.monotonic() - start
    finally:
        proc.kill()
        proc.wait()
    assert killed.is_set() and proc.returncode == -signal.SIGKILL
    assert elapsed < 5.0  # EOF is seen at once; nobody waited for its timeout
    for r in ranks:
        assert len(r.ran) == 30 and all(p == tree for p in r.ran)
        assert "lost the leader" in r.client.failure


# -- what a rank does with a bad leader ------------------------------------------------------
class FakeLeader(threading.Thread):
    """Speaks the leader's side by hand: welcome, then ``script`` (lines sent after epoch 0)."""

    def __init__(self, pattern, script, *, next_decision=5, delay=5):
        super().__init__(daemon=True)
        self.pattern, self.script = pattern, script
        self.next_decision, self.delay = next_decision, delay
        self.listener = listen("127.0.0.1", 0)
        self.address = self.listener.getsockname()
        self.received = []
        self.go = threading.Event()

    def run(self):
        self.listener.settimeout(5)
        sock, _ = self.listener.accept()
        channel = Channel(sock, timeout_s=5, peer="rank")
        try:
            self.received.append(channel.recv(5))  # hello
            channel.send({"type": "ping", "seq": 0})
            self.received.append(channel.recv(5))
            channel.send({"type": "welcome", "batch_epochs": 6, "apply_delay_epochs": self.delay,
                          "next_decision_epoch": self.next_decision,
                          "pattern": self.pattern.to_dict(), "offset_s": 0.0})
            self.go.wait(5)
            for item in self.script:
                if isinstance(item, bytes):
                    sock.sendall(item)  # below the channel: bytes it would never send
                else:
                    channel.send(item)
            while True:
                self.received.append(channel.recv(5))
        except ChannelError:
            pass
        finally:
            channel.close()
            self.listener.close()


def broken_ring():
    ring = allreduce_ring(4)
    data = ring.to_dict()
    data["flows"] = data["flows"][1:]  # the first reduce is missing: the sum is wrong
    return data


@pytest.mark.parametrize(("pattern_data", "why"), [
    ({"format": "react-pattern/1", "flows": "none"}, "unusable pattern"),
    (broken_ring(), "unusable pattern: .* is not valid"),
    (allreduce_ring(8).to_dict(), "not the job's allreduce over \\[0, 1, 2, 3\\]"),
])
def test_rank_rejects_a_bad_pattern_and_keeps_its_own(pattern_data, why, caplog):
    ring = allreduce_ring(4)
    leader = FakeLeader(ring, [{
        "type": "switch", "epoch": 11, "through_epoch": 5, "next_decision_epoch": 16,
        "pattern": pattern_data, "decision": {},
    }])
    leader.start()
    caplog.set_level(logging.WARNING, logger="react.runtime.tuner")
    client = TunerClient(1, leader.address, timeout_s=5)
    ran = [client.pattern_for(0, ring)]
    leader.go.set()
    time.sleep(0.2)
    ran += [client.pattern_for(e, ran[-1]) for e in range(1, 20)]
    client.close()
    leader.join(timeout=10)
    assert all(p is ring for p in ran)
    assert client.waited_epochs == 0
    assert client.failure is not None
    assert any("rejected the switch at epoch 11" in r.getMessage() for r in caplog.records)
    rejects = [m for m in leader.received if m["type"] == "reject"]
    assert len(rejects) == 1 and rejects[0]["epoch"] == 11
    assert re.search(why, rejects[0]["reason"])


def test_rank_rejects_a_switch_that_arrives_late():
    ring = allreduce_ring(4)
    swapped = Pattern.from_dict({**ring.to_dict(), "name": "renamed"})  # valid, another print
    leader = FakeLeader(ring, [{
        "type": "switch", "epoch": 2, "through_epoch": 0, "next_decision_epoch": 9,
        "pattern": swapped.to_dict(), "decision": {},
    }], next_decision=None)
    leader.start()
    client = TunerClient(0, leader.address, timeout_s=5)
    ran = [client.pattern_for(e, ring) for e in range(4)]
    leader.go.set()
    time.sleep(0.2)
    ran += [client.pattern_for(e, ran[-1]) for e in range(4, 8)]
    client.close()
    leader.join(timeout=10)
    assert all(p is ring for p in ran)
    assert "arrived late" in client.failure


@pytest.mark.parametrize("line", [b"{this is not json\n", b"x" * 5000 + b"\n",
                                  b'{"type": "launch_missiles"}\n'],
                         ids=["not-json", "oversize", "unknown-type"])
def test_rank_survives_a_malformed_message(line):
    ring = allreduce_ring(4)
    leader = FakeLeader(ring, [line])
    leader.start()
    client = TunerClient(2, leader.address, timeout_s=5, max_message_bytes=4096)
    client.pattern_for(0, ring)
    leader.go.set()
    time.sleep(0.2)
    start = time.monotonic()
    ran = [client.pattern_for(e, ring) for e in range(1, 30)]  # past the lease: no waiting
    assert time.monotonic() - start < 1.0
    client.close()
    leader.join(timeout=10)
    assert all(p is ring for p in ran)
    assert "lost the leader" in client.failure or "malformed" in client.failure


def test_rank_waits_at_most_its_timeout_for_a_silent_leader():
    # the leader never answers batch 0 (epochs 0-5): epochs up to 5 + 5 are known, epoch 11
    # waits timeout_s, then the rank freezes and never waits again.
    ring = allreduce_ring(4)
    leader = FakeLeader(ring, [])
    leader.start()
    client = TunerClient(3, leader.address, timeout_s=0.3)
    leader.go.set()
    start = time.monotonic()
    for e in range(20):
        client.pattern_for(e, ring)
    elapsed = time.monotonic() - start
    client.close()
    leader.join(timeout=10)
    assert 0.3 <= elapsed < 1.5
    assert client.waited_epochs == 1 and client.waited_s >= 0.3
    assert "no answer from the leader for epoch 11" in client.failure


def test_rank_without_a_leader_runs_its_pattern():
    sock = listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    client = TunerClient(0, ("127.0.0.1", port), timeout_s=1)
    ring = allreduce_ring(4)
    assert all(client.pattern_for(e, ring) is ring for e in range(12))
    client.report(rank_view(model(ring, 0), ring, 0, 0.0))  # dropped, never blocks
    client.close()
    assert "no tuner" in client.failure


# -- bad input -------------------------------------------------------------------------------
def test_leader_refuses_bad_arguments():
    ring = allreduce_ring(4)
    with pytest.raises(ReactError, match="world_size must equal the pattern's 4 ranks"):
        TunerLeader(ring, 5, message_bytes=1.0)
    with pytest.raises(ReactError, match="message_bytes must be a positive number"):
        TunerLeader(ring, 4, message_bytes=0)
    with pytest.raises(PatternError, match="is not valid"):
        TunerLeader(Pattern.from_dict(broken_ring()), 4, message_bytes=1.0)
    with pytest.raises(ReactError, match="port must be an integer in 0..65535, got 70000"):
        TunerLeader(ring, 4, message_bytes=1.0, port=70000)
    with pytest.raises(ReactError, match="apply_delay_epochs must be a non-negative integer"):
        TunerLeader(ring, 4, message_bytes=1.0, apply_delay_epochs=-1)
    with pytest.raises(ReactError, match="leader_address must be \\(host, port\\), got '1.2.3.4'"):
        TunerClient(0, "1.2.3.4")
    with pytest.raises(ReactError, match="batch_epochs=3 differs from the controller's 6"):
        TunerLeader(ring, 4, controller=Controller(ring), batch_epochs=3, message_bytes=1.0)


def test_spawn_leader_reports_a_leader_that_does_not_start(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"pattern": allreduce_ring(4).to_dict(), "message_bytes": 1,
                                "port": "x"}))
    with pytest.raises(ReactError, match="did not start .*port must be an integer in 0..65535"):
        spawn_leader(spec, tmp_path / "out.json", timeout_s=20,
                     popen=lambda argv, **kw: subprocess.Popen(argv, cwd=ROOT, **kw))


def test_leader_command_refuses_a_bad_spec(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"pattern": allreduce_ring(4).to_dict(), "message_bytes": 1,
                                "colour": "blue"}))
    proc = subprocess.run(
        [sys.executable, "-m", "react.runtime.tuner", "--spec", str(spec), "--out",
         str(tmp_path / "out.json")], cwd=ROOT, capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 2
    assert "unknown key(s) ['colour']" in proc.stderr
    assert not (tmp_path / "out.json").exists()


def test_leader_refuses_a_rank_that_is_not_in_the_pattern():
    ring = allreduce_ring(4)
    leader = TunerLeader(ring, 4, message_bytes=MESSAGE, host="127.0.0.1", timeout_s=1)
    out = {}
    thread = threading.Thread(target=lambda: out.update(doc=leader.run()), daemon=True)
    thread.start()
    client = TunerClient(7, leader.address, timeout_s=2)
    assert "rank 7 is not a rank of the pattern" in client.failure
    assert client.pattern_for(0, ring) is ring
    thread.join(timeout=5)
    assert not out["doc"]["complete"]
    assert any("only ranks [] of 4 connected" in e for e in out["doc"]["events"])


def test_read_result_names_a_file_that_is_not_a_result(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"format": "something-else"}')
    with pytest.raises(ReactError, match="is not a tuner result"):
        read_result(path)


def test_leader_stops_tuning_when_a_rank_starts_from_another_pattern():
    # rank 3 brings a (valid) pattern that is not the leader's: it rejects at epoch 0, the
    # leader stops tuning, tells everyone, and records that epoch 0 ran two patterns.
    ring = allreduce_ring(4)
    other = Pattern.from_dict({**ring.to_dict(), "name": "a renamed ring"})
    leader = TunerLeader(ring, 4, controller=Controller(ring), message_bytes=MESSAGE,
                         host="127.0.0.1", timeout_s=10)
    out = {}
    thread = threading.Thread(target=lambda: out.update(doc=leader.run()), daemon=True)
    thread.start()
    ranks = [FakeRank(r, leader.address, other if r == 3 else ring, 12, period_s=0.01)
             for r in ring.ranks]
    for r in ranks:
        r.start()
    for r in ranks:
        r.join(timeout=15)
        assert not r.is_alive() and r.error is None
    thread.join(timeout=15)
    doc = out["doc"]
    assert "is not the leader's" in ranks[3].client.failure
    assert all("stopped tuning" in r.client.failure for r in ranks[:3])
    assert all(r.client.waited_epochs == 0 for r in ranks)
    assert any("rank 3 rejected the switch at epoch 0" in e for e in doc["events"])
    assert any("diverged: at epoch 0" in e for e in doc["events"])
    assert not doc["complete"] and doc["decisions"] == [] and doc["epochs"] == []


def hand_rank(rank, address):
    """A rank that speaks the protocol by hand up to the welcome: (its channel, its socket)."""
    sock = socket.create_connection(address, timeout=5)
    channel = Channel(sock, timeout_s=5, max_message_bytes=4096, peer="leader")
    channel.send({"type": "hello", "rank": rank, "version": PROTOCOL_VERSION,
                  "clock": clock_id()})
    while (message := channel.recv(5))["type"] == "ping":
        channel.send({"type": "pong", "seq": message["seq"], "t_rank_s": now_s()})
    assert message["type"] == "welcome", message
    return channel, sock


@pytest.mark.parametrize(("bad", "why"), [
    ({"type": "timings", "timings": {"rank": "three"}, "pattern": "", "waited_s": 0},
     "rank 3 sent a bad 'timings' message: malformed rank timings"),
    (b"y" * 10_000, "lost rank 3: .*the channel limit is 4096"),
    ({"type": "pong", "seq": 0, "t_rank_s": 0.0}, "unexpected message type 'pong'"),
], ids=["bad-timings", "oversize", "out-of-turn"])
def test_leader_drops_a_rank_that_sends_garbage(bad, why):
    ring = allreduce_ring(4)
    leader = TunerLeader(ring, 4, controller=Controller(ring), message_bytes=MESSAGE,
                         host="127.0.0.1", timeout_s=10, max_message_bytes=4096)
    out = {}
    thread = threading.Thread(target=lambda: out.update(doc=leader.run()), daemon=True)
    thread.start()
    clients, hand = {}, {}
    connect = [threading.Thread(target=lambda r=r: clients.update(
        {r: TunerClient(r, leader.address, timeout_s=5)})) for r in (0, 1, 2)]
    connect.append(threading.Thread(target=lambda: hand.update(
        zip(("channel", "sock"), hand_rank(3, leader.address), strict=True))))
    for t in connect:
        t.start()
    for t in connect:
        t.join(timeout=10)
    if isinstance(bad, bytes):
        hand["sock"].sendall(bad)
    else:
        hand["channel"].send(bad)
    start = time.monotonic()
    for epoch in range(14):  # past the first lease (epoch 10): nobody may wait
        for r, client in clients.items():
            client.pattern_for(epoch, ring)
            client.report(rank_view(model(ring, epoch), ring, r, 1000.0 + 2 * epoch))
    assert time.monotonic() - start < 3.0
    for client in clients.values():
        client.close()
    hand["channel"].close()
    thread.join(timeout=15)
    doc = out["doc"]
    assert any(re.search(why, e) for e in doc["events"]), doc["events"]
    assert all("stopped tuning" in clients[r].failure for r in (0, 1, 2))
    assert not doc["complete"]


def test_a_rank_on_the_leaders_clock_gets_offset_zero_and_another_clock_is_estimated():
    # Same machine, same CLOCK_MONOTONIC: nothing to estimate, and an estimate would move the
    # rank's flows by the ping's asymmetry. A rank with a clock of its own is still estimated.
    if clock_id() is None:
        pytest.skip("this system does not name its clock (no /proc/sys/kernel/random/boot_id)")
    ring = allreduce_ring(4)
    leader = TunerLeader(ring, 4, message_bytes=MESSAGE, host="127.0.0.1", timeout_s=5)
    thread = threading.Thread(target=leader.run, daemon=True)
    thread.start()
    clients = [TunerClient(r, leader.address, timeout_s=5,
                           **({"clock": lambda: now_s() + 5.0} if r == 2 else {}))
               for r in ring.ranks]
    try:
        assert leader.offsets_s[0] == leader.offsets_s[1] == leader.offsets_s[3] == 0.0
        assert leader.offsets_s[2] == pytest.approx(-5.0, abs=1e-3)
    finally:
        for c in clients:
            c.close()
        thread.join(timeout=10)


def _result_file(tmp_path, decisions):
    """A result file of one epoch of the 8-rank tree (every flow 1 ms) and these decisions."""
    tree = allreduce_double_binary_tree(8)
    doc = {"format": "react-tuner-result/1", "patterns": [tree.to_dict()],
           "epochs": [{"epoch": 0, "pattern": 0, "collective_time_s": 6e-3,
                       "message_bytes": MESSAGE, "flows": [[0.0, 1e-3, 1e7]] * len(tree.flows)}],
           "decisions": [{"batch": i, "action": "keep", "pattern": 0, "reason": "r", "swaps": [],
                          "estimated_gain": None, "observed_gain": None, "mean_time_s": 6e-3,
                          **extra} for i, extra in enumerate(decisions)]}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_decisions_congestion_report_crosses_the_result_file(tmp_path):
    from react.control.detect import CongestionReport, FlowCongestion
    from react.model.pattern import Flow
    from react.runtime.tuner.messages import report_to_dict

    # Rank 3 steady congested inbound (its flow 1->3 at step 2 named with its numbers) and one
    # erratic flow; the JSON carries the flows as Pattern.to_dict writes them.
    report = CongestionReport(
        (FlowCongestion(Flow(2, 1, 3, (1,), "reduce"), "steady", 2, 25e9, 25e9, 47.2e9, 0.0),
         FlowCongestion(Flow(6, 2, 1, (0,), "copy"), "erratic", 2, 50e9, 41e9, 47.2e9, 0.31)),
        frozenset({3}), frozenset())
    data = report_to_dict(report)
    assert data["flows"][0] == {"flow": [2, 1, 3, [1], "reduce"], "kind": "steady", "degree": 2,
                                "p90_bps": 25e9, "mean_bps": 25e9, "class_mean_bps": 47.2e9,
                                "normalised_std": 0.0}
    assert data["steady_inbound"] == [3] and data["steady_outbound"] == []
    # Read back: the same report; a decision written with "report": null, and one written
    # before decisions carried a report (no key), read as None.
    path = _result_file(tmp_path, [{"report": data}, {"report": None}, {}])
    _results, _ran, decisions = read_result(path)
    assert [d.report for d in decisions] == [report, None, None]


def test_a_malformed_report_in_a_result_file_is_named(tmp_path):
    bad = {"flows": [{"flow": [2, 1, 3, [1], "reduce"], "kind": "hot", "degree": 2,
                      "p90_bps": 1.0, "mean_bps": 1.0, "class_mean_bps": 1.0,
                      "normalised_std": 0.0}], "steady_inbound": [], "steady_outbound": []}
    path = _result_file(tmp_path, [{"report": bad}])
    with pytest.raises(ReactError, match="kind must be 'steady' or 'erratic', got 'hot'"):
        read_result(path)
