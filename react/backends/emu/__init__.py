"""Emulated network backend (placeholder docstring)."""

from react.backends.emu.cleanup import clean
from react.backends.emu.errors import EmuError, EmuInputError
from react.backends.emu.limits import max_hosts
from react.backends.emu.network import Background, EmuNetwork

__all__ = ["Background", "EmuError", "EmuInputError", "EmuNetwork", "clean", "max_hosts"]
