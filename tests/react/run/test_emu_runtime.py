"""Real rank processes on the emulated network: RCollective, RTuner and the driver together.

Marker ``emu`` (root and iproute2; skipped otherwise, CI runs them as root). Truth is
independent of the runtime: a collective's result is checked against a plain numpy reduction of
every rank's input (react.runtime.reference), congestion against where the background flows go
and what flowsim predicts for the same scaled scenario, the tuner's switch against the agreed
epoch, cleanup against ``ip netns list``. Every process has a timeout.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from flowsim.topologies import star
from react.backends.emu import EmuError, EmuNetwork
from react.backends.emu.cleanup import list_namespaces
from react.cli import main as react_main
from react.control.controller import ControllerConfig
from react.control.detect import detect_congestion
from react.control.policies.baselines import RandomSwap
from react.model.errors import ReactError
from react.patterns import allreduce_double_binary_tree, patterns_at
from react.run.scenario import parse_scenario
from react.run.scenario_runs import open_jobs, run_scenario
from react.runtime.rank import job_spec

pytestmark = [pytest.mark.emu]

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "experiments" / "scenarios"
MIB = 1 << 20


def star_doc(*, ranks=4, p=2, epochs=8, react=False, backend="emu", message=MIB,
             transport="socket"):
    """A star of ranks + p hosts; one long-lived flow from each of the p outside hosts into
    rank 1 (the emulator shares a port per source host: p flows need p hosts)."""
    doc = {
        "name": f"emu-{ranks}r-p{p}", "seed": 0, "backend": backend, "connections": 1,
        "topology": {"name": "star", "n": ranks + max(p, 1), "capacity_bps": 200e6},
        "jobs": [{"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": ranks,
                  "placement": "first", "message_bytes": message, "epochs": epochs,
                  "react": {"enabled": react, "apply_delay_epochs": 5}}],
        "emu": {"message_bytes": message, "transport": transport, "timeout_s": 60},
    }
    doc["background"] = [{"kind": "long_lived", "src": f"h{ranks + k}", "dst": "tree:1"}
                         for k in range(p)]
    return doc


def run_group(module, n, transport, tmp_path, *, timeout_s=150):
    """Start ``python -m module JOB.json RANK`` for n ranks on a star; every exit status, output."""
    with EmuNetwork(star(n), link_rate_bps=200e6) as net:
        hosts = [f"h{i}" for i in range(n)]
        spec = job_spec(job="check", pattern=allreduce_double_binary_tree(n), epochs=1,
                        message_bytes=64 * 1024 + 12, transport=transport,
                        addresses=[(net.host_ip(h), 29500 + i) for i, h in enumerate(hosts)],
                        tuner=("127.0.0.1", 1), timeout_s=60)
        path = tmp_path / "job.json"
        path.write_text(json.dumps(spec))
        procs = [net.popen(h, [sys.executable, "-m", module, str(path), str(i)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i, h in enumerate(hosts)]
        try:
            outs = [p.communicate(timeout=timeout_s) for p in procs]
        finally:
            for p in procs:
                p.kill()
        return [p.returncode for p in procs], outs


@pytest.mark.parametrize("n", [5, 8])
def test_every_generator_is_correct_over_namespaces_on_sockets(n, tmp_path):
    codes, outs = run_group("react.runtime.selfcheck", n, "socket", tmp_path)
    assert codes == [0] * n, [err for _, err in outs]
    checked = set(json.loads(outs[0][0])["checked"])
    assert checked == set(patterns_at(n)) and len(checked) >= 6


def test_every_generator_is_correct_over_gloo_and_matches_torch(tmp_path):
    pytest.importorskip("torch", reason="the torch transport needs the [torch] extra")
    codes, outs = run_group("react.runtime.selfcheck", 4, "torch", tmp_path, timeout_s=240)
    assert codes == [0] * 4, [err for _, err in outs]
    assert len(json.loads(outs[0][0])["checked"]) >= 6


def _steady(run, pattern, epochs):
    report = detect_congestion(pattern, run.results[epochs])
    return {c.flow for c in report.steady()}


def test_congestion_shows_where_flowsim_predicts_it():
    # p = 2 flows into rank 1's host: every flow into rank 1 gets a third of its link, so
    # detection must flag them, on the emulator as on flowsim for the same scaled scenario.
    doc = star_doc(ranks=4, p=2, epochs=8)
    emu = run_scenario(parse_scenario(doc))["tree"]
    sim = run_scenario(parse_scenario(dict(doc, backend="sim")))["tree"]
    pattern = emu.patterns[0]
    into_1 = {f for f in pattern.flows if f.dst == 1}
    flagged_emu = _steady(emu, pattern, slice(2, 8))
    flagged_sim = _steady(sim, pattern, slice(2, 8))
    assert into_1 <= flagged_sim
    assert flagged_emu == flagged_sim
    # The shapers cap every link, so an emulated epoch cannot beat flowsim's max-min time by
    # more than the rounding of a few packets; CPU contention and TCP can only slow it down.
    ratio = np.mean(emu.times_s()[2:]) / np.mean(sim.times_s()[2:])
    assert 0.9 < ratio < 2.0, ratio


def test_react_closed_loop_improves_the_congested_star():
    # flowsim at the same scaled rates: 234 ms per epoch without REACT, 168-182 ms after its
    # swaps (-25%). On the emulator REACT goes on exploring (noise makes flows look erratic),
    # and a bad trial can fill any late window; what must hold is that the loop reached a
    # pattern that runs a batch at least 10% faster than the baseline's typical epoch, and that
    # the controller saw the gain in real measurements. 72 epochs, not 48: a trial is judged
    # only by the batch after it, and with 48 a reverted first trial left the good second one
    # unjudged at the end of the run (a CI failure; 5-7 decisions fit in 48 epochs).
    doc = star_doc(ranks=4, p=2, epochs=72, react=True)
    scenario = parse_scenario(doc)
    off = run_scenario(scenario, react=False)["tree"]
    on = run_scenario(scenario, react=True)["tree"]
    assert any(d.changed for d in on.decisions)
    times = on.times_s()
    best_batch = min(np.mean(times[i:i + 6]) for i in range(len(times) - 5))
    assert best_batch < 0.9 * np.median(off.times_s()), (np.median(off.times_s()), best_batch)
    assert any(d.observed_gain is not None and d.observed_gain > 0.05 for d in on.decisions)
    info = on.info
    assert info["complete"] and info["epochs_waited"] == 0
    # every rank ran every change (or the job would have failed); each decided change shows,
    # but the last one may fall after the final epoch
    changes = [e for e in range(1, 72) if on.patterns[e] != on.patterns[e - 1]]
    decided = sum(d.changed for d in on.decisions)
    assert decided - 1 <= len(changes) <= decided


def test_a_baseline_controller_runs_on_real_ranks():
    # The job names the 'random' baseline; the leader makes it again from that reference. Its
    # first draw depends on its seed alone, so its first decision tries the swap the same
    # baseline draws in process from seed 0, and every rank runs that pattern from epoch
    # 5 + 1 + 5 = 11 on (the second decision, after epoch 16, would switch after the run).
    doc = star_doc(ranks=4, p=0, epochs=18, react=True, message=256 * 1024)
    doc["jobs"][0]["controller"] = "random"
    run = run_scenario(parse_scenario(doc))["tree"]
    tree = allreduce_double_binary_tree(4)
    first = RandomSwap(tree, ControllerConfig(seed=0)).observe(run.results[:6])
    assert first.action == "try" and first.reason.startswith("trying a random viable swap")
    assert [(d.batch, d.action, d.reason) for d in run.decisions[:1]] == [
        (0, "try", first.reason)]
    assert [d.batch for d in run.decisions] == [0, 1]
    assert run.patterns == [tree] * 11 + [first.pattern] * 7
    assert run.info["complete"]


def test_killing_the_leader_mid_run_does_not_hang_the_job():
    scenario = parse_scenario(star_doc(ranks=4, p=0, epochs=40, react=True, message=256 * 1024))
    with open_jobs(scenario) as jobs:
        job = jobs[0]
        killed = threading.Event()

        def kill_after_five(_name, epoch):
            if epoch == 5 and not killed.is_set():
                killed.set()
                job.backend.tuner.send_signal(signal.SIGKILL)

        t0 = time.monotonic()
        with pytest.raises(EmuError, match="tuner") as info:
            job.backend.run_job(job.name, job.pattern, job.epochs, job.controller,
                                kill_after_five)
        assert killed.is_set()
        assert "every rank finished" in str(info.value)
        assert time.monotonic() - t0 < 90


def test_sigterm_during_a_run_leaves_no_namespace_and_no_rank(tmp_path):
    before = set(list_namespaces())
    doc = star_doc(ranks=4, p=1, epochs=500)
    toml = tmp_path / "s.toml"
    toml.write_text(_toml(doc))
    scratch = tmp_path / "tmp"  # the run's TMPDIR: its scratch folder must be gone afterwards
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "react", "run", str(toml), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, env={**os.environ, "TMPDIR": str(scratch)})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if _ranks_running():
                break
            time.sleep(0.2)
        assert _ranks_running(), "the ranks never started"
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert "Traceback" not in err
    assert set(list_namespaces()) <= before
    time.sleep(0.5)
    assert not _ranks_running()
    assert list(scratch.iterdir()) == []


def _ranks_running():
    """Whether any emulated rank process runs (the emu tests run one at a time)."""
    out = subprocess.run(["pgrep", "-f", "react.runtime.rank"], capture_output=True, text=True)
    return bool(out.stdout.strip())


def _toml(doc):
    """A scenario document as TOML (just what star_doc produces)."""
    lines = []
    for key in ("name", "seed", "backend", "connections"):
        lines.append(f"{key} = {json.dumps(doc[key])}")
    lines.append("[topology]")
    lines += [f"{k} = {json.dumps(v)}" for k, v in doc["topology"].items()]
    for job in doc["jobs"]:
        lines.append("[[jobs]]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in job.items() if k != "react"]
        lines.append("[jobs.react]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in job["react"].items()]
    for bg in doc.get("background", []):
        lines.append("[[background]]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in bg.items()]
    lines.append("[emu]")
    lines += [f"{k} = {json.dumps(v)}" for k, v in doc["emu"].items()]
    return "\n".join(lines) + "\n"


def test_two_jobs_run_at_once():
    scenario = parse_scenario({
        "name": "two", "seed": 0, "backend": "emu", "connections": 1,
        "topology": {"name": "star", "n": 7, "capacity_bps": 200e6},
        "jobs": [
            {"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": 4,
             "placement": ["h0", "h1", "h2", "h3"], "message_bytes": MIB, "epochs": 6},
            {"name": "ring", "collective": "allreduce_ring", "ranks": 4,
             "placement": ["h2", "h3", "h4", "h5"], "message_bytes": MIB, "epochs": 6},
        ],
        "emu": {"message_bytes": MIB, "timeout_s": 60},
    })
    runs = run_scenario(scenario)
    assert [len(runs[j].results) for j in ("tree", "ring")] == [6, 6]
    assert runs["ring"].patterns[0].name == "allreduce_ring"


@pytest.mark.parametrize("name", ["closed_loop_star.toml", "ring_degraded_spine.toml"])
def test_react_run_backend_emu_on_shipped_scenarios(name, capsys):
    code = react_main(["run", str(SCENARIOS / name), "--backend", "emu", "--epochs", "6",
                       "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "backend emu" in out and "0-5" in out


def test_a_pattern_that_fails_verification_is_refused_before_any_byte():
    scenario = parse_scenario(star_doc(ranks=4, p=0, epochs=2))
    tree = allreduce_double_binary_tree(4)
    broken = tree.with_flows(tree.flows[1:])
    with open_jobs(scenario) as jobs:
        with pytest.raises(ReactError, match="verif|contribution|missing|hold"):
            jobs[0].backend.run_job("tree", broken, 2, None)


def test_a_data_port_already_taken_is_one_clear_error():
    scenario = parse_scenario(star_doc(ranks=4, p=0, epochs=2))
    with open_jobs(scenario) as jobs:
        net = jobs[0].backend.network
        blocker = net.popen("h2", [sys.executable, "-c",
                                   "import socket,time;s=socket.socket();"
                                   "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
                                   f"s.bind(('{net.host_ip('h2')}',29502));s.listen();"
                                   "print('ok',flush=True);time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
        try:
            assert blocker.stdout.readline().strip() == "ok"
            with pytest.raises(EmuError, match="29502"):
                jobs[0].backend.run_job("tree", jobs[0].pattern, 2, None)
        finally:
            blocker.kill()
