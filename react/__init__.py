"""react: collective patterns as time-expanded networks, and the REACT controller.

The names a user's script needs, importable from here whatever the folders below are called
(docs/api.md lists them; internal paths may change, these do not). They are imported on first
use, so that ``import react`` (and the ``react`` command's start) stays cheap:

    from react import Controller, Job, SimBackend, allreduce_double_binary_tree, run_jobs

The layers below (docs/architecture.md): ``react.model`` (patterns as TENs, verify, transforms,
the swap space, the observation records), ``react.patterns`` and ``react.msccl`` beside it,
``react.control`` (detection, estimate, controller, tuning loop, policies), ``react.runtime``
(what real ranks run), ``react.backends`` (engines), ``react.run`` (driver, scenarios, sweeps,
store, regress), ``react.show`` (pages, plots, drawings, demo), ``react.commands`` and
``react.cli``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

PUBLIC: dict[str, str] = {
    # the model: what a collective is, what running it showed
    "ReactError": "react.model.errors",
    "PatternError": "react.model.errors",
    "Pattern": "react.model.pattern",
    "Flow": "react.model.pattern",
    "Chunk": "react.model.pattern",
    "verify": "react.model.verify",
    "first_violation": "react.model.verify",
    "GlobalSwap": "react.model.transforms",
    "ChunkLocalSwap": "react.model.transforms",
    "PositionSwap": "react.model.transforms",
    "SwapSpace": "react.model.swapspace",
    "EpochResult": "react.model.observation",
    "FlowTiming": "react.model.observation",
    # patterns
    "GENERATORS": "react.patterns",
    "generator": "react.patterns",
    "allreduce_double_binary_tree": "react.patterns",
    "allreduce_ring": "react.patterns",
    "allreduce_halving_doubling": "react.patterns",
    "allgather_ring": "react.patterns",
    "allgather_recursive_doubling": "react.patterns",
    "reduce_scatter_ring": "react.patterns",
    "broadcast_binary_tree": "react.patterns",
    "reduce_binary_tree": "react.patterns",
    # control: deciding
    "Controller": "react.control.controller",
    "ControllerConfig": "react.control.controller",
    "Decision": "react.control.controller",
    "CongestionReport": "react.control.detect",
    "detect_congestion": "react.control.detect",
    "TuningLoop": "react.control.loop",
    "Backend": "react.control.backend",
    "TunedBackend": "react.control.backend",
    "JobRun": "react.control.backend",
    "make_controller": "react.control.policies",
    # engines and running
    "SimBackend": "react.backends.sim",
    "Job": "react.run.driver",
    "run_jobs": "react.run.driver",
    "Scenario": "react.run.scenario",
    "ScenarioError": "react.run.scenario",
    "load_scenario": "react.run.scenario",
    "parse_scenario": "react.run.scenario",
    "open_jobs": "react.run.scenario_runs",
    "run_scenario": "react.run.scenario_runs",
    "compare_scenario": "react.run.scenario_runs",
}
"""Each public name and the module that defines it."""

__all__ = [
    "Backend",
    "Chunk",
    "ChunkLocalSwap",
    "CongestionReport",
    "Controller",
    "ControllerConfig",
    "Decision",
    "EpochResult",
    "Flow",
    "FlowTiming",
    "GENERATORS",
    "GlobalSwap",
    "Job",
    "JobRun",
    "Pattern",
    "PatternError",
    "PositionSwap",
    "ReactError",
    "Scenario",
    "ScenarioError",
    "SimBackend",
    "SwapSpace",
    "TunedBackend",
    "TuningLoop",
    "allgather_recursive_doubling",
    "allgather_ring",
    "allreduce_double_binary_tree",
    "allreduce_halving_doubling",
    "allreduce_ring",
    "broadcast_binary_tree",
    "compare_scenario",
    "detect_congestion",
    "first_violation",
    "generator",
    "load_scenario",
    "make_controller",
    "open_jobs",
    "parse_scenario",
    "reduce_binary_tree",
    "reduce_scatter_ring",
    "run_jobs",
    "run_scenario",
    "verify",
]


def __getattr__(name: str) -> Any:
    module = PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'react' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *PUBLIC})


if TYPE_CHECKING:  # for type checkers and editors: the same names, eagerly
    from react.backends.sim import SimBackend
    from react.control.backend import Backend, JobRun, TunedBackend
    from react.control.controller import Controller, ControllerConfig, Decision
    from react.control.detect import CongestionReport, detect_congestion
    from react.control.loop import TuningLoop
    from react.control.policies import make_controller
    from react.model.errors import PatternError, ReactError
    from react.model.observation import EpochResult, FlowTiming
    from react.model.pattern import Chunk, Flow, Pattern
    from react.model.swapspace import SwapSpace
    from react.model.transforms import ChunkLocalSwap, GlobalSwap, PositionSwap
    from react.model.verify import first_violation, verify
    from react.patterns import (
        GENERATORS,
        allgather_recursive_doubling,
        allgather_ring,
        allreduce_double_binary_tree,
        allreduce_halving_doubling,
        allreduce_ring,
        broadcast_binary_tree,
        generator,
        reduce_binary_tree,
        reduce_scatter_ring,
    )
    from react.run.driver import Job, run_jobs
    from react.run.scenario import Scenario, ScenarioError, load_scenario, parse_scenario
    from react.run.scenario_runs import compare_scenario, open_jobs, run_scenario
