"""The ``[sim]`` table of a scenario: how the simulator runs a scenario's jobs.

Pure data and validation (no SimPy, no network), so that a scenario file is checked before
anything is built. Each key is documented in :mod:`react.run.scenario`; why these models exist
is in ``docs/deviations.md``.

::

    [sim]
    execution = "algorithm2"   # or "dataflow"
    sharing = "maxmin"         # or "tcp" (flowsim.tcp)
    switch_cost_s = 0.0
    switch_cost_epochs = 0.0
    noise_sigma = 0.0          # 0 .. MAX_NOISE_SIGMA
    after_epochs = "stop"      # or "continue"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from react.model.execution import DEFAULT_EXECUTION, EXECUTION_RULES

__all__ = ["AFTER_EPOCHS", "MAX_NOISE_SIGMA", "SHARING", "SimSpec", "parse_sim_table"]

MAX_NOISE_SIGMA = 0.3
"""The largest noise a backend accepts: with draws clipped at 3 sigma, a flow's time keeps at
least 10% of its value, so it stays positive."""

SHARING: tuple[str, ...] = ("maxmin", "tcp")
"""How the simulator shares links: exact max-min, or the TCP-aware mode (flowsim.tcp)."""

AFTER_EPOCHS: tuple[str, ...] = ("stop", "continue")
"""What a simulated job does once its epochs are done while other jobs still run."""

_KEYS = ("execution", "sharing", "switch_cost_s", "switch_cost_epochs", "noise_sigma",
         "after_epochs")


@dataclass(frozen=True, slots=True)
class SimSpec:
    """How the simulator runs a scenario's jobs (the ``[sim]`` table; module docstring)."""

    execution: str = DEFAULT_EXECUTION
    switch_cost_s: float = 0.0
    switch_cost_epochs: float = 0.0
    noise_sigma: float = 0.0
    after_epochs: str = "stop"
    sharing: str = "maxmin"


def parse_sim_table(t: Any, *, sharing: str | None = None) -> SimSpec:
    """Validate a scenario's ``[sim]`` table (a :class:`react.run.scenario` table reader).

    ``sharing`` is the value of the deprecated top-level key, if the file has one; the table's
    own ``sharing`` key wins.
    """
    d = SimSpec()
    noise = t.number("noise_sigma", d.noise_sigma)
    if noise > MAX_NOISE_SIGMA:
        raise t.fail("noise_sigma", noise, f"a number in [0, {MAX_NOISE_SIGMA}]")
    spec = SimSpec(
        execution=t.string("execution", d.execution, choices=EXECUTION_RULES),
        switch_cost_s=t.number("switch_cost_s", d.switch_cost_s),
        switch_cost_epochs=t.number("switch_cost_epochs", d.switch_cost_epochs),
        noise_sigma=noise,
        after_epochs=t.string("after_epochs", d.after_epochs, choices=AFTER_EPOCHS),
        sharing=t.string("sharing", sharing or d.sharing, choices=SHARING),
    )
    t.done(_KEYS)
    return spec
