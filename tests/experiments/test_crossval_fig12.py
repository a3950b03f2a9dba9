"""experiments/crossval_fig12.py: a quick run on the simulator's two sharing modes."""

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
    module = load("crossval_fig12")
    assert module.main(["--quick", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "crossval_fig12.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["x"], r["p"], r["backend"]) for r in rows] == [("1", "2", "maxmin"),
                                                              ("1", "2", "tcp")]
    # the baseline column is an ordinary run's second batch, REACT off
    doc = load("fig12").scenario(1, 2, 0, epochs=12, message_bytes=2e6)
    times = run_scenario(parse_scenario(doc), react=False)["tree"].times_s()
    assert float(rows[0]["off_us"]) == pytest.approx(np.mean(times[6:12]) * 1e6, abs=0.05)
    for r in rows:
        assert float(r["gain"]) == pytest.approx(float(r["off_us"]) / float(r["on_us"]) - 1,
                                                 abs=1e-3)
