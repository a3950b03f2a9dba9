"""Errors of the emulated network: one readable message naming the problem and what to do."""

from __future__ import annotations

from react.model.errors import ReactError


class EmuError(ReactError, RuntimeError):
    """The emulator cannot run here or failed: not root, a tool missing, too many hosts, a
    command that failed (its stderr quoted), an unknown host or link."""


class EmuInputError(EmuError, ValueError):
    """A bad argument: an unknown host or link, a non-positive rate, a malformed prefix."""
