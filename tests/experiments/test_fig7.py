"""experiments/fig7.py: network-only sharing on the Alibaba fabric; a quick run end to end."""

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


fig7 = load("fig7")


@pytest.mark.parametrize("case", list(fig7.CASES))
def test_fig7_jobs_share_racks_but_no_server(case):
    scenario = parse_scenario(fig7.scenario(case, seed=4, epochs=5))
    job1, job2 = scenario.jobs
    assert (job1.collective, job2.collective) == fig7.CASES[case]
    assert not set(job1.hosts) & set(job2.hosts)
    rack = {h: scenario.topology.links[scenario.topology.out_links(h)[0]].dst
            for h in job1.hosts + job2.hosts}
    racks1 = [rack[h] for h in job1.hosts]
    racks2 = [rack[h] for h in job2.hosts]
    # 4 racks, 2 servers of each job in each
    assert set(racks1) == set(racks2) and len(set(racks1)) == 4
    assert all(racks1.count(r) == 2 and racks2.count(r) == 2 for r in racks1)
    # REACT on job 1 only when run "as the scenario says"
    assert (job1.react, job2.react) == (True, False)


def test_fig7_quick_writes_plot_and_csv(tmp_path):
    assert fig7.main(["--quick", "--store", str(tmp_path / "r.sqlite"),
                      "--out-dir", str(tmp_path)]) == 0
    assert (tmp_path / "fig7-quick.png").stat().st_size > 0
    with open(tmp_path / "fig7-quick.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # both jobs, REACT on job 1 only ("scenario") and on both ("on"), against one baseline
    assert sorted((r["job"], r["react"]) for r in rows) == [
        ("job1", "on"), ("job1", "scenario"), ("job2", "on"), ("job2", "scenario")]


def test_fig7_controller_settings_apply_to_both_jobs_and_keep_job_2_off():
    assert [j["react"] for j in fig7.scenario("a: ring + ring", 0, epochs=5)["jobs"]] == [True,
                                                                                         False]
    doc = fig7.scenario("a: ring + ring", 0, epochs=5, settings={"unseen_pairs": "links_least"})
    jobs = parse_scenario(doc).jobs
    assert [j.react for j in jobs] == [True, False]
    assert [j.controller.unseen_pairs for j in jobs] == ["links_least", "links_least"]
