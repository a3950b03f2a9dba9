"""``react report``: the REACT-vs-baseline table of a results store, as text, CSV or pages.

One row per sweep point and job (:func:`react.run.store.report_rows`); ``--html`` re-runs the
stored scenarios to draw a page per pair (:mod:`react.show.sweeppage`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from react.commands.argtypes import positive_int
from react.run.store import DEFAULT_STORE, ResultStore, StoreError

__all__ = ["add_parser", "cmd_report"]


def add_parser(sub: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Add the ``report`` subcommand (``handler(args, out) -> exit status``) to ``sub``."""
    report = sub.add_parser(
        "report", parents=list(parents), help="tables of a results store: REACT vs baseline",
        description="One row per sweep point and job: mean algorithm bandwidth without and "
                    "with REACT and the gain, p95 collective time, pattern changes and the "
                    "epoch REACT settled at.",
    )
    report.add_argument("--store", metavar="PATH", default=str(DEFAULT_STORE),
                        help=f"results store to read (default {DEFAULT_STORE})")
    report.add_argument("--sweep", metavar="NAME", help="only the runs of this sweep")
    report.add_argument("--csv", metavar="OUT", help="also write the table as CSV")
    report.add_argument("--html", metavar="DIR", help="also write one self-contained HTML page "
                        "per stored pair of runs (re-run from the stored scenario) and an index")
    report.add_argument("--pages", type=positive_int, default=20, metavar="N",
                        help="at most N pages with --html (default 20)")
    report.set_defaults(handler=cmd_report)


def cmd_report(args: argparse.Namespace, out: TextIO) -> int:
    """``react report``: the REACT-vs-baseline table of a store, and optionally its CSV."""
    from react.run.store import format_report, report_rows, write_report_csv

    with ResultStore(args.store, create=False) as store:
        runs = store.runs(sweep=args.sweep)
    if not runs:
        which = f" of sweep {args.sweep!r}" if args.sweep else ""
        raise StoreError(f"results store {args.store!r} holds no runs{which}")
    rows = report_rows(runs)
    for line in format_report(rows):
        print(line, file=out)
    failed = sum(r.status == "failed" for r in runs)
    gains = [r["algbw_gain"] for r in rows if r["algbw_gain"] is not None]
    mean_gain = f"; mean algbw gain {sum(gains) / len(gains):+.1%}" if gains else ""
    print(f"{len(runs)} runs ({failed} failed), {len(rows)} rows{mean_gain}", file=out)
    if args.html:
        from react.show.sweeppage import write_store_pages

        pages = write_store_pages(args.html, runs, limit=args.pages,
                                  base_dir=Path(args.store).resolve().parent)
        print(f"wrote {len(pages) - 1} page(s) and {pages[-1]}", file=out)
    if args.csv:
        write_report_csv(args.csv, rows)
        print(f"wrote {args.csv}", file=out)
    return 0
