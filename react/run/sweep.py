"""Sweeps: a base scenario, a grid of overrides and seeds, every point run with and without REACT.

A sweep spec is a small TOML file::

    name = "fig5-mini"                   # optional, default: the spec file's name
    description = "..."                  # optional
    base = "scenarios/star.toml"         # the base scenario, relative to this file
    seeds = [0, 1, 2]                    # optional, default: [the base scenario's seed]
    react = "both"                       # both (default) | on | off | scenario
    warmup_epochs = 25                   # optional: epochs left out of the statistics
    runner = "react.run.sweep:run_point"     # optional: "module:function" that runs one point

    [grid]                               # dotted key of the base scenario -> values to try
    "jobs.0.message_bytes" = [2e6, 20e6]
    "background.0.p" = [1, 2, 4]

Every combination of grid values (in the order the keys are written, the last one varying
fastest), for every seed, is a *point*; a point's scenario is the base document with the grid
values written in and its top-level ``seed`` set to the point's seed (a job that names its own
``seed`` keeps it unless the grid sets it). ``react = "both"`` runs each point twice, REACT off
then on for every job, from the same scenario and seed, so that background traffic and ECMP
choices are identical and the two runs differ only by REACT; ``on`` and ``off`` run one side
only; ``scenario`` runs once with each job as its scenario says (e.g. REACT on one job only).

Points are identified by a stable hash of everything that determines their result (the scenario
after the overrides, the seed, the REACT flag, the warm-up and the runner), and each finished run
is committed to the :mod:`react.run.store` the moment it returns. Rerunning a sweep therefore skips
what is done, and an interrupted sweep loses nothing it had finished. Failed runs are recorded
with their error and run again on the next rerun.

``runner`` exists so that the machinery can be exercised without simulating: it names any
importable function ``f(point) -> {job: {metric: value}}``; the tests use a fake one that sleeps,
fails or blocks on demand. Its default, :func:`run_point`, runs the scenario on the simulator.

Runs execute in a local :class:`~concurrent.futures.ProcessPoolExecutor` (one worker per CPU by
default; one worker runs them in this process), or on a Dask cluster (``dask=ADDRESS``, or
``"local"`` for a :class:`distributed.LocalCluster`). Workers only compute; the parent process
writes every result, so the store has a single writer.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import multiprocessing
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from copy import deepcopy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from react.model.errors import ReactError
from react.run.store import ResultStore, RunRecord
from react.run.tomlfile import read_toml

__all__ = [
    "DEFAULT_RUNNER",
    "REACT_CHOICES",
    "Point",
    "SweepError",
    "SweepSpec",
    "SweepSummary",
    "code_version",
    "execute",
    "expand",
    "load_spec",
    "parse_spec",
    "run_point",
    "scenario_points",
]

DEFAULT_RUNNER = "react.run.sweep:run_point"
"""The runner of a spec that names none: run the point's scenario on the simulator."""

REACT_CHOICES: dict[str, tuple[str, ...]] = {
    "both": ("off", "on"),
    "on": ("on",),
    "off": ("off",),
    "scenario": ("scenario",),
}
"""A spec's ``react`` value and the runs it makes of every point, in order."""

_SPEC_KEYS = ("name", "description", "base", "seeds", "react", "warmup_epochs", "runner", "grid")


class SweepError(ReactError, ValueError):
    """A sweep spec is unreadable or invalid, or a sweep cannot start; the message names it."""


# -- spec ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SweepSpec:
    """A validated sweep spec: the base scenario document and what varies around it."""

    name: str
    description: str
    source: str
    base: Path
    base_data: Mapping[str, Any]
    grid: tuple[tuple[str, tuple[Any, ...]], ...]
    seeds: tuple[int, ...]
    react: str
    warmup_epochs: int
    runner: str


@dataclass(frozen=True, slots=True)
class Point:
    """One run of a sweep: a scenario document, a seed and the REACT flag; picklable.

    ``key`` identifies the run in the store; ``pair_key`` is shared by the REACT-off and
    REACT-on runs of the same scenario and seed. ``base_dir`` is where the scenario's relative
    paths (a topology ``file``) are resolved.
    """

    key: str
    pair_key: str
    sweep: str
    params: Mapping[str, Any]
    scenario: Mapping[str, Any]
    base_dir: str
    seed: int
    react: str
    warmup_epochs: int
    runner: str


def load_spec(path: str | os.PathLike[str]) -> SweepSpec:
    """Read and validate a sweep spec file (see the module docstring for its keys).

    Raises
    ------
    SweepError
        If the spec or its base scenario cannot be read or parsed, or any key is unknown or bad;
        the message names the file, the key and the value.
    """
    path = Path(path)
    data = _read_toml(path, "sweep spec")
    return parse_spec(data, source=str(path), spec_dir=path.parent, default_name=path.stem)


def _read_toml(path: Path, what: str) -> dict[str, Any]:
    return read_toml(path, what, SweepError)


def parse_spec(
    data: Mapping[str, Any],
    *,
    source: str = "<sweep>",
    spec_dir: str | os.PathLike[str] = ".",
    default_name: str = "sweep",
) -> SweepSpec:
    """Validate an already-parsed spec document; ``base`` is read relative to ``spec_dir``."""
    from react.run.metrics import DEFAULT_WARMUP

    def fail(key: str, value: Any, expected: str) -> SweepError:
        return SweepError(f"{source}: {key} = {_show(value)}: expected {expected}")

    for key in data:
        if key not in _SPEC_KEYS:
            raise SweepError(f"{source}: unknown key {key!r}; expected one of "
                             f"{', '.join(_SPEC_KEYS)}")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise fail("name", name, "a non-empty string")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise fail("description", description, "a string")
    if "base" not in data:
        raise SweepError(f"{source}: base is missing: the base scenario file, relative to the "
                         "spec")
    if not isinstance(data["base"], str) or not data["base"]:
        raise fail("base", data["base"], "the path of a scenario TOML file")
    base = Path(spec_dir) / data["base"]
    base_data = _read_toml(base, "base scenario")
    react = data.get("react", "both")
    if react not in REACT_CHOICES:
        raise fail("react", react, f"one of {', '.join(REACT_CHOICES)}")
    warmup = data.get("warmup_epochs", DEFAULT_WARMUP)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise fail("warmup_epochs", warmup, "an integer >= 0")
    runner = data.get("runner", DEFAULT_RUNNER)
    if not isinstance(runner, str):
        raise fail("runner", runner, "'module:function'")
    try:
        resolve_runner(runner)
    except SweepError as exc:
        raise SweepError(f"{source}: {exc}") from None
    seeds = _seeds(data.get("seeds", [base_data.get("seed", 0)]), fail)
    grid_data = data.get("grid", {})
    if not isinstance(grid_data, Mapping):
        raise fail("grid", grid_data, "a [grid] table of dotted scenario keys and value lists")
    grid = tuple(_flatten(grid_data))
    for key, values in grid:
        where = f"grid.{_quote(key)}"
        if not isinstance(values, list):
            raise fail(where, values, "a list of values to try")
        if not values:
            raise SweepError(f"{source}: {where} is an empty list; give at least one value")
        for i, value in enumerate(values):
            if values.index(value) != i:
                raise fail(f"{where}[{i}]", value, "values that differ (it repeats an earlier one)")
        if key == "seed":
            raise SweepError(f"{source}: {where}: the scenario seed is set by 'seeds = [...]'")
        problem = _missing(base_data, key)
        if problem:
            raise SweepError(f"{source}: {where}: the base scenario {str(base)!r} {problem}")
    keys = [k for k, _ in grid]
    for a, b in itertools.permutations(keys, 2):
        if b.startswith(a + "."):
            raise SweepError(f"{source}: grid keys {a!r} and {b!r} overlap; vary one or the other")
    return SweepSpec(name, description, source, base, base_data,
                     tuple((k, tuple(v)) for k, v in grid), seeds, react, warmup, runner)


def _seeds(value: Any, fail: Callable[[str, Any, str], SweepError]) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise fail("seeds", value, "a non-empty list of integers")
    for i, seed in enumerate(value):
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise fail(f"seeds[{i}]", seed, "an integer")
        if value.index(seed) != i:
            raise fail(f"seeds[{i}]", seed, "seeds that differ (it repeats an earlier one)")
    return tuple(value)


def _flatten(table: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    # `jobs.0.ranks = [...]` written without quotes is a nested table in TOML; treat both alike
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, dotted + ".")
        else:
            yield dotted, value


def _quote(key: str) -> str:
    return f'"{key}"' if "." in key else key


def _show(value: Any) -> str:
    text = "a table" if isinstance(value, Mapping) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _missing(doc: Any, dotted: str) -> str | None:
    """Why ``dotted`` names nothing in ``doc`` (None when it does)."""
    node = doc
    walked: list[str] = []
    for part in dotted.split("."):
        where = ".".join(walked) or "the top level"
        if isinstance(node, list):
            if not part.isdigit():
                return f"has a list at {where}; {part!r} is not an index 0..{len(node) - 1}"
            if int(part) >= len(node):
                count = f"{len(node)} entry" if len(node) == 1 else f"{len(node)} entries"
                return (f"has {count} in {where}; index {part} is out of range "
                        f"0..{len(node) - 1}")
            node = node[int(part)]
        elif isinstance(node, Mapping):
            if part not in node:
                known = ", ".join(sorted(map(str, node))) or "none"
                return (f"has no key {part!r} in {where} (keys there: {known}); add it to the "
                        "base scenario first")
            node = node[part]
        else:
            return f"has a value, not a table or list, at {where}"
        walked.append(part)
    return None


def _override(doc: Mapping[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node: Any = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = deepcopy(value)
    else:
        node[last] = deepcopy(value)


# -- points ----------------------------------------------------------------------------------------
def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value).encode()).hexdigest()[:32]


def expand(spec: SweepSpec, *, check: bool = True) -> list[Point]:
    """Every point of the sweep, in a fixed order: grid combinations, then seeds, then REACT.

    Parameters
    ----------
    spec : SweepSpec
    check : bool
        Validate the scenario of each grid value before anything runs (each value once, with the
        other keys at their first value, so that the check stays cheap for large grids). A bad
        value then stops the sweep before the store is touched; a bad *combination* of values
        fails its own runs only.

    Raises
    ------
    SweepError
        If a grid value makes the scenario invalid; the message names the grid key and value.
    """
    keys = [k for k, _ in spec.grid]
    if check:
        _check_values(spec)
    base_dir = str(spec.base.parent)
    points: list[Point] = []
    for combo in itertools.product(*(values for _, values in spec.grid)):
        params = dict(zip(keys, combo, strict=True))
        for seed in spec.seeds:
            scenario = _scenario(spec, params, seed)
            pair = {"scenario": scenario, "seed": seed, "warmup_epochs": spec.warmup_epochs,
                    "runner": spec.runner}
            pair_key = _digest(pair)
            for react in REACT_CHOICES[spec.react]:
                points.append(Point(_digest({**pair, "react": react}), pair_key, spec.name,
                                    params, scenario, base_dir, seed, react, spec.warmup_epochs,
                                    spec.runner))
    return points


def scenario_points(
    sweep: str,
    cases: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]],
    *,
    react: str = "both",
    warmup_epochs: int | None = None,
    runner: str = DEFAULT_RUNNER,
    base_dir: str | os.PathLike[str] = ".",
) -> list[Point]:
    """Points of generated scenarios, for experiments whose randomness a grid cannot express.

    A grid overrides fixed keys; an experiment that draws, per seed, *which* links fail or
    *which* hosts two jobs share builds each scenario document itself and labels it with the
    values to plot against. Each case ``(params, scenario)`` becomes one point per run of
    ``react`` (see :data:`REACT_CHOICES`), keyed exactly as :func:`expand` keys its points, so
    the store, resumption and ``react report`` treat them alike. The scenario's own ``seed``
    is the point's seed.

    Raises
    ------
    SweepError
        If ``react`` is unknown or a scenario is invalid; the message names the case's params.
    """
    from react.run.metrics import DEFAULT_WARMUP
    from react.run.scenario import ScenarioError, parse_scenario

    if react not in REACT_CHOICES:
        raise SweepError(f"react = {react!r}: expected one of {', '.join(REACT_CHOICES)}")
    warmup = DEFAULT_WARMUP if warmup_epochs is None else warmup_epochs
    points: list[Point] = []
    for params, scenario in cases:
        doc = deepcopy(dict(scenario))
        try:
            parse_scenario(doc, source=f"{sweep} {dict(params)}", base_dir=base_dir)
        except ScenarioError as exc:
            raise SweepError(str(exc)) from None
        seed = int(doc.get("seed", 0))
        pair = {"scenario": doc, "seed": seed, "warmup_epochs": warmup, "runner": runner}
        pair_key = _digest(pair)
        for mode in REACT_CHOICES[react]:
            points.append(Point(_digest({**pair, "react": mode}), pair_key, sweep, dict(params),
                                doc, str(base_dir), seed, mode, warmup, runner))
    return points


def _scenario(spec: SweepSpec, params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    doc = deepcopy(dict(spec.base_data))
    for key, value in params.items():
        _override(doc, key, value)
    doc["seed"] = seed
    try:
        _canonical(doc)
    except (TypeError, ValueError) as exc:  # a TOML date or time has no JSON form
        raise SweepError(f"{spec.source}: the scenario cannot be stored as JSON ({exc})"
                         ) from None
    return doc


def _check_values(spec: SweepSpec) -> None:
    from react.run.scenario import ScenarioError, parse_scenario

    first = {k: values[0] for k, values in spec.grid}
    tried = [("", None)] + [(k, v) for k, values in spec.grid for v in values[1:]]
    for key, value in tried:
        params = dict(first)
        if key:
            params[key] = value
        doc = _scenario(spec, params, spec.seeds[0])
        try:
            parse_scenario(doc, source=str(spec.base), base_dir=spec.base.parent,
                           default_name=spec.base.stem)
        except ScenarioError as exc:
            if key:
                at = f"grid.{_quote(key)} = {_show(value)}: "
            else:
                at = "with the first value of every grid key: " if first else ""
            raise SweepError(f"{spec.source}: {at}{exc}") from None


# -- running one point -----------------------------------------------------------------------------
_RUNNERS: dict[str, Callable[[Point], Mapping[str, Mapping[str, Any]]]] = {}


def resolve_runner(name: str) -> Callable[[Point], Mapping[str, Mapping[str, Any]]]:
    """The function a ``"module:function"`` runner name designates (imported once per process)."""
    if name in _RUNNERS:
        return _RUNNERS[name]
    module_name, sep, func_name = name.partition(":")
    if not sep or not module_name or not func_name:
        raise SweepError(f"runner = {name!r}: expected 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SweepError(f"runner = {name!r}: cannot import {module_name!r} ({exc})") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise SweepError(f"runner = {name!r}: {module_name} has no function {func_name!r}")
    _RUNNERS[name] = func
    return func


def run_point(point: Point) -> dict[str, dict[str, Any]]:
    """Run one point's scenario on the simulator; return each job's statistics.

    The statistics, per job: ``epochs``; ``first_epoch`` (the first epoch counted: the warm-up,
    or 0 when the job ran no more epochs than that); ``mean_time_s``, ``p95_time_s`` (collective
    time) and ``mean_algbw_gbps`` (algorithm bandwidth) over the counted epochs; ``react``
    (whether a controller ran); ``decisions`` (controller decisions, one per batch);
    ``pattern_changes`` (epochs whose pattern differs from the previous epoch's);
    ``settled_epoch`` (the first epoch of the pattern the job ended with, 0 if it never changed:
    how long REACT took to settle).
    """
    from react.run.metrics import change_epochs, summarise
    from react.run.scenario import parse_scenario
    from react.run.scenario_runs import run_scenario

    scenario = parse_scenario(point.scenario, source=f"sweep point {point.key}",
                              base_dir=point.base_dir)
    force = {"off": False, "on": True, "scenario": None}[point.react]
    runs = run_scenario(scenario, react=force)
    metrics: dict[str, dict[str, Any]] = {}
    for job in scenario.jobs:
        run = runs[job.name]
        react = job.react if force is None else force
        summary = summarise(run, react=react, warmup=point.warmup_epochs)
        changes = change_epochs(run)
        metrics[job.name] = {
            "epochs": summary.epochs,
            "first_epoch": summary.first_epoch,
            "mean_time_s": summary.mean_time_s,
            "p95_time_s": summary.p95_time_s,
            "mean_algbw_gbps": summary.mean_algbw_gbps,
            "react": react,
            "decisions": len(run.decisions),
            "pattern_changes": len(changes),
            "settled_epoch": changes[-1] if changes else 0,
        }
    return metrics


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def execute_point(point: Point, version: str) -> RunRecord:
    """Run one point in a worker and package the outcome; a runner's exception becomes a
    failed record (with its traceback) instead of stopping the sweep."""
    started, clock = _now(), time.perf_counter()
    metrics: Mapping[str, Any] | None = None
    error: str | None = None
    try:
        metrics = resolve_runner(point.runner)(point)
        if not isinstance(metrics, Mapping) or not all(
            isinstance(k, str) and isinstance(v, Mapping) for k, v in metrics.items()
        ):
            raise SweepError(f"runner {point.runner} returned {_show(metrics)}; expected "
                             "{job name: {metric: value}}")
        _canonical(metrics)
    except Exception as exc:  # a failed run is data, not the end of the sweep
        metrics = None
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    return RunRecord(point.key, point.pair_key, point.sweep, point.params, point.scenario,
                     point.seed, point.react, "ok" if error is None else "failed", error,
                     metrics, version, started, _now(), time.perf_counter() - clock)


def code_version() -> str:
    """The package version, plus the git commit (and ``.dirty``) when run from a checkout."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("react-collectives")
    except PackageNotFoundError:
        text = "unknown"
    here = Path(__file__).resolve().parent
    try:
        top = _git(here, "rev-parse", "--show-toplevel")
        if Path(top).resolve() != here.parent:  # installed somewhere inside another repository
            return text
        commit = _git(here, "rev-parse", "--short=12", "HEAD")
        dirty = _git(here, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return text
    return f"{text}+g{commit}{'.dirty' if dirty else ''}"


def _git(where: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True,
                          check=True, timeout=10).stdout.strip()


# -- running a sweep -------------------------------------------------------------------------------
@dataclass
class SweepSummary:
    """What a call of :func:`execute` did. ``not_run`` counts points left when it stopped early
    (interrupted, or the worker pool broke); a rerun picks them up."""

    total: int
    skipped: int = 0
    ok: int = 0
    failed: int = 0
    not_run: int = 0
    interrupted: bool = False
    broken: str | None = None
    failures: list[RunRecord] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.not_run == 0 and not self.interrupted and self.broken is None


def execute(
    points: Sequence[Point],
    store: ResultStore,
    *,
    workers: int | None = None,
    dask: str | None = None,
    progress: bool = True,
    version: str | None = None,
    stream: TextIO | None = None,
) -> SweepSummary:
    """Run the points the store does not hold yet, recording each run as soon as it ends.

    Parameters
    ----------
    points : sequence of Point
        In the order to submit them (:func:`expand`'s order); duplicates run once.
    store : ResultStore
        Where every finished run is committed; points it holds as ``ok`` are skipped.
    workers : int, optional
        Local worker processes (default: one per CPU available, at most one per point);
        1 runs every point in this process. Ignored with ``dask``.
    dask : str, optional
        A Dask scheduler address, or ``"local"`` to start a LocalCluster of ``workers``
        processes; needs the optional ``dask`` extra.
    progress : bool
        Show a progress bar (done, failed, ETA) on ``stream`` (stderr by default).
    version : str, optional
        Code version stored with each run (default :func:`code_version`).

    Returns
    -------
    SweepSummary
        Counts of skipped, ok, failed and not-run points. Ctrl-C ends the sweep early with
        ``interrupted`` set instead of raising; finished runs are already stored.
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise SweepError(f"workers must be a positive integer, got {workers!r}")
    unique = list({p.key: p for p in points}.values())
    done = store.finished_keys()
    todo = [p for p in unique if p.key not in done]
    summary = SweepSummary(total=len(unique), skipped=len(unique) - len(todo))
    if not todo:
        return summary
    version = version or code_version()
    summary.not_run = len(todo)
    with _progress_bar(len(todo), progress, stream, unique[0].sweep) as bar:
        def finished(record: RunRecord) -> None:
            store.record(record)
            summary.not_run -= 1
            if record.status == "ok":
                summary.ok += 1
            else:
                summary.failed += 1
                summary.failures.append(record)
            bar.set_postfix_str(f"failed {summary.failed}", refresh=False)
            bar.update(1)

        try:
            if dask is not None:
                _run_dask(todo, version, dask, workers, finished)
            elif (workers or _cpus()) == 1 or len(todo) == 1:
                for point in todo:
                    finished(execute_point(point, version))
            else:
                _run_pool(todo, version, min(workers or _cpus(), len(todo)), finished, summary)
        except KeyboardInterrupt:
            summary.interrupted = True
    return summary


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _run_pool(todo: Sequence[Point], version: str, workers: int,
              finished: Callable[[RunRecord], None], summary: SweepSummary) -> None:
    pool = ProcessPoolExecutor(max_workers=workers)
    try:
        futures: list[Future[RunRecord]] = [pool.submit(execute_point, p, version) for p in todo]
        for future in as_completed(futures):
            try:
                record = future.result()
            except BrokenProcessPool as exc:
                # which run killed its worker is unknowable; stop, keep what is stored
                summary.broken = f"a worker process died ({exc}); rerun to resume"
                return
            finished(record)
    except KeyboardInterrupt:
        # runs already queued to the workers would still start, and the interpreter would wait
        # for them at exit: stop the workers now (their results would not be recorded anyway)
        for child in multiprocessing.active_children():
            child.terminate()
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _run_dask(todo: Sequence[Point], version: str, address: str, workers: int | None,
              finished: Callable[[RunRecord], None]) -> None:
    try:
        from distributed import Client, LocalCluster
        from distributed import as_completed as dask_completed
    except ImportError as exc:
        raise SweepError(
            f"--dask needs the optional dependency dask[distributed] ({exc}); install it with "
            "pip install 'react-collectives[dask]'"
        ) from None
    cluster = None
    if address == "local":
        cluster = LocalCluster(n_workers=min(workers or _cpus(), len(todo)),
                               threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    else:
        try:
            client = Client(address, timeout=30)
        except (OSError, TimeoutError) as exc:
            raise SweepError(f"--dask {address}: cannot connect to the scheduler ({exc})"
                             ) from None
    try:
        futures = client.map(execute_point, list(todo), version=version, pure=False)
        by_key = {f.key: p for f, p in zip(futures, todo, strict=True)}
        for future in dask_completed(futures):
            try:
                record = future.result()
            except Exception as exc:  # e.g. KilledWorker: the cluster gave up on this run
                point = by_key[future.key]
                record = RunRecord(point.key, point.pair_key, point.sweep, point.params,
                                   point.scenario, point.seed, point.react, "failed",
                                   f"{type(exc).__name__}: {exc}", None, version, _now(),
                                   _now(), 0.0)
            finished(record)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _progress_bar(total: int, enabled: bool, stream: TextIO | None, name: str) -> Any:
    from tqdm import tqdm

    # disable=None: no bar when the stream is not a terminal (CI logs, pipes), as `react run`
    return tqdm(total=total, desc=f"sweep {name}", unit="run", file=stream or sys.stderr,
                disable=None if enabled else True, dynamic_ncols=True, postfix="failed 0")
