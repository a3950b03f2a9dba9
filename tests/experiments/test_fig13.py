"""Smoke and unit tests of experiments/fig13.py (Fig. 13, ECMP and message sizes)."""

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments import fig13  # noqa: E402


def test_points_cover_the_grid_plus_one_reference_per_size():
    points = fig13.fig13_points([20e6, 1e5], [1, 4], [1, 8], [1, 4, 8], 2, epochs=10, sweep="t")
    # per size: 1 reference + 2 p x 3 connections x 2 x x 2 scenarios = 25 scenarios, 2 runs each
    assert len(points) == 2 * 25 * 2
    refs = [p for p in points if p.params["x"] == 0]
    assert len(refs) == 4 and all(not p.scenario["background"] for p in refs)
    assert {p.scenario["connections"] for p in refs} == {8}
    one = next(p for p in points if p.params == {"size_bytes": 1e5, "p": 4, "x": 8,
                                                  "connections": 1, "scenario": 1})
    assert one.scenario["jobs"][0]["message_bytes"] == 1e5
    assert [b["p"] for b in one.scenario["background"]] == [4] * 8


def test_quick_run_writes_csv_and_plot(tmp_path):
    args = ["--quick", "--out", str(tmp_path), "--store", str(tmp_path / "s.sqlite"),
            "--no-progress"]
    assert fig13.main(args) == 0
    with (tmp_path / "fig13-quick.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["x"], r["connections"]) for r in rows} == {("0", "4"), ("2", "1"), ("2", "4")}
    for r in rows:
        assert float(r["p95_off_s"]) >= float(r["mean_off_s"]) > 0
    assert (tmp_path / "fig13-quick.png").stat().st_size > 10_000
