"""``react crossval SCENARIO``: one scenario on several backends, compared with the first.

The runs and the comparison are :mod:`react.run.crossval`; this command prints the table and
writes ``crossval.json`` and ``crossval.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from react.run.crossval import (
    DEFAULT_EPOCHS,
    CrossvalError,
    crossval,
    format_table,
    plot_crossval,
    summarise,
    variant,
)

__all__ = ["add_parser", "cmd_crossval"]


def add_parser(sub: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Add the ``crossval`` subcommand (``handler(args, out) -> exit status``) to ``sub``."""
    p = sub.add_parser(
        "crossval", parents=list(parents),
        help="run one scenario on several backends and compare them",
        description="Run one scenario on each backend with the same seeds and compare them with "
                    "the first: collective time per epoch, per-flow FCT error (median, p95, "
                    "bias), the flows congestion detection flags per batch, and whether the "
                    "controller takes the same decisions. Prints a table and writes "
                    "crossval.json and crossval.png.",
        epilog="Example: react crossval experiments/scenarios/crossval_star.toml "
               "--backends sim,tcp,ns3 --epochs 6",
    )
    p.add_argument("scenario", metavar="SCENARIO", help="scenario TOML file")
    p.add_argument("--backends", metavar="A,B,...", default="sim,tcp,ns3",
                   help="backends to compare, the first is the reference: sim (flowsim, exact "
                        "max-min), tcp (flowsim, TCP-aware sharing), ns3 (packet level, extra "
                        "[ns3]), emu (real ranks, root), gpu; a name may repeat (default "
                        "sim,tcp,ns3)")
    p.add_argument("--epochs", metavar="N", type=int, default=DEFAULT_EPOCHS,
                   help=f"epochs per job (default {DEFAULT_EPOCHS}: a short run; 0 keeps the "
                        "file's)")
    p.add_argument("--out", metavar="DIR",
                   help="folder for crossval.json and crossval.png (default: a new temporary "
                        "folder)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_crossval)


def cmd_crossval(args: argparse.Namespace, out: TextIO) -> int:
    """``react crossval``: run, print the table, write the JSON and the figure."""
    from tqdm import tqdm

    from react.run.scenario import load_scenario

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for name in backends:
        variant(name)  # an unknown name fails before any run
    if args.epochs < 0:
        raise CrossvalError(f"crossval: --epochs must be >= 0, got {args.epochs}")
    scenario = load_scenario(args.scenario)
    if args.epochs:
        scenario = scenario.with_epochs(args.epochs)
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="react-crossval-"))
    folder.mkdir(parents=True, exist_ok=True)
    total = sum(j.epochs for j in scenario.jobs) * len(backends)
    with tqdm(total=total, unit="epoch", file=sys.stderr, leave=False, dynamic_ncols=True,
              disable=True if args.no_progress else None) as bar:
        outcomes = crossval(scenario, backends, on_epoch=lambda job, epoch: bar.update())
    summary = summarise(scenario, outcomes)
    for line in format_table(summary):
        print(line, file=out)
    (folder / "crossval.json").write_text(json.dumps(summary, indent=1) + "\n",
                                          encoding="utf-8")
    plot_crossval(summary, folder / "crossval.png")
    print(f"wrote {folder / 'crossval.json'} and {folder / 'crossval.png'}", file=out)
    return 0
