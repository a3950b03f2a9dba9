"""The ``react`` command: run scenarios, watch the paper's worked example, inspect patterns.

``react demo`` tells the §4.3 story end to end on the simulator; ``react run SCENARIO`` runs a
scenario file (:mod:`react.run.scenario`) with a progress bar and prints per-job tables and the
controller's decisions; ``react patterns`` lists, shows, verifies and draws pattern generators.
``react sweep SPEC`` and ``react report`` (grids of scenarios, the results store) are defined in
:mod:`react.run.sweep`, ``react plot`` (figures from the store) in :mod:`react.show.plots`, ``react regress``
(suites, golden decision traces, controllers side by side) in :mod:`react.commands.regress`,
``react crossval`` (one scenario on several backends, compared) in :mod:`react.run.crossval`.
This module (with :mod:`react.run.metrics` for the tables) is the only place that prints.

Bad input (a missing or invalid scenario, a bad number) prints one line ``react: error: ...`` on
stderr and exits with status 2; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
import textwrap
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from flowsim.errors import FlowsimError
from react.commands.argtypes import non_negative_int, positive_int
from react.model.errors import ReactError
from react.run import metrics as report

__all__ = ["build_parser", "main"]

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


class _UsageError(Exception):
    """Bad command-line input; reported in one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    # argparse prints the whole usage and exits from inside parse_args; report one line instead.
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message} (see '{self.prog} --help')")


# -- parser ----------------------------------------------------------------------------------------
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

    run = sub.add_parser(
        "run", parents=[common], help="run a scenario file and print tables and decisions",
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
    run.set_defaults(handler=_cmd_run)

    demo = sub.add_parser(
        "demo", parents=[common], help="the paper's worked example (§4.3), narrated",
        description="16 ranks on one switch run NCCL's dual binary tree AllReduce; two external "
                    "flows congest rank 3. See what congestion costs, what REACT detects, which "
                    "swap it picks and what that saves, then REACT in a closed loop. Saves a "
                    "before/after TEN picture and a timeline plot.",
    )
    demo.add_argument("--out", metavar="DIR", default="react-demo",
                      help="folder for the pictures (default ./react-demo)")
    demo.add_argument("--epochs", type=positive_int, default=60, metavar="N",
                      help="epochs of the closed-loop part (default 60)")
    demo.add_argument("--html", metavar="DIR",
                      help="also write the story as one self-contained page, DIR/demo.html")
    demo.set_defaults(handler=_cmd_demo)

    pat = sub.add_parser(
        "patterns", parents=[common], help="list pattern generators; show, verify or draw one",
        description="Without a subcommand: list the pattern generators a scenario can name.",
        epilog="Example: react patterns show allreduce_double_binary_tree 8",
    )
    pat.set_defaults(handler=_cmd_patterns_list)
    psub = pat.add_subparsers(dest="action", metavar="ACTION")
    from react.patterns import GENERATORS

    names = textwrap.fill("NAME is one of: " + ", ".join(sorted(GENERATORS)) + ".", width=79)
    for name, help_text, handler, example in (
        ("show", "print a pattern step by step", _cmd_patterns_show,
         "react patterns show allreduce_double_binary_tree 8"),
        ("verify", "check that a pattern implements its collective", _cmd_patterns_verify,
         "react patterns verify allgather_recursive_doubling 6"),
        ("draw", "draw a pattern's TEN to an image file", _cmd_patterns_draw,
         "react patterns draw allreduce_ring 8 --out ring.png"),
        ("export", "write a pattern as an MSCCL XML algorithm (or REACT's JSON)",
         _cmd_patterns_export,
         "react patterns export allreduce_ring 8 --format msccl-xml --out ring8.xml"),
    ):
        p = psub.add_parser(name, parents=[common], help=help_text, description=help_text,
                            epilog=f"Example: {example}\n\n{names}",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("name", metavar="NAME", help="a generator name (see 'react patterns')")
        p.add_argument("n", metavar="N", type=positive_int, help="number of ranks")
        if name == "draw":
            p.add_argument("--out", metavar="FILE", required=True,
                           help="image file to write (.png, .svg, .pdf, ...; .png if none)")
        if name == "export":
            p.add_argument("--format", choices=("msccl-xml", "json"), default="msccl-xml",
                           help="msccl-xml (default): an MSCCL algorithm; json: REACT's pattern")
            p.add_argument("--out", metavar="FILE", help="file to write (default: stdout)")
        p.set_defaults(handler=handler)
    imp = psub.add_parser(
        "import", parents=[common], help="read an MSCCL XML algorithm, check it, show it",
        description="Read an MSCCL XML algorithm (msccl-tools, TACCL, ...) as a REACT pattern, "
                    "check that it implements its collective, and print it step by step.",
        epilog="Example: react patterns import tests/data/msccl/allreduce_ring_4_1.xml")
    imp.add_argument("file", metavar="FILE.xml", help="the MSCCL XML algorithm")
    imp.add_argument("--json", metavar="OUT", help="also write the pattern as REACT JSON")
    imp.set_defaults(handler=_cmd_patterns_import)

    # `react sweep` and `react report` live with the sweep machinery (react.run.sweep)
    from react.run.sweep import add_parsers as add_sweep_parsers

    add_sweep_parsers(sub, [common])
    # `react plot`: figures from the results store (react.show.plots)
    from react.show.plots import add_parser as add_plot_parser

    add_plot_parser(sub, [common])
    # `react emu`: clean up after the network emulator, show its limits (react.backends.emu)
    from react.commands.emu import add_parser as add_emu_parser

    add_emu_parser(sub, [common])
    # `react regress`: suites, goldens and controller comparisons (react.run.regress)
    from react.commands.regress import add_parser as add_regress_parser

    add_regress_parser(sub, [common])
    # `react crossval`: one scenario on several backends, side by side (react.run.crossval)
    from react.run.crossval import add_parser as add_crossval_parser

    add_crossval_parser(sub, [common])
    return parser


# -- run -------------------------------------------------------------------------------------------
def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    # disable=None: no bar when stderr is not a terminal (CI logs, pipes)
    return tqdm(total=total, unit="epoch", file=sys.stderr, disable=None if enabled else True,
                leave=False, dynamic_ncols=True)


_ONE_DRAW_NOTE = """\
note: {jobs} jobs share this network. Jobs that share links are chaotic on the simulator: a change
in the last bit of one flow's time can move single epochs by tens of percent and means by a few
percent, so this run is one draw. Compare means over seeds, or measure the spread (and REACT's
gain in each draw) with: python3 -m experiments.sensitivity {path} --gain"""


def _cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    from react.run.scenario import compare_scenario, load_scenario, run_scenario

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
    total = sum(j.epochs for j in scenario.jobs) * (2 if args.compare else 1)
    _print_header(scenario, out)
    recorded: list[Any] = []
    with _progress(total, not args.no_progress) as bar:
        def tick(_job: str, _epoch: int) -> None:
            bar.update(1)

        if args.trace:  # the same runs, keeping the network's flow records for the timeline
            from react.run.scenario import Comparison
            from react.run.trace import run_recorded

            modes = [(False, "without REACT"), (True, "with REACT")] if args.compare else [
                (None, "")]
            recorded = [run_recorded(scenario, react=m, label=lab, on_epoch=tick)
                        for m, lab in modes]
            if args.compare:
                both = Comparison(dict(recorded[0].runs), dict(recorded[1].runs))
            else:
                plain = dict(recorded[0].runs)
        elif args.compare:
            both = compare_scenario(scenario, on_epoch=tick)
        else:
            plain = run_scenario(scenario, on_epoch=tick)
    decisions: list[dict[str, Any]] = []
    if args.compare:
        off = [report.summarise(r, react=False, warmup=args.warmup) for r in both.off.values()]
        on = [report.summarise(r, react=True, warmup=args.warmup) for r in both.on.values()]
        summaries = off + on
        table = report.comparison_table(off, on)
        rows = report.epoch_rows(both.off, react=False) + report.epoch_rows(both.on, react=True)
        decided = both.on
    else:
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
    for name, run in decided.items():
        print(file=out)
        for line in report.decision_lines(run):
            print(line, file=out)
        decisions.extend(report.decision_record(name, d) for d in run.decisions)
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
        page = write_run_html(args.html, scenario, both.on if args.compare else plain,
                              both.off if args.compare else None, warmup=args.warmup,
                              header=head.getvalue().splitlines())
        written.append(str(page))
    if args.msccl:
        from react.msccl import write_msccl

        folder = Path(args.msccl)
        folder.mkdir(parents=True, exist_ok=True)
        for name, run in (both.on if args.compare else plain).items():
            written.append(str(write_msccl(run.patterns[-1], folder / f"{name}.xml")))
    if args.trace:
        from react.run.trace import trace_events, write_trace

        trace = trace_events(scenario, recorded, tracks=args.trace_tracks, epochs=window)
        write_trace(args.trace, trace)
        written.append(f"{args.trace} ({trace['otherData']['window']}, "
                       f"{len(trace['traceEvents'])} events; open it in https://ui.perfetto.dev)")
    if written:
        print(file=out)
        print("wrote " + ", ".join(written), file=out)
    return 0


def _check_trace_args(args: argparse.Namespace, backend: str) -> tuple[int, int] | None:
    """Fail before a long run, not after it: the trace window and where the trace goes."""
    if not args.trace:
        if args.trace_epochs:
            raise _UsageError("--trace-epochs needs --trace OUT.json")
        return None
    if args.trace_tracks == "link" and backend != "sim":
        raise _UsageError(f"--trace-tracks link needs the simulator's flow records; this run "
                          f"uses the {backend!r} backend (per-rank tracks work everywhere)")
    from react.run.trace import parse_window

    target = Path(args.trace)
    if target.is_dir():
        raise _UsageError(f"--trace {args.trace!r} is a directory; expected a file name")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise _UsageError(f"cannot write the trace to {args.trace!r}: folder {str(parent)!r} "
                          f"does not exist")
    if not os.access(parent, os.W_OK):
        raise _UsageError(f"cannot write the trace to {args.trace!r}: folder {str(parent)!r} "
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


# -- patterns --------------------------------------------------------------------------------------
def _first_line(func: Any) -> str:
    """The first sentence of a docstring, without reStructuredText markup."""
    doc = inspect.getdoc(func) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    text = re.sub(r":\w+:`~?([^`]*)`", r"\1", text).replace("``", "")
    end = re.search(r"\.\s+(?=[A-Z])", text)
    return text if end is None else text[: end.start() + 1]


def _cmd_patterns_list(args: argparse.Namespace, out: TextIO) -> int:
    from react.patterns import GENERATORS

    width = max(len(n) for n in GENERATORS)
    for name in sorted(GENERATORS):
        print(f"{name:<{width}}  {_first_line(GENERATORS[name])}", file=out)
    return 0


def _pattern(args: argparse.Namespace) -> Any:
    from react.patterns import generator

    if args.n < 2:
        raise _UsageError(f"N must be at least 2 ranks, got {args.n}")
    return generator(args.name)(args.n)


def _cmd_patterns_show(args: argparse.Namespace, out: TextIO) -> int:
    print(_pattern(args).describe(), file=out)
    return 0


def _cmd_patterns_verify(args: argparse.Namespace, out: TextIO) -> int:
    from react.model.errors import PatternError
    from react.model.verify import verify

    pattern = _pattern(args)
    try:
        verify(pattern)
    except PatternError as exc:
        print(f"react: {args.name}({args.n}) FAILS verification: {exc}", file=out)
        return EXIT_FAILED
    print(f"ok: {args.name}({args.n}) implements its {pattern.kind} over {pattern.n} ranks "
          f"({len(pattern.flows)} flows in {pattern.num_steps} steps)", file=out)
    return 0


def _draw_module() -> Any:
    try:
        from react.show import draw
    except ImportError as exc:
        raise _UsageError(f"drawing is not available: react.show.draw cannot be imported ({exc})"
                          ) from None
    return draw


def _cmd_patterns_draw(args: argparse.Namespace, out: TextIO) -> int:
    from react.show.imagefile import image_path

    path = image_path(args.out)
    draw = _draw_module()
    pattern = _pattern(args)
    draw.draw(pattern, path=path)
    print(f"wrote {path}", file=out)
    return 0


def _cmd_patterns_export(args: argparse.Namespace, out: TextIO) -> int:
    from react.msccl import to_msccl_xml

    pattern = _pattern(args)
    text = to_msccl_xml(pattern) if args.format == "msccl-xml" else pattern.to_json()
    if args.out is None:
        print(text, file=out)
        return 0
    Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({args.format}: {args.name}({args.n}), {len(pattern.flows)} flows "
          f"in {pattern.num_steps} steps)", file=out)
    return 0


def _cmd_patterns_import(args: argparse.Namespace, out: TextIO) -> int:
    from react.msccl import read_msccl

    pattern = read_msccl(args.file)
    print(pattern.describe(), file=out)
    print(f"ok: {args.file} implements its {pattern.kind} over {pattern.n} ranks "
          f"({len(pattern.flows)} flows in {pattern.num_steps} steps)", file=out)
    if args.json:
        Path(args.json).write_text(pattern.to_json() + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=out)
    return 0


# -- demo ------------------------------------------------------------------------------------------
def _cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from react.show.demo import narrate

    told = []
    for paragraph in narrate(Path(args.out), epochs=args.epochs):
        told.append(paragraph)
        for line in paragraph.splitlines() or [""]:
            indent = " " * (len(line) - len(line.lstrip()))
            # paths are never broken, so that they can be copied from the terminal
            print(textwrap.fill(line, width=100, subsequent_indent=indent + "  ",
                                break_long_words=False, break_on_hyphens=False)
                  if len(line) > 100 else line, file=out)
        print(file=out)
        out.flush()
    if args.html:
        from react.show.demo import story_pictures
        from react.show.runpage import story_page, write_page

        folder = Path(args.html)
        folder.mkdir(parents=True, exist_ok=True)
        title, _, first = told[0].partition("\n\n")
        story = [first, *told[1:-1]]  # the last paragraph lists file paths: not for a page
        page = write_page(folder / "demo.html",
                          story_page(title, story, story_pictures(story, Path(args.out))))
        print(f"wrote {page}", file=out)
    return 0


# -- entry point -----------------------------------------------------------------------------------
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
    except (_UsageError, ReactError, FlowsimError, OSError) as exc:
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
