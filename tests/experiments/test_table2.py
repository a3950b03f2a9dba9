"""Smoke and unit tests of experiments/table2.py (Table 2 analog)."""

import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments import table2  # noqa: E402


def test_allocation_is_distinct_hosts_and_an_outside_source():
    hosts, src, dst = table2.allocation(2, 8)
    assert len(set(hosts)) == 8 and src not in hosts and dst in hosts
    assert table2.allocation(2, 8) == (hosts, src, dst)
    assert table2.allocation(3, 8) != (hosts, src, dst)


def test_p0_has_no_background_and_all_epochs_count():
    points = table2.table2_points([4], [0, 1], 1, epochs=10, message_bytes=1e6, sweep="t")
    p0 = [p for p in points if p.params["p"] == 0]
    assert p0 and all(not p.scenario["background"] for p in p0)
    assert all(p.warmup_epochs == 0 for p in points)


def test_quick_run_writes_the_table(tmp_path):
    args = ["--quick", "--out", str(tmp_path), "--store", str(tmp_path / "s.sqlite"),
            "--no-progress"]
    assert table2.main(args) == 0
    with (tmp_path / "table2-quick.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["ranks"], r["p"]) for r in rows] == [("4", "0"), ("4", "2")]
    # without congestion REACT finds nothing worth changing in 20 epochs: the same run twice
    assert float(rows[0]["changes"]) == 0
    assert float(rows[0]["speedup_mean"]) == pytest.approx(1.0)
    assert float(rows[1]["paper_speedup_mean"]) == 1.138
