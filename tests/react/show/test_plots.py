"""react.show.plots and `react plot`: pairing runs, per-grid-value gains, PNG and CSV from a
store."""

import csv

import pytest

from react.cli import main as react_main
from react.run.store import ResultStore, RunRecord
from react.run.sweep import expand, parse_spec, scenario_points
from react.show.plots import aggregate, improvement_rows


def run(pair, react, params, metrics, status="ok", seed=0):
    return RunRecord(f"{pair}-{react}", pair, "s", params, {}, seed, react, status,
                     None if status == "ok" else "boom", metrics if status == "ok" else None,
                     "test", "t0", "t1", 0.1)


def algbw(**jobs):
    return {job: {"mean_algbw_gbps": value} for job, value in jobs.items()}


RUNS = [
    # x=1: gains +25% (10 -> 12.5) and +5% (20 -> 21); x=2: +100% (5 -> 10)
    run("a", "off", {"x": 1, "p": 2}, algbw(tree=10.0)),
    run("a", "on", {"x": 1, "p": 2}, algbw(tree=12.5)),
    run("b", "off", {"x": 1, "p": 2}, algbw(tree=20.0), seed=1),
    run("b", "on", {"x": 1, "p": 2}, algbw(tree=21.0), seed=1),
    run("c", "off", {"x": 2, "p": 2}, algbw(tree=5.0)),
    run("c", "on", {"x": 2, "p": 2}, algbw(tree=10.0)),
    # a failed REACT run and a lone baseline make no row
    run("d", "off", {"x": 2, "p": 2}, algbw(tree=5.0), seed=1),
    run("d", "on", {"x": 2, "p": 2}, None, status="failed", seed=1),
    run("e", "off", {"x": 4, "p": 2}, algbw(tree=5.0)),
]


def test_improvement_rows_pair_runs_and_skip_incomplete_pairs():
    rows = improvement_rows(RUNS)
    assert sorted((r.params["x"], r.seed) for r in rows) == [(1, 0), (1, 1), (2, 0)]
    assert sorted(r.gain for r in rows) == pytest.approx([0.05, 0.25, 1.0])


def test_aggregate_mean_min_max_per_grid_value():
    table = aggregate(improvement_rows(RUNS), x="x", series="p")
    assert [(r["x"], r["series"], r["runs"]) for r in table] == [(1, 2, 2), (2, 2, 1)]
    assert table[0]["mean_gain"] == pytest.approx(0.15)  # (0.25 + 0.05) / 2
    assert (table[0]["min_gain"], table[0]["max_gain"]) == pytest.approx((0.05, 0.25))
    assert table[0]["mean_algbw_off_gbps"] == pytest.approx(15.0)


def test_each_react_mode_and_job_is_its_own_row():
    # two jobs; REACT on job 1 only ("scenario") and on both ("on") against one baseline
    runs = [run("p", "off", {"case": "a"}, algbw(job1=10.0, job2=10.0)),
            run("p", "scenario", {"case": "a"}, algbw(job1=13.0, job2=11.0)),
            run("p", "on", {"case": "a"}, algbw(job1=12.0, job2=9.0))]
    table = aggregate(improvement_rows(runs), x="case")
    gains = {(r["job"], r["react"]): r["mean_gain"] for r in table}
    assert gains == pytest.approx({("job1", "scenario"): 0.3, ("job2", "scenario"): 0.1,
                                   ("job1", "on"): 0.2, ("job2", "on"): -0.1})


def test_scenario_points_key_like_expand(tmp_path):
    # a generated scenario and the same scenario reached through a spec get the same keys
    base = tmp_path / "base.toml"
    base.write_text('seed = 3\nconnections = 1\n[topology]\nname = "star"\nn = 4\n'
                    '[[jobs]]\nname = "t"\ncollective = "allreduce_ring"\nranks = 2\n'
                    'message_bytes = 1e6\nepochs = 2\n')
    spec = parse_spec({"base": "base.toml", "seeds": [3]}, spec_dir=tmp_path, default_name="s")
    from_spec = expand(spec)
    generated = scenario_points("s", [({"x": 1}, dict(spec.base_data))], warmup_epochs=25,
                                base_dir=tmp_path)
    assert [p.key for p in generated] == [p.key for p in from_spec]
    assert [p.react for p in generated] == ["off", "on"] and generated[0].params == {"x": 1}


def test_react_plot_writes_png_and_csv(tmp_path, capsys):
    store = tmp_path / "r.sqlite"
    with ResultStore(store) as db:
        for r in RUNS:
            db.record(r)
    png, table = tmp_path / "f.png", tmp_path / "f.csv"
    assert react_main(["plot", "--store", str(store), "--out", str(png), "--csv",
                       str(table)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(table, newline="") as f:
        rows = list(csv.DictReader(f))
    # default axes: x = first grid key, series = second
    assert [(r["x"], r["series"], r["runs"]) for r in rows] == [("1", "2", "2"), ("2", "2", "1")]
    assert float(rows[1]["mean_gain"]) == pytest.approx(1.0)
    assert "+15.0%" in capsys.readouterr().out


def test_react_plot_refuses_a_store_without_pairs(tmp_path, capsys):
    store = tmp_path / "r.sqlite"
    with ResultStore(store) as db:
        db.record(RUNS[-1])  # a baseline alone
    assert react_main(["plot", "--store", str(store), "--out", str(tmp_path / "f.png")]) == 2
    assert "no finished pair" in capsys.readouterr().err
    assert not (tmp_path / "f.png").exists()
