"""experiments/draws.py and the figures' --draws: the same scenarios on other trajectories."""

import argparse
import csv

import pytest

from experiments import fig6, fig7
from experiments.draws import DRAW_EPS, add_draws_argument, drawn, with_draws


def test_draw_k_grows_every_message_by_k_eps_and_leaves_the_rest():
    doc = fig7.scenario("a: ring + ring", 0, epochs=5)
    same = drawn(doc, 0)
    assert same == doc and same is not doc and same["jobs"][0] is not doc["jobs"][0]
    two = drawn(doc, 2)
    assert [j["message_bytes"] for j in two["jobs"]] == [20e6 * (1 + 2e-9)] * 2
    assert DRAW_EPS == 1e-9
    assert {k: v for k, v in two.items() if k != "jobs"} == {
        k: v for k, v in doc.items() if k != "jobs"}
    assert [j["placement"] for j in two["jobs"]] == [j["placement"] for j in doc["jobs"]]
    assert doc["jobs"][0]["message_bytes"] == 20e6  # the original is untouched


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1"])
def test_a_bad_draw_is_named(bad):
    with pytest.raises(ValueError, match="draw must be a non-negative integer"):
        drawn(fig7.scenario("a: ring + ring", 0, epochs=5), bad)


def test_one_draw_keeps_the_cases_and_more_label_seed_and_draw():
    cases = [({"case": "x"}, fig7.scenario("a: ring + ring", s, epochs=5)) for s in (4, 7)]
    assert with_draws(cases, 1) is cases
    three = with_draws(cases, 3)
    assert [p for p, _ in three] == [{"case": "x", "seed": s, "draw": k}
                                     for s in (4, 7) for k in range(3)]
    assert [d["jobs"][1]["message_bytes"] for _, d in three[:3]] == [
        20e6, 20e6 * (1 + 1e-9), 20e6 * (1 + 2e-9)]


@pytest.mark.parametrize("text", ["0", "101", "two"])
def test_draws_argument_refuses(text, capsys):
    parser = argparse.ArgumentParser(prog="x")
    add_draws_argument(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--draws", text])
    assert "--draws" in capsys.readouterr().err


@pytest.mark.parametrize("module,stem", [(fig7, "fig7-quick"), (fig6, "fig6-quick")])
def test_quick_run_with_draws_writes_the_per_seed_table(tmp_path, module, stem):
    assert module.main(["--quick", "--draws", "2", "--store", str(tmp_path / "r.sqlite"),
                        "--out-dir", str(tmp_path)]) == 0
    with open(tmp_path / f"{stem}_seeds.csv", newline="") as f:
        seeds = list(csv.DictReader(f))
    with open(tmp_path / f"{stem}.csv", newline="") as f:
        figure = list(csv.DictReader(f))
    assert seeds and len(seeds) == len(figure)  # one seed in a quick run
    for row in seeds:
        assert row["series"] == "0" and row["runs"] == "2"
    # the draws are different trajectories: two jobs sharing links do not repeat a run
    assert any(r["min_gain"] != r["max_gain"] for r in seeds)


def test_one_draw_writes_no_per_seed_table(tmp_path):
    assert fig6.main(["--quick", "--store", str(tmp_path / "r.sqlite"),
                      "--out-dir", str(tmp_path)]) == 0
    assert not (tmp_path / "fig6-quick_seeds.csv").exists()
