"""A scenario on this host's GPUs: ``backend = "gpu"`` (what
:func:`react.run.scenario_runs.open_jobs` calls).

Host ``h{i}`` of the scenario's topology (in topology order) is GPU ``i``; a job's rank runs on
its host's GPU, so a scenario for a machine of ``N`` GPUs uses a topology of at least ``N``
hosts and places ranks on the first ``N`` (``star`` with ``n = N`` and ``placement =
"first"``). Jobs must not share a GPU. The topology's links and capacities play no part: the
GPUs' own links (NVLink, PCIe, the network between hosts) are what the flows cross.

Background traffic is the copy streams of :mod:`.copystream`: a ``long_lived`` entry with
``p`` flows into ``dst`` becomes ``p`` processes copying into ``dst``'s GPU, the first from
``src``'s GPU, the others from distinct GPUs where possible (:func:`.copystream.copy_sources`).
They start before the jobs and stop when the block exits (or after ``stop_s``). Other kinds,
a ``start_s`` and link failures have no GPU counterpart and are refused, naming the entry.

The ``[gpu]`` table (:class:`react.run.scenario.GpuSpec`): ``apply_delay_epochs``, ``timeout_s``,
``lanes``, ``copy_bytes``. Every job's ``message_bytes`` is used as it is (a GPU moves 100 MB
in well under a millisecond).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from react.backends.gpu.copystream import CopyStreams, copy_sources
from react.backends.gpu.cuda import GpuError
from react.backends.gpu.job import GpuJob, visible_gpus

if TYPE_CHECKING:
    from react.run.scenario import Scenario

__all__ = ["BACKGROUND_MAX_S", "copy_pairs", "gpu_of", "scenario_jobs"]

BACKGROUND_MAX_S = 1800.0
"""Upper bound on a copy stream's life when the scenario gives no ``stop_s``."""


def gpu_of(scenario: Scenario) -> dict[str, int]:
    """Host name -> GPU index (the host's position in the topology's host order)."""
    return {h: i for i, h in enumerate(scenario.topology.hosts)}


def copy_pairs(scenario: Scenario, gpus: int) -> list[tuple[int, int]]:
    """``(src GPU, dst GPU)`` of every copy stream of the scenario's background (module doc).

    Raises
    ------
    GpuError
        For a background kind, ``start_s`` or failure with no GPU counterpart, or a host that
        is not a GPU of this machine.
    """
    index = gpu_of(scenario)
    where = scenario.source
    if scenario.failures:
        raise GpuError(f"{where}: failures[0]: link failures have no counterpart on the GPU "
                       "backend (the GPUs' own links cannot be slowed); use copy streams "
                       "(long_lived background) to congest a rank")
    ranks = {index[h] for j in scenario.jobs for h in j.hosts}
    pairs = []
    for i, bg in enumerate(scenario.background):
        if bg.kind != "long_lived":
            raise GpuError(f"{where}: background[{i}].kind = {bg.kind!r}: the GPU backend has "
                           "only long_lived background (copy streams)")
        if bg.start_s:
            raise GpuError(f"{where}: background[{i}].start_s = {bg.start_s!r}: copy streams "
                           "start with the job on the GPU backend")
        for end, host in (("src", bg.src), ("dst", bg.dst)):
            if index[host] >= gpus:
                raise GpuError(f"{where}: background[{i}].{end} = {host!r} is GPU "
                               f"{index[host]}, but this host has {gpus} GPU(s)")
        dst = index[bg.dst]
        first = index[bg.src] if index[bg.src] != dst else None
        pairs += [(s, dst) for s in copy_sources(dst, bg.p, gpus, sorted(ranks), first)]
    return pairs


@contextmanager
def scenario_jobs(scenario: Scenario, *, react: bool | None = None,
                  gpus: int | None = None) -> Iterator[list[Any]]:
    """The scenario's jobs on this host's GPUs, copy streams running (module docstring)."""
    from react.run.driver import Job
    from react.run.scenario import controllers

    gpus = visible_gpus() if gpus is None else gpus
    index = gpu_of(scenario)
    taken: dict[int, str] = {}
    for spec in scenario.jobs:
        for r, h in enumerate(spec.hosts):
            g = index[h]
            if g >= gpus:
                raise GpuError(f"{scenario.source}: job {spec.name!r} places rank {r} on {h} = "
                               f"GPU {g}, but this host has {gpus} GPU(s); the GPU backend runs "
                               "one rank per GPU")
            if g in taken:
                raise GpuError(f"{scenario.source}: jobs {taken[g]!r} and {spec.name!r} both "
                               f"run a rank on {h} (GPU {g}); the GPU backend runs one rank per "
                               "GPU")
            taken[g] = spec.name
    pairs = copy_pairs(scenario, gpus)
    stops = [bg.stop_s for bg in scenario.background if bg.stop_s]
    duration = min(stops) if stops else BACKGROUND_MAX_S
    settings = scenario.gpu
    with ExitStack() as stack:
        if pairs:
            streams = CopyStreams(pairs, duration_s=duration, copy_bytes=settings.copy_bytes,
                                  timeout_s=settings.timeout_s)
            stack.enter_context(streams)
        jobs = []
        for spec, (pattern, controller) in zip(scenario.jobs,
                                               controllers(scenario, react), strict=True):
            backend = GpuJob([index[h] for h in spec.hosts], message_bytes=spec.message_bytes,
                             apply_delay_epochs=settings.apply_delay_epochs,
                             timeout_s=settings.timeout_s, lanes=settings.lanes,
                             compute_gap_s=spec.compute_gap_s, gpus=gpus)
            stack.callback(backend.close)
            jobs.append(Job(spec.name, backend, pattern, spec.epochs, controller))
        yield jobs
