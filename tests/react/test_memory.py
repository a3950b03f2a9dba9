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
    BYTES_PER_FLOW_EPOCH_TRACED,
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


def _traced_growth(run) -> float:
    """Traced peak growth per extra flow-epoch: 20 more epochs of the 112-flow ring (2,240
    flow-epochs), after a first run that pays the imports and caches."""
    scenario = load_scenario(RING)
    peaks = []
    for epochs in (5, 5, 25):
        gc.collect()
        tracemalloc.start()
        runs = run(scenario.with_epochs(epochs))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert len(runs["ring"].results) == epochs
        del runs
    return (peaks[2] - peaks[1]) / (20 * 112)


def test_bytes_per_flow_epoch_bounds_what_a_run_really_holds():
    # The constant must not under-estimate. REACT off: a controller decision's transient memory
    # (swap search) is no per-flow cost.
    per_flow_epoch = _traced_growth(lambda s: run_scenario(s, react=False))
    assert 0 < per_flow_epoch <= BYTES_PER_FLOW_EPOCH


def test_a_trace_keeps_the_flow_records_and_its_estimate_bounds_them():
    from react.trace import run_recorded

    kept = []

    def traced(s):
        recorded = run_recorded(s, react=False)
        kept.append(len(recorded.records))
        return dict(recorded.runs)

    per_flow_epoch = _traced_growth(traced)
    assert kept == [5 * 112, 5 * 112, 25 * 112]  # one record per flow and epoch
    assert BYTES_PER_FLOW_EPOCH < per_flow_epoch <= BYTES_PER_FLOW_EPOCH_TRACED
    est = estimate_memory(load_scenario(RING).with_epochs(10), traced=True)
    assert est.bytes == BASE_BYTES + 1120 * BYTES_PER_FLOW_EPOCH_TRACED


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
