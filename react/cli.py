"""The ``react`` command: one subcommand per module of :mod:`react.commands`, assembled here.

``react demo`` tells the §4.3 story end to end on the simulator; ``react run SCENARIO`` runs a
scenario file; ``react patterns`` lists, shows, verifies and draws pattern generators;
``react sweep`` / ``react report`` / ``react plot`` run grids of scenarios and read the results
store; ``react regress`` checks controller behaviour against goldens; ``react crossval``
compares backends; ``react emu`` cleans up after the emulator. Each module holds its parser and
its handler; this one only assembles them and turns errors into one line.

Bad input (a missing or invalid scenario, a bad number) prints one line ``react: error: ...`` on
stderr and exits with status 2; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import NoReturn

from flowsim.errors import FlowsimError
from react.commands import crossval, demo, emu, patterns, plot, regress, report, run, sweep
from react.commands.common import EXIT_INTERRUPTED, EXIT_USAGE, UsageError
from react.model.errors import ReactError

__all__ = ["build_parser", "main"]

SUBCOMMANDS = (run, demo, patterns, sweep, report, plot, emu, regress, crossval)
"""The modules of the subcommands, in the order ``react --help`` lists them."""


class _Parser(argparse.ArgumentParser):
    # argparse prints the whole usage and exits from inside parse_args; report one line instead.
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``react`` command."""
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true",
                        help="on an error, show the Python traceback too")
    parser = _Parser(
        prog="react",
        description="REACT: runtime congestion-aware tuning of collective patterns, on a "
                    "max-min fair flow simulator.",
        epilog="Start with 'react demo'. Run 'react COMMAND --help' for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in SUBCOMMANDS:
        command.add_parser(sub, [common])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``react`` command; return its exit status (0 ok, 1 a check failed, 2 bad input).

    Errors in the user's input (bad options, a missing or invalid scenario, bad numbers) are
    reported as one line on stderr, without a traceback unless ``--debug`` is given.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    if not debug:  # a warning is one line for a user, not a file name and a source line
        warnings.formatwarning = _warning_line
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return int(args.handler(args, sys.stdout))
    except KeyboardInterrupt:  # Ctrl-C: the user knows; no traceback
        print("react: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into e.g. head, which has stopped reading
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except SystemExit as exc:  # --help
        return int(exc.code or 0) if isinstance(exc.code, int | None) else EXIT_USAGE
    except (UsageError, ReactError, FlowsimError, OSError) as exc:
        if debug:
            traceback.print_exc()
        print(f"react: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE


def _warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  line: str | None = None) -> str:
    return f"react: warning: {message}\n"


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.strerror or exc}: {os.fsdecode(exc.filename)!r}"
    return " ".join(str(exc).split())


if __name__ == "__main__":
    sys.exit(main())
