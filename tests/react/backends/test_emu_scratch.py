"""The emulator's scratch folder goes however the run ends (no root needed: no namespaces).

Truth is the file system: after a normal exit, an exit that skips the ``with`` block's end, and
a SIGTERM (whose default action never unwinds ``with`` blocks), the folder no longer exists.
"""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from react.backends.emu.cleanup import ScratchDir

ROOT = Path(__file__).resolve().parents[3]

CHILD = textwrap.dedent("""
    import os, sys, time
    from react.backends.emu.cleanup import ScratchDir
    scratch = ScratchDir("react-emu-test-")
    (scratch.path / "job-0").mkdir()
    (scratch.path / "job-0" / "fcts.json").write_text("[]")
    print(scratch.path, flush=True)
    if sys.argv[1] == "exit":
        sys.exit(3)  # never closed by the code: only the atexit hook can remove it
    time.sleep(30)
""")


def _child(mode, tmp_path):
    return subprocess.Popen([sys.executable, "-c", CHILD, mode], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, env={**os.environ, "TMPDIR": str(tmp_path)})


def test_removed_when_the_block_ends(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    with ScratchDir("react-emu-test-") as path:
        (path / "x").write_text("x")
        assert path.parent == tmp_path
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_removed_at_exit_without_the_block(tmp_path):
    child = _child("exit", tmp_path)
    path = Path(child.stdout.readline().strip())
    assert child.wait(timeout=30) == 3
    assert path.parent == tmp_path
    assert not path.exists()


def test_removed_on_sigterm(tmp_path):
    child = _child("sleep", tmp_path)
    try:
        path = Path(child.stdout.readline().strip())
        assert path.is_dir()
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == -signal.SIGTERM  # still dies of the signal
        assert not path.exists()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
