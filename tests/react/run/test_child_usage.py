"""run_measured reports the command's own peak, not its parent's or an earlier child's."""

import sys

import pytest

from react.run.child_usage import run_measured

MiB = 2**20


def test_a_small_command_spawned_from_a_big_process_reports_its_own_small_peak():
    # The trap CI met: a child spawned from a 650 MiB test session reported 656 MiB.
    ballast = bytearray(400 * MiB)       # bytearray(n) writes its n zero bytes: resident
    done = run_measured([sys.executable, "-c", "pass"])
    assert len(ballast) == 400 * MiB
    assert done.returncode == 0 and not done.timed_out
    assert 1 * MiB < done.peak_rss_bytes < 100 * MiB


def test_a_big_command_reports_what_it_held_and_its_output():
    done = run_measured([sys.executable, "-c",
                         "import sys; b = bytearray(300 * 2**20); print('out'); "
                         "print('err', file=sys.stderr); sys.exit(3)"])
    assert done.returncode == 3
    assert done.stdout == "out\n" and done.stderr == "err\n"
    assert 300 * MiB <= done.peak_rss_bytes < 400 * MiB
    assert done.cpu_s > 0 and done.wall_s >= done.cpu_s * 0.5


def test_a_command_past_its_timeout_is_killed_and_says_so():
    done = run_measured([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert done.timed_out and done.wall_s < 10


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="timeout=0"):
        run_measured([sys.executable, "-c", "pass"], timeout=0)
    with pytest.raises(ValueError, match="empty"):
        run_measured([])
