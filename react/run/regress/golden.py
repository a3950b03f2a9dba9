"""Golden files: one small JSON document per case, the reviewed record of what a controller did.

A golden holds the suite's name (so that a directory is never compared with another suite), the
case, the controller, the warm-up and, per job, the metrics and the decision trace. It is written
with one key per line and the decisions in batch order, so that ``git diff`` of a golden directory
reads as "batch 3: action try -> keep". Files are replaced atomically (written beside, then
renamed), and only by ``--record`` or ``--update``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from react.run.regress.runner import CaseRun
from react.run.regress.suite import RegressError, Suite

__all__ = ["GOLDEN_FORMAT", "check_directory", "golden_document", "read_goldens", "write_goldens"]

GOLDEN_FORMAT = "react-regress-golden/1"


def golden_document(suite: Suite, run: CaseRun) -> dict[str, Any]:
    """The golden of one successful case run."""
    from react.control.policies import label

    if run.result is None:
        raise RegressError(f"case {run.case!r} has no result to record ({run.error})")
    return {
        "format": GOLDEN_FORMAT,
        "suite": suite.name,
        "case": run.case,
        "scenario": run.scenario,
        "controller": run.controller if run.controller == "scenario" else label(run.controller),
        "warmup_epochs": suite.warmup_epochs,
        "jobs": {job: _ordered(data) for job, data in run.result["jobs"].items()},
    }


def _ordered(job: Mapping[str, Any]) -> dict[str, Any]:
    """Metrics in :data:`METRICS` order and decision fields in :data:`TRACE_FIELDS` order, so
    that goldens read the same way whichever process wrote them."""
    from react.run.regress.metrics import METRICS, TRACE_FIELDS

    metrics = job["metrics"]
    return {
        "metrics": {m: metrics[m] for m in METRICS if m in metrics},
        "trace": [{f: d[f] for f in TRACE_FIELDS if f in d} for d in job["trace"]],
    }


def _load(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RegressError(f"golden file {str(path)!r} cannot be read as JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != GOLDEN_FORMAT:
        raise RegressError(f"golden file {str(path)!r} is not a react regress golden (format "
                           f"{GOLDEN_FORMAT!r})")
    for key in ("suite", "case", "jobs"):
        if key not in doc:
            raise RegressError(f"golden file {str(path)!r} has no {key!r}")
    return doc


def check_directory(directory: str | os.PathLike[str], suite: Suite, *, must_exist: bool
                    ) -> dict[str, dict[str, Any]]:
    """The goldens of ``suite`` in ``directory``, by case; refuse a directory of another suite.

    Raises
    ------
    RegressError
        If ``must_exist`` and the directory is missing or holds no golden; if any golden there
        is unreadable or was recorded for another suite (nothing is written in either case).
    """
    directory = Path(directory)
    if not directory.exists():
        if must_exist:
            raise RegressError(f"golden directory {str(directory)!r} does not exist (record it "
                               "with --record)")
        return {}
    if not directory.is_dir():
        raise RegressError(f"golden directory {str(directory)!r} is not a directory")
    goldens: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.glob("*.json")):
        doc = _load(path)
        if doc["suite"] != suite.name:
            raise RegressError(
                f"golden directory {str(directory)!r} belongs to suite {doc['suite']!r} "
                f"({path.name}), not to suite {suite.name!r}; give this suite its own directory")
        goldens[doc["case"]] = doc
    if must_exist and not goldens:
        raise RegressError(f"golden directory {str(directory)!r} holds no goldens (record them "
                           "with --record)")
    return goldens


read_goldens = check_directory


def _dump(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_goldens(directory: str | os.PathLike[str], suite: Suite, runs: Sequence[CaseRun], *,
                  replace_all: bool) -> list[Path]:
    """Write the golden of every run that succeeded; return the files written.

    With ``replace_all`` (``--record``), goldens of this suite for cases the suite no longer has
    are removed, so that the directory is exactly the suite's record.
    """
    directory = Path(directory)
    existing = check_directory(directory, suite, must_exist=False)
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for run in runs:
        if not run.ok:
            continue
        path = directory / f"{run.case}.json"
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(_dump(golden_document(suite, run)), encoding="utf-8")
        os.replace(tmp, path)
        written.append(path)
    if replace_all:
        cases = {run.case for run in runs}
        for case in existing:
            if case not in cases:
                (directory / f"{case}.json").unlink(missing_ok=True)
    return written
