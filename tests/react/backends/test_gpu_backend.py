"""The GPU backend's wiring without a GPU: the job launcher, the rank loop, copy-stream sources,
scenario files, the experiment scripts' argument checks.

:class:`GpuJob` runs here with a stand-in interpreter (``gpu_fake_rank.py``) whose ranks run the
real :func:`rank_loop`, :class:`TunerClient` and leader process but a timing model instead of
NCCL. The independent truth for the closed loop is an in-process :class:`TuningLoop` fed the
same model: the leader's decisions and every rank's pattern at every epoch must equal it.
"""

import argparse
import sys
import time
from pathlib import Path

import pytest

from react.backends.gpu.copystream import CopyStreams, copy_sources
from react.backends.gpu.cuda import GpuError
from react.backends.gpu.job import GpuJob, epoch_spans, flow_bytes
from react.backends.gpu.rank import gpu_job_spec, rank_loop
from react.control.controller import Controller, ControllerConfig
from react.control.loop import TuningLoop
from react.control.policies import make_controller
from react.control.policies.baselines import NeverChange
from react.model.errors import PatternError, ReactError
from react.model.observation import EpochResult, FlowTiming
from react.model.pattern import Pattern
from react.patterns import allreduce_double_binary_tree, allreduce_ring
from react.run.scenario import ScenarioError, parse_scenario
from react.run.worlds.gpu import copy_pairs, scenario_jobs
from react.runtime.tuner import pattern_fingerprint

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SHIM = [sys.executable, str(HERE / "gpu_fake_rank.py")]
MESSAGE = 20e6


@pytest.fixture(autouse=True)
def _importable_from_subprocesses(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


# -- copy-stream sources -----------------------------------------------------------------------
@pytest.mark.parametrize("dst, p, gpus, ranks, first, want", [
    (1, 2, 2, [0, 1], None, (0, 0)),            # 2 GPUs: both from the one other GPU
    (1, 1, 2, [0, 1], None, (0,)),
    (1, 3, 4, [0, 1, 2, 3], None, (2, 3, 0)),    # all ranks: nearest after the target first
    (1, 2, 8, [0, 1, 2, 3], None, (4, 5)),       # idle GPUs before ranks
    (3, 5, 4, [0, 1, 2, 3], None, (0, 1, 2, 0, 1)),  # more streams than sources: repeat
    (1, 2, 4, [0, 1, 2, 3], 0, (0, 2)),          # a named first source leads
    (0, 0, 2, [0, 1], None, ()),
])
def test_copy_sources_are_distinct_where_possible(dst, p, gpus, ranks, first, want):
    assert copy_sources(dst, p, gpus, ranks, first) == want


@pytest.mark.parametrize("args, words", [
    ((2, 1, 2), "dst must be a GPU index in 0..1, got dst=2"),
    ((0, -1, 2), "p must be >= 0, got p=-1"),
    ((0, 1, 1), "need another GPU to copy from"),
])
def test_copy_sources_refuses_bad_input(args, words):
    with pytest.raises(GpuError, match=words):
        copy_sources(*args)


def test_copy_streams_refuse_a_stream_from_a_gpu_into_itself():
    with pytest.raises(GpuError, match="src = dst = 1"):
        CopyStreams([(1, 1)], duration_s=1)


def test_copy_stream_without_cuda_fails_clearly_and_cleans_up():
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("this host has CUDA: the stream would start")
    except ImportError:
        pass
    streams = CopyStreams([(0, 1)], duration_s=5, timeout_s=60)
    with pytest.raises(GpuError, match="copy stream GPU 0 -> GPU 1 did not start.*CUDA|torch"):
        streams.start()
    assert streams.processes == ()


# -- the rank loop -----------------------------------------------------------------------------
class _Log:
    def __init__(self):
        self.events = []

    def post(self, pattern, epoch):
        self.events.append(("post", epoch))
        log = self

        class Handle:
            def timings(self):
                log.events.append(("read", epoch))
                return None

        return Handle()


def test_rank_loop_reads_each_epoch_after_posting_the_next():
    log = _Log()
    rank_loop(allreduce_ring(2), 3, log.post)
    assert log.events == [("post", 0), ("post", 1), ("read", 0), ("post", 2), ("read", 1),
                          ("read", 2)]
    log = _Log()
    rank_loop(allreduce_ring(2), 2, log.post, report_late=False)
    assert log.events == [("post", 0), ("read", 0), ("post", 1), ("read", 1)]


def test_job_spec_refuses_a_tuner_for_nccls_own_collective():
    with pytest.raises(ReactError, match="NCCL's own collective has no flows"):
        gpu_job_spec(job="j", pattern=allreduce_ring(2), epochs=1, message_bytes=8,
                     tuner=("127.0.0.1", 1), out_dir=".", mode="nccl")
    with pytest.raises(ReactError, match="mode must be one of"):
        gpu_job_spec(job="j", pattern=allreduce_ring(2), epochs=1, message_bytes=8,
                     tuner=None, out_dir=".", mode="gloo")


def test_flow_bytes_counts_whole_elements():
    # 10 float32 elements over 2 chunks of the 2-rank ring: 5 elements = 20 bytes per flow
    ring = allreduce_ring(2)
    assert flow_bytes(ring, 41) == [20.0] * len(ring.flows)


def test_epoch_spans_take_the_slowest_rank():
    records = [{"epochs": [[0.0, 1.0], [1.0, 1.5]]}, {"epochs": [[0.2, 1.4], [1.4, 1.6]]}]
    assert epoch_spans(records) == pytest.approx([1.2, 0.5])


# -- the job launcher, with the stand-in interpreter --------------------------------------------
def _truth(pattern, epoch, slow=1):
    sys.path.insert(0, str(HERE))
    try:
        from gpu_fake_rank import model
    finally:
        sys.path.remove(str(HERE))
    times = model(pattern, MESSAGE, slow)
    flows = tuple(FlowTiming(f, s, e, pattern.flow_bytes(f, MESSAGE))
                  for f, (s, e) in zip(pattern.flows, times, strict=True))
    return EpochResult(epoch, max(e for _, e in times), flows, MESSAGE)


def test_gpu_job_closed_loop_matches_the_in_process_loop(tmp_path):
    tree = allreduce_double_binary_tree(4)
    epochs = 36
    config = ControllerConfig(seed=0)
    reference = TuningLoop(tree, Controller(tree, config), 5)
    ran, decisions = [], []
    for e in range(epochs):
        p = reference.pattern_for(e)
        ran.append(p)
        d = reference.record(e, _truth(p, e))
        if d is not None:
            decisions.append(d)
    assert any(d.changed for d in decisions), "the model must make REACT act"

    job = GpuJob([0, 1, 2, 3], message_bytes=MESSAGE, gpus=4, python=SHIM, workdir=tmp_path,
                 compute_gap_s=0.02, timeout_s=30)
    seen = []
    try:
        run = job.run_job("tree", tree, epochs, Controller(tree, config),
                          on_epoch=lambda name, e: seen.append(e))
    finally:
        job.close()
    assert seen == list(range(epochs))
    assert [(d.batch, d.action, d.pattern.flows) for d in run.decisions] == [
        (d.batch, d.action, d.pattern.flows) for d in decisions]
    want = [pattern_fingerprint(p) for p in ran]
    assert [pattern_fingerprint(p) for p in run.patterns] == want
    import json
    for r in range(4):  # every rank switched at the agreed epoch
        record = json.loads((tmp_path / "tree-0" / f"rank{r}.json").read_text())
        assert record["ran"] == want
    assert run.info["events"] == [] and run.info["complete"]
    assert len(run.info["spans_s"]) == epochs


GREEDY = f"{ROOT / 'experiments' / 'controllers' / 'greedy.py'}:Greedy"


@pytest.mark.parametrize("ref", ["random", GREEDY], ids=["random", "file"])
def test_gpu_job_runs_a_controller_other_than_react(tmp_path, ref):
    # the leader makes the controller again from its reference; the truth is the same factory
    # fed the model's epochs in process
    tree = allreduce_double_binary_tree(4)
    epochs = 36
    config = ControllerConfig(seed=0)
    reference = TuningLoop(tree, make_controller(ref, tree, config), 5)
    decisions = []
    for e in range(epochs):
        d = reference.record(e, _truth(reference.pattern_for(e), e))
        if d is not None:
            decisions.append(d)
    word = "trying a random viable swap" if ref == "random" else "slowest flow"
    assert any(word in d.reason for d in decisions), "the model must make the policy act"

    job = GpuJob([0, 1, 2, 3], message_bytes=MESSAGE, gpus=4, python=SHIM, workdir=tmp_path,
                 compute_gap_s=0.02, timeout_s=30)
    try:
        run = job.run_job("tree", tree, epochs, make_controller(ref, tree, config))
    finally:
        job.close()
    assert [(d.batch, d.action, d.reason, d.pattern.flows) for d in run.decisions] == [
        (d.batch, d.action, d.reason, d.pattern.flows) for d in decisions]
    assert run.info["events"] == [] and run.info["complete"]


def test_a_controller_the_leader_cannot_make_again_is_refused_before_anything_starts(tmp_path):
    tree = allreduce_double_binary_tree(4)
    job = GpuJob([0, 1, 2, 3], message_bytes=MESSAGE, gpus=4, python=SHIM, workdir=tmp_path)
    with pytest.raises(GpuError, match="job 'tree': controller NeverChange: no reference"):
        job.run_job("tree", tree, 12, NeverChange(tree))  # not made from a reference
    assert list(tmp_path.iterdir()) == []


def test_gpu_job_without_tuner_reports_spans(tmp_path):
    ring = allreduce_ring(2)
    job = GpuJob([0, 1], message_bytes=MESSAGE, gpus=2, python=SHIM, workdir=tmp_path,
                 tuner=False)
    try:
        run = job.run_job("ring", ring, 5, None)
    finally:
        job.close()
    # every rank enters at the epoch's start and leaves after its last flow: the slowest rank
    # leaves when the model's last flow ends
    want = max(t.end_s for t in _truth(ring, 0).flows)
    assert [r.collective_time_s for r in run.results] == pytest.approx([want] * 5)
    assert run.decisions == []


def test_a_failing_rank_ends_the_job_and_every_process(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL_RANK", "1")
    monkeypatch.setenv("FAKE_FAIL_EPOCH", "3")
    tree = allreduce_double_binary_tree(4)
    job = GpuJob([0, 1, 2, 3], message_bytes=MESSAGE, gpus=4, python=SHIM, workdir=tmp_path,
                 compute_gap_s=0.01, timeout_s=20)
    t0 = time.monotonic()
    with pytest.raises(GpuError, match=r"rank 1 failed \(exit 1\): rank 1: injected failure "
                                       r"at epoch 3"):
        job.run_job("tree", tree, 200, Controller(tree, ControllerConfig(seed=0)))
    assert time.monotonic() - t0 < 20
    procs = job.launcher.processes
    assert len(procs) == 5  # the tuner and 4 ranks, none left running
    assert all(p.poll() is not None for p in procs)
    job.close()


def test_fewer_gpus_than_ranks_is_refused_before_anything_starts(tmp_path):
    job = GpuJob([0, 1, 2], message_bytes=MESSAGE, gpus=2, python=SHIM, workdir=tmp_path)
    with pytest.raises(GpuError, match=r"GPUs \[0, 1, 2\], but this host has 2 GPU\(s\)"):
        job.run_job("tree", allreduce_ring(3), 5, None)
    assert list(tmp_path.iterdir()) == []


def test_an_unverifiable_pattern_is_refused_before_anything_starts(tmp_path):
    ring = allreduce_ring(2)
    broken = Pattern(ring.kind, ring.ranks, ring.chunks, ring.flows[:-1], name="broken")
    job = GpuJob([0, 1], message_bytes=MESSAGE, gpus=2, python=SHIM, workdir=tmp_path)
    with pytest.raises(PatternError):
        job.run_job("ring", broken, 5, None)
    assert list(tmp_path.iterdir()) == []


def test_two_ranks_on_one_gpu_are_refused():
    with pytest.raises(GpuError, match=r"two ranks on one GPU \(\[0, 0\]\)"):
        GpuJob([0, 0], message_bytes=MESSAGE)


# -- scenario files ----------------------------------------------------------------------------
def _doc(**extra):
    doc = {"backend": "gpu", "topology": {"name": "star", "n": 4},
           "jobs": [{"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": 4,
                     "placement": "first", "message_bytes": 1e8, "epochs": 12}],
           "background": [{"kind": "long_lived", "src": "h2", "dst": "tree:1", "p": 2}]}
    doc.update(extra)
    return doc


def test_scenario_on_gpus_maps_hosts_to_gpus_and_draws_copy_sources():
    scenario = parse_scenario(_doc(gpu={"apply_delay_epochs": 3, "lanes": 2}))
    assert scenario.backend == "gpu" and scenario.gpu.apply_delay_epochs == 3
    assert scenario.gpu.lanes == 2
    # src h2 = GPU 2 first, then the nearest other GPU after the target: GPU 3
    assert copy_pairs(scenario, 4) == [(2, 1), (3, 1)]


def test_scenario_gpu_table_refuses_unknown_keys():
    with pytest.raises(ScenarioError, match="gpu"):
        parse_scenario(_doc(gpu={"lane": 2}))


@pytest.mark.parametrize("change, words", [
    ({"background": [{"kind": "periodic_bulk", "src": "h2", "dst": "tree:1", "size_bytes": 1e6,
                      "period_s": 0.1}]}, "only long_lived background"),
    ({"failures": [{"link": "h1->s0", "capacity_bps": 1e9}]}, "link failures have no"),
])
def test_scenario_on_gpus_refuses_what_gpus_cannot_do(change, words):
    scenario = parse_scenario(_doc(**change))
    with pytest.raises(GpuError, match=words):
        copy_pairs(scenario, 4)


def test_scenario_with_more_ranks_than_gpus_is_refused():
    scenario = parse_scenario(_doc())
    with pytest.raises(GpuError, match=r"rank 2 on h2 = GPU 2, but this host has 2 GPU"):
        with scenario_jobs(scenario, gpus=2):
            pass


# -- the experiment scripts' argument checks ---------------------------------------------------
def _experiment(name):
    sys.path.insert(0, str(ROOT))
    try:
        import importlib
        return importlib.import_module(f"experiments.{name}")
    finally:
        sys.path.remove(str(ROOT))


@pytest.mark.parametrize("kwargs, gpus, words", [
    ({"ranks": 3}, 2, r"--ranks must be in 2..2"),
    ({}, 1, "needs at least 2 GPUs"),
    ({"ps": [-1]}, 2, "--p values must be >= 0"),
    ({"epochs": 5}, 2, "--epochs must be in 12.."),
])
def test_table2_gpu_checks_its_arguments(kwargs, gpus, words):
    mod = _experiment("table2_gpu")
    args = argparse.Namespace(**{"ranks": 0, "ps": [0, 1, 2], "epochs": 600,
                                 "max_epochs": 2400, "settle_batches": 10, **kwargs})
    with pytest.raises(ReactError, match=words):
        mod.check_args(args, gpus)


def test_table2_gpu_scenario_congests_rank_1_from_the_next_gpu():
    mod = _experiment("table2_gpu")
    scenario = parse_scenario(mod.scenario_doc(4, 2, epochs=60))
    assert scenario.backend == "gpu" and scenario.jobs[0].hosts == ("h0", "h1", "h2", "h3")
    assert copy_pairs(scenario, 4) == [(2, 1), (3, 1)]
    two = parse_scenario(mod.scenario_doc(2, 2, epochs=60))
    assert copy_pairs(two, 2) == [(0, 1), (0, 1)]
    assert mod.scenario_doc(2, 0, epochs=60).get("background") is None


def test_table2_gpu_settles_when_the_last_change_is_old():
    mod = _experiment("table2_gpu")
    from react.run.driver import JobRun
    a, b = allreduce_ring(4), allreduce_double_binary_tree(4)  # different flows
    run = JobRun("t", [EpochResult(e, 1.0, (), 1.0) for e in range(120)],
                 [a] * 30 + [b] * 90, [])
    assert mod.settled(run, 6, 10) == (True, 30)
    assert mod.settled(run, 6, 16) == (False, 30)


@pytest.mark.parametrize("argv, words", [
    (["--ranks", "4"], "--ranks 4 but this host has 2"),
    (["--congested", "2"], "--congested must be a rank in 0..1"),
    (["--epochs", "6"], "--epochs must be at least two batches"),
])
def test_gpu_closed_loop_checks_its_arguments(argv, words):
    mod = _experiment("gpu_closed_loop")
    parser_args = argparse.Namespace(ranks=0, congested=1, ps=[0, 1, 2], epochs=300, batch=6)
    for key, value in zip(argv[::2], argv[1::2], strict=True):
        setattr(parser_args, key.lstrip("-"), int(value))
    with pytest.raises(ReactError, match=words):
        mod.check_args(parser_args, 2)


def test_gpu_closed_loop_detection_names_the_flows_into_the_congested_rank():
    mod = _experiment("gpu_closed_loop")
    from react.run.driver import JobRun
    tree = allreduce_double_binary_tree(4)
    results = [_truth(tree, e, slow=1) for e in range(12)]
    run = JobRun("t", results, [tree] * 12, [])
    det = mod.detection(run, 6, 1, [2], ControllerConfig())
    into = [i for i, f in enumerate(tree.flows) if f.dst == 1]
    assert det["into_congested"] == into and det["batches_total"] == 2
    for b in det["batches"]:
        assert set(b["flagged"]) <= set(into) and b["flagged"]


def test_gpu_closed_loop_flow_timing_compares_directions_and_counts_zero_time_flows(tmp_path):
    mod = _experiment("gpu_closed_loop")
    tree = allreduce_double_binary_tree(2)  # flows: (1, 0->1), (1, 1->0), (2, 0->1), (2, 1->0)
    other = allreduce_ring(2)
    # into rank 1: 2 ms (one epoch 0 ms: clocks disagreeing); the others 1 ms
    epochs = [{"pattern": 0, "flows": [[0.0, 0.002, 5e7], [0.0, 0.001, 5e7],
                                       [0.003, 0.005, 5e7], [0.003, 0.004, 5e7]]}
              for _ in range(4)]
    epochs[1]["flows"][0] = [0.004, 0.004, 5e7]
    epochs.append({"pattern": 1, "flows": [[0.0, 0.009, 5e7]] * 4})  # another pattern: ignored
    doc = {"patterns": [tree.to_dict(), other.to_dict()], "epochs": epochs}
    t = mod.flow_timing(doc, congested=1)
    assert t["epochs"] == 4 and t["flows"] == 16 and t["zero_time_flows"] == 1
    assert t["median_into_congested_ms"] == pytest.approx(2.0)
    assert t["median_other_ms"] == pytest.approx(1.0)
    # sorted: 0, eight 1 ms, seven 2 ms: the median is 1 ms, the 90th percentile 2 ms
    assert t["p90_over_median"] == pytest.approx(2.0)


def test_gpu_closed_loop_replot_needs_a_finished_run(tmp_path, capsys):
    mod = _experiment("gpu_closed_loop")
    assert mod.main(["--replot", str(tmp_path)]) == 1
    assert "no gpu_closed_loop.json there" in capsys.readouterr().err


def test_table2_gpu_shows_no_paper_value_where_the_paper_has_no_row():
    mod = _experiment("table2_gpu")
    row = dict(ranks=2, p=1, sources=[0], epochs=600, settled=True, mean_off_s=1e-3,
               mean_on_s=0.8e-3, speedup_mean=1.25, speedup_p95=1.1, changes=0,
               changes_per_5k=0.0, paper_speedup_mean=float("nan"),
               paper_speedup_p95=float("nan"), paper_changes=float("nan"))
    line = mod.markdown_table([row])[-1]
    assert "nan" not in line and "1.250 / - | 1.100 / - | 0 (0; -)" in line


def test_flow_stamp_choices_are_checked_where_a_job_is_made(tmp_path):
    with pytest.raises(GpuError, match=r"stamp must be one of \['post', 'launch'\], got 'late'"):
        GpuJob([0, 1], message_bytes=1e6, gpus=2, workdir=tmp_path, stamp="late")
    with pytest.raises(GpuError, match="got 'late'"):
        gpu_job_spec(job="j", pattern=allreduce_ring(2), epochs=6, message_bytes=1e6,
                     tuner=None, out_dir=str(tmp_path), stamp="late")
    spec = gpu_job_spec(job="j", pattern=allreduce_ring(2), epochs=6, message_bytes=1e6,
                        tuner=None, out_dir=str(tmp_path), stamp="launch")
    assert spec["stamp"] == "launch"


def test_graph_posting_is_off_unless_asked_and_reaches_every_rank_spec(tmp_path):
    def spec(**kw):
        return gpu_job_spec(job="j", pattern=allreduce_ring(2), epochs=6, message_bytes=1e6,
                            tuner=None, out_dir=str(tmp_path), **kw)

    assert spec()["graph"] is False and spec(graph=True)["graph"] is True
    job = GpuJob([0, 1], message_bytes=1e6, gpus=2, workdir=tmp_path, graph=True)
    try:
        assert job.graph is True
    finally:
        job.close()
