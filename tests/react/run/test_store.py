"""The SQLite results store: round trips, resume bookkeeping, refusing foreign files, the report."""

import csv
import sqlite3

import pytest

from react.model.errors import ReactError
from react.run.store import (
    APPLICATION_ID,
    REPORT_FIELDS,
    ResultStore,
    RunRecord,
    StoreError,
    format_report,
    report_rows,
    write_report_csv,
)


def record(key, *, pair="p1", react="off", status="ok", algbw=10.0, p95=2e-3, error=None,
           params=None, seed=0):
    metrics = None if status != "ok" else {
        "tree": {"mean_algbw_gbps": algbw, "mean_time_s": 1e-3, "p95_time_s": p95,
                 "decisions": 3 if react == "on" else 0, "pattern_changes": 2 if react == "on"
                 else 0, "settled_epoch": 12 if react == "on" else 0},
    }
    return RunRecord(key, pair, "s", params or {"jobs.0.message_bytes": 2e6}, {"seed": seed},
                     seed, react, status, error, metrics, "0.1.0+gabc", "2024-01-01T00:00:00",
                     "2024-01-01T00:00:01", 1.0)


def test_store_round_trip_keeps_every_field(tmp_path):
    path = tmp_path / "sub" / "r.sqlite"  # the folder is created too
    runs = [record("a"), record("b", react="on", algbw=12.0),
            record("c", status="failed", error="ValueError: boom")]
    with ResultStore(path) as store:
        for run in runs:
            store.record(run)
    with ResultStore(path, create=False) as store:
        assert store.runs() == runs
        assert len(store) == 3
        assert store.finished_keys() == {"a", "b"}  # a failed run is not finished


def test_store_rerun_of_a_point_replaces_its_row(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        store.record(record("a", status="failed", error="boom"))
        store.record(record("a"))
        assert [r.status for r in store.runs()] == ["ok"]


def test_store_is_marked_with_its_application_id(tmp_path):
    path = tmp_path / "r.sqlite"
    ResultStore(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_store_rows_are_committed_before_close(tmp_path):
    # a second connection sees a recorded run while the writer is still open: nothing waits
    # for close() (or for the end of the sweep) to reach the file
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        store.record(record("a"))
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT point_key FROM runs").fetchall() == [("a",)]


def _foreign_sqlite(path):
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE accounts (id INTEGER, balance REAL)")
        db.execute("INSERT INTO accounts VALUES (1, 2.5)")
    db.close()


def _text(path):
    path.write_text("name,value\na,1\n")


def _empty(path):
    path.write_bytes(b"")


def _truncated_store(path):
    with ResultStore(path) as store:
        for i in range(40):
            store.record(record(f"k{i}", params={"blob": "x" * 2000}))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _garbled_store(path):
    with ResultStore(path) as store:
        for i in range(40):
            store.record(record(f"k{i}", params={"blob": "x" * 2000}))
    data = bytearray(path.read_bytes())
    data[4096:12288] = b"\xa5" * 8192  # pages 2 and 3 (of 4 KiB) overwritten
    path.write_bytes(bytes(data))


def _newer_schema(path):
    ResultStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    db.close()


@pytest.mark.parametrize(("make", "words"), [
    (_foreign_sqlite, "another application"),
    (_text, "not an SQLite database"),
    (_empty, "empty file"),
    (_truncated_store, "damaged"),
    (_garbled_store, "damaged"),
    (_newer_schema, "schema version 99"),
])
def test_store_refuses_a_file_it_does_not_own_and_leaves_it_byte_identical(tmp_path, make, words):
    path = tmp_path / "r.sqlite"
    make(path)
    before = path.read_bytes()
    for create in (True, False):
        with pytest.raises(StoreError) as info:
            ResultStore(path, create=create)
        message = str(info.value)
        assert words in message and str(path) in message
        assert "\n" not in message
    assert path.read_bytes() == before
    assert isinstance(info.value, ReactError) and isinstance(info.value, ValueError)


def test_store_missing_file_is_an_error_for_a_reader(tmp_path):
    with pytest.raises(StoreError, match="no results store"):
        ResultStore(tmp_path / "nope.sqlite", create=False)
    assert not (tmp_path / "nope.sqlite").exists()


def test_store_directory_is_refused(tmp_path):
    with pytest.raises(StoreError, match="is a directory"):
        ResultStore(tmp_path)


def test_run_record_rejects_bad_status_and_missing_metrics():
    with pytest.raises(StoreError, match="status must be one of"):
        record("a", status="done")
    with pytest.raises(StoreError, match="react must be one of"):
        record("a", react="maybe")
    with pytest.raises(StoreError, match="needs its metrics"):
        RunRecord("a", "p", "s", {}, {}, 0, "on", "ok", None, None, "v", "t0", "t1", 0.0)


def test_report_pairs_off_and_on_and_computes_the_gain():
    # off 10 Gb/s, on 12.5 Gb/s: 12.5 / 10 - 1 = +25%
    runs = [record("a", pair="p1", algbw=10.0), record("b", pair="p1", react="on", algbw=12.5),
            record("c", pair="p2", seed=1, algbw=8.0)]
    rows = report_rows(runs)
    assert len(rows) == 2
    first, second = rows
    assert first["job"] == "tree" and first["seed"] == 0
    assert first["algbw_off_gbps"] == 10.0 and first["algbw_on_gbps"] == 12.5
    assert first["algbw_gain"] == pytest.approx(0.25)
    assert first["pattern_changes"] == 2 and first["settled_epoch"] == 12
    assert first["status"] == "ok"
    assert second["algbw_gain"] is None and second["status"] == "on missing"
    lines = list(format_report(rows))
    assert "+25.0%" in lines[2] and "on missing" in lines[3]


def test_report_shows_a_failed_half():
    runs = [record("a"), record("b", react="on", status="failed", error="boom")]
    (row,) = report_rows(runs)
    assert row["status"] == "on failed"
    assert row["algbw_off_gbps"] == 10.0 and row["algbw_on_gbps"] is None


def test_report_keeps_a_react_as_scenario_run_on_its_own_row():
    runs = [record("a"), record("b", react="on", algbw=12.0),
            record("c", react="scenario", algbw=11.0)]  # same pair key "p1" for all three
    rows = report_rows(runs)
    assert [(r["algbw_off_gbps"], r["algbw_on_gbps"], r["status"]) for r in rows] == [
        (10.0, 12.0, "ok"), (None, 11.0, "REACT as scenario")]


def test_report_csv_has_the_documented_columns(tmp_path):
    runs = [record("a", algbw=10.0), record("b", react="on", algbw=11.0)]
    out = tmp_path / "r.csv"
    write_report_csv(out, report_rows(runs))
    with out.open() as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames) == REPORT_FIELDS
    assert len(rows) == 1
    assert float(rows[0]["algbw_gain"]) == pytest.approx(0.1)
