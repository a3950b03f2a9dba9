"""experiments/fit_tcp.py: the TCP-aware mode's parameters come out of the committed ns-3 data."""

import importlib.util
import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from flowsim.tcp import FITTED


def load(name):
    path = Path(__file__).resolve().parents[2] / "experiments" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"experiment_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


fit_tcp = load("fit_tcp")


def test_fit_reproduces_the_shipped_parameters():
    reference = fit_tcp.read_reference(fit_tcp.REFERENCE_CSV)
    assert fit_tcp.fit(reference) == FITTED


def test_fitted_mode_is_within_ten_percent_of_ns3_on_every_case():
    # The ns-3 measurements are the truth: every reference case, fitted or not (the leaf-spine
    # tree with two long-lived flows and the star's one-source variant are validation only).
    reference = fit_tcp.read_reference(fit_tcp.REFERENCE_CSV)
    rows = {r["case"]: r for r in fit_tcp.table(reference, FITTED)}
    assert set(rows) == {c.name for c in fit_tcp.CASES}
    for row in rows.values():
        assert abs(row["tcp_err"]) <= 0.10, row
    for case in ("leaf-spine-tree-p2", "star-tree-p2-one-source"):
        assert case not in (*fit_tcp.FIT_STARTUP, *fit_tcp.FIT_SHARING)
    # and exact max-min is not (the reason the mode exists)
    assert abs(rows["star-tree-p1"]["maxmin_err"]) > 0.10
    assert abs(rows["pair-16MB"]["maxmin_err"]) > 0.10
    assert abs(rows["leaf-spine-tree-p2"]["maxmin_err"]) > 0.10


@pytest.mark.parametrize("without", [
    {"reverse_share": 1.0},  # the pair cap: the pairs exchanging data both ways
    {"rtt_exponent": 0.0},  # round-trip weights: flows within a leaf beside flows across it
    {"ramp_segments": math.inf},  # the ramp: rate rises take effect at once
    {"young_weight": 1.0},  # young flows: a new flow beside a long-lived one
])
def test_each_correction_is_needed_for_some_case(without):
    reference = fit_tcp.read_reference(fit_tcp.REFERENCE_CSV)
    rows = fit_tcp.table(reference, replace(FITTED, **without))
    assert max(abs(r["tcp_err"]) for r in rows) > 0.10


def test_main_prints_the_table(tmp_path, capsys):
    out = tmp_path / "fit.csv"
    assert fit_tcp.main(["--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "star-tree-p2" in text and out.exists()
    with pytest.raises(SystemExit):
        fit_tcp.fit({})


def test_sim_epoch_time_leaves_the_case_alone():
    # --measure times flowsim per epoch of a longer run of each case; the case itself (one
    # epoch, as ns-3 runs it) must not change.
    case = next(c for c in fit_tcp.CASES if c.name == "pair-1MB")
    per_epoch = fit_tcp.sim_epoch_s(case, "tcp", epochs=3)
    assert 0 < per_epoch < 5
    assert [job["epochs"] for job in case.doc["jobs"]] == [1]
