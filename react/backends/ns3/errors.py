"""Errors of the ns-3 backend, one family under :class:`react.model.errors.ReactError`."""

from __future__ import annotations

from react.model.errors import ReactError


class Ns3Error(ReactError, RuntimeError):
    """The ns-3 backend could not do what was asked; the message says what and why."""


class Ns3MissingError(Ns3Error, ImportError):
    """The optional ``ns3`` package is not installed."""


class Ns3UnsupportedError(Ns3Error, ValueError):
    """The scenario uses a topology or feature the ns-3 backend does not model."""


class Ns3CrashError(Ns3Error):
    """The ns-3 child process died (an ns-3 assertion aborts the whole process)."""


class Ns3TimeoutError(Ns3Error, TimeoutError):
    """The ns-3 child process did not answer within its time bound; it was stopped."""
