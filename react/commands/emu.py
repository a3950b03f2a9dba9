"""``react emu``: ``clean`` removes what crashed emulator runs left; ``info`` says what runs here.

Hooked into :mod:`react.cli` by :func:`add_parser`; handlers take ``(args, out)`` and return an
exit status like every other subcommand. Errors (not root) are :class:`EmuError`, reported by
``react`` as one line with exit status 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, TextIO

from react.backends.emu import cleanup, limits, shell
from react.backends.emu.names import PROJECT_PREFIX, belongs, check_prefix


def add_parser(sub: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Add the ``emu`` subcommand with its actions ``clean`` and ``info`` to ``sub``."""
    emu = sub.add_parser("emu", parents=list(parents),
                         help="the emulated network: clean up after crashed runs, show limits",
                         description="Manage the Linux-namespace network emulator "
                                     "(react.backends.emu).")
    esub = emu.add_subparsers(dest="action", metavar="ACTION", required=True)
    clean = esub.add_parser(
        "clean", parents=list(parents), help="remove namespaces left by emulator runs",
        description=f"Delete every network namespace named '{PROJECT_PREFIX}<run>-<node>' (the "
                    "processes inside them are killed first). Needs root. Also removes the "
                    "namespaces of runs that are still going: use --prefix to target one run.",
        epilog="Example: react emu clean --dry-run",
    )
    clean.add_argument("--prefix", metavar="PREFIX", type=_prefix,
                       help=f"only the run with this prefix (e.g. {PROJECT_PREFIX}3k9a0)")
    clean.add_argument("--dry-run", action="store_true", help="list what would be removed")
    clean.set_defaults(handler=cmd_clean)
    info = esub.add_parser("info", parents=list(parents),
                           help="root, tools, and how many hosts this machine can emulate",
                           description="Check the emulator's requirements and limits.")
    info.set_defaults(handler=cmd_info)


def _prefix(text: str) -> str:
    try:
        return check_prefix(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_clean(args: argparse.Namespace, out: TextIO) -> int:
    """``react emu clean``: print each namespace removed (or that would be)."""
    if args.dry_run:
        names = [n for n in cleanup.list_namespaces() if belongs(n, args.prefix)]
    else:
        names = cleanup.clean(args.prefix)
    verb = "would remove" if args.dry_run else "removed"
    for name in names:
        print(f"{verb} {name}", file=out)
    print(f"{verb} {len(names)} namespace{'s' if len(names) != 1 else ''}", file=out)
    return 0


def cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    """``react emu info``: requirements met or not, and the host limit with its reasons."""
    missing = shell.missing_tools()
    print(f"root:       {'yes' if shell.is_root() else 'no (the emulator needs root)'}", file=out)
    print(f"iproute2:   {'missing ' + ', '.join(missing) if missing else 'found'}", file=out)
    for line in limits.explain().splitlines():
        print(line, file=out)
    left = [n for n in cleanup.list_namespaces() if belongs(n, None)]
    print(f"namespaces: {len(left)} with prefix {PROJECT_PREFIX!r} now", file=out)
    return 0
