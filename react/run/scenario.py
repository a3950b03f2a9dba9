"""Scenario files: one TOML file describes a whole what-if run on the flow simulator.

A scenario names a fabric, the jobs that share it (each a collective on some hosts, with or
without REACT), the background traffic and the link failures, and the seeds that make the run
repeat exactly. :func:`load_scenario` reads and validates the file into frozen records; every
mistake is a :class:`ScenarioError` naming the key path (``jobs[1].placement``), the bad value and
what was expected, so that a typo never silently changes an experiment. Running a scenario
(:func:`~react.run.scenario_runs.run_scenario`, :func:`~react.run.scenario_runs.compare_scenario`)
is :mod:`react.run.scenario_runs`; a scenario built on each backend is :mod:`react.run.worlds`.
Each backend's own table (``[sim]``, ``[emu]``, ``[gpu]``, ``[ns3]``) is validated by that
backend's ``spec`` module.

The file (every key is listed; anything else is an error)::

    name = "worked-example"          # optional, default: the file name
    description = "..."              # optional
    seed = 0                         # ECMP hash seed of the network; default seed of each job
    backend = "sim"                  # "sim" (flowsim) | "emu" (real ranks, emulated network)
                                     # | "gpu" (this host's GPUs: host h{i} is GPU i, NCCL)
                                     # | "ns3" (packet level; extra [ns3]; the [ns3] table:
                                     # react.backends.ns3.spec)
    connections = 4                  # ECMP connections per rank pair (default for every job)

    [emu]                            # optional; used when the backend is "emu"
    link_rate_bps = 200e6            # the fastest link's emulated rate; others scale with it
    message_bytes = 4194304          # every job's message on the emulator (default 4 MiB)
    transport = "socket"             # "socket" (base packages) | "torch" (Gloo; extra [torch])
    apply_delay_epochs = 5           # epochs a new pattern takes to reach every rank (§6.3)
    timeout_s = 120                  # bound on any wait of a rank or of the tuner

    [sim]                            # optional; used when the backend is "sim"
    execution = "algorithm2"         # "algorithm2" (the paper's, as real ranks run it) |
                                     # "dataflow" (a flow waits only for its data; looser)
    sharing = "maxmin"               # the simulator's rates: exact max-min, or "tcp" (headers,
                                     # start-up, DCTCP's latecomer penalty, a cap on a job's
                                     # flows both ways between two hosts; flowsim.tcp); the
                                     # old top-level key still works, with a warning
    switch_cost_s = 0.0              # idle set-up before the first epoch of each new pattern
    switch_cost_epochs = 0.0         # ... plus this many times the previous epoch's time
    noise_sigma = 0.0                # relative noise on every flow's time (0 .. 0.3), seeded
                                     # from the scenario's seed
    after_epochs = "stop"            # a job whose epochs are done while others still run:
                                     # "stop", or "continue" its last pattern, unrecorded,
                                     # until every job is done (jobs of different epoch
                                     # lengths then share the network throughout)

    [gpu]                            # optional; used when the backend is "gpu"
    apply_delay_epochs = 5           # epochs a new pattern takes to reach every rank (§6.3)
    timeout_s = 120                  # bound on every NCCL operation and every tuner wait
    lanes = 4                        # NCCL communicators for chunk graphs
    copy_bytes = 67108864            # bytes per copy of a background copy stream

    [topology]                       # a builder of flowsim.topologies and its parameters ...
    name = "star"                    # star | leaf_spine | fat_tree | alibaba_fabric
    n = 17
    latency_s = 2e-6
    # ... or a JSON file written by Topology.save, relative to the scenario file:
    # file = "fabric.json"

    [[jobs]]
    name = "tree"
    collective = "allreduce_double_binary_tree"   # a name of react.patterns.GENERATORS
    ranks = 16
    placement = "first"              # "first" | "spread" | "random" | ["h0", "h5", ...]
    message_bytes = 2e6
    epochs = 60
    compute_gap_s = 0.0              # optional
    connections = 1                  # optional, overrides the top-level value
    seed = 0                         # optional: per-epoch port choice and controller seed
    react = true                     # or a table of ControllerConfig parameters:
    # [jobs.react]                   #   enabled = true, batch_epochs = 6, delta1 = 0.2, ...
    controller = "react"             # optional: who decides when react is on: "react", a
                                     # baseline ("never", "random"), "package.module:Factory" or
                                     # "path/to/file.py:Factory" (relative to this file); see
                                     # react.control.policies

    [[background]]
    kind = "long_lived"              # long_lived | periodic_bulk | ping_pong | poisson_on_off
    src = "h16"
    dst = "tree:3"                   # a host, or JOB:RANK (the host of that rank of that job)
    p = 2                            # parallel flows, on ports port .. port+p-1
    # start_s, stop_s, port, tenant; periodic_bulk: size_bytes, period_s; ping_pong:
    # size_bytes (src -> dst, then back, ...; simulator only); poisson_on_off: mean_on_s,
    # mean_off_s

    [[failures]]
    link = "spine0->leaf1"           # a directed link by its endpoints
    capacity_bps = 30e9
    at_s = 0.0
    recover_s = 0.05                 # optional: back to the original capacity then

Placement rules pick among the hosts that no earlier job placed by a rule has taken, in the
topology's host order (``h0 ..``): ``first`` takes the first ``ranks`` of them, ``spread`` spaces
the ranks evenly across them (one per pod of a fat-tree when the counts divide), ``random`` draws
them with the job's seed. An explicit host list may share hosts with other jobs (GPU sharing).
"""

from __future__ import annotations

import inspect
import math
import numbers
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from flowsim.errors import FlowsimError
from flowsim.topologies import alibaba_fabric, fat_tree, leaf_spine, star
from flowsim.topology import Topology
from react.backends.emu.spec import EmuSpec, parse_emu_table
from react.backends.gpu.spec import GpuSpec, parse_gpu_table
from react.backends.ns3.spec import Ns3Spec, parse_ns3_table
from react.backends.sim.spec import SHARING, SimSpec, parse_sim_table
from react.control.controller import ControllerConfig
from react.model.errors import ReactError
from react.patterns import GENERATORS
from react.run.tomlfile import read_toml

__all__ = [
    "BACKENDS",
    "PLACEMENTS",
    "TOPOLOGIES",
    "BackgroundSpec",
    "EmuSpec",
    "GpuSpec",
    "FailureSpec",
    "SimSpec",
    "JobSpec",
    "Scenario",
    "ScenarioError",
    "controllers",
    "load_scenario",
    "parse_scenario",
]

TOPOLOGIES: dict[str, Callable[..., Topology]] = {
    "star": star,
    "leaf_spine": leaf_spine,
    "fat_tree": fat_tree,
    "alibaba_fabric": alibaba_fabric,
}
"""Topology builders a scenario may name (the string registry lives at this edge only)."""

BACKENDS: tuple[str, ...] = ("sim", "emu", "gpu", "ns3")
"""Backends a scenario may name; :mod:`react.run.worlds` builds a scenario's jobs on each."""

PLACEMENTS: tuple[str, ...] = ("first", "spread", "random")
"""Placement rules; an explicit list of host names is the alternative."""

TRAFFIC_KINDS: dict[str, tuple[str, ...]] = {
    "long_lived": (),
    "periodic_bulk": ("size_bytes", "period_s"),
    "ping_pong": ("size_bytes",),
    "poisson_on_off": ("mean_on_s", "mean_off_s"),
}
"""Background source kinds (flowsim.traffic) and the keys each one requires."""


MAX_EPOCHS = 100_000
"""The most epochs a job may run: every epoch's per-flow timings are kept in memory (about
3 KB per epoch for a 16-rank tree), so 10^5 epochs is already hundreds of MB; a larger value is
far more likely a typo than a plan."""


class ScenarioError(ReactError, ValueError):
    """A scenario file is unreadable or invalid; the message names the key and the bad value."""


# -- parsed records ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job of a scenario, placement resolved: ``hosts[i]`` runs rank ``i``."""

    name: str
    collective: str
    ranks: int
    hosts: tuple[str, ...]
    message_bytes: float
    epochs: int
    compute_gap_s: float
    connections: int
    seed: int
    react: bool
    controller: ControllerConfig
    controller_factory: str = "react"
    """Who decides when ``react`` is on: a reference :func:`react.control.policies.resolve`
    accepts."""


@dataclass(frozen=True, slots=True)
class BackgroundSpec:
    """One background source, endpoints resolved to host names; ``p`` parallel flows."""

    kind: str
    src: str
    dst: str
    p: int = 1
    port: int = 0
    start_s: float | None = None
    stop_s: float | None = None
    size_bytes: float | None = None
    period_s: float | None = None
    mean_on_s: float | None = None
    mean_off_s: float | None = None
    tenant: str = "background"


@dataclass(frozen=True, slots=True)
class FailureSpec:
    """A partial (or total, at 0 bps) failure of one directed link from ``at_s``."""

    src: str
    dst: str
    capacity_bps: float
    at_s: float = 0.0
    recover_s: float | None = None


@dataclass(frozen=True, slots=True)
class Scenario:
    """A validated scenario: the built topology, resolved jobs, background and failures."""

    name: str
    description: str
    seed: int
    backend: str
    topology: Topology
    jobs: tuple[JobSpec, ...]
    background: tuple[BackgroundSpec, ...] = ()
    failures: tuple[FailureSpec, ...] = ()
    source: str = "<scenario>"
    emu: EmuSpec = EmuSpec()
    sim: SimSpec = SimSpec()
    gpu: GpuSpec = GpuSpec()
    ns3: Ns3Spec = Ns3Spec()

    def job(self, name: str) -> JobSpec:
        for job in self.jobs:
            if job.name == name:
                return job
        raise ScenarioError(
            f"{self.source}: no job {name!r}; jobs are {[j.name for j in self.jobs]}"
        )

    def with_epochs(self, epochs: int) -> Scenario:
        """The same scenario with every job running ``epochs`` epochs (the CLI's --epochs)."""
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise ScenarioError(f"epochs must be a positive integer, got {epochs!r}")
        if epochs > MAX_EPOCHS:
            raise ScenarioError(f"epochs must be at most {MAX_EPOCHS:,}, got {epochs!r}")
        return replace(self, jobs=tuple(replace(j, epochs=epochs) for j in self.jobs))

    def with_controller(self, ref: str, base_dir: str | os.PathLike[str] = ".") -> Scenario:
        """The same scenario with ``ref`` deciding for every job that runs a controller.

        ``ref`` is anything :func:`react.control.policies.resolve` accepts (a relative file path is
        read from ``base_dir``); a reference that does not load is a :class:`ScenarioError`.
        """
        from react.control.policies import ControllerLoadError, resolve

        try:
            ref = resolve(ref, base_dir)
        except ControllerLoadError as exc:
            raise ScenarioError(str(exc)) from None
        return replace(self, jobs=tuple(replace(j, controller_factory=ref) for j in self.jobs))

    def with_sharing(self, sharing: str) -> Scenario:
        """The same scenario with the simulator sharing links ``sharing`` ("maxmin" | "tcp")."""
        if sharing not in SHARING:
            raise ScenarioError(
                f"sharing {sharing!r} does not exist; expected one of {', '.join(SHARING)}")
        return replace(self, sim=replace(self.sim, sharing=sharing))

    def with_backend(self, backend: str) -> Scenario:
        """The same scenario on another backend (the CLI's --backend)."""
        if backend not in BACKENDS:
            raise ScenarioError(
                f"backend {backend!r} does not exist; expected one of {', '.join(BACKENDS)}"
            )
        return replace(self, backend=backend)


# -- validation helpers --------------------------------------------------------------------------
class _Table:
    """A TOML table being validated: remembers its key path and which keys were read.

    Reading a key marks it used; :meth:`done` then rejects any key nobody read, which is how
    an unknown (misspelt) key anywhere in the file is caught.
    """

    def __init__(self, data: Any, path: str, source: str) -> None:
        if not isinstance(data, Mapping):
            raise ScenarioError(
                f"{source}: {path or 'the file'} must be a table, got {_show(data)}"
            )
        self.data = data
        self.path = path
        self.source = source
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def fail(self, name: str, value: Any, expected: str) -> ScenarioError:
        return ScenarioError(
            f"{self.source}: {self.key(name)} = {_show(value)}: expected {expected}"
        )

    def has(self, name: str) -> bool:
        return name in self.data

    def raw(self, name: str, default: Any = ..., *, required: bool = False) -> Any:
        self.used.add(name)
        if name not in self.data:
            if required or default is ...:
                raise ScenarioError(f"{self.source}: {self.key(name)} is missing")
            return default
        return self.data[name]

    def string(self, name: str, default: Any = ..., *, choices: Sequence[str] = ()) -> Any:
        value = self.raw(name, default)
        if value is default and default is not ...:
            return value
        if not isinstance(value, str) or not value:
            raise self.fail(name, value, "a non-empty string")
        if choices and value not in choices:
            raise self.fail(name, value, f"one of {', '.join(choices)}")
        return value

    def integer(self, name: str, default: Any = ..., *, minimum: int | None = None,
                maximum: int | None = None) -> Any:
        value = self.raw(name, default)
        if value is default and default is not ...:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(name, value, "an integer")
        if minimum is not None and value < minimum:
            raise self.fail(name, value, f"an integer >= {minimum}")
        if maximum is not None and value > maximum:
            raise self.fail(name, value, f"an integer <= {maximum:,}")
        return value

    def number(self, name: str, default: Any = ..., *, positive: bool = False) -> Any:
        value = self.raw(name, default)
        if value is default and default is not ...:
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(
            value
        ):
            raise self.fail(name, value, "a finite number")
        if positive and value <= 0:
            raise self.fail(name, value, "a positive number")
        if not positive and value < 0:
            raise self.fail(name, value, "a number >= 0")
        return float(value)

    def done(self, allowed: Sequence[str] | None = None) -> None:
        unknown = [k for k in self.data if k not in self.used]
        if unknown:
            known = sorted(allowed if allowed is not None else self.used)
            raise ScenarioError(
                f"{self.source}: unknown key {self.key(unknown[0])!r}; expected one of "
                f"{', '.join(known)}"
            )


def _show(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a table"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- loading -------------------------------------------------------------------------------------
def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read and validate a scenario TOML file.

    Parameters
    ----------
    path : path-like
        The TOML file. A topology ``file`` inside it is read relative to the file's folder.

    Returns
    -------
    Scenario

    Raises
    ------
    ScenarioError
        If the file cannot be read, is not TOML, or any key is unknown, missing or bad; the
        message names the file, the key path and the value.

    Examples
    --------
    >>> from pathlib import Path
    >>> s = load_scenario(Path("experiments/scenarios/worked_example.toml"))  # doctest: +SKIP
    >>> s.jobs[0].ranks  # doctest: +SKIP
    16
    """
    path = Path(path)
    data = read_toml(path, "scenario file", ScenarioError)
    return parse_scenario(data, source=str(path), base_dir=path.parent, default_name=path.stem)


def parse_scenario(
    data: Mapping[str, Any],
    *,
    source: str = "<scenario>",
    base_dir: str | os.PathLike[str] = ".",
    default_name: str = "scenario",
) -> Scenario:
    """Validate an already-parsed TOML document (a dict); see :func:`load_scenario`."""
    top = _Table(data, "", source)
    name = top.string("name", default_name)
    description = top.string("description", "")
    seed = top.integer("seed", 0)
    backend = top.raw("backend", "sim")
    if backend not in BACKENDS:
        raise top.fail("backend", backend, f"one of the backends that exist: {', '.join(BACKENDS)}")
    connections = top.integer("connections", 4, minimum=1)
    sharing = None
    if top.has("sharing"):  # moved into [sim] with the simulator's other settings
        sharing = top.string("sharing", choices=SHARING)
        warnings.warn(f"{source}: the top-level key 'sharing' is deprecated; write it in the "
                      f"[sim] table: [sim] sharing = {sharing!r}", FutureWarning,
                      stacklevel=2)
    topology = _topology(_Table(top.raw("topology", required=True), "topology", source),
                         Path(base_dir))
    raw_jobs = top.raw("jobs", required=True)
    if not isinstance(raw_jobs, list) or not raw_jobs:
        raise top.fail("jobs", raw_jobs, "an array of at least one [[jobs]] table")
    jobs: list[JobSpec] = []
    taken: set[str] = set()
    for i, raw in enumerate(raw_jobs):
        job = _job(_Table(raw, f"jobs[{i}]", source), topology, seed, connections, taken,
                   Path(base_dir))
        if job.name in {j.name for j in jobs}:
            raise ScenarioError(f"{source}: jobs[{i}].name = {job.name!r}: expected a unique name")
        jobs.append(job)
    background = tuple(
        _background(_Table(raw, f"background[{i}]", source), topology, jobs)
        for i, raw in enumerate(_array(top, "background"))
    )
    failures = tuple(
        _failure(_Table(raw, f"failures[{i}]", source), topology)
        for i, raw in enumerate(_array(top, "failures"))
    )
    emu = parse_emu_table(_Table(top.raw("emu", {}), "emu", source))
    sim = parse_sim_table(_Table(top.raw("sim", {}), "sim", source), sharing=sharing)
    gpu = parse_gpu_table(_Table(top.raw("gpu", {}), "gpu", source))
    ns3 = parse_ns3_table(_Table(top.raw("ns3", {}), "ns3", source))
    top.done(("name", "description", "seed", "backend", "connections", "sharing", "topology",
              "jobs", "background", "failures", "emu", "sim", "gpu", "ns3"))
    return Scenario(name, description, seed, backend, topology, tuple(jobs), background,
                    failures, source, emu, sim, gpu, ns3)


def _array(table: _Table, name: str) -> list[Any]:
    value = table.raw(name, [])
    if not isinstance(value, list):
        raise table.fail(name, value, f"an array of [[{name}]] tables")
    return value


def _topology(t: _Table, base_dir: Path) -> Topology:
    if t.has("file"):
        file = t.string("file")
        t.done(("file",))
        path = base_dir / file
        try:
            return Topology.load(path)
        except OSError as exc:
            raise t.fail("file", file, f"a readable topology JSON file ({exc.strerror})") from None
        except (FlowsimError, ValueError, KeyError, TypeError) as exc:
            raise t.fail("file", file, f"a topology JSON file ({exc})") from None
    name = t.raw("name", required=True)
    if name not in TOPOLOGIES:
        raise t.fail("name", name, f"a topology: one of {', '.join(TOPOLOGIES)} (or a 'file')")
    build = TOPOLOGIES[name]
    params = [p for p in inspect.signature(build).parameters]
    kwargs = {}
    for key in t.data:
        if key == "name":
            continue
        if key not in params:
            raise ScenarioError(
                f"{t.source}: unknown key {t.key(key)!r} for topology {name!r}; expected one of "
                f"{', '.join(params)}"
            )
        kwargs[key] = t.raw(key)
    try:
        return build(**kwargs)
    except (FlowsimError, TypeError, ValueError) as exc:
        raise ScenarioError(f"{t.source}: topology: {exc}") from None


_JOB_KEYS = ("name", "collective", "ranks", "placement", "message_bytes", "epochs",
             "compute_gap_s", "connections", "seed", "react", "controller")


def _job(t: _Table, topo: Topology, seed: int, connections: int, taken: set[str],
         base_dir: Path) -> JobSpec:
    name = t.string("name")
    if ":" in name:
        raise t.fail("name", name, "a name without ':' (JOB:RANK names a rank's host)")
    collective = t.raw("collective", required=True)
    if collective not in GENERATORS:
        raise t.fail("collective", collective,
                     f"a pattern generator: one of {', '.join(sorted(GENERATORS))}")
    ranks = t.integer("ranks", minimum=2)
    message_bytes = t.number("message_bytes", positive=True)
    epochs = t.integer("epochs", minimum=1, maximum=MAX_EPOCHS)
    compute_gap_s = t.number("compute_gap_s", 0.0)
    conns = t.integer("connections", connections, minimum=1)
    job_seed = t.integer("seed", seed)
    react, controller = _react(t, job_seed)
    factory = _controller_factory(t, base_dir)
    hosts = _placement(t, topo, ranks, job_seed, taken)
    t.done(_JOB_KEYS)
    try:
        GENERATORS[collective](ranks)
    except ReactError as exc:
        raise t.fail("ranks", ranks, f"a rank count {collective} supports ({exc})") from None
    return JobSpec(name, collective, ranks, hosts, message_bytes, epochs, compute_gap_s, conns,
                   job_seed, react, controller, factory)


def _controller_factory(t: _Table, base_dir: Path) -> str:
    from react.control.policies import ControllerLoadError, resolve

    ref = t.string("controller", "react")
    try:
        return resolve(ref, base_dir)
    except ControllerLoadError as exc:
        raise t.fail("controller", ref, f"a controller that loads ({exc})") from None


def _react(t: _Table, job_seed: int) -> tuple[bool, ControllerConfig]:
    value = t.raw("react", False)
    if isinstance(value, bool):
        return value, ControllerConfig(seed=job_seed)
    if not isinstance(value, Mapping):
        raise t.fail("react", value, "true, false, or a table of controller parameters")
    table = _Table(value, t.key("react"), t.source)
    enabled = table.raw("enabled", True)
    if not isinstance(enabled, bool):
        raise table.fail("enabled", enabled, "true or false")
    params = {k: v for k, v in value.items() if k != "enabled"}
    params.setdefault("seed", job_seed)
    try:
        return enabled, ControllerConfig.from_mapping(params, where=f"{t.source}: {t.key('react')}")
    except ReactError as exc:
        message = str(exc)
        if not message.startswith(t.source):
            message = f"{t.source}: {t.key('react')}: {message}"
        raise ScenarioError(message) from None


def _placement(t: _Table, topo: Topology, ranks: int, seed: int, taken: set[str]
               ) -> tuple[str, ...]:
    rule = t.raw("placement", "first")
    if isinstance(rule, list):
        hosts = []
        for i, host in enumerate(rule):
            where = f"placement[{i}]"
            if not isinstance(host, str) or not topo.has_node(host):
                raise t.fail(where, host, f"a host of the topology ({_hosts_hint(topo)})")
            if not topo.is_host(host):
                raise t.fail(where, host, f"a host, not a switch ({_hosts_hint(topo)})")
            if host in hosts:
                raise t.fail(where, host, "each host at most once in a job")
            hosts.append(host)
        if len(hosts) != ranks:
            raise t.fail("placement", rule, f"{ranks} hosts, one per rank (ranks = {ranks})")
        return tuple(hosts)
    if rule not in PLACEMENTS:
        raise t.fail("placement", rule,
                     f"a list of host names or a rule: one of {', '.join(PLACEMENTS)}")
    free = [h for h in topo.hosts if h not in taken]
    if ranks > len(free):
        raise t.fail(
            "ranks", ranks,
            f"at most {len(free)}: the topology has {len(topo.hosts)} hosts and earlier jobs "
            f"placed by a rule took {len(taken)}",
        )
    if rule == "first":
        chosen = free[:ranks]
    elif rule == "spread":
        chosen = [free[i * len(free) // ranks] for i in range(ranks)]
    else:
        rng = np.random.default_rng(seed)
        chosen = [free[int(i)] for i in rng.choice(len(free), size=ranks, replace=False)]
    taken.update(chosen)
    return tuple(chosen)


def _nodes_hint(topo: Topology) -> str:
    def some(names: Sequence[str]) -> str:
        return ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")

    switches = sorted(topo.switches)
    return (f"switches: {some(switches) or 'none'}; hosts: {_hosts_hint(topo)}")


def _hosts_hint(topo: Topology) -> str:
    hosts = topo.hosts
    return f"{hosts[0]} .. {hosts[-1]}" if hosts else "none"


def _endpoint(t: _Table, name: str, topo: Topology, jobs: Sequence[JobSpec]) -> str:
    value = t.string(name)
    if ":" in value:
        job_name, _, rank_text = value.partition(":")
        job = next((j for j in jobs if j.name == job_name), None)
        if job is None:
            raise t.fail(name, value, f"JOB:RANK with JOB one of {[j.name for j in jobs]}")
        if not rank_text.isdigit() or int(rank_text) >= job.ranks:
            raise t.fail(name, value, f"JOB:RANK with RANK in 0..{job.ranks - 1}")
        return job.hosts[int(rank_text)]
    if not topo.has_node(value):
        raise t.fail(name, value, f"a host ({_hosts_hint(topo)}) or JOB:RANK")
    if not topo.is_host(value):
        raise t.fail(name, value, "a host, not a switch")
    return value


_BACKGROUND_KEYS = ("kind", "src", "dst", "p", "port", "start_s", "stop_s", "tenant",
                    "size_bytes", "period_s", "mean_on_s", "mean_off_s")


def _background(t: _Table, topo: Topology, jobs: Sequence[JobSpec]) -> BackgroundSpec:
    kind = t.string("kind", choices=tuple(TRAFFIC_KINDS))
    src = _endpoint(t, "src", topo, jobs)
    dst = _endpoint(t, "dst", topo, jobs)
    if src == dst:
        raise t.fail("dst", t.data["dst"], f"a host other than src ({src})")
    p = t.integer("p", 1, minimum=1)
    port = t.integer("port", 0, minimum=0)
    start_s = t.number("start_s", None)
    stop_s = t.number("stop_s", None)
    if stop_s is not None and not stop_s > (start_s or 0.0):
        raise t.fail("stop_s", stop_s, f"a time after start_s ({start_s or 0.0})")
    tenant = t.string("tenant", "background")
    extra = {key: t.number(key, positive=True) for key in TRAFFIC_KINDS[kind]}
    t.done(("kind", "src", "dst", "p", "port", "start_s", "stop_s", "tenant",
            *TRAFFIC_KINDS[kind]))
    return BackgroundSpec(kind, src, dst, p, port, start_s, stop_s, tenant=tenant, **extra)


def _failure(t: _Table, topo: Topology) -> FailureSpec:
    link = t.string("link")
    src, sep, dst = (part.strip() for part in link.partition("->"))
    if not sep or not src or not dst:
        raise t.fail("link", link, "'SRC->DST', e.g. 'spine0->leaf1'")
    for end in (src, dst):
        if not topo.has_node(end):
            raise t.fail("link", link, f"a link of the topology; it has no node {end!r} "
                                       f"({_nodes_hint(topo)})")
    try:
        topo.link(src, dst)
    except FlowsimError:
        ends = sorted(topo.link_by_id(i).dst for i in topo.out_links(src))
        shown = ", ".join(ends[:8]) + (", ..." if len(ends) > 8 else "")
        raise t.fail("link", link, f"a link of the topology; there is no link {src}->{dst} "
                                   f"({src} links to {shown})") from None
    capacity = t.number("capacity_bps")
    at_s = t.number("at_s", 0.0)
    recover_s = t.number("recover_s", None)
    if recover_s is not None and not recover_s > at_s:
        raise t.fail("recover_s", recover_s, f"a time after at_s ({at_s})")
    t.done(("link", "capacity_bps", "at_s", "recover_s"))
    return FailureSpec(src, dst, capacity, at_s, recover_s)


# -- running -------------------------------------------------------------------------------------
def controllers(scenario: Scenario, react: bool | None) -> list[Any]:
    """Each job's pattern and controller (None where REACT is off), in job order.

    The controller is REACT unless the job names another (its ``controller`` key); any other is
    checked and guarded by :func:`react.control.policies.make_controller`.
    """
    from react.control.policies import make_controller

    out = []
    for spec in scenario.jobs:
        pattern = GENERATORS[spec.collective](spec.ranks)
        on = spec.react if react is None else react
        out.append((pattern, make_controller(spec.controller_factory, pattern, spec.controller)
                             if on else None))
    return out
