"""The memory guard (react/memory.py): estimate before a run, refuse or warn, --max-memory."""

import gc
import tracemalloc
from pathlib import Path

import pytest

from react.cli import main
from react.errors import ReactError
from react.memory import (
    BASE_BYTES,
    BYTES_PER_FLOW_EPOCH,
    MemoryLimitError,
    check_memory,
    estimate_memory,
    parse_size,
)
from react.scenario import load_scenario, run_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "experiments" / "scenarios"
RING = SCENARIOS / "ring_degraded_spine.toml"  # one 8-rank ring AllReduce job


def test_estimate_counts_flows_per_epoch_times_epochs():
    # A ring AllReduce of n ranks runs 2 (n - 1) steps of n flows: 2 x 7 x 8 = 112 per epoch;
    # 10 epochs keep 1,120 flow records, twice that when two runs are kept (--compare).
    scenario = load_scenario(RING).with_epochs(10)
    est = estimate_memory(scenario)
    assert est.jobs == (("ring", 112, 10),)
    assert est.flow_epochs == 1120
    assert est.bytes == BASE_BYTES + 1120 * BYTES_PER_FLOW_EPOCH
    assert estimate_memory(scenario, runs=2).flow_epochs == 2240


def test_bytes_per_flow_epoch_bounds_what_a_run_really_holds():
    # The constant must not under-estimate: the traced peak of a run grows by less than it per
    # extra flow-epoch (20 more epochs of the 112-flow ring: 2,240 flow-epochs). REACT off:
    # a controller decision's transient memory (swap search) is no per-flow cost.
    scenario = load_scenario(RING)
    peaks = []
    for epochs in (5, 25):
        gc.collect()
        tracemalloc.start()
        runs = run_scenario(scenario.with_epochs(epochs), react=False)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert len(runs["ring"].results) == epochs
        del runs
    per_flow_epoch = (peaks[1] - peaks[0]) / (20 * 112)
    assert 0 < per_flow_epoch <= BYTES_PER_FLOW_EPOCH


def test_check_memory_refuses_above_the_cap_naming_the_estimate():
    scenario = load_scenario(RING).with_epochs(10)
    need = estimate_memory(scenario).bytes
    assert check_memory(scenario, need).bytes == need  # exactly at the cap: allowed
    with pytest.raises(MemoryLimitError, match=r"1,120 flow records.*--max-memory"):
        check_memory(scenario, need - 1)


def test_check_memory_without_a_cap_uses_the_memory_available():
    scenario = load_scenario(RING).with_epochs(10)
    need = estimate_memory(scenario).bytes
    check_memory(scenario, available=None)  # unknown: no check
    check_memory(scenario, available=need * 3)  # a third of what is free: silent
    with pytest.warns(ResourceWarning, match="more than half"):
        check_memory(scenario, available=int(need * 1.5))
    with pytest.raises(MemoryLimitError, match="80% of the"):
        check_memory(scenario, available=need)


@pytest.mark.parametrize("text,expected", [("2G", 2 * 2**30), ("512M", 512 * 2**20),
                                           ("1.5GiB", 3 * 2**29), ("4096", 4096),
                                           ("64kb", 64 * 1024)])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "lots", "2X", "-1G", "0"])
def test_parse_size_rejects_bad_sizes(bad):
    with pytest.raises(ReactError, match="memory size"):
        parse_size(bad)


def test_run_max_memory_refuses_before_starting(capsys):
    assert main(["run", str(RING), "--epochs", "10", "--max-memory", "1M", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "flow records" in err and "--max-memory 1.0 MiB" in err
    assert main(["run", str(RING), "--epochs", "2", "--max-memory", "4G", "--no-progress"]) == 0
    assert main(["run", str(RING), "--max-memory", "two gigs", "--no-progress"]) == 2
    assert "memory size 'two gigs'" in capsys.readouterr().err
