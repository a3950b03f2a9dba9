"""Names of everything the emulator creates, so that a crashed run can be found and removed.

Every namespace is called ``{prefix}-{node}`` where ``prefix`` is the run prefix: the project
prefix :data:`PROJECT_PREFIX` (``rct``) followed by a per-run tag of lower-case letters and
digits (``rct3k9a0``), unique among the runs alive on the machine (it encodes the process id
and a per-process counter). All links live inside the run's namespaces (a veth pair is created
directly in its two namespaces), so deleting the namespaces removes every link: nothing is ever
left in the root namespace. ``clean()`` finds leftovers by the prefix alone.

Inside a host namespace the one interface is :data:`HOST_IFNAME` (``eth0``), whatever the host;
(Gloo's ``GLOO_SOCKET_IFNAME`` can name it). A switch's port towards neighbour ``n`` is
``to-{n}`` (``to-h3``, ``to-spine1``), or ``p{i}`` when that would exceed the kernel's
15-character limit.
"""

from __future__ import annotations

import itertools
import os
import re

from react.backends.emu.errors import EmuInputError

PROJECT_PREFIX = "rct"
"""Start of every run prefix; ``react emu clean`` removes every namespace carrying it."""

HOST_IFNAME = "eth0"
"""The interface of every host namespace."""

BRIDGE_IFNAME = "br0"
"""The bridge of a star's switch namespace."""

_PREFIX_RE = re.compile(rf"^{PROJECT_PREFIX}[a-z0-9]{{1,16}}$")
_ANY_RUN_RE = re.compile(rf"^{PROJECT_PREFIX}[a-z0-9]{{1,16}}-")
_IFNAME_MAX = 15
_counter = itertools.count()


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rem = divmod(value, 36)
        out = digits[rem] + out
        if value == 0:
            return out


def new_run_prefix() -> str:
    """A run prefix unique among live processes: project prefix + pid + per-process counter."""
    return f"{PROJECT_PREFIX}{_base36(os.getpid())}{_base36(next(_counter))}"


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a valid run prefix, else raise :class:`EmuInputError`."""
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
        raise EmuInputError(
            f"prefix must be {PROJECT_PREFIX!r} followed by 1-16 lower-case letters or digits "
            f"(e.g. 'rctt1234'), got prefix={prefix!r}"
        )
    return prefix


def netns_name(prefix: str, node: str) -> str:
    """The namespace of ``node`` in the run ``prefix``."""
    return f"{prefix}-{node}"


def belongs(name: str, prefix: str | None) -> bool:
    """Whether namespace ``name`` was made by run ``prefix`` (by any run when ``None``)."""
    if prefix is None:
        return bool(_ANY_RUN_RE.match(name))
    return name.startswith(prefix + "-")


def switch_port(neighbour: str, index: int) -> str:
    """Name of a switch's port towards ``neighbour`` (its ``index``-th port as a fallback)."""
    name = f"to-{neighbour}"
    if len(name) <= _IFNAME_MAX and re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        return name
    return f"p{index}"
