"""experiments/gpu_all.sh's arguments: step selection, and bad input named (no GPU needed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "gpu_all.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_unknown_step_is_named_and_nothing_runs(tmp_path: Path) -> None:
    res = run(tmp_path, "--only", "pytest,tabel2")
    assert res.returncode == 2
    assert "unknown step 'tabel2'" in res.stderr and "table2" in res.stderr
    assert not (tmp_path / "out").exists()


def test_unknown_argument_is_named(tmp_path: Path) -> None:
    res = run(tmp_path, "--fast")
    assert res.returncode == 2
    assert "unknown argument '--fast'" in res.stderr


def test_only_runs_the_named_steps(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the script asks torch for the GPU count")
    # graph_probe stops at once without CUDA (a failed step); every other step is skipped.
    res = run(tmp_path, "--only", "graph_probe")
    logs = sorted(p.name for p in (tmp_path / "out").glob("*.log"))
    assert logs == ["graph_probe.log"], res.stdout
    assert "== graph_probe:" in res.stdout and "== pytest:" not in res.stdout
