"""``react patterns``: list the pattern generators; show, verify, draw, export or import one.

Patterns are :mod:`react.patterns`' generators by name, or MSCCL XML algorithms
(:mod:`react.msccl`) read back and checked.
"""

from __future__ import annotations

import argparse
import inspect
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from react.commands.argtypes import positive_int
from react.commands.common import EXIT_FAILED, UsageError

__all__ = ["add_parser"]


def add_parser(sub: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Add the ``patterns`` subcommand and its actions to ``sub``."""
    pat = sub.add_parser(
        "patterns", parents=list(parents), help="list pattern generators; show, verify or draw one",
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
        p = psub.add_parser(name, parents=list(parents), help=help_text, description=help_text,
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
        "import", parents=list(parents), help="read an MSCCL XML algorithm, check it, show it",
        description="Read an MSCCL XML algorithm (msccl-tools, TACCL, ...) as a REACT pattern, "
                    "check that it implements its collective, and print it step by step.",
        epilog="Example: react patterns import tests/data/msccl/allreduce_ring_4_1.xml")
    imp.add_argument("file", metavar="FILE.xml", help="the MSCCL XML algorithm")
    imp.add_argument("--json", metavar="OUT", help="also write the pattern as REACT JSON")
    imp.set_defaults(handler=_cmd_patterns_import)


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
        raise UsageError(f"N must be at least 2 ranks, got {args.n}")
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
        raise UsageError(f"drawing is not available: react.show.draw cannot be imported ({exc})"
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
