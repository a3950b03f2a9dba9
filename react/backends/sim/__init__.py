"""The simulator backend: a job's epochs on a :class:`flowsim.network.Network`.

Needs nothing beyond the base packages. :mod:`~react.backends.sim.engine` holds
:class:`SimBackend` (each epoch's flows released by the pattern's execution rule, timed by the
network's max-min rates); :mod:`~react.backends.sim.spec` the scenario's ``[sim]`` table. A
scenario becomes simulated jobs in :mod:`react.run.worlds.sim`.
"""

from react.backends.sim.engine import SimBackend
from react.backends.sim.spec import SimSpec

__all__ = ["SimBackend", "SimSpec"]
