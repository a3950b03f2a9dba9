"""Markers whose requirement may be missing here: skip those tests, saying what is missing.

``emu`` needs root and iproute2 (network namespaces); CI runs as root, so they run there.
``gpu`` needs CUDA; ``ns3`` the optional ns-3 package. ``slow`` tests are deselected by default
(``python3 -m pytest -m slow`` runs them).
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest


def _emu_missing() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the emulator needs root (network namespaces, tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"the emulator needs iproute2's {tool!r} on PATH"
    return None


def _ns3_missing() -> str | None:
    if importlib.util.find_spec("ns3") is None:
        return "needs the optional ns-3 package: pip install 'react-collectives[ns3]'"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    emu_reason = _emu_missing()
    ns3_reason = _ns3_missing()
    for item in items:
        if emu_reason and item.get_closest_marker("emu"):
            item.add_marker(pytest.mark.skip(reason=emu_reason))
        if ns3_reason and item.get_closest_marker("ns3"):
            item.add_marker(pytest.mark.skip(reason=ns3_reason))
