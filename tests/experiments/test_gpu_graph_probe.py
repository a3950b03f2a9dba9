"""The CUDA-graph probe's front door: bad input and a machine without a GPU fail clearly; its
page says which checks failed (the checks themselves need a GPU: docs/results/gpu.md)."""

import importlib.util

import pytest

from experiments import gpu_graph_probe as probe


@pytest.mark.parametrize("mbytes", ["0", "-5", "nan"])
def test_probe_refuses_a_size_that_is_not_positive(mbytes, tmp_path, capsys):
    with pytest.raises(SystemExit):
        probe.main(["--out", str(tmp_path), "--mbytes", mbytes])
    assert f"--mbytes must be positive, got {float(mbytes)}" in capsys.readouterr().err


def test_probe_without_a_gpu_says_so(tmp_path, capsys):
    if importlib.util.find_spec("torch") is None:
        words = "torch is not installed"
    else:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU: the probe would run")
        words = "no CUDA device: this probe needs a GPU"
    with pytest.raises(SystemExit):
        probe.main(["--out", str(tmp_path)])
    assert words in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing written


def test_probe_page_marks_each_check_and_leaves_tracebacks_out():
    result = {"gpu": "G", "torch": "t", "cuda": "c", "nccl": "n", "bytes": 2e6,
              "checks": {"eager": {"ok": True, "equal": True},
                         "graph": {"ok": False, "error": "RuntimeError: no", "traceback": "TB"}},
              "teardown_finished": False}
    text = probe.page(result)
    assert "| eager | yes |" in text and "| graph | no |" in text
    assert "RuntimeError: no" in text and "TB" not in text
    assert "2 MB" in text and "teardown finished within 30 s: False" in text
