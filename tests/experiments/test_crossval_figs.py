"""experiments/crossval_figs.py: a quick run on the two sharing modes; Fig. 5's points."""

import csv
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from react.scenario import parse_scenario, run_scenario


def load(name):
    path = Path(__file__).resolve().parents[2] / "experiments" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"experiment_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_crossval_fig12_quick_writes_both_modes(tmp_path):
    module = load("crossval_figs")
    assert module.main(["--quick", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "crossval_fig12.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["x"], r["p"], r["seed"], r["backend"]) for r in rows] == [("1", "2", "0", "maxmin"),
                                                                         ("1", "2", "0", "tcp")]
    # the baseline column is an ordinary run's second batch, REACT off
    doc = load("fig12").scenario(1, 2, 0, epochs=12, message_bytes=2e6)
    times = run_scenario(parse_scenario(doc), react=False)["tree"].times_s()
    assert float(rows[0]["off_us"]) == pytest.approx(np.mean(times[6:12]) * 1e6, abs=0.05)
    for r in rows:
        assert float(r["gain"]) == pytest.approx(float(r["off_us"]) / float(r["on_us"]) - 1,
                                                 abs=1e-3)


def test_fig5_points_congest_ranks_of_the_spread_placement():
    module = load("crossval_figs")
    pts = module.points(5, 1, 2e6)
    assert [(p["x"], p["p"]) for p, _ in pts] == [(1, 2), (2, 2)]
    for params, doc in pts:
        scenario = parse_scenario(doc)
        ranks = set(scenario.jobs[0].hosts)
        assert len(scenario.background) == params["x"]
        assert all(bg.dst in ranks and bg.src not in ranks and bg.p == 2
                   for bg in scenario.background)
