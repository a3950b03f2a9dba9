"""The ``react`` command (react/cli.py): run, demo, patterns, one-line errors with exit status 2.

Named test_react_cli.py, not test_cli.py: pytest's default import mode needs unique basenames and
tests/flowsim/test_cli.py exists.
"""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from react.cli import main
from react.patterns import GENERATORS

SCENARIOS = Path(__file__).resolve().parents[3] / "experiments" / "scenarios"
STAR = str(SCENARIOS / "closed_loop_star.toml")
PNG = b"\x89PNG\r\n\x1a\n"


def test_run_prints_a_table_and_the_decisions(capsys):
    assert main(["run", STAR, "--epochs", "7", "--warmup", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "scenario closed-loop-star" in out
    header = next(line for line in out.splitlines() if line.startswith("job "))
    assert all(col in header for col in ("mean us", "p95 us", "algbw Gb/s"))
    row = next(line for line in out.splitlines() if line.startswith("tree "))
    assert row.split()[1:3] == ["on", "2-6"]
    # the first batch (6 epochs at 11744 us) leads to a swap on trial
    assert "decisions of job 'tree'" in out and " try " in out and "why: " in out


def test_run_compare_writes_json_and_csv(tmp_path, capsys):
    js, cs = tmp_path / "out.json", tmp_path / "out.csv"
    code = main(["run", STAR, "--compare", "--epochs", "8", "--warmup", "0", "--json", str(js),
                 "--csv", str(cs), "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    assert "without REACT" in out and "with REACT" in out and "algbw gain" in out
    doc = json.loads(js.read_text())
    assert doc["scenario"] == "closed-loop-star" and doc["warmup_epochs"] == 0
    assert sorted(s["react"] for s in doc["summary"]) == [False, True]
    assert len(doc["epochs"]) == 16 and doc["decisions"][0]["action"] == "try"
    rows = list(csv.DictReader(cs.open()))
    assert len(rows) == 16
    assert set(rows[0]) == {"job", "epoch", "react", "collective_time_s", "algbw_gbps",
                            "pattern_changed"}
    off = [r for r in rows if r["react"] == "False"]
    on = [r for r in rows if r["react"] == "True"]
    # 20 MB in 11744 us = 13.62 Gb/s, before any change; REACT's trial starts at epoch 6
    assert float(off[0]["algbw_gbps"]) == pytest.approx(8 * 20e6 / 11744e-6 / 1e9, rel=1e-9)
    assert [r["pattern_changed"] for r in on].index("True") == 6
    assert all(r["pattern_changed"] == "False" for r in off)


def test_demo_narrates_the_worked_example_and_saves_pictures(tmp_path, capsys):
    out_dir = tmp_path / "demo"
    assert main(["demo", "--out", str(out_dir), "--epochs", "14"]) == 0
    out = capsys.readouterr().out
    assert "576 us -> 656 us -> 576 us" in out
    assert "steady congested" in out and "chunk-local swap 3<->2 in chunk graph 1" in out
    timeline = out_dir / "timeline.png"
    assert str(timeline) in out
    assert timeline.read_bytes().startswith(PNG)


def test_demo_saves_the_ten_picture(tmp_path, capsys):
    pytest.importorskip("react.show.draw")
    assert main(["demo", "--out", str(tmp_path), "--epochs", "12"]) == 0
    assert (tmp_path / "ten_swap.png").read_bytes().startswith(PNG)
    assert str(tmp_path / "ten_swap.png") in capsys.readouterr().out


def test_patterns_list_show_verify(capsys):
    assert main(["patterns"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listing] == sorted(GENERATORS)
    assert all(len(line.split()) > 1 for line in listing)  # each with a description
    assert main(["patterns", "show", "allreduce_ring", "4"]) == 0
    assert capsys.readouterr().out.startswith("allreduce_ring: allreduce over 4 ranks")
    assert main(["patterns", "verify", "allgather_recursive_doubling", "8"]) == 0
    assert capsys.readouterr().out.startswith("ok: allgather_recursive_doubling(8)")


def one_error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("react: error: ")
    return err[0]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", "no-such.toml"], "'no-such.toml' does not exist"),
        (["run", STAR, "--epochs", "0"], "--epochs: expected a positive integer, got 0"),
        (["run", STAR, "--warmup", "x"], "--warmup: expected an integer >= 0, got 'x'"),
        (["patterns", "show", "nope", "4"], "unknown pattern generator 'nope'"),
        (["patterns", "show", "allreduce_ring", "1"], "at least 2 ranks, got 1"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, expected, capsys):
    assert main(argv) == 2
    assert expected in one_error_line(capsys)


def test_invalid_scenario_exits_2_and_debug_shows_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(Path(STAR).read_text().replace("ranks = 8", "ranks = 99"))
    assert main(["run", str(bad)]) == 2
    line = one_error_line(capsys)
    assert "jobs[0].ranks = 99" in line
    assert main(["run", str(bad), "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1] == line


def test_python_dash_m_react_runs():
    done = subprocess.run([sys.executable, "-m", "react", "patterns"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0 and "allreduce_ring" in done.stdout


def test_controller_setting_reads_toml_values_and_bare_strings():
    import argparse

    from react.commands.argtypes import controller_setting

    assert controller_setting("epsilon=0.1") == ("epsilon", 0.1)
    assert controller_setting("trials=20") == ("trials", 20)
    assert controller_setting("size_aware_detection=false") == ("size_aware_detection", False)
    assert controller_setting('unseen_pairs="links"') == ("unseen_pairs", "links")
    assert controller_setting("unseen_pairs=links_least") == ("unseen_pairs", "links_least")
    for bad in ("epsilon", "=0.1", "two words=1"):
        with pytest.raises(argparse.ArgumentTypeError, match="KEY=VALUE"):
            controller_setting(bad)


def test_run_of_several_jobs_says_it_is_one_draw(capsys):
    two = str(SCENARIOS / "two_jobs_star.toml")
    assert main(["run", two, "--epochs", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "note: 2 jobs share this network" in out
    assert f"python3 -m experiments.sensitivity {two} --gain" in out
    assert main(["run", STAR, "--epochs", "2", "--no-progress"]) == 0
    assert "note:" not in capsys.readouterr().out
