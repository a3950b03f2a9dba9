"""``react demo``: the paper's worked example (§4.3), narrated, with its pictures.

The story itself is :func:`react.show.demo.narrate`; this command prints it wrapped for a
terminal (paths never broken, so they can be copied) and, with ``--html``, lays it out as one
page.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from react.commands.argtypes import positive_int

__all__ = ["add_parser", "cmd_demo"]


def add_parser(sub: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Add the ``demo`` subcommand (``handler(args, out) -> exit status``) to ``sub``."""
    demo = sub.add_parser(
        "demo", parents=list(parents), help="the paper's worked example (§4.3), narrated",
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
    demo.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
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
