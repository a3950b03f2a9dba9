"""Tests of experiments/fig5.py (Fig. 5) and experiments/oracle.py, against runs redone by hand."""

import csv
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments import fig5, oracle  # noqa: E402
from react.model.transforms import ChunkLocalSwap, GlobalSwap, PositionSwap  # noqa: E402
from react.model.verify import verify  # noqa: E402
from react.patterns import allreduce_double_binary_tree  # noqa: E402
from react.run.driver import run_jobs  # noqa: E402
from react.run.scenario import parse_scenario  # noqa: E402
from react.run.scenario_runs import open_jobs, run_scenario  # noqa: E402

HOSTS = fig5.spread_hosts()
ALL = [f"h{i}" for i in range(128)]


def test_spread_hosts_one_rank_per_pod_of_k8_fat_tree():
    # 128 hosts, 16 per pod: ranks on h0, h16, .., h112
    assert HOSTS == [f"h{16 * i}" for i in range(8)]


def test_congested_pairs_all_ranks_distinct_at_x8():
    pairs = fig5.congested_pairs(3, 8, HOSTS, ALL)
    assert sorted(d for _, d in pairs) == sorted(HOSTS)  # every rank congested once
    sources = [s for s, _ in pairs]
    assert len(set(sources)) == 8 and not set(sources) & set(HOSTS)


def test_congested_pairs_depend_on_seed_and_x_only_and_out_reverses():
    a = fig5.congested_pairs(5, 2, HOSTS, ALL, "in")
    assert fig5.congested_pairs(5, 2, HOSTS, ALL, "in") == a
    assert fig5.congested_pairs(5, 2, HOSTS, ALL, "out") == [(d, s) for s, d in a]
    assert fig5.congested_pairs(6, 2, HOSTS, ALL) != a


def test_congested_pairs_rejects_bad_x_and_direction():
    with pytest.raises(ValueError, match="x must be in 1..8, got 9"):
        fig5.congested_pairs(0, 9, HOSTS, ALL)
    with pytest.raises(ValueError, match="direction"):
        fig5.congested_pairs(0, 1, HOSTS, ALL, "sideways")


def test_on_and_off_points_share_a_pair_key():
    points = fig5.fig5_points(["tree"], [1], [2], 2, epochs=10, direction="in", sweep="t")
    assert [p.react for p in points] == ["off", "on", "off", "on"]
    assert points[0].pair_key == points[1].pair_key != points[2].pair_key
    assert len({p.key for p in points}) == 4


def _mean_algbw_gbps(run, warmup):
    return float(np.mean([r.algorithm_bandwidth_bps for r in run.results[warmup:]])) / 1e9


def test_quick_csv_matches_the_runs_redone_by_hand_and_resumes(tmp_path, capsys):
    args = ["--quick", "--out", str(tmp_path), "--store", str(tmp_path / "s.sqlite"),
            "--no-progress"]
    assert fig5.main(args) == 0
    with (tmp_path / "fig5-quick.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    # --quick: the tree, x = 1 and 4, p = 2, scenario 0, 13 epochs, 6 of warm-up
    assert [(r["collective"], r["x"], r["p"], r["scenario"]) for r in rows] == [
        ("tree", "1", "2", "0"), ("tree", "4", "2", "0")]
    for r in rows:
        pairs = fig5.congested_pairs(0, int(r["x"]), HOSTS, ALL)
        scenario = parse_scenario(fig5.scenario_doc("tree", pairs, 2, seed=0, hosts=HOSTS,
                                                    epochs=13))
        off = run_scenario(scenario, react=False)["job"]
        on = run_scenario(scenario, react=True)["job"]
        assert float(r["algbw_off_gbps"]) == pytest.approx(_mean_algbw_gbps(off, 6), rel=1e-5)
        assert float(r["algbw_on_gbps"]) == pytest.approx(_mean_algbw_gbps(on, 6), rel=1e-5)
    assert (tmp_path / "fig5-quick.png").stat().st_size > 10_000
    capsys.readouterr()
    assert fig5.main(args) == 0  # everything is in the store: nothing runs again
    assert "4 runs (0 run now)" in capsys.readouterr().out


_SWAP = re.compile(r"(global|chunk-local|position) swap (\d+)<->(\d+)"
                   r"(?: in chunk graph (\d+))?(?:, steps (\d+)\.\.(\d+))?")


def _swaps_from_text(text):
    """The swaps of the oracle's description, rebuilt from the text alone."""
    if text == "(initial pattern)":
        return []
    out = []
    for part in text.split(" + "):
        kind, x, y, g, a, b = _SWAP.fullmatch(part.replace(" (all chunk graphs)", "")).groups()
        if kind == "global":
            out.append(GlobalSwap(int(x), int(y)))
        elif kind == "chunk-local":
            out.append(ChunkLocalSwap(int(g), int(x), int(y)))
        else:
            out.append(PositionSwap(int(g), int(x), int(y), int(a), int(b)))
    return out


def test_oracle_row_is_what_its_swaps_give_when_run_by_hand(tmp_path):
    # The row claims: the baseline, REACT and the oracle's pattern (the swaps it names, applied
    # to the initial tree) have these bandwidths. Redo each run through the public API.
    assert oracle.main(["--quick", "--out", str(tmp_path)]) == 0
    with (tmp_path / "fig5_oracle_quick.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert (row["collective"], row["x"], row["p"], row["scenario"]) == ("tree", "1", "2", "0")
    pairs = fig5.congested_pairs(0, 1, HOSTS, ALL)
    scenario = parse_scenario(fig5.scenario_doc("tree", pairs, 2, seed=0, hosts=HOSTS,
                                                epochs=13))
    warmup = 6  # --quick
    base = run_scenario(scenario, react=False)["job"]
    react = run_scenario(scenario, react=True)["job"]
    assert float(row["algbw_base_gbps"]) == pytest.approx(_mean_algbw_gbps(base, warmup), rel=1e-5)
    assert float(row["algbw_react_gbps"]) == pytest.approx(_mean_algbw_gbps(react, warmup),
                                                           rel=1e-5)
    pattern = allreduce_double_binary_tree(8)
    for swap in _swaps_from_text(row["oracle_swaps"]):
        pattern = swap.apply(pattern)
    verify(pattern)
    with open_jobs(scenario, react=False) as jobs:
        jobs[0].pattern = pattern
        fixed = run_jobs(jobs)["job"]
    assert float(row["algbw_oracle_gbps"]) == pytest.approx(_mean_algbw_gbps(fixed, warmup),
                                                            rel=1e-5)


def test_oracle_output_name_follows_the_options():
    parse = lambda argv: oracle.output_name(  # noqa: E731
        type("A", (), {"quick": False, "collectives": ["tree"], "ps": [2], "xs": [1, 2, 4, 8],
                       "scenarios": 10, "epochs": 100, "beam": 8, "depth": 3, "confirm": 4,
                       "baseline_only": False, **argv})())
    assert parse({}) == "fig5_oracle"
    assert parse({"baseline_only": True}) == "fig5_oracle_baseline_only"
    assert parse({"collectives": ["tree", "rd"], "ps": [1, 2, 4]}) == "fig5_oracle_ctree-rd_p1-2-4"
    assert parse({"scenarios": 3}) == "fig5_oracle_s3"


def test_beam_search_keeps_the_start_and_sorts_by_estimate():
    # A model from two epochs of the job alone on the fabric; one swap deep, two wide.
    scenario = fig5.scenario_doc("tree", [], 0, seed=0, hosts=HOSTS, epochs=2)
    run = oracle.run_fixed(parse_scenario(scenario))
    start = allreduce_double_binary_tree(8)
    history = oracle.FctHistory(60)
    history.add(start, run.results)
    ranked = oracle.beam_search(history.model(), start, 20e6, beam=2, depth=1)
    estimates = [t[0] for t in ranked]
    assert estimates == sorted(estimates)
    assert any(t[1].flows == start.flows and t[2] == () for t in ranked)
    assert len({t[1].flows for t in ranked}) == len(ranked) > 1


def test_random_placement_draws_distinct_hosts_per_scenario():
    a = fig5.random_hosts(0)
    assert len(set(a)) == 8 and set(a) <= set(ALL)
    assert fig5.random_hosts(0) == a != fig5.random_hosts(1)
    points = fig5.fig5_points(["rd"], [2], [1], 2, epochs=10, direction="in", sweep="t",
                              placement="random")
    assert points[0].scenario["jobs"][0]["placement"] == a
    assert points[0].params["placement"] == "random"


def test_controller_settings_reach_every_on_run_and_the_default_keeps_its_keys():
    plain = fig5.fig5_points(["tree"], [1], [2], 2, epochs=10, direction="in", sweep="t")
    assert all(p.scenario["jobs"][0]["react"] is True for p in plain)
    table = {"enabled": True, "unseen_pairs": "links_least"}
    points = fig5.fig5_points(["tree"], [1], [2], 2, epochs=10, direction="in", sweep="t",
                              react_value=table)
    assert all(p.scenario["jobs"][0]["react"] == table for p in points)
    assert {parse_scenario(p.scenario).jobs[0].controller.unseen_pairs
            for p in points} == {"links_least"}
