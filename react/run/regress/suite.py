"""Regression suites: which scenarios to rerun, what to watch in each, and how closely.

A suite is a TOML file::

    name = "default"                 # optional, default: the file name; goldens carry it
    description = "..."              # optional
    warmup_epochs = 20               # optional: epochs left out of the time statistics (25)
    controllers = ["scenario"]       # optional: who decides, each a separate case per scenario:
                                     #   "scenario" (each job as its file says: REACT unless it
                                     #   names another), "react", "never", "random",
                                     #   "package.module:Factory", "file.py:Factory" (relative
                                     #   to this file)
    trace = "identical"              # optional: "identical" (every field of every decision) or
                                     #   "equivalent" (same batches, actions and swaps)

    [metrics]                        # the metrics to watch and their tolerance (default: all,
    mean_time_s = 0.0                #   at 0); see react.run.regress.metrics.METRICS for the units
    kept_swaps = 0

    [[scenarios]]
    path = "../scenarios/closed_loop_star.toml"   # a scenario file, relative to this file ...
    name = "star"                    # optional, default: the scenario's name
    epochs = 40                      # optional: every job runs this many epochs
    trace = "equivalent"             # optional, overrides the suite's
    metrics = { mean_time_s = 0.02 } # optional: added to / overriding the suite's [metrics]
    react = { search_width = 2 }     # optional: controller parameters set on every job of the
                                     #   scenario (as experiments' --react-set), so that a case
                                     #   can watch an option on a shipped scenario

    [[scenarios]]                    # ... or a scenario written inline
    name = "quiet-star"
    [scenarios.scenario]
    topology = { name = "star", n = 8 }
    # ... the keys of a scenario file (react.run.scenario)

Everything is checked when the suite is loaded, before anything runs or any golden is touched: a
missing scenario, an unknown metric, a negative tolerance and a controller that does not load are
each one :class:`RegressError` naming the key and the value.
"""

from __future__ import annotations

import copy
import math
import numbers
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from react.model.errors import ReactError
from react.run.regress.metrics import METRICS
from react.run.tomlfile import read_toml

__all__ = ["SCENARIO_CONTROLLER", "TRACE_MODES", "Case", "RegressError", "Suite", "load_suite",
           "parse_suite", "resolve_controllers"]

TRACE_MODES = ("identical", "equivalent")
SCENARIO_CONTROLLER = "scenario"
"""The controller name meaning "each job as its scenario file says"."""

_SUITE_KEYS = ("name", "description", "warmup_epochs", "controllers", "trace", "metrics",
               "scenarios")
_CASE_KEYS = ("path", "scenario", "name", "epochs", "trace", "metrics", "react")


class RegressError(ReactError, ValueError):
    """A suite, a golden directory or a controller cannot be used; the message names it."""


@dataclass(frozen=True, slots=True)
class Case:
    """One scenario of a suite, validated: its document (epochs applied) and what to watch.

    ``document`` is the scenario's TOML data and ``base_dir`` the folder its relative paths are
    read from, so that a worker process can rebuild it; ``jobs`` are its job names.
    """

    name: str
    source: str
    document: Mapping[str, Any]
    base_dir: str
    jobs: tuple[str, ...]
    metrics: Mapping[str, float]
    trace: str


@dataclass(frozen=True, slots=True)
class Suite:
    """A validated suite (module docstring)."""

    name: str
    description: str
    source: str
    warmup_epochs: int
    controllers: tuple[str, ...]
    cases: tuple[Case, ...]


def load_suite(path: str | os.PathLike[str]) -> Suite:
    """Read and validate a suite file (module docstring); raise :class:`RegressError`."""
    path = Path(path)
    data = read_toml(path, "suite file", RegressError)
    return parse_suite(data, source=str(path), suite_dir=path.parent, default_name=path.stem)


def _show(value: Any) -> str:
    text = "a table" if isinstance(value, Mapping) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Where:
    """Error messages that name the file, the key and the bad value."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, value: Any, expected: str) -> RegressError:
        return RegressError(f"{self.source}: {key} = {_show(value)}: expected {expected}")

    def unknown(self, data: Mapping[str, Any], known: Sequence[str], prefix: str = "") -> None:
        for key in data:
            if key not in known:
                raise RegressError(f"{self.source}: unknown key {prefix + key!r}; expected one "
                                   f"of {', '.join(known)}")


def parse_suite(data: Mapping[str, Any], *, source: str = "<suite>",
                suite_dir: str | os.PathLike[str] = ".", default_name: str = "suite") -> Suite:
    """Validate an already-parsed suite document; paths are read relative to ``suite_dir``."""
    from react.run.metrics import DEFAULT_WARMUP

    at = _Where(source)
    at.unknown(data, _SUITE_KEYS)
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name.strip():
        raise at.fail("name", name, "a non-empty string")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise at.fail("description", description, "a string")
    warmup = data.get("warmup_epochs", DEFAULT_WARMUP)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise at.fail("warmup_epochs", warmup, "an integer >= 0")
    trace = _trace(at, "trace", data.get("trace", "identical"))
    metrics = _metrics(at, "metrics", data.get("metrics", dict.fromkeys(METRICS, 0)))
    raw_controllers = data.get("controllers", [SCENARIO_CONTROLLER])
    if not isinstance(raw_controllers, list) or not raw_controllers or not all(
            isinstance(c, str) for c in raw_controllers):
        raise at.fail("controllers", raw_controllers, "a non-empty list of controller names")
    try:
        controllers = resolve_controllers(raw_controllers, suite_dir)
    except RegressError as exc:
        raise RegressError(f"{source}: controllers: {exc}") from None
    raw_cases = data.get("scenarios")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise at.fail("scenarios", raw_cases, "an array of at least one [[scenarios]] table")
    cases: list[Case] = []
    for i, raw in enumerate(raw_cases):
        case = _case(at, f"scenarios[{i}]", raw, Path(suite_dir), metrics, trace)
        if case.name in {c.name for c in cases}:
            raise at.fail(f"scenarios[{i}].name", case.name,
                          "a name no other scenario of the suite has (set 'name')")
        cases.append(case)
    return Suite(name, description, source, warmup, controllers, tuple(cases))


def resolve_controllers(refs: Sequence[str], base_dir: str | os.PathLike[str] = "."
                        ) -> tuple[str, ...]:
    """Check controller references (``scenario`` or anything :func:`react.control.policies.resolve`
    accepts) and return them resolved, in order; a repeated one is an error."""
    from react.control.policies import ControllerLoadError, resolve

    out: list[str] = []
    for ref in refs:
        ref = ref.strip()
        try:
            resolved = ref if ref == SCENARIO_CONTROLLER else resolve(ref, base_dir)
        except ControllerLoadError as exc:
            raise RegressError(str(exc)) from None
        if resolved in out:
            raise RegressError(f"controller {ref!r} is named twice")
        out.append(resolved)
    if not out:
        raise RegressError("no controller named")
    return tuple(out)


def _trace(at: _Where, key: str, value: Any) -> str:
    if value not in TRACE_MODES:
        raise at.fail(key, value, f"one of {', '.join(TRACE_MODES)}")
    return str(value)


def _metrics(at: _Where, key: str, value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise at.fail(key, value, "a table of metric = tolerance")
    out: dict[str, float] = {}
    for metric, tolerance in value.items():
        if metric not in METRICS:
            raise RegressError(f"{at.source}: {key}.{metric}: unknown metric {metric!r}; "
                               f"expected one of {', '.join(METRICS)}")
        if (isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real)
                or not math.isfinite(tolerance) or tolerance < 0):
            raise at.fail(f"{key}.{metric}", tolerance, "a tolerance: a finite number >= 0")
        out[metric] = float(tolerance)
    return out


def _job_tables(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The scenario's job tables (malformed entries left for the scenario's parser to name)."""
    jobs = document.get("jobs")
    return [job for job in jobs if isinstance(job, dict)] if isinstance(jobs, list) else []


def _set_controllers(at: _Where, key: str, settings: Any, document: dict[str, Any]) -> None:
    """Put ``settings`` (controller parameters) into every job's ``react`` entry, keeping
    whether the job runs REACT; the scenario's parser then checks each key and value."""
    if not isinstance(settings, Mapping) or not settings:
        raise at.fail(key, settings, "a table of controller parameters, e.g. "
                      "{ overestimate_tolerance = 0.1 }")
    for job in _job_tables(document):
        entry = job.get("react", False)
        if isinstance(entry, Mapping):
            job["react"] = {**entry, **settings}
        elif isinstance(entry, bool):
            job["react"] = {"enabled": entry, **settings}


def _case(at: _Where, key: str, raw: Any, suite_dir: Path, metrics: Mapping[str, float],
          trace: str) -> Case:
    from react.run.scenario import ScenarioError, parse_scenario

    if not isinstance(raw, Mapping):
        raise at.fail(key, raw, "a [[scenarios]] table")
    at.unknown(raw, _CASE_KEYS, key + ".")
    if ("path" in raw) == ("scenario" in raw):
        raise RegressError(f"{at.source}: {key}: give exactly one of 'path' (a scenario file) "
                           "and 'scenario' (an inline scenario table)")
    if "path" in raw:
        path = raw["path"]
        if not isinstance(path, str) or not path:
            raise at.fail(f"{key}.path", path, "the path of a scenario TOML file")
        file = suite_dir / path
        try:
            document = tomllib.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise at.fail(f"{key}.path", path,
                          f"an existing scenario file (no file at {str(file)!r})") from None
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise at.fail(f"{key}.path", path, f"a readable scenario TOML file ({exc})"
                          ) from None
        base_dir, source, default = file.parent, str(file), file.stem
    else:
        document = raw["scenario"]
        if not isinstance(document, Mapping):
            raise at.fail(f"{key}.scenario", document, "an inline scenario table")
        base_dir, source, default = suite_dir, f"{at.source}: {key}.scenario", ""
    document = copy.deepcopy(dict(document))
    if "epochs" in raw:
        epochs = raw["epochs"]
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise at.fail(f"{key}.epochs", epochs, "a positive integer")
        for job in _job_tables(document):
            job["epochs"] = epochs
    if "react" in raw:
        _set_controllers(at, f"{key}.react", raw["react"], document)
    try:
        scenario = parse_scenario(document, source=source, base_dir=base_dir,
                                  default_name=default or "scenario")
    except ScenarioError as exc:
        raise RegressError(f"{at.source}: {key}: {exc}") from None
    name = raw.get("name", scenario.name if ("name" in document or default) else None)
    if not isinstance(name, str) or not name.strip():
        raise at.fail(f"{key}.name", name, "a non-empty name for the inline scenario")
    if any(c in name for c in "/\\") or name.startswith("."):
        raise at.fail(f"{key}.name", name, "a name usable as a file name (no '/', no leading .)")
    case_metrics = dict(metrics)
    case_metrics.update(_metrics(at, f"{key}.metrics", raw.get("metrics", {})))
    return Case(name, source, document, str(base_dir), tuple(j.name for j in scenario.jobs),
                case_metrics, _trace(at, f"{key}.trace", raw.get("trace", trace)))
