"""Timelines of a scenario run as Chrome trace-event JSON (opens in Perfetto, chrome://tracing).

One process per job (per job and mode under ``--compare``) with one track per rank, or one
process for the network with one track per directed link (``tracks="link"``): every flow is a
slice on the track of the rank that sends it, or on every link its path crosses. A track holds
one slice at a time, so concurrent flows of one rank or link go on numbered lanes of it
("rank 3", "rank 3 #2"). Each job also gets an "epochs" track: one slice per epoch, an instant
event where a new pattern starts to run, and one where the controller decided (its action,
reason and the congested flows it acted on in the event's arguments). Times are microseconds
of simulated time (the format's unit).

Long runs: only a window of epochs is written (``epochs=(first, last)``, default the first
:data:`DEFAULT_WINDOW`), so that a trace stays small enough for a browser to open.

The runs come from :func:`run_recorded`, which runs a scenario like
:func:`react.run.scenario_runs.run_scenario` and also keeps the simulated network's flow records
(start, end, path of every flow), which the per-link view needs; a run on another backend has
per-rank tracks only, its epochs laid back to back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowsim.errors import FlowsimError
from flowsim.records import FlowRecord
from react.control.backend import JobRun
from react.model.errors import ReactError

__all__ = ["DEFAULT_WINDOW", "Recorded", "TraceError", "run_recorded", "trace_events",
           "write_trace"]

DEFAULT_WINDOW = 100
"""Epochs written when no window is given (per job)."""

TRACKS = ("rank", "link")


class TraceError(ReactError, ValueError):
    """A trace cannot be made as asked (bad window, bad track kind)."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """One run of a scenario: each job's record and every flow record of the network."""

    label: str  # "" for a plain run, "without REACT" / "with REACT" under --compare
    runs: Mapping[str, JobRun]
    records: tuple[FlowRecord, ...]


def run_recorded(scenario: Any, *, react: bool | None = None, label: str = "",
                 on_epoch: Callable[[str, int], None] | None = None) -> Recorded:
    """Run ``scenario`` as :func:`react.run.scenario_runs.run_scenario` does, keeping the network's
    flow records when it runs on the simulator (other backends have no flow records: their timeline
    is per rank, from each epoch's flow timings)."""
    from react.backends.sim.engine import SimBackend
    from react.run.driver import run_jobs
    from react.run.scenario import ScenarioError
    from react.run.scenario_runs import open_jobs

    try:
        with open_jobs(scenario, react=react) as jobs:
            runs = run_jobs(jobs, on_epoch=on_epoch)
            nets = {id(j.backend.network): j.backend.network for j in jobs
                    if isinstance(j.backend, SimBackend)}
            records = tuple(r for net in nets.values() for r in net.records)
    except FlowsimError as exc:
        raise ScenarioError(f"{scenario.source}: {exc}") from None
    return Recorded(label, runs, records)


def parse_window(text: str) -> tuple[int, int]:
    """``"FIRST:LAST"`` (epochs, inclusive, from 0) as a pair; :class:`TraceError` if bad."""
    parts = text.split(":")
    try:
        first, last = (int(p) for p in parts)
    except ValueError:
        first, last = -1, -1
    if len(parts) != 2 or first < 0 or last < first:
        raise TraceError(f"--trace-epochs: expected FIRST:LAST with 0 <= FIRST <= LAST, got "
                         f"{text!r}")
    return first, last


def trace_events(scenario: Any, recorded: Sequence[Recorded], *, tracks: str = "rank",
                 epochs: tuple[int, int] | None = None) -> dict[str, Any]:
    """The trace (a JSON-ready dict) of ``recorded`` runs of ``scenario``.

    Parameters
    ----------
    scenario : Scenario
        Names the hosts of each job's ranks and the topology's links.
    recorded : sequence of Recorded
    tracks : {"rank", "link"}
    epochs : (first, last), optional
        The window of epochs written (inclusive); default the first :data:`DEFAULT_WINDOW`.
    """
    if tracks not in TRACKS:
        raise TraceError(f"trace tracks={tracks!r}, expected one of {TRACKS}")
    first, last = epochs if epochs is not None else (0, DEFAULT_WINDOW - 1)
    events: list[dict[str, Any]] = []
    lanes = _Lanes(events)
    link_pid = 1
    pid = 1 + (tracks == "link")
    if tracks == "link":
        _name_process(events, link_pid, "network links", 0)
    total = 0
    for rec in recorded:
        for spec in scenario.jobs:
            run = rec.runs.get(spec.name)
            if run is None:
                continue
            total = max(total, len(run.results))
            label = f"job {spec.name}" + (f" ({rec.label})" if rec.label else "")
            _name_process(events, pid, label, pid)
            job_records = _by_epoch(rec.records, spec.name)
            starts = _epoch_starts(spec, run, job_records)
            if tracks == "link" and not job_records:
                raise TraceError(f"--trace-tracks link needs the simulator's flow records; job "
                                 f"{spec.name!r} ran on the {scenario.backend!r} backend")
            _epochs_track(events, pid, spec, run, starts, first, last)
            for e in range(first, min(last, len(run.results) - 1) + 1):
                if tracks == "rank":
                    _rank_slices(lanes, pid, spec, run, e, starts.get(e, 0.0))
                else:
                    _link_slices(lanes, link_pid, scenario, spec, job_records.get(e, ()), e,
                                 label)
            pid += 1
    shown = f"epochs {first}-{min(last, max(total - 1, first))}"
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"scenario": scenario.name, "tracks": tracks, "window": shown,
                      "epochs_run": total, "time_unit": "us of simulated time"},
    }


def write_trace(path: str | os.PathLike[str], trace: Mapping[str, Any]) -> Path:
    """Write ``trace`` as JSON to ``path`` (an OSError names the path if it cannot be written)."""
    out = Path(path)
    with out.open("w", encoding="utf-8") as fh:
        json.dump(trace, fh, separators=(",", ":"))
    return out


# -- tracks ----------------------------------------------------------------------------------------
class _Lanes:
    """Thread ids for the lanes of each track, so that slices on one lane never overlap."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.busy: dict[tuple[int, str], list[float]] = {}  # lane ends per (pid, track)
        self.tids: dict[tuple[int, str, int], int] = {}
        self.order: dict[int, int] = {}

    def slice(self, pid: int, track: str, sort: int, name: str, cat: str, start_us: float,
              dur_us: float, args: dict[str, Any]) -> None:
        ends = self.busy.setdefault((pid, track), [])
        lane = next((k for k, end in enumerate(ends) if end <= start_us), len(ends))
        if lane == len(ends):
            ends.append(0.0)
        ends[lane] = start_us + dur_us
        key = (pid, track, lane)
        tid = self.tids.get(key)
        if tid is None:
            tid = self.tids[key] = len(self.tids) + 1
            title = track if lane == 0 else f"{track} #{lane + 1}"
            self.events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                                "args": {"name": title}})
            self.events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                                "args": {"sort_index": sort * 64 + lane}})
        self.events.append({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid,
                            "ts": start_us, "dur": dur_us, "args": args})


def _name_process(events: list[dict[str, Any]], pid: int, name: str, sort: int) -> None:
    events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
    events.append({"ph": "M", "name": "process_sort_index", "pid": pid,
                   "args": {"sort_index": sort}})


def _by_epoch(records: Iterable[FlowRecord], job: str) -> dict[int, list[FlowRecord]]:
    out: dict[int, list[FlowRecord]] = {}
    for r in records:
        if r.tenant == job and r.tag.startswith("epoch"):
            out.setdefault(int(r.tag[5:]), []).append(r)
    return out


def _epoch_starts(spec: Any, run: JobRun, records: Mapping[int, list[FlowRecord]]
                  ) -> dict[int, float]:
    """When each epoch began: its first flow's start on the simulator; elsewhere (no records)
    the epochs back to back, each followed by the job's compute gap."""
    if records:
        return {e: min(r.start_s for r in rs) for e, rs in records.items() if rs}
    starts, t = {}, 0.0
    for e, result in enumerate(run.results):
        starts[e] = t
        t += result.collective_time_s + spec.compute_gap_s
    return starts


def _epochs_track(events: list[dict[str, Any]], pid: int, spec: Any, run: JobRun,
                  starts: Mapping[int, float], first: int, last: int) -> None:
    tid = 0
    events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                   "args": {"name": "epochs and decisions"}})
    decided = _decision_epochs(spec, run)
    for e in range(first, min(last, len(run.results) - 1) + 1):
        result, pattern = run.results[e], run.patterns[e]
        t0 = starts.get(e, 0.0) * 1e6
        events.append({"ph": "X", "name": f"epoch {e}", "cat": "epoch", "pid": pid, "tid": tid,
                       "ts": t0, "dur": result.collective_time_s * 1e6,
                       "args": {"collective_time_us": round(result.collective_time_s * 1e6, 3),
                                "algbw_gbps": round(result.algorithm_bandwidth_bps / 1e9, 3),
                                "pattern": pattern.name}})
        if e > 0 and pattern != run.patterns[e - 1]:
            events.append({"ph": "i", "s": "p", "name": "pattern change", "cat": "pattern",
                           "pid": pid, "tid": tid, "ts": t0,
                           "args": {"epoch": e, "note": "a new pattern runs from this epoch"}})
        for decision in decided.get(e, ()):
            end = t0 + result.collective_time_s * 1e6
            args: dict[str, Any] = {"batch": decision.batch, "action": decision.action,
                                    "reason": decision.reason, "epoch": e}
            if decision.swaps:
                args["swaps"] = [str(s) for s in decision.swaps]
            if decision.report is not None:  # what the controller saw, as it classified it
                args["congested"] = [f"{c.flow.src}->{c.flow.dst} at step {c.flow.step}: "
                                     f"{c.kind}" for c in decision.report.flows]
            for key in ("estimated_gain", "observed_gain"):
                value = getattr(decision, key)
                if value is not None:
                    args[key] = round(value, 4)
            events.append({"ph": "i", "s": "p", "name": f"REACT {decision.action}",
                           "cat": "decision", "pid": pid, "tid": tid, "ts": end, "args": args})


def _decision_epochs(spec: Any, run: JobRun) -> dict[int, list[Any]]:
    """The epoch after which each decision was taken, replaying
    :class:`react.control.loop.TuningLoop`'s rule: batches of ``B`` epochs that ran the
    controller's current pattern."""
    if not run.decisions:
        return {}
    size = spec.controller.batch_epochs
    current = run.patterns[0]
    count, k = 0, 0
    out: dict[int, list[Any]] = {}
    for e, pattern in enumerate(run.patterns):
        if k >= len(run.decisions):
            break
        if pattern != current:
            continue
        count += 1
        if count == size:
            out.setdefault(e, []).append(run.decisions[k])
            current = run.decisions[k].pattern
            k += 1
            count = 0
    return out


def _rank_slices(lanes: _Lanes, pid: int, spec: Any, run: JobRun, epoch: int,
                 t0: float) -> None:
    for timing in run.results[epoch].flows:
        f = timing.flow
        lanes.slice(pid, f"rank {f.src} ({spec.hosts[f.src]})", 1 + f.src,
                    f"{f.src}->{f.dst} step {f.step}", "flow", (t0 + timing.start_s) * 1e6,
                    timing.fct_s * 1e6, _flow_args(f, epoch, timing.size_bytes, timing.fct_s))


def _link_slices(lanes: _Lanes, pid: int, scenario: Any, spec: Any,
                 records: Iterable[FlowRecord], epoch: int, label: str) -> None:
    rank = {h: i for i, h in enumerate(spec.hosts)}
    for r in records:
        src, dst = rank.get(r.src, r.src), rank.get(r.dst, r.dst)
        for link_id in r.path:
            link = scenario.topology.link_by_id(link_id)
            lanes.slice(pid, f"{link.src}->{link.dst}", link_id, f"{label}: {src}->{dst}",
                        "flow", r.start_s * 1e6, r.duration_s * 1e6,
                        {"epoch": epoch, "job": spec.name, "src_rank": src, "dst_rank": dst,
                         "bytes": r.size_bytes, "fct_us": round(r.duration_s * 1e6, 3),
                         "port": r.port})


def _flow_args(flow: Any, epoch: int, size: float, fct_s: float) -> dict[str, Any]:
    return {"epoch": epoch, "step": flow.step, "src": flow.src, "dst": flow.dst,
            "chunks": list(flow.chunks), "op": flow.op, "bytes": size,
            "fct_us": round(fct_s * 1e6, 3)}
