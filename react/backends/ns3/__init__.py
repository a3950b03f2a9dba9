"""The ns-3 backend: the same scenarios at packet level, DCTCP over RED/ECN switches.

Needs the optional extra ``[ns3]`` (the PyPI package ``ns3``, x86-64 wheels; installing it
compiles cppyy, a few minutes). Nothing here imports ns-3: the simulation runs in a child process
(:mod:`react.backends.ns3.process` starts it, :mod:`react.backends.ns3.child` is its program)
that loads ns-3 (8-16 s), compiles a small C++ helper with cppyy
(``react_ns3.h``: per-flow ECMP routing and the collective's flow driver), builds the
scenario's network and then runs batches of epochs on request, keeping simulated time, TCP state
and background flows between batches. The child stops when the run ends (or when a
:func:`shared_child` block ends); an ns-3 abort, a Python error in the child or a timeout
becomes one :class:`Ns3Error` naming what was running.

Modules: :mod:`~react.backends.ns3.spec` (the scenario's ``[ns3]`` table),
:mod:`~react.backends.ns3.plan` (a topology as cables, routes and TCP defaults; what is not
supported), :mod:`~react.backends.ns3.engine` (:class:`Ns3Backend`); a scenario becomes its
world in :mod:`react.run.worlds.ns3`.
"""

from react.backends.ns3.errors import (
    Ns3CrashError,
    Ns3Error,
    Ns3MissingError,
    Ns3TimeoutError,
    Ns3UnsupportedError,
)
from react.backends.ns3.process import Ns3Process, shared_child
from react.backends.ns3.spec import Ns3Spec

__all__ = [
    "Ns3CrashError",
    "Ns3Error",
    "Ns3MissingError",
    "Ns3Process",
    "Ns3Spec",
    "Ns3TimeoutError",
    "Ns3UnsupportedError",
    "shared_child",
]
