"""``react run SCENARIO``: run a scenario file on its backend and print tables and decisions.

A progress bar, a table per job (mean and p95 collective time, mean algorithm bandwidth after
the warm-up), every controller decision; optionally the same as JSON/CSV, an HTML page, the
patterns REACT ended with as MSCCL XML, and a Perfetto timeline.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from react.commands.argtypes import non_negative_int, positive_int
from react.commands.common import UsageError, epoch_bar
from react.run import metrics as report

__all__ = ["add_parser", "cmd_run"]


def add_parser(sub: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Add the ``run`` subcommand (``handler(args, out) -> exit status``) to ``sub``."""
    run = sub.add_parser(
        "run", parents=list(parents), help="run a scenario file and print tables and decisions",
        description="Run a scenario (TOML, see react/run/scenario.py or experiments/scenarios/) on "
                    "its backend (the simulator unless the file or --backend says otherwise): a "
                    "progress bar, a table per job (mean and p95 collective time, mean algorithm "
                    "bandwidth after the warm-up), then every controller decision.",
        epilog="Examples: react run experiments/scenarios/closed_loop_star.toml --compare\n"
               "          react run experiments/scenarios/closed_loop_star.toml --backend emu "
               "--epochs 30   (as root: real ranks over an emulated network)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("scenario", metavar="SCENARIO", help="scenario TOML file")
    run.add_argument("--compare", action="store_true",
                     help="run without and with REACT (same seeds) and show both side by side")
    run.add_argument("--epochs", type=positive_int, metavar="N",
                     help="run every job N epochs instead of the file's value")
    run.add_argument("--backend", metavar="NAME", choices=("sim", "emu", "ns3"),
                     help="run on this backend instead of the file's: sim (flowsim), emu "
                          "(rank processes over network namespaces; needs root) or ns3 "
                          "(packet level; extra [ns3])")
    run.add_argument("--warmup", type=non_negative_int, default=report.DEFAULT_WARMUP, metavar="N",
                     help=f"epochs left out of the statistics (default {report.DEFAULT_WARMUP}; "
                          "all epochs count when a job runs no more than N)")
    run.add_argument("--json", metavar="OUT", help="write summaries, epochs and decisions as JSON")
    run.add_argument("--csv", metavar="OUT", help="write one row per job and epoch as CSV")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--max-memory", metavar="SIZE",
                     help="refuse to start when the run's estimated memory (every flow of "
                          "every epoch is kept) exceeds SIZE, e.g. 2G or 512M; without it a run "
                          "is refused above 80%% of the memory available now and warned about "
                          "above 50%%")
    run.add_argument("--html", metavar="DIR",
                     help="write a self-contained HTML page of the run into DIR")
    run.add_argument("--msccl", metavar="DIR",
                     help="write the pattern each job ended with (REACT's rewrite) as an MSCCL "
                          "XML algorithm, DIR/JOB.xml")
    run.add_argument("--trace", metavar="OUT.json",
                     help="write a timeline (Chrome trace-event JSON; open it in Perfetto)")
    run.add_argument("--trace-tracks", choices=("rank", "link"), default="rank",
                     help="one track per rank (default) or per network link")
    run.add_argument("--trace-epochs", metavar="FIRST:LAST",
                     help="the window of epochs in the trace (default: the first 100)")
    run.set_defaults(handler=cmd_run)


_ONE_DRAW_NOTE = """\
note: {jobs} jobs share this network. Jobs that share links are chaotic on the simulator: a change
in the last bit of one flow's time can move single epochs by tens of percent and means by a few
percent, so this run is one draw. Compare means over seeds, or measure the spread (and REACT's
gain in each draw) with: python3 -m experiments.sensitivity {path} --gain"""


@dataclass
class _Runs:
    """What a ``react run`` ran: one set of runs by job, or the pair without and with REACT."""

    plain: dict[str, Any] | None = None
    both: Any = None
    recorded: list[Any] = field(default_factory=list)

    def shown(self) -> dict[str, Any]:
        """The runs a page and the MSCCL export show: with REACT when compared."""
        return self.both.on if self.both is not None else self.plain or {}


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    """``react run``: load, check, run with a progress bar, print tables, write the files."""
    scenario, window = _load(args)
    _print_header(scenario, out)
    runs = _execute(scenario, args)
    summaries, rows, decisions = _print_results(scenario, runs, args, out)
    written = _write_files(scenario, runs, args, window, summaries, rows, decisions)
    if written:
        print(file=out)
        print("wrote " + ", ".join(written), file=out)
    return 0


def _load(args: argparse.Namespace) -> tuple[Any, tuple[int, int] | None]:
    """The scenario with the command's overrides; everything checked before a long run."""
    from react.run.scenario import load_scenario

    scenario = load_scenario(args.scenario)
    if args.epochs is not None:
        scenario = scenario.with_epochs(args.epochs)
    if args.backend is not None:
        scenario = scenario.with_backend(args.backend)
    window = _check_trace_args(args, scenario.backend)
    if scenario.backend == "sim":
        from react.run.memory import check_memory, parse_size

        check_memory(scenario, parse_size(args.max_memory) if args.max_memory else None,
                     runs=2 if args.compare else 1, traced=bool(args.trace),
                     react=True if args.compare else None)
    return scenario, window


def _execute(scenario: Any, args: argparse.Namespace) -> _Runs:
    """Run the scenario once, or without and with REACT; keep flow records for a trace."""
    from react.run.scenario_runs import Comparison, compare_scenario, run_scenario

    total = sum(j.epochs for j in scenario.jobs) * (2 if args.compare else 1)
    with epoch_bar(total, not args.no_progress) as bar:
        def tick(_job: str, _epoch: int) -> None:
            bar.update(1)

        if args.trace:  # the same runs, keeping the network's flow records for the timeline
            from react.run.trace import run_recorded

            modes = [(False, "without REACT"), (True, "with REACT")] if args.compare else [
                (None, "")]
            recorded = [run_recorded(scenario, react=m, label=lab, on_epoch=tick)
                        for m, lab in modes]
            if args.compare:
                return _Runs(both=Comparison(dict(recorded[0].runs), dict(recorded[1].runs)),
                             recorded=recorded)
            return _Runs(plain=dict(recorded[0].runs), recorded=recorded)
        if args.compare:
            return _Runs(both=compare_scenario(scenario, on_epoch=tick))
        return _Runs(plain=run_scenario(scenario, on_epoch=tick))


def _print_results(scenario: Any, runs: _Runs, args: argparse.Namespace, out: TextIO
                   ) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
    """Print the table and every decision; return the summaries, rows and decision records."""
    both = runs.both
    if both is not None:
        off = [report.summarise(r, react=False, warmup=args.warmup) for r in both.off.values()]
        on = [report.summarise(r, react=True, warmup=args.warmup) for r in both.on.values()]
        summaries = off + on
        table = report.comparison_table(off, on)
        rows = report.epoch_rows(both.off, react=False) + report.epoch_rows(both.on, react=True)
        decided = both.on
    else:
        plain = runs.plain or {}
        react_of = {j.name: j.react for j in scenario.jobs}
        summaries = [report.summarise(r, react=react_of[n], warmup=args.warmup)
                     for n, r in plain.items()]
        table = report.summary_table(summaries)
        rows = [row for n, r in plain.items()
                for row in report.epoch_rows({n: r}, react=react_of[n])]
        decided = {n: r for n, r in plain.items() if react_of[n]}
    print(file=out)
    for line in table:
        print(line, file=out)
    if scenario.backend == "sim" and len(scenario.jobs) > 1:
        print(file=out)
        for line in _ONE_DRAW_NOTE.format(jobs=len(scenario.jobs),
                                          path=args.scenario).splitlines():
            print(line, file=out)
    decisions: list[dict[str, Any]] = []
    for name, run in decided.items():
        print(file=out)
        for line in report.decision_lines(run):
            print(line, file=out)
        decisions.extend(report.decision_record(name, d) for d in run.decisions)
    return summaries, rows, decisions


def _write_files(scenario: Any, runs: _Runs, args: argparse.Namespace,
                 window: tuple[int, int] | None, summaries: list[Any], rows: list[Any],
                 decisions: list[dict[str, Any]]) -> list[str]:
    """Write what the options ask for; return what was written, for the last line."""
    written = []
    if args.json:
        report.write_json(args.json, scenario=scenario.name, warmup=args.warmup,
                          summaries=summaries, rows=rows, decisions=decisions)
        written.append(args.json)
    if args.csv:
        report.write_csv(args.csv, rows)
        written.append(args.csv)
    if args.html:
        import io

        from react.show.sweeppage import write_run_html

        head = io.StringIO()
        _print_header(scenario, head)
        page = write_run_html(args.html, scenario, runs.shown(),
                              runs.both.off if runs.both is not None else None,
                              warmup=args.warmup, header=head.getvalue().splitlines())
        written.append(str(page))
    if args.msccl:
        from react.msccl import write_msccl

        folder = Path(args.msccl)
        folder.mkdir(parents=True, exist_ok=True)
        for name, run in runs.shown().items():
            written.append(str(write_msccl(run.patterns[-1], folder / f"{name}.xml")))
    if args.trace:
        from react.run.trace import trace_events, write_trace

        trace = trace_events(scenario, runs.recorded, tracks=args.trace_tracks, epochs=window)
        write_trace(args.trace, trace)
        written.append(f"{args.trace} ({trace['otherData']['window']}, "
                       f"{len(trace['traceEvents'])} events; open it in https://ui.perfetto.dev)")
    return written


def _check_trace_args(args: argparse.Namespace, backend: str) -> tuple[int, int] | None:
    """Fail before a long run, not after it: the trace window and where the trace goes."""
    if not args.trace:
        if args.trace_epochs:
            raise UsageError("--trace-epochs needs --trace OUT.json")
        return None
    if args.trace_tracks == "link" and backend != "sim":
        raise UsageError(f"--trace-tracks link needs the simulator's flow records; this run "
                          f"uses the {backend!r} backend (per-rank tracks work everywhere)")
    from react.run.trace import parse_window

    target = Path(args.trace)
    if target.is_dir():
        raise UsageError(f"--trace {args.trace!r} is a directory; expected a file name")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"cannot write the trace to {args.trace!r}: folder {str(parent)!r} "
                          f"does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"cannot write the trace to {args.trace!r}: folder {str(parent)!r} "
                          f"is not writable")
    return parse_window(args.trace_epochs) if args.trace_epochs else None


def _print_header(scenario: Any, out: TextIO) -> None:
    print(f"scenario {scenario.name}: {scenario.description or scenario.source}", file=out)
    print(f"  topology  {scenario.topology.name}, ECMP seed {scenario.seed}; backend "
          f"{scenario.backend}", file=out)
    for j in scenario.jobs:
        hosts = ", ".join(j.hosts[:4]) + (", ..." if len(j.hosts) > 4 else "")
        print(f"  job {j.name}: {j.collective}, {j.ranks} ranks on {hosts}; "
              f"{j.message_bytes / 1e6:g} MB, {j.epochs} epochs, REACT "
              f"{'on' if j.react else 'off'}", file=out)
    if scenario.backend == "emu":
        e = scenario.emu
        print(f"  emulator  links scaled so the fastest runs at {e.link_rate_bps / 1e6:g} Mbit/s; "
              f"every message {e.message_bytes / 2**20:g} MiB; {e.transport} transport; "
              f"new patterns apply {e.apply_delay_epochs} epochs after a decision", file=out)
    for b in scenario.background:
        print(f"  background {b.kind} {b.src} -> {b.dst} x{b.p}", file=out)
    for f in scenario.failures:
        until = f" until {f.recover_s:g} s" if f.recover_s is not None else ""
        print(f"  failure {f.src}->{f.dst} at {f.capacity_bps / 1e9:g} Gb/s from {f.at_s:g} s"
              f"{until}", file=out)
