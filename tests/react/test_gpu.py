"""The GPU backend on real GPUs (marker ``gpu``; skipped without CUDA and two GPUs).

Each test starts one process per GPU with torchrun, under a timeout, so a hang fails the test
instead of blocking the run. Run them on a GPU machine with ``python3 -m pytest -m gpu
tests/react/test_gpu.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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


def test_more_ranks_than_gpus_fails_clearly_and_every_rank_exits():
    n = _gpus() + 1
    done = _torchrun(n, ["-m", "react.backends.gpu.selfcheck"], 120)
    assert done.returncode != 0
    assert "GPU backend runs one rank per GPU" in done.stderr
