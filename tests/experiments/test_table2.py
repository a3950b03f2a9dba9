"""Tests of experiments/table2.py (Table 2 analog) against numbers computed independently."""

import csv
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments import table2  # noqa: E402
from react.run.scenario import parse_scenario  # noqa: E402
from react.run.scenario_runs import run_scenario  # noqa: E402


def test_allocation_is_distinct_hosts_and_an_outside_source():
    hosts, src, dst = table2.allocation(2, 8)
    assert len(set(hosts)) == 8 and src not in hosts and dst in hosts
    assert table2.allocation(2, 8) == (hosts, src, dst)
    assert table2.allocation(3, 8) != (hosts, src, dst)


def test_p0_has_no_background_and_all_epochs_count():
    points = table2.table2_points([4], [0, 1], 1, epochs=10, message_bytes=1e6, sweep="t")
    p0 = [p for p in points if p.params["p"] == 0]
    assert p0 and all(not p.scenario["background"] for p in p0)
    assert all(p.warmup_epochs == 0 for p in points)


def _by_hand(doc):
    """Speedups and changes of one allocation, from the public API alone: the scenario run
    without and with REACT, ratios of mean and p95 collective times over all epochs, and the
    number of epochs whose pattern differs from the epoch before."""
    scenario = parse_scenario(doc)
    off = run_scenario(scenario, react=False)
    on = run_scenario(scenario, react=True)
    (job,) = off
    t_off = np.array([r.collective_time_s for r in off[job].results])
    t_on = np.array([r.collective_time_s for r in on[job].results])
    flows = [p.flows for p in on[job].patterns]
    changes = sum(a != b for a, b in zip(flows, flows[1:], strict=False))
    return t_off.mean() / t_on.mean(), np.percentile(t_off, 95) / np.percentile(t_on, 95), changes


def test_quick_table_matches_the_runs_redone_by_hand(tmp_path):
    args = ["--quick", "--out", str(tmp_path), "--store", str(tmp_path / "s.sqlite"),
            "--no-progress"]
    assert table2.main(args) == 0
    with (tmp_path / "table2-quick.csv").open() as fh:
        rows = {(int(r["ranks"]), int(r["p"])): r for r in csv.DictReader(fh)}
    assert sorted(rows) == [(4, 0), (4, 2)]  # --quick: 4 ranks, p = 0 and 2, 1 allocation
    points = table2.table2_points([4], [0, 2], 1, epochs=20, message_bytes=100e6, sweep="t")
    for p in (0, 2):
        doc = next(pt.scenario for pt in points if pt.params["p"] == p)
        mean, p95, changes = _by_hand(doc)
        row = rows[(4, p)]
        assert float(row["speedup_mean"]) == pytest.approx(mean, rel=1e-5)
        assert float(row["speedup_p95"]) == pytest.approx(p95, rel=1e-5)
        assert float(row["changes"]) == changes
        assert float(row["changes_per_5k"]) == pytest.approx(changes * 5000 / 20)


def test_without_congestion_react_changes_nothing_so_the_runs_are_identical():
    # p = 0: no background flow, nothing for REACT to react to on a noise-free simulator.
    points = table2.table2_points([4], [0], 1, epochs=20, message_bytes=100e6, sweep="t")
    mean, p95, changes = _by_hand(points[0].scenario)
    assert (mean, p95, changes) == (1.0, 1.0, 0)


def test_output_name_follows_the_options(tmp_path):
    args = ["--epochs", "3", "--ranks", "4", "--p", "0", "--allocations", "1",
            "--out", str(tmp_path), "--store", str(tmp_path / "s.sqlite"), "--no-progress"]
    assert table2.main(args) == 0
    assert [f.name for f in tmp_path.glob("*.csv")] == ["table2_n4_p0_a1_e3.csv"]


def test_ping_pong_background_sends_1_gb_each_way_in_turn():
    # --background ping_pong: each of the p external flows is a 1 GB ping-pong between the
    # outside host and the congested rank's host; the job still runs and the first transfers
    # alternate direction.
    points = table2.table2_points([4], [2], 1, epochs=4, message_bytes=100e6, sweep="t",
                                  background="ping_pong")
    doc = points[0].scenario
    hosts, src, dst = table2.allocation(0, 4)
    assert doc["background"] == [{"kind": "ping_pong", "src": src, "dst": dst, "p": 2,
                                  "size_bytes": 1e9}]
    from react.run.worlds.sim import build_network
    net = build_network(parse_scenario(doc))
    net.env.run(until=0.5)  # 1 GB at <= 100 Gb/s takes >= 80 ms: several turns
    ends = sorted((r.end_s, r.src, r.dst) for r in net.records if r.tag == "ping_pong")
    assert len(ends) >= 4
    assert {(s, d) for _t, s, d in ends[:2]} == {(src, dst)}
    assert {(s, d) for _t, s, d in ends[2:4]} == {(dst, src)}


def test_controller_settings_reach_every_run_and_the_default_keeps_its_keys():
    # `--react-set`: the job's react entry becomes a table of the settings (a parameter the
    # parsed scenario's controller then has); without settings it stays `true`, so the points,
    # and the stored runs keyed by them, are those recorded before the option existed.
    plain = table2.table2_points([4], [1], 2, epochs=10, message_bytes=1e6, sweep="t")
    assert all(p.scenario["jobs"][0]["react"] is True for p in plain)
    table = {"enabled": True, "unseen_pairs": "links_least"}
    points = table2.table2_points([4], [1], 2, epochs=10, message_bytes=1e6, sweep="t",
                                  react_value=table)
    assert all(p.scenario["jobs"][0]["react"] == table for p in points)
    assert {parse_scenario(p.scenario).jobs[0].controller.unseen_pairs
            for p in points} == {"links_least"}
    assert [p.key for p in points] != [p.key for p in plain]


def test_noise_reaches_both_runs_and_the_default_keeps_its_points():
    # `--noise`: every point (baseline and REACT) observes its flows' times with the noise;
    # without it the points, and the stored runs keyed by them, are those recorded before.
    plain = table2.table2_points([4], [1], 1, epochs=10, message_bytes=1e6, sweep="t")
    assert all("noise_sigma" not in p.scenario.get("sim", {}) for p in plain)
    noisy = table2.table2_points([4], [1], 1, epochs=10, message_bytes=1e6, sweep="t",
                                 noise_sigma=0.02)
    assert [parse_scenario(p.scenario).sim.noise_sigma for p in noisy] == [0.02, 0.02]
    # The same network underneath: the baseline's noisy times scatter around the plain ones.
    quiet = run_scenario(parse_scenario(plain[0].scenario), react=False)
    loud = run_scenario(parse_scenario(noisy[0].scenario), react=False)
    a, b = (np.asarray(next(iter(r.values())).times_s()) for r in (quiet, loud))
    assert not np.array_equal(a, b)
    assert np.all(np.abs(b / a - 1) < 0.3)


def test_noise_out_of_range_is_refused(capsys):
    with pytest.raises(SystemExit):
        table2.main(["--quick", "--noise", "0.5"])
    assert "--noise 0.5" in capsys.readouterr().err
