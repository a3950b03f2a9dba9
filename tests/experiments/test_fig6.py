"""experiments/fig6.py: two jobs share exactly the drawn servers; a quick run end to end."""

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


fig6 = load("fig6")


@pytest.mark.parametrize("overlap", [1, 2, 3, 4])
def test_fig6_jobs_share_exactly_overlap_servers(overlap):
    scenario = parse_scenario(fig6.scenario(overlap, seed=1, epochs=5))
    tree, ring = scenario.job("tree"), scenario.job("ring")
    assert tree.collective == "allreduce_double_binary_tree" and ring.collective == "allreduce_ring"
    assert len(set(tree.hosts) & set(ring.hosts)) == overlap
    assert len(set(ring.hosts)) == 8 and not scenario.background


def test_fig6_seeds_draw_different_shared_servers():
    draws = {tuple(fig6.scenario(2, seed=s, epochs=5)["jobs"][1]["placement"])
             for s in range(5)}
    assert len(draws) > 1


def test_fig6_quick_writes_plot_and_csv(tmp_path):
    assert fig6.main(["--quick", "--store", str(tmp_path / "r.sqlite"),
                      "--out-dir", str(tmp_path)]) == 0
    assert (tmp_path / "fig6-quick.png").stat().st_size > 0
    with open(tmp_path / "fig6-quick.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # one row per job for the single overlap value of the quick run
    assert sorted((r["job"], r["x"], r["react"]) for r in rows) == [
        ("ring", "2", "on"), ("tree", "2", "on")]


@pytest.mark.parametrize("react_on", ["tree", "ring"])
def test_fig6_react_on_one_job_leaves_the_other_without_a_controller(react_on):
    scenario = parse_scenario(fig6.scenario(2, seed=1, epochs=5, react_on=react_on))
    assert {job.name: job.react for job in scenario.jobs} == {
        "tree": react_on == "tree", "ring": react_on == "ring"}


def test_fig6_react_on_tree_quick_run_compares_against_the_same_baseline(tmp_path):
    assert fig6.main(["--quick", "--react-on", "tree", "--store", str(tmp_path / "r.sqlite"),
                      "--out-dir", str(tmp_path)]) == 0
    with open(tmp_path / "fig6-quick.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["job"], r["react"]) for r in rows) == [("ring", "scenario"),
                                                            ("tree", "scenario")]
    with pytest.raises(SystemExit):
        fig6.main(["--quick", "--react-on", "neither"])


@pytest.mark.parametrize("react_on, enabled", [("both", [True, True]), ("tree", [True, False]),
                                               ("ring", [False, True])])
def test_fig6_controller_settings_apply_to_both_jobs(react_on, enabled):
    plain = fig6.scenario(2, 0, epochs=5, react_on=react_on)
    assert [j["react"] for j in plain["jobs"]] == enabled
    doc = fig6.scenario(2, 0, epochs=5, react_on=react_on, settings={"epsilon": 0.2})
    jobs = parse_scenario(doc).jobs
    assert [j.react for j in jobs] == enabled
    assert [j.controller.epsilon for j in jobs] == [0.2, 0.2]


def test_fig6_load_counts_the_ring_bytes_through_a_shared_server():
    """A ring AllReduce of M over n ranks moves 2 (n - 1) / n x M into and out of every rank
    per epoch (8 ranks, 20 MB: 35 MB), whatever REACT does to the ring's ranks."""
    from experiments.fig6_load import shared_load

    rows = shared_load(1, 3, react_on="ring", epochs=8, warmup=2)
    assert [(r["react"], r["job"]) for r in rows] == [
        (False, "tree"), (False, "ring"), (True, "tree"), (True, "ring")]
    for r in rows:
        assert len(r["shared"]) == 1
        if r["job"] == "ring":
            assert r["in_mb_per_epoch"] == pytest.approx(35.0)
            assert r["out_mb_per_epoch"] == pytest.approx(35.0)
    assert rows[0]["changes"] == rows[1]["changes"] == rows[2]["changes"] == 0


def test_fig6_load_refuses_too_few_epochs(capsys):
    from experiments.fig6_load import main

    with pytest.raises(SystemExit):
        main(["--epochs", "10"])
    assert "--epochs 10" in capsys.readouterr().err


def test_fig6_load_eps_grows_the_messages():
    """--eps 0.01: the ring moves 1.01 x 35 MB into and out of every rank per epoch."""
    from experiments.fig6_load import shared_load

    rows = shared_load(1, 3, react_on="ring", epochs=4, warmup=1, eps=0.01)
    for r in rows:
        if r["job"] == "ring":
            assert r["in_mb_per_epoch"] == pytest.approx(35.35)


def test_fig6_load_refuses_a_bad_eps(capsys):
    from experiments.fig6_load import main

    with pytest.raises(SystemExit):
        main(["--eps", "0.7"])
    assert "--eps 0.7: expected a relative change between -0.5 and 0.5" in capsys.readouterr().err
