"""What RTuner writes and reads: pattern fingerprints, decisions, epoch results, the result
file (the formats are in :mod:`react.runtime.tuner`'s docstring)."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from react.control.controller import Decision
from react.control.detect import CongestionReport, FlowCongestion
from react.model.errors import ReactError
from react.model.observation import EpochResult, FlowTiming
from react.model.pattern import Flow, Pattern
from react.model.transforms import ChunkLocalSwap, GlobalSwap, PositionSwap, Swap
from react.runtime.channel import (
    MessageError,
)

RESULT_FORMAT = "react-tuner-result/1"
PROTOCOL_VERSION = 1
PINGS = 16
"""Clock-offset samples per rank at connection (the one with the shortest round trip counts)."""

_POLL_S = 0.2  # how often background threads look up from a blocking read to check for close
_SWAPS = {cls.kind: cls for cls in (GlobalSwap, ChunkLocalSwap, PositionSwap)}


def pattern_fingerprint(pattern: Pattern) -> str:
    """A short stable digest of a pattern's JSON: equal patterns, equal fingerprints."""
    cached = pattern._cache.get("fingerprint")
    if cached is None:
        cached = hashlib.sha256(pattern.to_json().encode("utf-8")).hexdigest()[:16]
        pattern._cache["fingerprint"] = cached
    return str(cached)


# -- JSON records ------------------------------------------------------------------------------
def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _swap_to_dict(swap: Swap) -> dict[str, Any]:
    return {"kind": swap.kind, **{f.name: getattr(swap, f.name) for f in fields(swap)}}


def _swap_from_dict(data: Mapping[str, Any]) -> Swap:
    cls = _SWAPS.get(data.get("kind"))  # type: ignore[arg-type]
    if cls is None:
        raise ReactError(f"unknown swap kind {data.get('kind')!r}; expected one of "
                         f"{sorted(_SWAPS)}")
    names = [f.name for f in fields(cls)]
    return cls(**{n: data[n] for n in names})  # type: ignore[return-value]


def _decision_summary(d: Decision) -> dict[str, Any]:
    return {"batch": d.batch, "action": d.action, "reason": d.reason,
            "swaps": [_swap_to_dict(s) for s in d.swaps]}


_CONGESTION_NUMBERS = ("p90_bps", "mean_bps", "class_mean_bps", "normalised_std")


def report_to_dict(report: CongestionReport | None) -> dict[str, Any] | None:
    """A decision's congestion report as JSON data (None stays None): each congested flow
    (``[step, src, dst, chunks, op]``, as in ``Pattern.to_dict``) with its kind, degree and the
    numbers behind the verdict, and the steady-congested ranks."""
    if report is None:
        return None
    return {
        "flows": [{"flow": [c.flow.step, c.flow.src, c.flow.dst, list(c.flow.chunks), c.flow.op],
                   "kind": c.kind, "degree": c.degree,
                   **{k: _finite(getattr(c, k)) for k in _CONGESTION_NUMBERS}}
                  for c in report.flows],
        "steady_inbound": sorted(report.steady_inbound),
        "steady_outbound": sorted(report.steady_outbound),
    }


def report_from_dict(data: Mapping[str, Any] | None) -> CongestionReport | None:
    """:func:`report_to_dict` read back (a number written as null reads as NaN)."""
    if data is None:
        return None
    flows = []
    for c in data["flows"]:
        step, src, dst, chunks, op = c["flow"]
        if c["kind"] not in ("steady", "erratic"):
            raise ReactError(f"congestion report: kind must be 'steady' or 'erratic', got "
                             f"{c['kind']!r}")
        numbers = [math.nan if c[k] is None else float(c[k]) for k in _CONGESTION_NUMBERS]
        flows.append(FlowCongestion(
            Flow(int(step), int(src), int(dst), tuple(int(x) for x in chunks), str(op)),  # type: ignore[arg-type]
            c["kind"], int(c["degree"]), *numbers))
    return CongestionReport(tuple(flows), frozenset(int(r) for r in data["steady_inbound"]),
                            frozenset(int(r) for r in data["steady_outbound"]))


def _result_to_dict(result: EpochResult) -> dict[str, Any]:
    return {"epoch": result.epoch, "collective_time_s": result.collective_time_s,
            "message_bytes": result.message_bytes,
            "flows": [[t.start_s, t.end_s, t.size_bytes] for t in result.flows]}


def _result_from_dict(data: Mapping[str, Any], pattern: Pattern) -> EpochResult:
    rows = data["flows"]
    if len(rows) != len(pattern.flows):
        raise ReactError(f"epoch {data.get('epoch')!r}: {len(rows)} flow timings for a pattern "
                         f"of {len(pattern.flows)} flows")
    flows = tuple(FlowTiming(f, float(a), float(b), float(s))
                  for f, (a, b, s) in zip(pattern.flows, rows, strict=True))
    return EpochResult(int(data["epoch"]), float(data["collective_time_s"]), flows,
                       float(data["message_bytes"]))


def read_result(
    path: str | os.PathLike[str],
) -> tuple[list[EpochResult], list[Pattern], list[Decision]]:
    """Read a leader's result file: every epoch's result, the pattern each ran, the decisions.

    The three lists are what :class:`react.run.driver.JobRun` holds (``results``, ``patterns``
    one per epoch, ``decisions``), so ``JobRun(name, *read_result(path))`` reports like a
    simulated job. A decision's ``report`` (:func:`report_to_dict`) is read where the file has
    one; a file written without it reads as ``report=None``.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ReactError(f"read_result: cannot read {os.fspath(path)!r} ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != RESULT_FORMAT:
        raise ReactError(f"read_result: {os.fspath(path)!r} is not a tuner result (expected "
                         f"format {RESULT_FORMAT!r})")
    try:
        patterns = [Pattern.from_dict(p) for p in doc["patterns"]]
        results, ran = [], []
        for row in doc["epochs"]:
            pattern = patterns[row["pattern"]]
            results.append(_result_from_dict(row, pattern))
            ran.append(pattern)
        decisions = [
            Decision(
                batch=int(d["batch"]), action=d["action"], pattern=patterns[d["pattern"]],
                reason=str(d["reason"]), swaps=tuple(_swap_from_dict(s) for s in d["swaps"]),
                estimated_gain=d["estimated_gain"], observed_gain=d["observed_gain"],
                mean_time_s=math.nan if d["mean_time_s"] is None else float(d["mean_time_s"]),
                report=report_from_dict(d.get("report")),
            )
            for d in doc["decisions"]
        ]
    except ReactError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ReactError(f"read_result: malformed tuner result {os.fspath(path)!r} "
                         f"({exc!r})") from None
    return results, ran, decisions


def _int(message: Mapping[str, Any], key: str, *, nullable: bool = False) -> int | None:
    value = message.get(key)
    if value is None and nullable:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MessageError(f"{message.get('type')!r} message: {key} must be a non-negative "
                           f"integer, got {value!r}")
    return value


def _number(message: Mapping[str, Any], key: str) -> float:
    value = message.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise MessageError(f"{message.get('type')!r} message: {key} must be a number, got "
                           f"{value!r}")
    return float(value)


