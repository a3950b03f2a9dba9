"""experiments/fig8.py: failed links lie on the job's paths; a quick run end to end."""

import csv
import importlib.util
from pathlib import Path

from flowsim.routing import Router
from flowsim.topologies import fat_tree
from react.run.scenario import parse_scenario


def load(name):
    path = Path(__file__).resolve().parents[2] / "experiments" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"experiment_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fig8 = load("fig8")


def test_fig8_candidates_are_links_of_the_jobs_ecmp_paths():
    topo = fat_tree(8)
    candidates = set(fig8.candidate_links(seed=0))
    router = Router(topo, seed=0)
    hosts = fig8.rank_hosts()
    # h0 -> h16 on port 2: every link of that path is a candidate
    for link_id in router.route(hosts[0], hosts[1], 2):
        link = topo.links[link_id]
        assert f"{link.src}->{link.dst}" in candidates
    # a host outside the job never appears
    assert not any(c.startswith("h1->") or c.endswith("->h1") for c in candidates)
    # one rank per pod: its host link both ways, at least, for each of the 8 ranks
    for h in hosts:
        assert sum(c.startswith(f"{h}->") for c in candidates) == 1


def test_fig8_same_links_fail_at_every_capacity():
    docs = [fig8.scenario(3, c, seed=2, epochs=5) for c in (30, 50, 80)]
    links = [[f["link"] for f in d["failures"]] for d in docs]
    assert links[0] == links[1] == links[2] and len(set(links[0])) == 3
    assert [d["failures"][0]["capacity_bps"] for d in docs] == [30e9, 50e9, 80e9]
    assert set(links[0]) <= set(fig8.candidate_links(seed=2))
    scenario = parse_scenario(docs[0])
    assert len(scenario.failures) == 3 and scenario.job("tree").connections == 4


def test_fig8_quick_writes_plot_and_csv(tmp_path):
    assert fig8.main(["--quick", "--store", str(tmp_path / "r.sqlite"),
                      "--out-dir", str(tmp_path)]) == 0
    assert (tmp_path / "fig8-quick.png").stat().st_size > 0
    with open(tmp_path / "fig8-quick.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["x"], r["series"]) for r in rows] == [("1", "30"), ("2", "30")]
