"""Tests of experiments/regenerate.py: it covers every file under docs/results/ and its quick
mode runs each step, writing nothing into docs/."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments import regenerate  # noqa: E402

DOCS = ROOT / "docs" / "results"


def _snapshot():
    return {p: p.stat().st_mtime_ns for p in DOCS.rglob("*") if p.is_file()}


def test_every_results_file_is_made_by_a_step_or_listed_with_its_command():
    made = {o for s in (*regenerate.STEPS, regenerate.EMU) for o in s.outputs}
    listed = [pattern for _, outputs, _ in regenerate.NOT_RUN for pattern in outputs]
    for path in DOCS.rglob("*"):
        if not path.is_file() or path.suffix == ".md" and path.name != "gpu.md":
            continue  # the pages are written by hand; each names its command (next test)
        rel = path.relative_to(DOCS)
        assert str(rel) in made or any(rel.match(p) for p in listed), f"{rel}: no step makes it"
    for s in regenerate.STEPS:  # and every step's files are committed
        for name in s.outputs:
            assert (DOCS / name).exists(), f"{s.name} makes {name}, which is not in docs/results"


def test_every_page_names_the_command_that_regenerates_it():
    for page in DOCS.glob("*.md"):
        text = page.read_text()
        assert "experiments.regenerate" in text or "experiments/table2_emu.py" in text \
            or "bench_gpu.py" in text, f"{page.name} names no command"


def test_list_prints_every_step_and_the_commands_not_run(capsys):
    assert regenerate.main(["--list"]) == 0
    out = capsys.readouterr().out
    for s in regenerate.STEPS:
        assert s.shown() in out
    assert "sudo python3 -m experiments.table2_emu --gloo --out docs/results" in out


def test_unknown_step_is_named():
    with pytest.raises(SystemExit, match="unknown step.*nope"):
        regenerate.main(["--only", "nope", "--quick"])
    with pytest.raises(SystemExit, match="needs --emu"):
        regenerate.main(["--only", "table2_emu", "--quick"])


def test_quick_steps_write_to_a_temporary_folder_not_docs(tmp_path, capsys):
    before = _snapshot()
    assert regenerate.main(["--quick", "--only", "fig8,table2",
                            "--store-dir", str(tmp_path / "stores")]) == 0
    out = capsys.readouterr().out
    assert "[2/2 done]" in out and "FAILED" not in out
    assert _snapshot() == before
    # The folder it wrote into is a new temporary one; the test removes it.
    import re
    import shutil
    import tempfile
    scratch = Path(re.search(r"-> (\S+);", out).group(1))
    assert scratch.parent == Path(tempfile.gettempdir()) and scratch.name.startswith(
        "react-regenerate-quick-") and any(scratch.glob("*.csv"))
    shutil.rmtree(scratch)


@pytest.mark.slow
def test_quick_run_of_every_step(tmp_path, capsys):
    before = _snapshot()
    assert regenerate.main(["--quick", "--jobs", "2", "--out", str(tmp_path)]) == 0
    assert "FAILED" not in capsys.readouterr().out
    assert _snapshot() == before
    assert len(list(tmp_path.glob("*.csv"))) >= len(regenerate.STEPS) - 1
