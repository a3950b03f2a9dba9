"""What every ``react`` subcommand shares: its exit statuses, its one-line usage error, its bar.

Exit statuses: 0 ok, 1 a check or a run failed (:data:`EXIT_FAILED`), 2 bad input
(:data:`EXIT_USAGE`), 130 interrupted (:data:`EXIT_INTERRUPTED`, what shells report for Ctrl-C).
A handler takes ``(args, out)`` and returns one of them; :mod:`react.cli` turns errors into one
line.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_USAGE", "UsageError", "epoch_bar"]

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


class UsageError(Exception):
    """Bad command-line input; reported in one line with exit status 2."""


def epoch_bar(total: int, enabled: bool) -> Any:
    """A progress bar over ``total`` epochs on stderr; none when stderr is not a terminal."""
    from tqdm import tqdm

    # disable=None: no bar when stderr is not a terminal (CI logs, pipes)
    return tqdm(total=total, unit="epoch", file=sys.stderr, disable=None if enabled else True,
                leave=False, dynamic_ncols=True)
