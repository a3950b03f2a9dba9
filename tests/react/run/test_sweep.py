"""Sweeps: spec validation, grid expansion, resumable execution (with a real kill), Dask.

Most tests swap the simulator for a fake runner (the spec's documented ``runner`` key), written
below into a module in the test's folder: it returns made-up metrics at once, fails when a job's
``message_bytes`` is 666, kills its own process at 777, blocks while ``message_bytes >= 1000``
until a gate file exists (``FAKE_GATE``), and appends the key of every run it finishes to
``FAKE_LOG``. That keeps the store, executor and resume logic under test without simulating.
"""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from react.cli import main
from react.model.errors import ReactError
from react.run.store import ResultStore
from react.run.sweep import (
    SweepError,
    execute,
    expand,
    load_spec,
    run_point,
)

BASE = """\
name = "mini"
seed = 0
connections = 1

[topology]
name = "star"
n = 5

[[jobs]]
name = "ring"
collective = "allreduce_ring"
ranks = 4
message_bytes = 2e5
epochs = 12
react = { batch_epochs = 2 }

[[background]]
kind = "long_lived"
src = "h4"
dst = "ring:1"
p = 2
"""

FAKE = '''\
import os, time

def run(point):
    job = point.scenario["jobs"][0]
    size = job["message_bytes"]
    if size == 666:
        raise ValueError(f"fake failure at message_bytes={size}")
    if size == 777:
        os._exit(3)  # a worker dying (out of memory, a crash in C code)
    gate = os.environ.get("FAKE_GATE")
    if gate and size >= 1000:
        while not os.path.exists(gate):
            time.sleep(0.02)
    log = os.environ.get("FAKE_LOG")
    if log:
        with open(log, "a") as f:
            f.write(point.key + "\\n")
    gain = 1.1 if point.react == "on" else 1.0
    return {"ring": {"mean_algbw_gbps": gain * size / 100, "mean_time_s": 1e-3,
                     "p95_time_s": 2e-3, "decisions": 0, "pattern_changes": 0,
                     "settled_epoch": 0}}
'''


@pytest.fixture
def sweep_dir(tmp_path, monkeypatch):
    """A folder with the base scenario and the fake runner module, importable by workers."""
    (tmp_path / "base.toml").write_text(BASE)
    (tmp_path / "sweep_fake.py").write_text(FAKE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "log.txt"))
    monkeypatch.delenv("FAKE_GATE", raising=False)
    return tmp_path


def write_spec(folder, body, name="spec.toml", runner="sweep_fake:run"):
    head = f'base = "base.toml"\nrunner = "{runner}"\n' if runner else 'base = "base.toml"\n'
    path = folder / name
    path.write_text(head + textwrap.dedent(body))
    return path


def log_lines(folder, name="log.txt"):
    path = folder / name
    return path.read_text().split() if path.exists() else []


# -- spec and grid ---------------------------------------------------------------------------------
def test_expand_orders_grid_then_seed_then_react_and_pairs_runs(sweep_dir):
    spec = load_spec(write_spec(sweep_dir, """\
        seeds = [3, 4]
        [grid]
        "jobs.0.message_bytes" = [1e5, 2e5]
        "background.0.p" = [1, 2, 3]
    """))
    points = expand(spec)
    assert len(points) == 2 * 3 * 2 * 2
    # the first key varies slowest, then the second, then the seed, then off before on
    first = [(p.params["jobs.0.message_bytes"], p.params["background.0.p"], p.seed, p.react)
             for p in points[:6]]
    assert first == [(1e5, 1, 3, "off"), (1e5, 1, 3, "on"), (1e5, 1, 4, "off"),
                     (1e5, 1, 4, "on"), (1e5, 2, 3, "off"), (1e5, 2, 3, "on")]
    assert len({p.key for p in points}) == len(points)
    for off, on in zip(points[::2], points[1::2], strict=True):
        assert off.pair_key == on.pair_key and off.scenario == on.scenario
    assert len({p.pair_key for p in points}) == len(points) // 2
    point = points[-1]
    assert point.scenario["jobs"][0]["message_bytes"] == 2e5
    assert point.scenario["background"][0]["p"] == 3
    assert point.scenario["seed"] == 4
    assert spec.base_data["background"][0]["p"] == 2  # the base document is not modified


def test_point_keys_are_stable_and_follow_the_scenario(sweep_dir):
    body = '[grid]\n"jobs.0.epochs" = [10, 12]\n'
    keys = [p.key for p in expand(load_spec(write_spec(sweep_dir, body)))]
    again = [p.key for p in expand(load_spec(write_spec(sweep_dir, body, name="other.toml")))]
    assert keys == again  # the same scenarios, whatever the spec file is called
    changed = [p.key for p in expand(load_spec(write_spec(
        sweep_dir, '[grid]\n"jobs.0.epochs" = [10, 13]\n')))]
    assert changed[:2] == keys[:2] and set(changed[2:]).isdisjoint(keys)


def test_grid_keys_may_be_written_without_quotes(sweep_dir):
    quoted = expand(load_spec(write_spec(sweep_dir, '[grid]\n"background.0.p" = [1, 3]\n')))
    bare = expand(load_spec(write_spec(sweep_dir, "[grid]\nbackground.0.p = [1, 3]\n")))
    assert [p.key for p in quoted] == [p.key for p in bare]


def test_spec_without_grid_or_seeds_runs_the_base_once_each_way(sweep_dir):
    points = expand(load_spec(write_spec(sweep_dir, 'react = "on"\n')))
    assert [(p.seed, p.react, dict(p.params)) for p in points] == [(0, "on", {})]


def test_react_scenario_mode_runs_each_point_once_as_the_file_says(sweep_dir):
    spec = load_spec(write_spec(sweep_dir, 'react = "scenario"\nwarmup_epochs = 0\n',
                                runner=None))
    (point,) = expand(spec)
    assert point.react == "scenario"
    metrics = run_point(point)["ring"]
    assert metrics["react"] and metrics["decisions"] >= 1  # the base job has react = {...}
    both = expand(load_spec(write_spec(sweep_dir, "warmup_epochs = 0\n", runner=None,
                                       name="both.toml")))
    assert point.key not in {p.key for p in both}


@pytest.mark.parametrize(("body", "words"), [
    ("colour = 1\n", "unknown key 'colour'"),
    ('[grid]\n"jobs.0.mesage_bytes" = [1e5]\n', "no key 'mesage_bytes' in jobs.0"),
    ('[grid]\n"jobs.3.ranks" = [4]\n', "index 3 is out of range"),
    ('[grid]\n"jobs.first.ranks" = [4]\n', "'first' is not an index"),
    ('[grid]\n"background.0.p" = []\n', "grid.\"background.0.p\" is an empty list"),
    ('[grid]\n"background.0.p" = 2\n', "expected a list of values"),
    ('[grid]\n"background.0.p" = [1, 1]\n', "repeats an earlier one"),
    ('[grid]\nseed = [1, 2]\n', "set by 'seeds"),
    ('[grid]\n"jobs" = [[]]\n"jobs.0.ranks" = [4]\n', "overlap"),
    ('seeds = [0, "one"]\n', "seeds[1] = 'one': expected an integer"),
    ("seeds = [0, 1.5]\n", "seeds[1] = 1.5: expected an integer"),
    ("seeds = [true]\n", "seeds[0] = True: expected an integer"),
    ("seeds = []\n", "seeds = []: expected a non-empty list"),
    ('react = "sometimes"\n', "react = 'sometimes': expected one of both, on, off"),
    ("warmup_epochs = -1\n", "warmup_epochs = -1"),
])
def test_bad_spec_is_one_line_naming_the_mistake(sweep_dir, body, words):
    path = write_spec(sweep_dir, body)
    with pytest.raises(SweepError) as info:
        expand(load_spec(path))
    message = str(info.value)
    assert words in message and str(path) in message
    assert "\n" not in message
    assert isinstance(info.value, ReactError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize(("spec_text", "words"), [
    ('base = "missing.toml"\n', "base scenario"),
    ("base = 3\n", "base = 3"),
    ("seeds = [0]\n", "base is missing"),
    ('base = "base.toml"\nrunner = "no_such_module_xyz:run"\n', "cannot import"),
    ('base = "base.toml"\nrunner = "sweep_fake:nope"\n', "no function 'nope'"),
    ('base = "base.toml"\nrunner = "sweep_fake"\n', "expected 'module:function'"),
])
def test_bad_base_or_runner_is_named(sweep_dir, spec_text, words):
    path = sweep_dir / "spec.toml"
    path.write_text(spec_text)
    with pytest.raises(SweepError, match=words.replace("(", r"\(")):
        load_spec(path)


def test_grid_value_that_breaks_the_scenario_is_named_before_anything_runs(sweep_dir):
    path = write_spec(sweep_dir, '[grid]\n"background.0.p" = [1, 0]\n')
    with pytest.raises(SweepError) as info:
        expand(load_spec(path))
    message = str(info.value)
    assert 'grid."background.0.p" = 0' in message and "background[0].p" in message


@pytest.mark.parametrize("body", [
    "seeds = [0, 'x']\n",
    '[grid]\n"jobs.0.nope" = [1]\n',
    '[grid]\n"jobs.0.ranks" = []\n',
    "unknown = 1\n",
])
def test_cli_bad_spec_exits_2_with_one_line_and_no_store(sweep_dir, capsys, body):
    store = sweep_dir / "out" / "r.sqlite"
    status = main(["sweep", str(write_spec(sweep_dir, body)), "--store", str(store)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("react: error: ")
    assert not store.exists() and not store.parent.exists()
    assert log_lines(sweep_dir) == []


def test_cli_bad_spec_leaves_an_existing_store_byte_identical(sweep_dir, capsys):
    store = sweep_dir / "r.sqlite"
    assert main(["sweep", str(write_spec(sweep_dir, "seeds = [0]\n")), "--store", str(store),
                 "--workers", "1", "--no-progress"]) == 0
    before = store.read_bytes()
    assert main(["sweep", str(write_spec(sweep_dir, "seeds = [0, 0.5]\n")), "--store",
                 str(store)]) == 2
    assert store.read_bytes() == before
    assert "seeds[1] = 0.5" in capsys.readouterr().err


def test_cli_foreign_store_is_refused_and_untouched(sweep_dir, capsys):
    store = sweep_dir / "notes.sqlite"
    store.write_text("my notes\n")
    status = main(["sweep", str(write_spec(sweep_dir, "")), "--store", str(store)])
    assert status == 2
    assert "not a react results store" in capsys.readouterr().err
    assert store.read_text() == "my notes\n"
    assert log_lines(sweep_dir) == []


# -- execution -------------------------------------------------------------------------------------
def test_execute_records_every_point_and_rerun_skips_them(sweep_dir):
    points = expand(load_spec(write_spec(sweep_dir, """\
        seeds = [0, 1]
        [grid]
        "jobs.0.message_bytes" = [100, 200, 300]
    """)))
    with ResultStore(sweep_dir / "r.sqlite") as store:
        summary = execute(points, store, workers=1, progress=False, version="test")
        assert (summary.ok, summary.failed, summary.skipped) == (12, 0, 0)
        assert summary.complete
        assert sorted(log_lines(sweep_dir)) == sorted(p.key for p in points)
        again = execute(points, store, workers=1, progress=False, version="test")
        assert (again.ok, again.failed, again.skipped) == (0, 0, 12)
        assert len(log_lines(sweep_dir)) == 12  # nothing ran a second time
        runs = {r.point_key: r for r in store.runs()}
    assert set(runs) == {p.key for p in points}
    point = points[5]
    run = runs[point.key]
    assert (run.seed, run.react, run.params, run.version) == (
        point.seed, point.react, point.params, "test")
    assert run.metrics["ring"]["mean_algbw_gbps"] == pytest.approx(2.0 * 1.1)


def test_failed_runs_are_recorded_counted_and_retried(sweep_dir, capsys):
    path = write_spec(sweep_dir, '[grid]\n"jobs.0.message_bytes" = [100, 666, 300]\n')
    store = sweep_dir / "r.sqlite"
    status = main(["sweep", str(path), "--store", str(store), "--workers", "2", "--no-progress"])
    out = capsys.readouterr().out
    assert status == 1
    assert "4 ok, 2 failed" in out and "fake failure at message_bytes=666" in out
    with ResultStore(store, create=False) as s:
        failed = [r for r in s.runs() if r.status == "failed"]
        assert len(s) == 6
    assert len(failed) == 2 and {r.react for r in failed} == {"off", "on"}
    assert all(r.params["jobs.0.message_bytes"] == 666 for r in failed)
    assert all(r.error.startswith("ValueError: fake failure") and r.metrics is None
               for r in failed)
    # a rerun tries the failed points again, and only them
    (sweep_dir / "log.txt").unlink()
    assert main(["sweep", str(path), "--store", str(store), "--workers", "1",
                 "--no-progress"]) == 1
    assert "0 ok, 2 failed, 4 already done" in capsys.readouterr().out


def test_dead_worker_stops_the_sweep_and_keeps_what_finished(sweep_dir, capsys):
    path = write_spec(sweep_dir, '[grid]\n"jobs.0.message_bytes" = [100, 777]\n')
    store = sweep_dir / "r.sqlite"
    status = main(["sweep", str(path), "--store", str(store), "--workers", "2", "--no-progress"])
    out = capsys.readouterr().out
    assert status == 1
    assert "a worker process died" in out and "rerun to resume" in out
    with ResultStore(store, create=False) as s:
        runs = s.runs()
    # whatever finished before the crash is stored, and only that: no run of the crashing
    # point, and nothing recorded as failed on a guess
    assert all(r.status == "ok" and r.params["jobs.0.message_bytes"] == 100 for r in runs)
    assert sorted(r.point_key for r in runs) == sorted(log_lines(sweep_dir))


def test_process_pool_runs_each_point_once(sweep_dir):
    points = expand(load_spec(write_spec(sweep_dir, """\
        seeds = [0, 1, 2]
        [grid]
        "jobs.0.message_bytes" = [100, 200]
    """)))
    with ResultStore(sweep_dir / "r.sqlite") as store:
        summary = execute(points, store, workers=3, progress=False, version="test")
        keys = [r.point_key for r in store.runs()]
    assert summary.ok == 12
    assert sorted(keys) == sorted(p.key for p in points)
    assert sorted(log_lines(sweep_dir)) == sorted(keys)


def test_report_command_prints_pairs_and_writes_csv(sweep_dir, capsys):
    store = sweep_dir / "r.sqlite"
    spec = write_spec(sweep_dir, '[grid]\n"jobs.0.message_bytes" = [100, 200]\n')
    assert main(["sweep", str(spec), "--store", str(store), "--workers", "1",
                 "--no-progress"]) == 0
    capsys.readouterr()
    csv_path = sweep_dir / "r.csv"
    assert main(["report", "--store", str(store), "--csv", str(csv_path)]) == 0
    out = capsys.readouterr().out
    table = out.splitlines()
    assert len(table) == 2 + 2 + 2  # header, rule, two points, the totals, the CSV note
    # the fake runner's REACT side is 10% faster at both points
    assert all("+10.0%" in line and line.endswith(" ok") for line in table[2:4])
    assert "mean algbw gain +10.0%" in out
    assert len(csv_path.read_text().splitlines()) == 3


def test_react_command_has_sweep_and_report(sweep_dir, capsys):
    from react.cli import main as react_main

    store = sweep_dir / "r.sqlite"
    spec = write_spec(sweep_dir, '[grid]\n"jobs.0.message_bytes" = [100, 666]\n')
    assert react_main(["sweep", str(spec), "--store", str(store), "--workers", "1",
                       "--no-progress"]) == 1  # one point fails, both its runs
    assert "2 ok, 2 failed" in capsys.readouterr().out
    assert react_main(["report", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "off failed, on failed" in out and "+10.0%" in out
    assert react_main(["sweep", str(write_spec(sweep_dir, "seeds = ['a']\n")), "--store",
                       str(store)]) == 2
    assert "seeds[0] = 'a'" in capsys.readouterr().err


def test_report_of_a_missing_store_is_one_line(tmp_path, capsys):
    assert main(["report", "--store", str(tmp_path / "none.sqlite")]) == 2
    assert "no results store" in capsys.readouterr().err
    assert not (tmp_path / "none.sqlite").exists()


def test_run_point_on_the_simulator_reports_each_job(sweep_dir):
    spec = load_spec(write_spec(sweep_dir, "warmup_epochs = 4\n", runner=None))
    off, on = expand(spec)
    with ResultStore(sweep_dir / "r.sqlite") as store:
        summary = execute([off, on], store, workers=1, progress=False, version="test")
        runs = {r.react: r for r in store.runs()}
    assert summary.ok == 2, [r.error for r in summary.failures]
    a, b = runs["off"].metrics["ring"], runs["on"].metrics["ring"]
    assert a["epochs"] == b["epochs"] == 12 and a["first_epoch"] == 4
    assert a["decisions"] == 0 and a["pattern_changes"] == 0 and not a["react"]
    assert b["react"] and b["decisions"] >= 1
    assert 0 < a["mean_time_s"] <= a["p95_time_s"]
    # the same point run directly gives the same numbers: runs are deterministic
    assert run_point(off)["ring"] == a


# -- a real kill -----------------------------------------------------------------------------------
def _ok_rows(store):
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            return {k for (k,) in db.execute("SELECT point_key FROM runs WHERE status = 'ok'")}
    except sqlite3.Error:  # not created yet
        return set()


def _start_gated_sweep(folder):
    """A sweep in its own process group whose quick points finish and whose others block."""
    # sizes 100..300 finish at once; 1000 and 2000 block on the gate, so the sweep cannot end
    # before it is stopped, whatever the machine's speed
    spec = write_spec(folder, """\
        seeds = [0, 1]
        [grid]
        "jobs.0.message_bytes" = [100, 200, 300, 1000, 2000]
    """)
    points = expand(load_spec(spec))
    quick = {p.key for p in points if p.params["jobs.0.message_bytes"] < 1000}
    store = folder / "r.sqlite"
    env = dict(os.environ, FAKE_GATE=str(folder / "gate"), FAKE_LOG=str(folder / "first.txt"))
    command = [sys.executable, "-m", "react", "sweep", str(spec), "--store", str(store),
               "--workers", "2", "--no-progress"]
    proc = subprocess.Popen(
        command, env=env, start_new_session=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        # a shell that started pytest in the background may have left SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120  # a safety net, not an assertion on speed
    while _ok_rows(store) != quick and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is not None or _ok_rows(store) != quick:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"the sweep did not reach its blocked points: {proc.communicate()}")
    return proc, command, env, points, quick, store


def _resume(folder, command, env, points, stored, store):
    (folder / "gate").touch()
    env = dict(env, FAKE_LOG=str(folder / "second.txt"))
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rerun = log_lines(folder, "second.txt")
    assert set(rerun).isdisjoint(stored)  # nothing finished before the stop ran again
    assert sorted(rerun) == sorted({p.key for p in points} - stored)
    with ResultStore(store, create=False) as s:
        runs = s.runs()
    assert all(r.status == "ok" for r in runs)
    assert sorted(r.point_key for r in runs) == sorted(p.key for p in points)  # each once


def test_sigkilled_sweep_resumes_without_rerunning_or_losing_runs(sweep_dir):
    proc, command, env, points, quick, store = _start_gated_sweep(sweep_dir)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its workers, no chance to clean up
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    stored = _ok_rows(store)
    assert stored == quick
    _resume(sweep_dir, command, env, points, stored, store)


def test_interrupted_sweep_stops_promptly_says_so_and_resumes(sweep_dir):
    proc, command, env, points, quick, store = _start_gated_sweep(sweep_dir)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
    try:
        out, _err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the sweep did not stop on SIGINT (blocked runs kept it alive)")
    assert proc.returncode == 130
    assert "interrupted" in out and "12 ok, 0 failed, 0 already done, 8 not run" in out
    stored = _ok_rows(store)
    assert stored == quick
    _resume(sweep_dir, command, env, points, stored, store)


# -- Dask ------------------------------------------------------------------------------------------
def test_dask_missing_is_a_clear_error(sweep_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    points = expand(load_spec(write_spec(sweep_dir, "")))
    with ResultStore(sweep_dir / "r.sqlite") as store:
        with pytest.raises(SweepError, match=r"dask\[distributed\]"):
            execute(points, store, dask="local", progress=False, version="test")
        assert len(store) == 0


def test_dask_local_cluster_runs_the_sweep(sweep_dir):
    pytest.importorskip("distributed")
    points = expand(load_spec(write_spec(sweep_dir, """\
        [grid]
        "jobs.0.message_bytes" = [100, 666, 300]
    """)))
    with ResultStore(sweep_dir / "r.sqlite") as store:
        summary = execute(points, store, dask="local", workers=2, progress=False,
                          version="test")
        runs = store.runs()
    assert (summary.ok, summary.failed) == (4, 2)
    assert sorted(r.point_key for r in runs) == sorted(p.key for p in points)


def test_shipped_example_spec_expands():
    # experiments/sweeps/tree_star_p.toml: 3 values of p x 3 seeds x (off, on) = 18 runs.
    from pathlib import Path

    from react.run.sweep import expand, load_spec

    spec = load_spec(Path(__file__).parents[3] / "experiments/sweeps/tree_star_p.toml")
    points = expand(spec)
    assert len(points) == 18
    assert {p.params["background.0.p"] for p in points} == {1, 2, 4}
