"""Running a suite: every scenario without a controller and with each controller, in parallel,
each controller run twice in separate processes to prove it deterministic.

The runs go through the sweep machinery (:func:`react.run.sweep.execute`: a local process pool or a
Dask cluster, a runner exception recorded as that run's failure instead of stopping the rest), as
:class:`~react.run.sweep.Point` records whose runner is :func:`run_point`. A suite makes three kinds
of run, named by the point's ``role``:

- ``off``: the scenario with every controller switched off, the reference of the ``gain`` metric;
- ``run``: the scenario with one controller (``scenario``: each job as its file says);
- ``twin``: the ``run`` points again, in a fresh interpreter started for them
  (``python -m react.run.regress.runner``) with a different string-hash seed (``PYTHONHASHSEED``),
  so that anything a trace depends on beyond the scenario (set iteration order, process ids, state
  left by an earlier run in a worker, the clock) shows up as a difference from ``run``. The reruns
  are shared out among as many fresh interpreters as there are workers (each case's two runs are
  still in two processes), which keeps interpreter start-ups off the suite's time.

A case's result is ``{"jobs": {job: {"metrics": {...}, "trace": [...]}}}``: JSON data only, so
that the comparison with the twin, and later with the golden, is exact.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from react.run.regress.suite import SCENARIO_CONTROLLER, Case, RegressError, Suite
from react.run.sweep import Point

__all__ = ["CASE_TIMEOUT_S", "CaseRun", "case_id", "check_controllers", "first_difference",
           "run_point", "run_suite"]

CASE_TIMEOUT_S = 600.0
"""Bound on one determinism rerun in its own process."""

RUNNER = "react.run.regress.runner:run_point"


@dataclass(frozen=True, slots=True)
class CaseRun:
    """One controller on one scenario of a suite: its result, or why there is none.

    ``error`` is set when the run failed (the controller raised, decided an invalid pattern, the
    scenario could not run); ``nondeterministic`` when its rerun in another process differed
    (it then says where). ``result`` holds the metrics (``gain`` included) and the trace.
    """

    case: str
    scenario: str
    controller: str
    result: Mapping[str, Any] | None
    error: str | None = None
    nondeterministic: str | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and self.nondeterministic is None


def case_id(scenario: str, controller: str) -> str:
    """The name of a case: the scenario's, with ``@label`` for a controller other than
    ``scenario`` (``closed-loop-star@never``)."""
    from react.control.policies import label

    return scenario if controller == SCENARIO_CONTROLLER else f"{scenario}@{label(controller)}"


# -- one run, in a worker ------------------------------------------------------------------------
def run_point(point: Point) -> dict[str, Any]:
    """The sweep runner of a suite's points (module docstring): ``{job: {...}}``, or for a
    ``twin`` point ``{point key: {"result": {job: {...}}} or {"error": message}}``."""
    if point.params["role"] == "twin":
        return _run_fresh(point)
    return _run_here(point)


def _run_here(point: Point) -> dict[str, Any]:
    from react.run.metrics import summarise
    from react.run.regress.metrics import job_result
    from react.run.scenario import parse_scenario
    from react.run.scenario_runs import run_scenario

    scenario = parse_scenario(point.scenario, source=f"scenario {point.params['case']}",
                              base_dir=point.base_dir)
    if point.params["role"] == "off":
        runs = run_scenario(scenario, react=False)
        return {name: {"mean_algbw_gbps": summarise(run, react=False,
                                                    warmup=point.warmup_epochs).mean_algbw_gbps}
                for name, run in runs.items()}
    controller = point.params["controller"]
    if controller != SCENARIO_CONTROLLER:
        scenario = scenario.with_controller(controller)
    runs = run_scenario(scenario)
    return {name: job_result(run, warmup=point.warmup_epochs) for name, run in runs.items()}


def _other_hash_seed() -> str:
    return "1" if os.environ.get("PYTHONHASHSEED") == "0" else "0"


def _run_fresh(point: Point) -> dict[str, Any]:
    # the child imports exactly what this process imports (the same react, the user's modules)
    paths = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    env = dict(os.environ, PYTHONHASHSEED=_other_hash_seed(), PYTHONPATH=os.pathsep.join(paths))
    timeout = CASE_TIMEOUT_S * len(point.scenario["runs"])
    try:
        proc = subprocess.run([sys.executable, "-m", "react.run.regress.runner"],
                              input=json.dumps(point.scenario["runs"]), capture_output=True,
                              text=True, env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RegressError(f"the reruns in a fresh process took more than {timeout:g} s"
                           ) from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RegressError(f"the reruns in a fresh process failed (exit {proc.returncode}): "
                           f"{last}")
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def main() -> int:
    """``python -m react.run.regress.runner``: rerun the ``run`` points given as JSON on stdin.

    Prints ``{point key: {"result": result} or {"error": message}}``.
    """
    out: dict[str, Any] = {}
    answer, sys.stdout = sys.stdout, sys.stderr  # a controller's print() must not garble it
    try:
        for fields in json.loads(sys.stdin.read()):
            point = Point(**fields)
            try:
                out[point.key] = {"result": _run_here(point)}
            except Exception as exc:  # the primary run reports it; here it only has to agree
                out[point.key] = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        sys.stdout = answer
    answer.write(json.dumps(out))
    return 0


# -- the whole suite -----------------------------------------------------------------------------
def _point(suite: Suite, case: Case, role: str, controller: str | None) -> Point:
    params = {"case": case.name, "role": role, "controller": controller}
    identity = json.dumps([suite.name, params, case.document, suite.warmup_epochs],
                          sort_keys=True, default=str)
    key = hashlib.sha256(identity.encode()).hexdigest()[:32]
    seed = case.document.get("seed", 0)
    return Point(key, key, suite.name, params, case.document, case.base_dir,
                 seed if isinstance(seed, int) else 0, "off" if role == "off" else "scenario",
                 suite.warmup_epochs, RUNNER)


def _twins(suite: Suite, runs: Sequence[Point], chunks: int) -> list[Point]:
    """The ``run`` points shared out into ``chunks`` twin points (one fresh process each)."""
    out = []
    for i in range(min(chunks, len(runs))):
        share = [{name: getattr(p, name) for name in Point.__slots__}  # type: ignore[attr-defined]
                 for p in runs[i::chunks]]
        key = hashlib.sha256(json.dumps([p["key"] for p in share]).encode()).hexdigest()[:32]
        out.append(Point(key, key, suite.name, {"role": "twin", "chunk": i}, {"runs": share},
                         ".", 0, "scenario", suite.warmup_epochs, RUNNER))
    return out


def run_suite(suite: Suite, *, controllers: Sequence[str] | None = None,
              workers: int | None = None, dask: str | None = None, determinism: bool = True,
              progress: bool = False) -> list[CaseRun]:
    """Run every case of ``suite`` (each scenario with each controller); return them in order.

    Parameters
    ----------
    controllers : sequence of str, optional
        Resolved controller references (default: the suite's).
    workers, dask :
        As :func:`react.run.sweep.execute`: local worker processes, or a Dask scheduler address.
    determinism : bool
        Rerun every case in a fresh process and report any difference (module docstring).
    """
    from react.run.store import ResultStore
    from react.run.sweep import execute

    controllers = tuple(controllers or suite.controllers)
    offs = [_point(suite, case, "off", None) for case in suite.cases]
    runs = [_point(suite, case, "run", ctl) for case in suite.cases for ctl in controllers]
    twins = _twins(suite, runs, workers or len(os.sched_getaffinity(0))) if determinism else []
    with tempfile.TemporaryDirectory(prefix="react-regress-") as tmp:
        with ResultStore(Path(tmp) / "runs.sqlite") as store:
            # the long twin points first, so that the pool ends with the short ones
            summary = execute(twins + runs + offs, store, workers=workers, dask=dask,
                              progress=progress, version="regress")
            records = {r.point_key: r for r in store.runs()}
    if summary.interrupted:
        raise KeyboardInterrupt
    not_run = summary.broken or "the run was stopped"
    reruns: dict[str, Any] = {}  # run point key -> {"result": ...} | {"error": ...}
    for t in twins:
        record = records.get(t.key)
        problem = _error(record, "the rerun in a fresh process", not_run)
        for share in t.scenario["runs"]:
            if problem is None and record is not None and record.metrics is not None:
                reruns[share["key"]] = record.metrics[share["key"]]
            else:
                reruns[share["key"]] = {"error": problem}
    out: list[CaseRun] = []
    for case, off in zip(suite.cases, offs, strict=True):
        for ctl in controllers:
            run = _point(suite, case, "run", ctl)
            twin = reruns.get(run.key) if determinism else None
            out.append(_case_run(case, ctl, records.get(off.key), records.get(run.key), twin,
                                 not_run))
    return out


def check_controllers(suite: Suite, controllers: Sequence[str]) -> None:
    """Build every controller other than REACT for every job it would drive, before anything runs.

    A controller that lacks the interface is bad input (:class:`RegressError` naming it); a
    factory that raises is left to its run, where it becomes that case's failure.
    """
    from react.control.policies import ControllerFault, ControllerInterfaceError
    from react.run.scenario import controllers as build
    from react.run.scenario import parse_scenario

    for case in suite.cases:
        scenario = parse_scenario(case.document, source=case.source, base_dir=case.base_dir)
        for ctl in controllers:
            chosen = scenario if ctl == SCENARIO_CONTROLLER else scenario.with_controller(ctl)
            if all(j.controller_factory == "react" or not j.react for j in chosen.jobs):
                continue
            try:
                build(chosen, None)
            except ControllerInterfaceError as exc:
                raise RegressError(f"scenario {case.name!r}: {exc}") from None
            except ControllerFault:
                continue


def _error(record: Any, what: str, not_run: str) -> str | None:
    if record is None:
        return f"{what} did not run ({not_run})"
    if record.status != "ok":
        return f"{what} failed: {(record.error or '').splitlines()[0]}"
    return None


def _case_run(case: Case, controller: str, off: Any, run: Any, twin: Any, not_run: str
              ) -> CaseRun:
    name = case_id(case.name, controller)
    duration = run.duration_s if run is not None else 0.0
    error = _error(run, "the run", not_run) or _error(off, "the run without a controller",
                                                     not_run)
    if error is not None:
        return CaseRun(name, case.name, controller, None, error, duration_s=duration)
    jobs: dict[str, Any] = {}
    for job, data in run.metrics.items():
        metrics = dict(data["metrics"])
        algbw = metrics.pop("mean_algbw_gbps")
        metrics["gain"] = algbw / off.metrics[job]["mean_algbw_gbps"] - 1.0
        jobs[job] = {"metrics": metrics, "trace": data["trace"]}
    different = None
    if twin is not None:
        if "error" in twin:
            different = f"its rerun in a separate process failed: {twin['error']}"
        else:
            where = first_difference(run.metrics, twin["result"])
            if where is not None:
                different = f"two runs in separate processes differ at {where}"
    return CaseRun(name, case.name, controller, {"jobs": jobs}, None, different, duration)


def first_difference(a: Any, b: Any, where: str = "") -> str | None:
    """Where two JSON values first differ (``tree.trace[3].reason: 'x' != 'y'``), or None."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in a or key not in b:
                return f"{where}{key}: only in {'the second' if key in b else 'the first'} run"
            found = first_difference(a[key], b[key], f"{where}{key}.")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{where.rstrip('.')}[{i}].")
            if found:
                return found
        if len(a) != len(b):
            return f"{where.rstrip('.')}: {len(a)} entries != {len(b)}"
        return None
    if type(a) is not type(b) or a != b:
        return f"{where.rstrip('.')}: {_short(a)} != {_short(b)}"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


if __name__ == "__main__":
    sys.exit(main())
