"""A scenario built on each backend: its network (or devices) and its jobs, ready to run.

One module per backend, each with one function ``scenario_jobs(scenario, *, react=None)``, a
context manager that builds whatever the backend needs from a
:class:`~react.run.scenario.Scenario` (a simulated network, namespaces and rank processes, an
ns-3 child, this host's GPUs), yields the jobs for :func:`react.run.driver.run_jobs`, and
releases everything when the block exits. The backends below take plain values; this is where
a scenario is translated into them. The table is explicit, so a reader (and a type checker)
sees every route; a module is imported only when its backend is used, because the emulator,
ns-3 and the GPUs need what a simulator run does not.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from react.run.scenario import Scenario

__all__ = ["World", "world_of"]


class World(Protocol):
    """``scenario_jobs`` of one backend: the scenario's jobs, released when the block exits."""

    def __call__(self, scenario: Scenario, *, react: bool | None = None
                 ) -> AbstractContextManager[list[Any]]: ...


def _sim() -> World:
    from react.run.worlds import sim

    return sim.scenario_jobs


def _emu() -> World:
    from react.run.worlds import emu

    return emu.scenario_jobs


def _gpu() -> World:
    from react.run.worlds import gpu

    return gpu.scenario_jobs


def _ns3() -> World:
    from react.run.worlds import ns3

    return ns3.scenario_jobs


_WORLDS: dict[str, Callable[[], World]] = {"sim": _sim, "emu": _emu, "gpu": _gpu, "ns3": _ns3}


def world_of(backend: str) -> World:
    """``scenario_jobs`` of ``backend`` (a name of :data:`react.run.scenario.BACKENDS`)."""
    return _WORLDS[backend]()
