"""``react crossval``: one scenario on several backends, compared with the first.

On the simulator alone (``sim,sim``) the command must find what determinism promises: zero FCT
error, the same flags and decisions; the times it reports must be those of an independent run.
"""

from __future__ import annotations

import json

import pytest

from react.cli import main
from react.run.crossval import CrossvalError, labels
from react.run.scenario import load_scenario
from react.run.scenario_runs import run_scenario

TINY = """
seed = 0
connections = 1
[topology]
name = "star"
n = 10
[[jobs]]
name = "tree"
collective = "allreduce_double_binary_tree"
ranks = 8
message_bytes = 1e6
epochs = 30
react = true
[[background]]
kind = "long_lived"
src = "h8"
dst = "tree:3"
p = 2
"""


def test_crossval_sim_twice_agrees_with_itself(tmp_path, capsys):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    out = tmp_path / "out"
    assert main(["crossval", str(path), "--backends", "sim,sim", "--epochs", "12",
                 "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    rows = [ln for ln in text.splitlines() if ln.startswith("tree")]
    assert [r.split()[1] for r in rows] == ["sim", "sim#2"]
    summary = json.loads((out / "crossval.json").read_text())
    assert (out / "crossval.png").stat().st_size > 0
    ref, other = summary["backends"]
    # the times are those of an ordinary run of the same scenario, 12 epochs
    expected = run_scenario(load_scenario(path).with_epochs(12))["tree"].times_s()
    assert ref["jobs"]["tree"]["times_us"] == pytest.approx([t * 1e6 for t in expected],
                                                            rel=1e-12)
    job = other["jobs"]["tree"]
    assert job["fct_error"]["median_abs"] == 0 and job["fct_error"]["p95_abs"] == 0
    assert job["fct_error"]["flows"] > 0
    assert job["same_decisions"] is True and job["same_final_pattern"] is True
    # two external flows into rank 3: the first batch flags flows into rank 3, on both
    first_flags = ref["jobs"]["tree"]["flagged"][0][1]
    assert first_flags and all(f.endswith("->3") for f in first_flags if "steady" in f)
    assert job["flagged"] == ref["jobs"]["tree"]["flagged"]


def test_crossval_unknown_backend_is_refused_before_running(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    with pytest.raises(CrossvalError, match="backend 'ns4' does not exist"):
        from react.run.crossval import variant

        variant("ns4")
    assert main(["crossval", str(path), "--backends", "sim,ns4", "--no-progress"]) == 2


def test_crossval_labels_repeated_backends():
    assert labels(["sim", "ns3", "sim", "sim"]) == ["sim", "ns3", "sim#2", "sim#3"]
