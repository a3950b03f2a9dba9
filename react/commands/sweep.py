"""``react sweep SPEC``: run every point of a sweep spec, resumable, into the results store.

The sweep machinery is :mod:`react.run.sweep`; this command validates the spec, opens the store,
runs with a progress bar and says what failed (exit status 1 if any run failed, 130 if
interrupted: finished runs are stored, and the same command resumes).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from react.commands.argtypes import positive_int
from react.commands.common import EXIT_FAILED, EXIT_INTERRUPTED
from react.run.store import DEFAULT_STORE, ResultStore
from react.run.sweep import REACT_CHOICES, SweepSummary, execute, expand, load_spec

__all__ = ["add_parser", "cmd_sweep"]


def add_parser(sub: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Add the ``sweep`` subcommand (``handler(args, out) -> exit status``) to ``sub``."""
    sweep = sub.add_parser(
        "sweep", parents=list(parents), help="run a sweep spec: a grid of scenarios and seeds",
        description="Run every point of a sweep spec (TOML: base scenario, [grid], seeds, see "
                    "react/run/sweep.py), with and without REACT, recording each run in the "
                    "results store as it finishes. Rerunning skips finished runs, so an "
                    "interrupted sweep resumes where it stopped. Exit status 1 if any run "
                    "failed.",
        epilog="Example: react sweep experiments/sweeps/tree_star_p.toml --workers 2",
    )
    sweep.add_argument("spec", metavar="SPEC", help="sweep spec TOML file")
    sweep.add_argument("--store", metavar="PATH", default=str(DEFAULT_STORE),
                       help=f"results store (SQLite; default {DEFAULT_STORE})")
    sweep.add_argument("--workers", type=positive_int, metavar="N",
                       help="local worker processes (default: one per CPU; 1: in this process)")
    sweep.add_argument("--dask", metavar="ADDRESS",
                       help="run on the Dask scheduler at ADDRESS ('local': a LocalCluster)")
    sweep.add_argument("--no-progress", action="store_true", help="no progress bar")
    sweep.set_defaults(handler=cmd_sweep)


def cmd_sweep(args: argparse.Namespace, out: TextIO) -> int:
    """``react sweep``: validate everything, then open the store, then run."""
    spec = load_spec(args.spec)
    points = expand(spec)
    with ResultStore(args.store) as store:
        pairs = len({p.pair_key for p in points})
        print(f"sweep {spec.name}: {pairs} scenario points x {len(REACT_CHOICES[spec.react])} "
              f"= {len(points)} runs -> {args.store}", file=out)
        out.flush()
        summary = execute(points, store, workers=args.workers, dask=args.dask,
                          progress=not args.no_progress)
    for line in _summary_lines(summary, args.store):
        print(line, file=out)
    if summary.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if summary.failed or not summary.complete else 0


def _summary_lines(summary: SweepSummary, store: str) -> Iterable[str]:
    yield (f"{summary.ok} ok, {summary.failed} failed, {summary.skipped} already done, "
           f"{summary.not_run} not run (of {summary.total})")
    for record in summary.failures[:10]:
        params = " ".join(f"{k}={v}" for k, v in record.params.items())
        first = (record.error or "").splitlines()[0] if record.error else ""
        yield f"  failed: {params} seed={record.seed} react={record.react}: {first}"
    if len(summary.failures) > 10:
        yield f"  ... and {len(summary.failures) - 10} more ('react report --store {store}')"
    if summary.interrupted:
        yield "interrupted: finished runs are stored; run the same command again to resume"
    if summary.broken:
        yield f"stopped: {summary.broken}"
