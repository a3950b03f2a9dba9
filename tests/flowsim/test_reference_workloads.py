"""Replays of the SimGrid reference workloads (tests/data/README_bench.md) through the engine.

The replay itself lives in ``benchmarks/bench_flowsim.py`` (one implementation for the benchmark
and these tests). The c1000 set is well conditioned: every completion time must match SimGrid's
to 1e-9 relative. The c100 set is not: perturbing the capacities by 1e-15 relative moves the
mean flow duration of an exact solver by up to 3e-3 (measured with the naive baseline), because
round-off grows along the 100-wave dependency chains. So the c100 check compares exactly against
the naive baseline's algorithm on the first waves, where round-off has not grown yet, and the
full run's mean duration against SimGrid only within that measured sensitivity.
"""

import importlib.util
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_flowsim",
                                                  ROOT / "benchmarks" / "bench_flowsim.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_c1000_matches_simgrid(bench):
    data = bench.load_workload("leafspine128_10k_c1000.json")
    done, net = bench.replay_flowsim(data)
    assert len(net.records) == 10_000
    assert bench.max_rel_err(done, data["done"]) < 1e-9


def test_reference_c100_first_waves_match_the_naive_baseline(bench):
    # 20 waves of 100 flows: the exact baseline and the engine agree to round-off.
    data = bench.load_workload("leafspine128_10k_c100.json", limit=2000)
    done, _net = bench.replay_flowsim(data)
    assert bench.max_rel_err(done, bench.replay_naive(data)) < 1e-9


@pytest.mark.slow
def test_reference_c100_mean_duration_close_to_simgrid(bench):
    data = bench.load_workload("leafspine128_10k_c100.json")
    done, _net = bench.replay_flowsim(data)
    ours = bench.mean_duration(data, done)
    simgrid = bench.mean_duration(data, data["done"])
    assert math.isclose(ours, simgrid, rel_tol=5e-3)


def test_bench_main_quick_runs(bench, capsys):
    assert bench.main(["--quick", "300", "--no-memory", "--workloads", "c100",
                       "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "best of 2 alternating runs" in out
    row = next(line for line in out.splitlines() if line.startswith("c100"))
    ratio, pairs = row.split()[4:6]
    low, high = (float(x) for x in pairs.rstrip("x").split("-"))
    # The best-time ratio lies within the spread of the individual runs' ratios (min naive /
    # min flowsim is at most the ratio of flowsim's best run, at least that of naive's best).
    assert low <= float(ratio.rstrip("x")) <= high
    # The closed-loop section runs both re-solve paths; their completion times must be equal.
    assert out.count("completion times identical") == 3


def test_bench_rejects_a_bad_repeat(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--repeat", "0"])
    assert "--repeat 0: expected at least 1 run" in capsys.readouterr().err
