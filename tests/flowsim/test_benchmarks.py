"""The concurrency and what-if benchmarks run, and the shipped what-if scenarios are theirs."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_workload_follows_the_reference_recipe():
    bench = _load("bench_concurrency")
    data = bench.generate(7, flows=30)
    # Flow j of wave w waits for flow j of wave w - 1: with 7 at once, flow 10 waits for 3.
    assert [f[3] for f in data["flows"][:8]] == [-1] * 7 + [0]
    assert data["flows"][10][3] == 3
    for (src, dst, size, _dep), route in zip(data["flows"], data["routes"], strict=True):
        assert 1_000_000 <= size <= 100_000_000 and src != dst
        # up from src, (leaf -> spine -> leaf when the leaves differ), down to dst
        assert route[0] == src and route[-1] == 128 + dst
        assert len(route) == (2 if src // 16 == dst // 16 else 4)


def test_bench_concurrency_quick_run_prints_ratios(capsys):
    bench = _load("bench_concurrency")
    assert bench.main(["--sizes", "5", "--repeat", "1", "--flows", "200", "--check"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith("5 "))
    # the ratio column and the error against the naive baseline (exact: round-off only)
    assert row.split()[5].endswith("x")
    assert float(row.split()[-1]) < 1e-9


def test_simgrid_child_reproduces_the_shipped_simgrid_times(tmp_path):
    # The shipped c100 set carries the completion times SimGrid itself computed (its done
    # column): the benchmark's SimGrid child, replaying the set through the Python bindings,
    # must give them back, or its timings would be of another workload.
    pytest.importorskip("simgrid", reason="SimGrid's Python bindings are not installed "
                        "(optional; benchmarks/bench_concurrency.py says how to build them)",
                        exc_type=ImportError)
    import json
    import subprocess
    import sys

    data = ROOT / "tests" / "data" / "leafspine128_10k_c100.json"
    out = tmp_path / "done.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_concurrency.py"), "--child",
                    "simgrid", str(data), str(out)], check=True, capture_output=True, timeout=300)
    got = json.loads(out.read_text())
    want = json.loads(data.read_text())["done"]
    assert len(got) == len(want) == 10_000
    assert max(abs(a - b) / b for a, b in zip(got, want, strict=True)) < 1e-9


def test_shipped_whatif_scenarios_are_the_generator_output():
    bench = _load("bench_whatif")
    for name, text in bench.scenario_texts().items():
        path = ROOT / "experiments" / "scenarios" / f"{name}.toml"
        header = bench.HEADER.format(path=path.relative_to(ROOT))
        assert path.read_text(encoding="utf-8") == header + text, name


def test_whatif_scenarios_load_with_the_stated_setting():
    from react.run.scenario import load_scenario

    s = load_scenario(ROOT / "experiments" / "scenarios" / "whatif_alibaba_64.toml")
    assert [(j.collective, j.ranks, j.epochs, j.react) for j in s.jobs] == [
        ("allreduce_double_binary_tree", 64, 20, True), ("allreduce_ring", 64, 20, True),
        ("allgather_recursive_doubling", 64, 20, True)]
    assert len(s.topology.hosts) == 720 and len(s.background) == 200
    assert len({h for j in s.jobs for h in j.hosts}) == 3 * 64  # random, disjoint placement
    big = load_scenario(ROOT / "experiments" / "scenarios" / "whatif_fat_tree_512.toml")
    assert len(big.topology.hosts) == 1024 and big.jobs[0].ranks == 512
    assert len(big.background) == 500 and len(big.failures) == 2


@pytest.mark.parametrize("bad", [["--epochs", "0"], ["no_such_scenario"]])
def test_bench_whatif_rejects_bad_arguments(bad):
    with pytest.raises(SystemExit):
        _load("bench_whatif").main(bad)


def _guarded_check(monkeypatch):
    """check_resolves, with what it patches in the engine restored after the test."""
    import flowsim.network as engine

    monkeypatch.setattr(engine.Network, "_resolve_now", engine.Network._resolve_now)
    monkeypatch.setattr(engine, "_CLOSURE_FLOWS", engine._CLOSURE_FLOWS)
    monkeypatch.setattr(engine, "_LIST_FLOWS", engine._LIST_FLOWS)
    return _load("check_resolves"), engine


@pytest.mark.parametrize("flags", [[], ["--closure-everywhere"]])
def test_check_resolves_finds_the_engine_exact(monkeypatch, capsys, flags):
    check, _ = _guarded_check(monkeypatch)
    scenario = str(ROOT / "experiments" / "scenarios" / "two_jobs_star.toml")
    assert check.main([scenario, "--epochs", "3"] + flags) == 0
    out = capsys.readouterr().out
    assert " 0 rates beyond 1e-12" in out and "re-solves" in out


def test_check_resolves_catches_a_wrong_rate(monkeypatch, capsys):
    """Rates 1e-9 too high after every re-solve: the fresh solve must see it."""
    check, engine = _guarded_check(monkeypatch)
    apply = engine.Network._apply_rates

    def skewed(self, now, solve, rates):
        apply(self, now, solve, [r * (1 + 1e-9) for r in rates])

    monkeypatch.setattr(engine.Network, "_apply_rates", skewed)
    scenario = str(ROOT / "experiments" / "scenarios" / "two_jobs_star.toml")
    assert check.main([scenario, "--epochs", "2"]) == 1
    worst = float(capsys.readouterr().out.split("worst relative difference ")[1].split(",")[0])
    assert 0.5e-9 < worst < 5e-9  # skews compound a little through the residual capacities
