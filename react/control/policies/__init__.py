"""Controllers other than REACT: naming one, loading it, checking what it decides.

A job's controller is any object with the interface :class:`react.control.controller.Controller`
offers the job driver (:mod:`react.run.driver`, :class:`react.control.loop.TuningLoop`): a
``pattern`` attribute (the pattern it wants run, starting with the job's), a ``config`` with
``batch_epochs`` and ``apply_delay_epochs``, and ``observe(batch) -> Decision``. A *factory* builds
one from the job's starting pattern and its :class:`~react.control.controller.ControllerConfig`, as
``Controller(pattern, config)`` does. Scenario files (a job's ``controller`` key) and ``react
regress --controllers`` name a factory by a *reference*:

- ``react`` (REACT itself), ``never`` or ``random`` (the baselines of
  :mod:`react.control.policies.baselines`);
- ``package.module:Factory``, imported like any module;
- ``path/to/file.py:Factory``, a file loaded by path (relative paths from the scenario or suite
  file's folder, or the working directory on the command line).

:func:`resolve` checks a reference (the module imports, the factory is callable) and returns it in a
form any process can load (file paths absolute); :func:`make_controller` builds the controller and,
for anything but REACT, wraps it in :class:`~react.control.policies.guard.CheckedController`, which
verifies every pattern it decides (:func:`react.model.verify.verify`) so that a wrong policy fails
loudly instead of running a collective that computes the wrong result. On real ranks the controller
runs in RTuner's leader, another process: :func:`controller_reference` gives the reference and
configuration the leader makes it again from.
"""

from react.control.policies.guard import (
    CheckedController,
    ControllerFault,
    ControllerInterfaceError,
    check_interface,
)
from react.control.policies.loading import (
    BUILTIN,
    ControllerLoadError,
    controller_reference,
    label,
    load_factory,
    make_controller,
    resolve,
)

__all__ = [
    "BUILTIN",
    "CheckedController",
    "ControllerFault",
    "ControllerInterfaceError",
    "ControllerLoadError",
    "check_interface",
    "controller_reference",
    "label",
    "load_factory",
    "make_controller",
    "resolve",
]
