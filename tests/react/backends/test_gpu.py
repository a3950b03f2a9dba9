"""The GPU backend on real GPUs (marker ``gpu``; skipped without CUDA and two GPUs): every
generator against numpy and NCCL, the closed loop, a killed rank, a missing peer.

Each test starts one process per GPU with torchrun, under a timeout, so a hang fails the test
instead of blocking the run. Run them on a GPU machine with ``python3 -m pytest -m gpu
tests/react/backends/test_gpu.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _gpus() -> int:
    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(_gpus() < 2, reason="needs CUDA with at least two GPUs (NCCL)"),
]


def _torchrun(nproc: int, args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
           "NVSHMEM_DISABLE_NVLS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={nproc}", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout_s)


def test_every_generator_equals_numpy_and_nccl(tmp_path):
    out = tmp_path / "check.json"
    n = _gpus()
    done = _torchrun(n, ["-m", "react.backends.gpu.selfcheck", "--out", str(out)], 300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    names = {c["generator"] for c in report["checked"]}
    assert {"allreduce_ring", "allreduce_double_binary_tree", "allgather_ring"} <= names
    assert all(c["nccl_compared"] for c in report["checked"])
    for c in report["checked"]:
        for m in c["merged"]:
            assert m["epoch_s"] > 0 and len(m["fct_s"]) == c["flows"]
            assert all(0 <= f <= m["epoch_s"] for f in m["fct_s"])


def test_every_generator_equals_numpy_and_nccl_when_posted_as_a_cuda_graph(tmp_path):
    # The same checks with RCollective's graph mode: each pattern runs eagerly once, is then
    # captured and replayed, and replayed again, all on one buffer; every epoch's result and
    # merged timings are checked as above.
    out = tmp_path / "check.json"
    n = _gpus()
    done = _torchrun(n, ["-m", "react.backends.gpu.selfcheck", "--graph", "--out", str(out)],
                     300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["graph"] is True
    assert all(len(c["merged"]) == 3 for c in report["checked"])
    assert {"allreduce_ring", "allreduce_double_binary_tree"} <= {
        c["generator"] for c in report["checked"]}


def test_more_ranks_than_gpus_fails_clearly_and_every_rank_exits():
    n = _gpus() + 1
    done = _torchrun(n, ["-m", "react.backends.gpu.selfcheck"], 120)
    assert done.returncode != 0
    assert "GPU backend runs one rank per GPU" in done.stderr


# -- the closed loop and failures on real GPUs -------------------------------------------------
def test_closed_loop_on_gpus_runs_checks_and_reports_every_epoch(tmp_path):
    from react.backends.gpu.job import GpuJob
    from react.control.controller import Controller, ControllerConfig
    from react.patterns import allreduce_double_binary_tree

    n = _gpus()
    tree = allreduce_double_binary_tree(n)
    job = GpuJob(list(range(n)), message_bytes=4e6, workdir=tmp_path, timeout_s=60)
    try:
        run = job.run_job("tree", tree, 48, Controller(tree, ControllerConfig(seed=0)))
    finally:
        job.close()
    assert len(run.results) == 48 and run.info["complete"] and run.info["events"] == []
    # a decision after every batch of B = 6 epochs, except batches that wait for a switch
    assert 1 <= len(run.decisions) <= 48 // 6
    # every rank checked its result at epoch 0 and at the last epoch (and after any switch)
    assert all(c[0] == 0 and c[-1] == 47 for c in run.info["checks"])
    for result in run.results:
        assert result.collective_time_s > 0
        assert all(0 <= t.end_s - t.start_s <= result.collective_time_s + 1e-9
                   for t in result.flows)


def test_a_killed_rank_ends_the_job_and_no_process_is_left(tmp_path):
    import threading
    import time

    from react.backends.gpu.cuda import GpuError
    from react.backends.gpu.job import GpuJob
    from react.patterns import allreduce_ring

    n = _gpus()
    job = GpuJob(list(range(n)), message_bytes=4e6, workdir=tmp_path, timeout_s=30,
                 compute_gap_s=0.01, tuner=False)

    def kill_the_last_rank_mid_run():  # 15 s in: NCCL is set up by then
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            launcher = job.launcher
            if launcher is not None and len(launcher.ranks) == n:
                time.sleep(15.0)
                launcher.ranks[-1].kill()
                return
            time.sleep(0.05)

    threading.Thread(target=kill_the_last_rank_mid_run, daemon=True).start()
    try:
        with pytest.raises(GpuError, match=rf"rank {n - 1} failed \(exit -9\)"):
            job.run_job("ring", allreduce_ring(n), 100000, None)
    finally:
        job.close()
    procs = job.launcher.processes
    assert len(procs) == n and all(p.poll() is not None for p in procs)


def test_a_missing_peer_times_out_with_a_clear_error():
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
           "NVSHMEM_DISABLE_NVLS": "1", "PYTHONPATH": str(ROOT), "RANK": "0",
           "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29731"}
    code = ("from react.backends.gpu.cuda import init_gpu_world, GpuError\n"
            "try:\n    init_gpu_world(timeout_s=8)\n"
            "except GpuError as e:\n    print(e); raise SystemExit(1)\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    assert "rank 0 of 2: the NCCL process group did not form" in done.stdout
