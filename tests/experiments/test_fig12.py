"""experiments/fig12.py: the scenario draw, and a quick run end to end (PNG, CSV)."""

import csv
import importlib.util
from pathlib import Path

import pytest

from react.run.scenario import parse_scenario


def load(name):
    path = Path(__file__).resolve().parents[2] / "experiments" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"experiment_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fig12 = load("fig12")


@pytest.mark.parametrize("flows", [1, 2, 4, 8])
def test_fig12_congests_distinct_ranks_from_distinct_external_hosts(flows):
    doc = fig12.scenario(flows, 2, seed=3, epochs=5)
    scenario = parse_scenario(doc)
    tree = scenario.job("tree").hosts
    # x pairs, p flows each, into x different ranks, from x different hosts outside the job
    assert len(scenario.background) == flows
    assert {bg.p for bg in scenario.background} == {2}
    assert len({bg.dst for bg in scenario.background}) == flows
    assert {bg.dst for bg in scenario.background} <= set(tree)
    assert len({bg.src for bg in scenario.background}) == flows
    assert not {bg.src for bg in scenario.background} & set(tree)


def test_fig12_draw_is_shared_across_p_and_direction_flips_it():
    # the p bars of one x and seed must congest the same pairs
    one, four = fig12.scenario(2, 1, seed=5, epochs=5), fig12.scenario(2, 4, seed=5, epochs=5)
    pairs = [(b["src"], b["dst"]) for b in one["background"]]
    assert pairs == [(b["src"], b["dst"]) for b in four["background"]]
    out = fig12.scenario(2, 1, seed=5, epochs=5, direction="out")
    assert [(b["dst"], b["src"]) for b in out["background"]] == pairs


def test_fig12_quick_writes_plot_and_csv(tmp_path):
    assert fig12.main(["--quick", "--store", str(tmp_path / "r.sqlite"),
                       "--out-dir", str(tmp_path)]) == 0
    assert (tmp_path / "fig12.png").stat().st_size > 0
    with open(tmp_path / "fig12.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # quick: x in {1, 2}, p = 2, one seed -> one row per x, each from one pair of runs
    assert [(r["x"], r["series"], r["runs"]) for r in rows] == [("1", "2", "1"), ("2", "2", "1")]
    assert all(float(r["mean_algbw_off_gbps"]) > 0 for r in rows)


def test_fig12_react_set_reaches_the_controller(tmp_path):
    # A trial needs an estimated gain of epsilon: at 0.99 nothing qualifies, so REACT changes
    # nothing and every run with it equals its run without (the default gains in both points).
    rows = {}
    for name, extra in (("default", []), ("eps", ["--react-set", "epsilon=0.99"])):
        assert fig12.main(["--quick", "--store", str(tmp_path / f"{name}.sqlite"),
                           "--out-dir", str(tmp_path / name), *extra]) == 0
        with open(tmp_path / name / "fig12.csv", newline="") as f:
            rows[name] = list(csv.DictReader(f))
    assert all(float(r["mean_gain"]) > 0.05 for r in rows["default"])
    assert all(float(r["mean_gain"]) == 0.0 for r in rows["eps"])
    doc = fig12.scenario(1, 2, seed=3, epochs=5, react={"enabled": True,
                                                        "unseen_pairs": "links_least"})
    assert parse_scenario(doc).job("tree").controller.unseen_pairs == "links_least"


def test_fig12_react_set_rejects_an_unknown_parameter(capsys):
    with pytest.raises(SystemExit):
        fig12.main(["--quick", "--react-set", "unseen=links"])
    assert "unknown parameter 'unseen'" in capsys.readouterr().err
