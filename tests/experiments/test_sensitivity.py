"""The sensitivity script against what a lone job must do, by hand.

A lone job on an idle star with zero latency is a pure transfer schedule: every flow's time is
bytes over a share of fixed capacities, so multiplying every message by ``1 + eps`` multiplies
every epoch's time by exactly ``1 + eps``. With link latency, the latency part does not grow, so
the change lies strictly between 0 and ``eps``.
"""

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from experiments import sensitivity
from react.run.scenario import ScenarioError, load_scenario, parse_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "experiments" / "scenarios"


def lone_job(latency_s):
    return parse_scenario({
        "name": "lone", "seed": 0,
        "topology": {"name": "star", "n": 8, "capacity_bps": 100e9, "latency_s": latency_s},
        "jobs": [{"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": 8,
                  "placement": [f"h{i}" for i in range(8)], "message_bytes": 4e6,
                  "epochs": 3}],
    }, source="lone")


def lone_ring_toml(tmp_path, latency_s=None):
    """A scenario file: a 4-rank ring on a 4-host star, 1 MB, 2 epochs."""
    latency = "" if latency_s is None else f"latency_s = {latency_s}\n"
    toml = tmp_path / "lone.toml"
    toml.write_text(
        f'name = "lone"\nseed = 0\n[topology]\nname = "star"\nn = 4\n{latency}'
        '[[jobs]]\nname = "ring"\ncollective = "allreduce_ring"\nranks = 4\n'
        'placement = ["h0", "h1", "h2", "h3"]\nmessage_bytes = 1e6\nepochs = 2\n')
    return toml


def test_lone_job_without_latency_scales_exactly():
    (row,) = sensitivity.responses(lone_job(0.0), [1e-9], react=False)
    assert row["job"] == "tree" and row["epochs"] == 3
    assert row["max_epoch_change"] == pytest.approx(1e-9, rel=1e-5)
    assert row["mean_change"] == pytest.approx(1e-9, rel=1e-5)
    assert row["max_change_over_eps"] == pytest.approx(1.0, rel=1e-5)


def test_latency_does_not_grow_so_the_change_is_below_eps():
    (row,) = sensitivity.responses(lone_job(20e-6), [1e-9], react=False)
    assert 0.1e-9 < row["max_epoch_change"] < 0.999e-9


@pytest.mark.parametrize("eps", [0.0, 0.5, -0.7, float("nan"), float("inf"), True, "1e-9"])
def test_bad_eps_is_named(eps):
    with pytest.raises(ScenarioError, match="eps must be"):
        sensitivity.perturbed(lone_job(0.0), eps)


def test_only_the_simulator():
    scenario = lone_job(0.0)
    with pytest.raises(ScenarioError, match="simulator only"):
        sensitivity.responses(replace(scenario, backend="emu"), [1e-9])


def test_cli_prints_and_writes_csv(tmp_path, capsys):
    toml = lone_ring_toml(tmp_path, latency_s=0.0)
    out = tmp_path / "s.csv"
    assert sensitivity.main([str(toml), "--eps", "1e-10", "1e-8", "--react", "off",
                             "--csv", str(out)]) == 0
    printed = capsys.readouterr()
    assert "run 3/3: eps 1e-08" in printed.err
    rows = list(csv.DictReader(out.open()))
    assert [r["eps"] for r in rows] == ["1e-10", "1e-08"]
    for r in rows:
        assert float(r["max_change_over_eps"]) == pytest.approx(1.0, rel=1e-4)
    assert "ring" in printed.out


def test_cli_bad_eps_is_a_usage_error(tmp_path, capsys):
    toml = lone_ring_toml(tmp_path)
    with pytest.raises(SystemExit) as exc:
        sensitivity.main([str(toml), "--eps", "0.9"])
    assert exc.value.code == 2
    assert "eps must be a number with 0 < |eps| < 0.5, got 0.9" in capsys.readouterr().err


def test_a_lone_jobs_react_gain_is_the_same_in_every_draw():
    """closed_loop_star: one job, long-lived flows into one rank. A lone job answers linearly,
    so REACT decides alike in every draw and its gain (positive: it avoids the congested
    rank) is the same to round-off."""
    scenario = load_scenario(SCENARIOS / "closed_loop_star.toml").with_epochs(24)
    rows = sensitivity.react_gains(scenario, [1e-12, 1e-9], warmup=12)
    assert [r["eps"] for r in rows] == [0.0, 1e-12, 1e-9]
    gains = [r["gain"] for r in rows]
    assert gains[0] > 0.05
    assert max(gains) - min(gains) < 1e-6


def test_cli_gain_prints_each_draw_and_the_spread(tmp_path, capsys):
    toml = tmp_path / "two.toml"
    toml.write_text(
        'name = "two"\nseed = 0\n[topology]\nname = "star"\nn = 8\n'
        '[[jobs]]\nname = "a"\ncollective = "allreduce_ring"\nranks = 4\n'
        'placement = ["h0", "h1", "h2", "h3"]\nmessage_bytes = 1e6\nepochs = 3\n'
        '[[jobs]]\nname = "b"\ncollective = "allreduce_ring"\nranks = 4\n'
        'placement = ["h3", "h4", "h5", "h6"]\nmessage_bytes = 1e6\nepochs = 3\n')
    out = tmp_path / "g.csv"
    assert sensitivity.main([str(toml), "--gain", "--eps", "1e-9", "--warmup", "0",
                             "--csv", str(out)]) == 0
    printed = capsys.readouterr()
    assert "draw 2/2: eps 1e-09, without and with REACT" in printed.err
    rows = list(csv.DictReader(out.open()))
    assert [(r["eps"], r["job"]) for r in rows] == [("0.0", "a"), ("0.0", "b"),
                                                    ("1e-09", "a"), ("1e-09", "b")]
    summary = printed.out.split("mean gain")[1]
    assert "a " in summary and "b " in summary


def test_cli_gain_refuses_react_and_a_negative_warmup(tmp_path, capsys):
    toml = lone_ring_toml(tmp_path)
    with pytest.raises(SystemExit):
        sensitivity.main([str(toml), "--gain", "--react", "off"])
    assert "--react does not apply with --gain" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sensitivity.main([str(toml), "--gain", "--warmup", "-1"])
    assert "--warmup -1: expected 0 or more epochs" in capsys.readouterr().err
