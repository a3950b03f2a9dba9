"""``react regress``: rerun a suite, compare it with its goldens, say what changed (exit 1 if
anything did), or record the goldens in the first place.

Modes: ``--record DIR`` writes one golden per case; ``--against DIR`` reruns and compares
(``--update`` then accepts the new results); neither just runs and prints the metrics. Bad input
(a suite error, a golden directory of another suite, a controller that does not load or lacks the
interface) is one ``react: error:`` line and exit status 2, before any golden is written.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from react.commands.argtypes import positive_int

__all__ = ["add_parser", "cmd_regress"]

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def add_parser(sub: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Add the ``regress`` subcommand (``handler(args, out) -> exit status``, as react.cli)."""
    p = sub.add_parser(
        "regress", parents=list(parents),
        help="rerun a regression suite and compare it with its golden decision traces",
        description="Run every scenario of a suite (TOML, see react/run/regress/suite.py and "
                    "experiments/suites/) with each controller, in parallel, each case twice in "
                    "separate processes to check it is deterministic. With --record, write one "
                    "golden JSON file per case; with --against, compare with the goldens: exit 0 "
                    "when every watched metric is within tolerance and every trace matches, "
                    "exit 1 with a table of deltas and the first differing decisions otherwise.",
        epilog="Examples: react regress experiments/suites/default.toml --record goldens/\n"
               "          react regress experiments/suites/default.toml --against goldens/ "
               "--markdown pr.md --junit junit.xml\n"
               "          react regress SUITE --controllers react,never,random\n"
               "          react regress SUITE --controller mypkg.policy:Greedy",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("suite", metavar="SUITE", help="suite TOML file")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--record", metavar="DIR", help="write the goldens of every case to DIR")
    mode.add_argument("--against", metavar="DIR", help="compare with the goldens in DIR")
    p.add_argument("--update", action="store_true",
                   help="with --against: accept the new results (rewrite the goldens)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--controllers", metavar="LIST",
                       help="comma-separated controllers, each a case per scenario: scenario, "
                            "react, never, random, package.module:Factory, file.py:Factory "
                            "(default: the suite's)")
    which.add_argument("--controller", metavar="REF",
                       help="one controller for every scenario (as --controllers REF)")
    p.add_argument("--workers", type=positive_int, metavar="N",
                   help="local worker processes (default: one per CPU; 1: in this process)")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run on the Dask scheduler at ADDRESS ('local': a LocalCluster)")
    p.add_argument("--no-determinism-check", action="store_true",
                   help="skip the second run of each case in a separate process")
    p.add_argument("--markdown", metavar="OUT", help="write a Markdown summary (PR comment)")
    p.add_argument("--junit", metavar="OUT", help="write JUnit XML (one testcase per case)")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the table (default: when writing to a terminal)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_regress)


def _color(choice: str, out: TextIO) -> bool:
    if choice != "auto":
        return choice == "always"
    return out.isatty() and "NO_COLOR" not in os.environ


def cmd_regress(args: argparse.Namespace, out: TextIO) -> int:
    """``react regress`` (module docstring)."""
    from react.run.regress import golden, render
    from react.run.regress.compare import compare_case, run_verdict
    from react.run.regress.runner import check_controllers, run_suite
    from react.run.regress.suite import RegressError, load_suite, resolve_controllers

    if args.update and not args.against:
        raise RegressError("--update accepts new results against goldens: give --against DIR")
    suite = load_suite(args.suite)
    refs = args.controllers.split(",") if args.controllers else (
        [args.controller] if args.controller else None)
    controllers = resolve_controllers(refs, os.getcwd()) if refs else suite.controllers
    goldens = {}
    if args.against:
        goldens = golden.check_directory(args.against, suite, must_exist=True)
    elif args.record:
        golden.check_directory(args.record, suite, must_exist=False)
    check_controllers(suite, controllers)

    print(f"suite {suite.name}: {len(suite.cases)} scenarios x {len(controllers)} "
          f"controller(s){'' if args.no_determinism_check else ', each run twice'}", file=out)
    out.flush()
    try:
        runs = run_suite(suite, controllers=controllers, workers=args.workers, dask=args.dask,
                         determinism=not args.no_determinism_check,
                         progress=not args.no_progress)
    except KeyboardInterrupt:
        print("react: interrupted; no golden was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    cases = {c.name: c for c in suite.cases}
    if args.against:
        verdicts = [compare_case(r, goldens.get(r.case), cases[r.scenario]) for r in runs]
        lines = render.terminal(verdicts, color=_color(args.color, out))
    else:
        verdicts = [run_verdict(r) for r in runs]
        lines = render.results_table(runs)
    stale = sorted(set(goldens) - {r.case for r in runs})
    if stale:
        lines.append(f"note: goldens without a case in this run (not compared): "
                     f"{', '.join(stale)}")
    print(file=out)
    for line in lines + ([""] + render.controllers_table(runs) if len(controllers) > 1 else []):
        print(line, file=out)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as fh:
            fh.write(render.markdown(verdicts, suite=suite.name))
    if args.junit:
        with open(args.junit, "w", encoding="utf-8") as fh:
            fh.write(render.junit_xml(verdicts, suite=suite.name,
                                      properties={"suite_file": suite.source}))
    target = args.record or (args.against if args.update else None)
    if target:
        written = golden.write_goldens(target, suite, runs, replace_all=bool(args.record))
        print(f"\nwrote {len(written)} golden(s) to {target}", file=out)
        return 0 if all(r.ok for r in runs) else EXIT_FAILED
    return 0 if all(v.status == "pass" for v in verdicts) else EXIT_FAILED
