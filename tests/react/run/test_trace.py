"""Timeline traces (react/run/trace.py, ``react run --trace``): Chrome trace events that add up."""

import json
from collections import defaultdict
from pathlib import Path

import pytest

from react.cli import main
from react.run.scenario import load_scenario
from react.run.trace import run_recorded, trace_events

SCENARIOS = Path(__file__).resolve().parents[3] / "experiments" / "scenarios"
STAR = SCENARIOS / "closed_loop_star.toml"


@pytest.fixture(scope="module")
def star_run():
    scenario = load_scenario(STAR).with_epochs(14)
    return scenario, run_recorded(scenario)


def _by_cat(trace, cat):
    return [e for e in trace["traceEvents"] if e.get("cat") == cat]


def test_rank_tracks_hold_every_flow_inside_its_epoch(star_run):
    scenario, rec = star_run
    run = rec.runs["tree"]
    trace = trace_events(scenario, [rec])
    epochs = sorted(_by_cat(trace, "epoch"), key=lambda e: e["ts"])
    flows = _by_cat(trace, "flow")
    assert len(epochs) == 14
    # one slice per flow of the pattern each epoch ran
    assert len(flows) == sum(len(p.flows) for p in run.patterns)
    for e, ev in enumerate(epochs):
        assert ev["dur"] == pytest.approx(run.results[e].collective_time_s * 1e6)
        if e:  # no compute gap: epochs follow each other
            assert ev["ts"] == pytest.approx(epochs[e - 1]["ts"] + epochs[e - 1]["dur"])
        inside = [f for f in flows if f["args"]["epoch"] == e]
        assert len(inside) == len(run.patterns[e].flows)
        assert min(f["ts"] for f in inside) == pytest.approx(ev["ts"])
        assert max(f["ts"] + f["dur"] for f in inside) == pytest.approx(ev["ts"] + ev["dur"])
    # a lane never holds two slices at once (what Perfetto needs to draw them)
    lanes = defaultdict(list)
    for f in flows:
        lanes[(f["pid"], f["tid"])].append((f["ts"], f["ts"] + f["dur"]))
    for spans in lanes.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:], strict=False))


def test_decisions_and_pattern_changes_are_instant_events_with_reasons(star_run):
    scenario, rec = star_run
    run = rec.runs["tree"]
    trace = trace_events(scenario, [rec])
    decisions = _by_cat(trace, "decision")
    assert [d["args"]["reason"] for d in decisions] == [d.reason for d in run.decisions]
    # batches of B = 6 epochs: the first decision follows epoch 5, the second epoch 11
    assert [d["args"]["epoch"] for d in decisions][:2] == [5, 11]
    # what the first decision acted on: p = 2 into rank 3 slows every flow into it
    assert decisions[0]["args"]["congested"] == [
        "1->3 at step 2: steady", "5->3 at step 2: steady", "7->3 at step 4: steady",
        "2->3 at step 6: steady"]
    changed = [e for e in range(1, 14) if run.patterns[e] != run.patterns[e - 1]]
    assert [c["args"]["epoch"] for c in _by_cat(trace, "pattern")] == changed
    assert changed and changed[0] == 6  # the first swap is tried right away (no apply delay)


def test_link_tracks_put_each_flow_on_every_link_of_its_path(star_run):
    # On a star every flow crosses two links, host -> s0 and s0 -> host.
    scenario, rec = star_run
    trace = trace_events(scenario, [rec], tracks="link", epochs=(0, 2))
    flows = _by_cat(trace, "flow")
    per_epoch = sum(len(rec.runs["tree"].patterns[e].flows) for e in range(3))
    assert len(flows) == 2 * per_epoch
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert any(n.startswith("h3->s0") or n.startswith("s0->h3") for n in names)


def test_a_window_of_epochs(star_run):
    scenario, rec = star_run
    trace = trace_events(scenario, [rec], epochs=(3, 4))
    assert sorted({e["args"]["epoch"] for e in _by_cat(trace, "flow")}) == [3, 4]
    assert trace["otherData"]["window"] == "epochs 3-4"


def test_cli_writes_a_trace_for_a_comparison(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["run", str(STAR), "--compare", "--epochs", "7", "--no-progress", "--trace",
                 str(out), "--trace-epochs", "0:6"]) == 0
    doc = json.loads(out.read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert names == {"job tree (without REACT)", "job tree (with REACT)"}
    assert all(e["ph"] in ("M", "X", "i") for e in doc["traceEvents"])
    assert "open it in https://ui.perfetto.dev" in capsys.readouterr().out


@pytest.mark.parametrize("extra, expected", [
    (["--trace", "/nonexistent-folder/t.json"], "folder '/nonexistent-folder' does not exist"),
    (["--trace", "{tmp}", ], "is a directory"),
    (["--trace", "{tmp}/t.json", "--trace-epochs", "5:2"], "expected FIRST:LAST"),
    (["--trace-epochs", "0:3"], "--trace-epochs needs --trace"),
])
def test_cli_bad_trace_options_are_one_line(tmp_path, capsys, extra, expected):
    argv = ["run", str(STAR), "--epochs", "2", "--no-progress"]
    argv += [a.replace("{tmp}", str(tmp_path)) for a in extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and expected in err


def test_without_flow_records_epochs_are_laid_back_to_back(star_run):
    # What a run on another backend gives (no simulated network): per-rank tracks from each
    # epoch's flow timings, epoch e starting where epoch e-1 ended (no compute gap here).
    from react.run.trace import Recorded, TraceError

    scenario, rec = star_run
    bare = Recorded("", rec.runs, ())
    trace = trace_events(scenario, [bare], epochs=(0, 13))
    epochs = sorted(_by_cat(trace, "epoch"), key=lambda e: e["ts"])
    times = [r.collective_time_s * 1e6 for r in rec.runs["tree"].results]
    assert [e["ts"] for e in epochs] == pytest.approx([sum(times[:k]) for k in range(14)])
    with pytest.raises(TraceError, match="needs the simulator's flow records"):
        trace_events(scenario, [bare], tracks="link")


def test_link_tracks_off_the_simulator_are_refused_before_running(tmp_path, capsys):
    assert main(["run", str(STAR), "--backend", "emu", "--trace", str(tmp_path / "t.json"),
                 "--trace-tracks", "link", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "uses the 'emu' backend" in err
