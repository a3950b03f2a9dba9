"""``react plot``: the figure of a results store, REACT's improvement per grid value.

The figure and its numbers come from :mod:`react.show.plots`; this command reads the store,
picks the axes (the grid parameter with the most values on x, unless told) and writes the PNG
and optionally the CSV.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, TextIO

from react.run.store import DEFAULT_STORE, ResultStore, StoreError
from react.show.plots import (
    aggregate,
    default_keys,
    format_rows,
    improvement_rows,
    plot_improvement,
    write_csv,
)

__all__ = ["add_parser", "cmd_plot"]


def add_parser(sub: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Add the ``plot`` subcommand (``handler(args, out) -> exit status``) to ``sub``."""
    plot = sub.add_parser(
        "plot", parents=list(parents), help="figure of a results store: REACT's improvement",
        description="Plot the improvement in mean algorithm bandwidth with REACT over the "
                    "baseline, per grid value of a sweep (bars: mean over seeds; dots: each "
                    "scenario), and optionally write the numbers as CSV.",
        epilog="Example: react plot --store results/fig12.sqlite --out fig12.png --csv fig12.csv",
    )
    plot.add_argument("--store", metavar="PATH", default=str(DEFAULT_STORE),
                      help=f"results store to read (default {DEFAULT_STORE})")
    plot.add_argument("--sweep", metavar="NAME", help="only the runs of this sweep")
    plot.add_argument("--out", metavar="FILE.png", required=True, help="the figure to write")
    plot.add_argument("--csv", metavar="FILE", help="also write the plotted numbers as CSV")
    plot.add_argument("--x", metavar="KEY", help="grid parameter on the x axis (default: the one "
                      "with the most values)")
    plot.add_argument("--series", metavar="KEY", help="grid parameter that groups the bars "
                      "(default: the one with the second most values, if any)")
    plot.set_defaults(handler=cmd_plot)


def cmd_plot(args: argparse.Namespace, out: TextIO) -> int:
    """``react plot``: read the store, draw the figure, write the CSV; print the numbers."""
    from react.show.imagefile import image_path

    png = image_path(args.out)  # a bad suffix fails before any work
    with ResultStore(args.store, create=False) as store:
        runs = store.runs(sweep=args.sweep)
    which = f" of sweep {args.sweep!r}" if args.sweep else ""
    if not runs:
        raise StoreError(f"results store {args.store!r} holds no runs{which}")
    rows = improvement_rows(runs)
    if not rows:
        raise StoreError(f"results store {args.store!r} holds no finished pair of runs without "
                         f"and with REACT{which}")
    x, series = default_keys(rows)
    x = args.x or x
    series = args.series or (series if series != x else None)
    table = aggregate(rows, x=x, series=series)
    title = args.sweep or ", ".join(sorted({r.sweep for r in rows}))
    plot_improvement(png, rows, x=x, series=series, title=title)
    for line in format_rows(table):
        print(line, file=out)
    print(f"wrote {png}", file=out)
    if args.csv:
        write_csv(args.csv, table)
        print(f"wrote {args.csv}", file=out)
    return 0
