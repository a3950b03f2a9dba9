"""experiments/crossval_figs.py: a quick run on the two sharing modes; Fig. 5's points."""

import csv
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from react.run.scenario import parse_scenario
from react.run.scenario_runs import run_scenario


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


def test_reuse_keeps_the_rows_of_a_backend_and_reruns_the_others(tmp_path):
    # Made-up ns-3 rows stand in for the hour of ns-3 runs; --reuse ns3 keeps them verbatim and
    # runs only max-min (an ordinary run's second batch, REACT off).
    module = load("crossval_figs")
    path = tmp_path / "crossval_fig12_bmaxmin,ns3.csv"
    fields = ["x", "p", "seed", "backend", "off_us", "on_us", "gain", "first_batch_us",
              "decision", "wall_s"]
    made_up = [{"x": x, "p": p, "seed": 0, "backend": b, "off_us": 1000 + 10 * x + p,
                "on_us": 900, "gain": 0.1, "first_batch_us": 1, "decision": "kept", "wall_s": 9}
               for x in (1, 2) for p in (1, 2, 4) for b in ("maxmin", "ns3")]
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(made_up)
    argv = ["--figure", "12", "--backends", "maxmin,ns3", "--out", str(tmp_path)]
    assert module.main([*argv, "--reuse", "ns3"]) == 0
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["x"], r["p"], r["backend"]) for r in rows] == [
        (str(x), str(p), b) for x in (1, 2) for p in (1, 2, 4) for b in ("maxmin", "ns3")]
    for r in rows[1::2]:
        assert (r["off_us"], r["decision"]) == (str(1000 + 10 * int(r["x"]) + int(r["p"])), "kept")
    doc = load("fig12").scenario(2, 4, 0, epochs=12, message_bytes=2e6)
    times = run_scenario(parse_scenario(doc), react=False)["tree"].times_s()
    assert float(rows[-2]["off_us"]) == pytest.approx(np.mean(times[6:12]) * 1e6, abs=0.05)
    # no earlier file, or a backend that is not run at all: a clear error
    with pytest.raises(SystemExit, match="no earlier results at"):
        module.main([*argv, "--reuse", "ns3", "--out", str(tmp_path / "empty")])
    with pytest.raises(SystemExit):
        module.main([*argv, "--reuse", "tcp"])
