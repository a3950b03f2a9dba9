"""Tests of the ``flowsim`` command line (flowsim/__main__.py)."""

import subprocess
import sys

import pytest

from flowsim import Topology
from flowsim.__main__ import main, run_demo
from flowsim.topologies import fat_tree


def test_demo_prints_the_flow_table_and_explanation(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(line for line in lines if line.split()[:2] == ["flow", "tenant"])
    for column in ("tenant", "src->dst", "via", "size", "start ms", "end ms", "mean Gbps"):
        assert column in header
    rows = [line for line in lines if line[:4].strip().isdigit()]
    assert len(rows) == 5  # four job flows and the storage flow
    assert "What happened:" in out
    assert "(stopped)" in rows[-1]


def test_demo_flow_on_the_healthy_spine_matches_a_hand_computation(capsys):
    # Seed 0 hashes job flows 0-2 and the storage flow h3->h7 onto spine0, job flow 3 (h3->h7)
    # onto spine1. leaf0->spine0 (100 Gbps) is shared by 4 flows: 25 Gbps each, so the storage
    # flow takes 25 of h3's uplink and flow 3 gets the other 75 Gbps. At 0.5 ms spine0->leaf1
    # drops to 30 Gbps: 7.5 Gbps each there, and flow 3 rises to 92.5 Gbps.
    # Flow 3: 0.5 ms x 75 Gbps = 37.5 Mbit; the other 200 - 37.5 = 162.5 Mbit take
    # 162.5 / 92.5 ms = 1.7568 ms; plus 4 links x 1 us: end = 0.5 + 1.7568 + 0.004 = 2.2608 ms.
    records, _ = run_demo(seed=0)
    flow3 = next(r for r in records if r.flow_id == 3)
    assert (flow3.src, flow3.dst) == ("h3", "h7")
    assert flow3.end_s == pytest.approx(0.5e-3 + 162.5e6 / 92.5e9 + 4e-6, rel=1e-9)
    assert main(["demo"]) == 0
    assert "2.261" in capsys.readouterr().out


def test_demo_is_deterministic_and_seed_dependent(capsys):
    main(["demo"])
    first = capsys.readouterr().out
    main(["demo"])
    assert capsys.readouterr().out == first
    main(["demo", "--seed", "1"])
    assert capsys.readouterr().out != first


def test_demo_job_flows_complete_and_background_is_stopped():
    records, _ = run_demo()
    job = [r for r in records if r.tenant == "job"]
    assert len(job) == 4 and not any(r.stopped for r in job)
    (storage,) = [r for r in records if r.tenant == "storage"]
    assert storage.stopped
    assert storage.end_s == pytest.approx(max(r.end_s for r in job))


def test_topology_command_prints_a_summary_and_saves_json(tmp_path, capsys):
    path = tmp_path / "ft.json"
    assert main(["topology", "fat_tree", "--k", "8", "--out", str(path)]) == 0
    out = capsys.readouterr().out
    assert "fat_tree(k=8)" in out
    assert "128" in out and "edge 32, agg 32, core 16" in out
    assert "16 equal-cost paths" in out
    assert Topology.load(path) == fat_tree(8)


def test_topology_command_converts_gbps_and_us(tmp_path):
    path = tmp_path / "ls.json"
    args = ["topology", "leaf_spine", "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2"]
    args += ["--host-gbps", "25", "--fabric-gbps", "40", "--latency-us", "0.5", "--out", str(path)]
    assert main(args) == 0
    topo = Topology.load(path)
    assert topo.link("h0", "leaf0").capacity_bps == 25e9
    assert topo.link("leaf0", "spine1").capacity_bps == 40e9
    assert topo.link("leaf0", "spine1").latency_s == pytest.approx(0.5e-6)


def test_topology_file_reads_a_saved_topology(tmp_path, capsys):
    path = tmp_path / "a.json"
    assert main(["topology", "alibaba_fabric", "--tors", "4", "--out", str(path)]) == 0
    capsys.readouterr()
    assert main(["topology", "file", str(path)]) == 0
    out = capsys.readouterr().out
    assert "alibaba_fabric(tors=4, aggs=3, hosts_per_tor=15)" in out
    assert "tor 4, agg 3" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["topology", "fat_tree", "--k", "3"],
            "fat_tree: k must be a positive even integer, got k=3",
        ),
        (["topology", "fat_tree", "--k", "x"], "argument --k: invalid int value: 'x'"),
        (["topology", "leaf_spine", "--spines", "0"], "spines=0"),
        (["topology", "star", "--capacity-gbps", "-1"], "capacity_bps=-1000000000.0"),
        (
            ["topology", "leaf_spine", "--fabric-gbps", "1", "--oversubscription", "2"],
            "not allowed",
        ),
        (["topology"], "required: BUILDER"),
        (["bogus"], "invalid choice: 'bogus'"),
        ([], "required: COMMAND"),
        (["demo", "--seed", "one"], "invalid int value: 'one'"),
        (["topology", "file", "/nonexistent/t.json"], "No such file or directory"),
    ],
)
def test_bad_input_gives_one_error_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err_lines = captured.err.splitlines()
    assert len(err_lines) == 1
    assert err_lines[0].startswith("flowsim: error: ")
    assert message in err_lines[0]


def test_malformed_json_file_is_reported(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text("{ nope")
    assert main(["topology", "file", str(path)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err


def test_unwritable_out_path_is_reported_before_any_output(tmp_path, capsys):
    target = tmp_path / "missing-dir" / "t.json"
    assert main(["topology", "star", "--out", str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "cannot write" in captured.err


def test_help_exits_0_and_lists_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "demo" in out and "topology" in out


def test_module_entry_point_exits_2_without_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "flowsim", "topology", "fat_tree", "--k", "3"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "flowsim: error: fat_tree: k must be a positive even integer, got k=3"
    )
    assert "Traceback" not in proc.stderr
