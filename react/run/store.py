"""The results store: one SQLite file, one row per finished sweep run, written as each run ends.

A sweep may be interrupted at any moment (Ctrl-C, a killed process, a lost machine), so every run
is committed on its own the moment its result reaches the parent process; rerunning the sweep
asks :meth:`ResultStore.finished_keys` which points are done and skips them. Only the parent
process writes (workers return results), so there is never more than one writer; WAL mode lets
``react report`` read the file while a sweep is still filling it.

The file identifies itself: ``PRAGMA application_id`` holds :data:`APPLICATION_ID` and
``PRAGMA user_version`` the schema version. Anything else — a text file, somebody else's SQLite
database, a damaged file — is refused with one :class:`StoreError` line and is never written:
the checks run on a read-only connection before a writable one is opened.

Besides the rows, this module turns a store into the table ``react report`` prints (and its CSV):
per point and job, the run without REACT beside the run with it.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from react.model.errors import ReactError

__all__ = [
    "APPLICATION_ID",
    "DEFAULT_STORE",
    "REPORT_FIELDS",
    "SCHEMA_VERSION",
    "ResultStore",
    "RunRecord",
    "StoreError",
    "format_report",
    "report_rows",
    "write_csv_rows",
    "write_report_csv",
]

DEFAULT_STORE = Path("results") / "react.sqlite"
"""Where sweeps write and reports read when no ``--store`` is given."""

APPLICATION_ID = 0x52454143
"""``PRAGMA application_id`` of a react results store: the ASCII bytes ``REAC``."""

SCHEMA_VERSION = 1
"""``PRAGMA user_version`` of the layout below; a store from a newer layout is refused."""

STATUSES = ("ok", "failed")
REACT_MODES = ("off", "on", "scenario")

_SQLITE_MAGIC = b"SQLite format 3\x00"

_SCHEMA = """
CREATE TABLE runs (
    point_key   TEXT PRIMARY KEY,   -- hash of scenario + seed + react + warm-up + runner
    pair_key    TEXT NOT NULL,      -- the same hash without react: the on and off runs share it
    sweep       TEXT NOT NULL,      -- name of the sweep that ran it first
    params      TEXT NOT NULL,      -- JSON: the grid values of this point
    scenario    TEXT NOT NULL,      -- JSON: the scenario document after the overrides
    seed        INTEGER NOT NULL,
    react       TEXT NOT NULL CHECK (react IN ('off', 'on', 'scenario')),
    status      TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error       TEXT,
    metrics     TEXT,               -- JSON: {job: {metric: value}}, NULL when failed
    version     TEXT NOT NULL,      -- package version and git commit that produced it
    started_at  TEXT NOT NULL,      -- ISO 8601, UTC
    finished_at TEXT NOT NULL,
    duration_s  REAL NOT NULL
);
CREATE INDEX runs_pair ON runs (pair_key);
"""


class StoreError(ReactError, ValueError):
    """A results store cannot be used: missing, not SQLite, foreign, damaged, or a bad record."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run of one sweep point, as stored.

    ``metrics`` maps each job name to its statistics (see :func:`react.run.sweep.run_point`); it is
    None for a failed run, whose ``error`` says why. ``react`` is ``"off"``, ``"on"`` (REACT
    forced off or on for every job) or ``"scenario"`` (each job as its scenario says).
    """

    point_key: str
    pair_key: str
    sweep: str
    params: Mapping[str, Any]
    scenario: Mapping[str, Any]
    seed: int
    react: str
    status: str
    error: str | None
    metrics: Mapping[str, Mapping[str, Any]] | None
    version: str
    started_at: str
    finished_at: str
    duration_s: float

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise StoreError(f"RunRecord: status must be one of {STATUSES}, got {self.status!r}")
        if self.react not in REACT_MODES:
            raise StoreError(f"RunRecord: react must be one of {REACT_MODES}, got {self.react!r}")
        if self.status == "ok" and self.metrics is None:
            raise StoreError(f"RunRecord {self.point_key}: an ok run needs its metrics")


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class ResultStore:
    """An open results store. Use as a context manager, or call :meth:`close`.

    Parameters
    ----------
    path : path-like
        The SQLite file (``results/react.sqlite`` by default in the CLI).
    create : bool
        Create the file (and its folder) if it does not exist. With False a missing file is an
        error, which is what a report wants.

    Raises
    ------
    StoreError
        If the file is not an SQLite database, belongs to another application, has a schema
        newer than this code, or is damaged. The file is not modified in any of these cases.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with ResultStore(os.path.join(d, "r.sqlite")) as store:
    ...         print(len(store.finished_keys()))
    0
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self.path = Path(path)
        exists = self.path.exists()
        if exists:
            _check_existing(self.path)
        elif not create:
            raise StoreError(f"no results store at {str(self.path)!r} (run 'react sweep' first)")
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = FULL")  # a committed run survives a crash
            if not exists:
                self._create()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open results store {str(self.path)!r}: {exc}") from None

    def _create(self) -> None:
        # one transaction: a crash while creating leaves no half-made store behind
        self._db.executescript(
            "BEGIN;" + _SCHEMA
            + f"PRAGMA application_id = {APPLICATION_ID};"
            + f"PRAGMA user_version = {SCHEMA_VERSION};"
            + "COMMIT;"
        )

    # -- context manager -------------------------------------------------------------------------
    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()
            self._db = None  # type: ignore[assignment]

    # -- writing ---------------------------------------------------------------------------------
    def record(self, run: RunRecord) -> None:
        """Store one run and commit it at once; a rerun of the same point replaces its row."""
        values = (
            run.point_key, run.pair_key, run.sweep, _json(run.params), _json(run.scenario),
            run.seed, run.react, run.status, run.error,
            None if run.metrics is None else _json(run.metrics),
            run.version, run.started_at, run.finished_at, run.duration_s,
        )
        try:
            with self._db:  # commits, or rolls back on an error
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute(
                    "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", values
                )
        except (sqlite3.Error, ValueError) as exc:
            raise StoreError(f"cannot record run {run.point_key} in {str(self.path)!r}: {exc}"
                             ) from None

    # -- reading ---------------------------------------------------------------------------------
    def finished_keys(self) -> set[str]:
        """Point keys of runs that finished ok; a sweep skips these (failed ones run again)."""
        rows = self._db.execute("SELECT point_key FROM runs WHERE status = 'ok'")
        return {key for (key,) in rows}

    def runs(self, *, sweep: str | None = None) -> list[RunRecord]:
        """Every stored run (of one sweep, if given), in the order they were first recorded."""
        query = "SELECT * FROM runs"
        args: tuple[Any, ...] = ()
        if sweep is not None:
            query += " WHERE sweep = ?"
            args = (sweep,)
        rows = self._db.execute(query + " ORDER BY rowid", args).fetchall()
        return [_record(row) for row in rows]

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM runs").fetchone()[0])


def _record(row: Sequence[Any]) -> RunRecord:
    (key, pair, sweep, params, scenario, seed, react, status, error, metrics, version,
     started, finished, duration) = row
    return RunRecord(key, pair, sweep, json.loads(params), json.loads(scenario), seed, react,
                     status, error, None if metrics is None else json.loads(metrics), version,
                     started, finished, duration)


def _check_existing(path: Path) -> None:
    """Refuse anything but a react store of a known schema, reading only."""
    name = str(path)
    if path.is_dir():
        raise StoreError(f"results store {name!r} is a directory, expected an SQLite file")
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"cannot read results store {name!r}: {exc.strerror}") from None
    if head != _SQLITE_MAGIC:
        what = "an empty file" if not head else "not an SQLite database"
        raise StoreError(f"{name!r} is {what}, not a react results store; "
                         "give another --store path")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open results store {name!r}: {exc}") from None
    try:
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if app_id != APPLICATION_ID:
            tables = [t for (t,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            raise StoreError(
                f"{name!r} is an SQLite database of another application (application_id "
                f"{app_id:#x}, tables {tables or 'none'}), not a react results store; "
                "give another --store path")
        if version != SCHEMA_VERSION:
            raise StoreError(f"results store {name!r} has schema version {version}; this react "
                             f"reads version {SCHEMA_VERSION}")
        check = db.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise StoreError(f"results store {name!r} is damaged (quick_check: {check})")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"results store {name!r} is damaged or not a database: {exc}") from None
    finally:
        db.close()


# -- report ----------------------------------------------------------------------------------------
REPORT_FIELDS = (
    "sweep", "params", "seed", "job",
    "algbw_off_gbps", "algbw_on_gbps", "algbw_gain",
    "mean_off_s", "mean_on_s", "p95_off_s", "p95_on_s",
    "decisions", "pattern_changes", "settled_epoch", "status",
)
"""Columns of :func:`report_rows` (and of the report's CSV file), in order."""


def report_rows(runs: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """One row per point and job: without REACT beside with REACT, and the bandwidth gain.

    Runs pair up by ``pair_key`` (same scenario, seed, warm-up and runner). A point whose other
    half is missing or failed still gets a row with blanks (None) where numbers are missing;
    ``status`` then says what is missing. A run with ``react = "scenario"`` (each job as its
    scenario says) gets a row of its own with its numbers in the "on" columns.
    The gain is ``algbw_on / algbw_off - 1``.
    """
    pairs: dict[tuple[str, bool], dict[str, RunRecord]] = {}
    for run in runs:
        side = "off" if run.react == "off" else "on"
        # a run with each job's REACT as its scenario says is a row of its own, never half a pair
        pairs.setdefault((run.pair_key, run.react == "scenario"), {})[side] = run
    rows = []
    for sides in pairs.values():
        first = sides.get("off") or sides["on"]
        off, on = sides.get("off"), sides.get("on")
        jobs: list[str] = []
        for half in (off, on):
            for job in (half.metrics or {}) if half else {}:
                if job not in jobs:
                    jobs.append(job)
        status = _pair_status(off, on, alone=first.react == "scenario")
        if not jobs:
            jobs = [""]
        for job in jobs:
            a = _job_metrics(off, job)
            b = _job_metrics(on, job)
            algbw_off = a.get("mean_algbw_gbps")
            algbw_on = b.get("mean_algbw_gbps")
            gain = (algbw_on / algbw_off - 1.0
                    if algbw_on is not None and algbw_off not in (None, 0) else None)
            rows.append({
                "sweep": first.sweep,
                "params": " ".join(f"{k}={_short(v)}" for k, v in first.params.items()),
                "seed": first.seed,
                "job": job,
                "algbw_off_gbps": algbw_off,
                "algbw_on_gbps": algbw_on,
                "algbw_gain": gain,
                "mean_off_s": a.get("mean_time_s"),
                "mean_on_s": b.get("mean_time_s"),
                "p95_off_s": a.get("p95_time_s"),
                "p95_on_s": b.get("p95_time_s"),
                "decisions": b.get("decisions"),
                "pattern_changes": b.get("pattern_changes"),
                "settled_epoch": b.get("settled_epoch"),
                "status": status,
            })
    return rows


def _job_metrics(run: RunRecord | None, job: str) -> Mapping[str, Any]:
    if run is None or run.metrics is None:
        return {}
    return run.metrics.get(job, {})


def _pair_status(off: RunRecord | None, on: RunRecord | None, *, alone: bool = False) -> str:
    if alone and on is not None:
        return "REACT as scenario" + (" failed" if on.status != "ok" else "")
    parts = []
    for side, run in (("off", off), ("on", on)):
        if run is None:
            parts.append(f"{side} missing")
        elif run.status != "ok":
            parts.append(f"{side} failed")
    return ", ".join(parts) or "ok"


def _short(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1e4:
        return f"{value:g}"
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 30 else text[:27] + "..."


def _cell(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)


def format_report(rows: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """Text lines of the report table: algbw (Gb/s) and p95 time (µs) off/on, and the gain."""
    params_width = max([len("params"), *(len(r["params"]) for r in rows)])
    job_width = max([len("job"), *(len(r["job"]) for r in rows)])
    header = (f"{'params':<{params_width}} {'seed':>5} {'job':<{job_width}} "
              f"{'algbw off':>10} {'algbw on':>10} {'gain':>8} {'p95 off us':>11} "
              f"{'p95 on us':>11} {'changes':>7} {'settled':>7}  status")
    yield header
    yield "-" * len(header)
    for r in rows:
        p95_off = None if r["p95_off_s"] is None else r["p95_off_s"] * 1e6
        p95_on = None if r["p95_on_s"] is None else r["p95_on_s"] * 1e6
        yield (f"{r['params']:<{params_width}} {r['seed']:>5} {r['job']:<{job_width}} "
               f"{_cell(r['algbw_off_gbps'], '.2f'):>10} {_cell(r['algbw_on_gbps'], '.2f'):>10} "
               f"{_cell(r['algbw_gain'], '+.1%'):>8} {_cell(p95_off, '.1f'):>11} "
               f"{_cell(p95_on, '.1f'):>11} {_cell(r['pattern_changes'], 'd'):>7} "
               f"{_cell(r['settled_epoch'], 'd'):>7}  {r['status']}")


def write_csv_rows(
    path: str | os.PathLike[str], rows: Sequence[Mapping[str, Any]], fields: Sequence[str]
) -> None:
    """Write ``rows`` as CSV with the columns ``fields``, in that order; ``None`` as a blank.

    The one CSV writer of the result tables (``react report``, ``react plot``, ``react run``).
    """
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row[k] is None else row[k]) for k in fields})


def write_report_csv(path: str | os.PathLike[str], rows: Sequence[Mapping[str, Any]]) -> None:
    """Write the report rows as CSV (columns :data:`REPORT_FIELDS`; blanks where missing)."""
    write_csv_rows(path, rows, REPORT_FIELDS)
