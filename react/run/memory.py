"""How much memory a simulated scenario will hold, estimated before it starts.

A run keeps every flow of every epoch: the job's :class:`~react.model.observation.FlowTiming` per
flow and epoch (the controller and the reports read them) and, when a trace is asked for, the
network's :class:`~flowsim.records.FlowRecord` per finished flow too (a plain run keeps none,
:func:`react.run.scenario_runs.run_scenario`). That is ``flows per epoch x epochs`` records per job,
summed over jobs, and it is what grows with a what-if study: a ring AllReduce of 240 ranks has
114,720 flows per epoch, so 20 epochs of it are 2.3 million records. Estimating this before
starting turns a machine that would swap for an hour into one clear line.

The cost per record was measured with ``tracemalloc`` (peak of a run minus the peak of the same
run with fewer epochs, divided by the extra flow-epochs, on CPython 3.11; the test suite checks
both bounds): about 140 bytes with the timings alone, 270-390 with the network's records;
:data:`BYTES_PER_FLOW_EPOCH` and :data:`BYTES_PER_FLOW_EPOCH_TRACED` round them up. Background
traffic is not counted (long-lived flows leave one record each; a periodic source's count
depends on how long the jobs take).

A job with REACT on also keeps, in its controller, one observation per flow of each of its last
``history_epochs`` epochs (:class:`react.control.estimate.FctHistory`: about 184 bytes each,
measured the same way; :data:`BYTES_PER_OBSERVATION` rounds it up), and while it decides it holds
the candidate patterns it prices and swap spaces with their chunk-graph replays, which do not grow
with the epochs but with the pattern: :data:`DECISION_BYTES_PER_FLOW_STEP` per flow and step of its
pattern, at most :data:`DECISION_BYTES_CAP` per job, the bound the controller keeps its spaces and
replays within plus what one search level's pricing holds (docs/benchmarks.md, "eleventh look":
before that bound, a 240-rank recursive-doubling AllGather's replays took the 240-rank what-if to
4.56 GiB).
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from react.model.errors import ReactError

if TYPE_CHECKING:
    from react.run.scenario import Scenario

__all__ = ["BYTES_PER_FLOW_EPOCH", "BYTES_PER_FLOW_EPOCH_TRACED", "BYTES_PER_OBSERVATION",
           "DECISION_BYTES_CAP", "DECISION_BYTES_PER_FLOW_STEP", "MemoryEstimate",
           "MemoryLimitError", "check_memory", "estimate_memory", "format_bytes", "parse_size"]

BYTES_PER_FLOW_EPOCH = 256
"""Bytes one flow of one epoch holds until a plain run ends (measured about 140, rounded up)."""

BYTES_PER_FLOW_EPOCH_TRACED = 512
"""The same with the network's flow records kept for a trace (measured 270-390, rounded up)."""

BYTES_PER_OBSERVATION = 256
"""Bytes one flow of one epoch holds in a REACT controller's history (measured about 184)."""

DECISION_BYTES_PER_FLOW_STEP = 72
"""What a REACT job's decision holds while it searches, per flow of its pattern and per step
(small patterns: the 32-rank what-if's decisions stay under it)."""

DECISION_BYTES_CAP = 512 * 2**20
"""At most this per REACT job: the controller's kept swap spaces (192 MiB) and shared replays
(~100 MiB), one search level's candidates and their pricing (a 240-rank ring's first decision:
+485 MiB at its peak with the pricing of before the eleventh look, +208 MiB at 128 ranks now)."""

BASE_BYTES = 280 * 2**20
"""The interpreter, numpy, the topology and the engine, held whatever the scenario; of it
about 128 MiB are numba and LLVM with the compiled simulator core (a process that imports the
driver holds 39 MiB, 167 MiB once the kernels are loaded)."""

WARN_FRACTION = 0.5
"""Warn when the estimate exceeds this share of the memory available now."""

REFUSE_FRACTION = 0.8
"""Without an explicit cap, refuse to start above this share of the memory available now."""


class MemoryLimitError(ReactError, MemoryError):
    """A scenario would need more memory than allowed; the message gives the estimate."""


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """The estimate for one run: flow-epochs kept per job and the bytes they hold in all."""

    jobs: tuple[tuple[str, int, int], ...]
    """Per job: ``(name, flows per epoch, epochs)``."""
    runs: int
    """How many runs of the scenario stay in memory together (2 with ``--compare``)."""
    traced: bool = False
    """Whether the network's flow records are kept too (a trace)."""
    observations: int = 0
    """Flow-epochs the REACT controllers keep as observations (one run with REACT on)."""
    decision_bytes: int = 0
    """What the REACT jobs' decisions hold while they search, in all."""

    @property
    def flow_epochs(self) -> int:
        return self.runs * sum(flows * epochs for _name, flows, epochs in self.jobs)

    @property
    def bytes(self) -> int:
        per = BYTES_PER_FLOW_EPOCH_TRACED if self.traced else BYTES_PER_FLOW_EPOCH
        return (BASE_BYTES + self.flow_epochs * per
                + self.observations * BYTES_PER_OBSERVATION
                + self.decision_bytes)

    def describe(self) -> str:
        parts = ", ".join(f"{name}: {flows:,} flows x {epochs:,} epochs"
                          for name, flows, epochs in self.jobs)
        runs = f" x {self.runs} runs" if self.runs > 1 else ""
        seen = (f" and {self.observations:,} controller observations"
                if self.observations else "")
        if self.decision_bytes:
            seen += f", and {format_bytes(self.decision_bytes)} for the decisions' searches"
        return (f"about {format_bytes(self.bytes)} ({self.flow_epochs:,} flow records{runs}"
                f"{seen}; {parts})")


def estimate_memory(scenario: Scenario, *, runs: int = 1, traced: bool = False,
                    react: bool | None = None) -> MemoryEstimate:
    """The memory ``scenario`` will hold at its end (``runs`` runs kept together; ``traced``:
    with the network's flow records; ``react``: REACT on or off for every job, None: as each
    job says)."""
    from react.patterns import GENERATORS

    patterns = [GENERATORS[j.collective](j.ranks) for j in scenario.jobs]
    jobs = tuple((j.name, len(p.flows), j.epochs)
                 for j, p in zip(scenario.jobs, patterns, strict=True))
    reacting = [spec.react if react is None else react for spec in scenario.jobs]
    observations = sum(flows * min(epochs, spec.controller.history_epochs)
                       for (_name, flows, epochs), spec, on
                       in zip(jobs, scenario.jobs, reacting, strict=True) if on)
    decision_bytes = sum(min(DECISION_BYTES_PER_FLOW_STEP * len(p.flows) * p.num_steps,
                             DECISION_BYTES_CAP)
                         for p, on in zip(patterns, reacting, strict=True) if on)
    return MemoryEstimate(jobs, runs, traced, observations, decision_bytes)


def available_bytes() -> int | None:
    """Memory available to new allocations now (``MemAvailable``), or None where unknown."""
    try:
        text = Path("/proc/meminfo").read_text(encoding="ascii")
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+(\d+)\s+kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def check_memory(scenario: Scenario, max_bytes: int | None = None, *, runs: int = 1,
                 traced: bool = False, react: bool | None = None,
                 available: int | None | bool = True) -> MemoryEstimate:
    """Estimate, then refuse (:class:`MemoryLimitError`) or warn before a too-large run.

    Parameters
    ----------
    scenario : Scenario
    max_bytes : int, optional
        The user's cap: refuse above it. Without one, refuse above 80% of the memory available
        now and warn above 50%.
    runs : int
        Runs held together (2 for a comparison with and without REACT).
    traced : bool
        Whether the runs keep the network's flow records (a trace).
    react : bool, optional
        REACT on (True) or off (False) for every job in the run that has it on; None: as each
        job says (a comparison's second run has it on for every job).
    available : int, None or True
        Memory available, in bytes (True: read it from the system; None: unknown, no check).
    """
    est = estimate_memory(scenario, runs=runs, traced=traced, react=react)
    hint = ("run fewer epochs (--epochs), fewer or smaller jobs, or raise the cap with "
            "--max-memory")
    if max_bytes is not None:
        if est.bytes > max_bytes:
            raise MemoryLimitError(
                f"{scenario.source}: the run would hold {est.describe()}, more than "
                f"--max-memory {format_bytes(max_bytes)}; {hint}")
        return est
    avail = available_bytes() if available is True else available
    if avail is None or avail is False:
        return est
    if est.bytes > REFUSE_FRACTION * avail:
        raise MemoryLimitError(
            f"{scenario.source}: the run would hold {est.describe()}, more than "
            f"{REFUSE_FRACTION:.0%} of the {format_bytes(avail)} available now; {hint} "
            f"(--max-memory SIZE sets the cap explicitly)")
    if est.bytes > WARN_FRACTION * avail:
        warnings.warn(f"{scenario.source}: the run will hold {est.describe()}, more than half "
                      f"of the {format_bytes(avail)} available now", ResourceWarning,
                      stacklevel=2)
    return est


_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20,
          "MIB": 2**20, "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40,
          "TIB": 2**40}


def parse_size(text: str) -> int:
    """``"2G"``, ``"512MB"``, ``"1.5GiB"`` or a number of bytes -> bytes (binary units)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in _UNITS:
        raise ReactError(f"memory size {text!r}: expected a number with an optional unit K, M, "
                         f"G or T (binary), e.g. 2G or 512M")
    value = float(match.group(1)) * _UNITS[unit]
    if not (math.isfinite(value) and value > 0):
        raise ReactError(f"memory size {text!r}: expected a positive size")
    return int(value)


def format_bytes(n: float) -> str:
    """A byte count for people: ``1.5 GiB``, ``320 MiB``."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"
