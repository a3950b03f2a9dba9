"""Draws: one scenario run on several trajectories, for figures whose jobs share links.

Jobs that share links are chaotic on the simulator: a change in the last bits of one flow's time
grows epoch by epoch until single epochs move by tens of percent (docs/benchmarks.md, twelfth
look), so one run of such a scenario is one draw from a spread, and REACT's gain in it can swing
by ten points or more between draws. Draw ``k`` runs the same scenario with every job's message
``1 + k * DRAW_EPS`` times as large (0.02 bytes more per 20 MB per draw: nothing a network could
tell apart), which puts the run on another trajectory; draw 0 is the scenario itself. A figure
run with ``--draws D`` reports each point's mean over its seeds and draws, and a per-seed table
(``<stem>_seeds.csv``: one row per seed with the mean, min and max over its draws), whose means
are what a claim about one scenario should rest on. The paper is silent on run-to-run spread;
the choice and what it changes are in docs/deviations.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from copy import deepcopy
from typing import Any

DRAW_EPS = 1e-9
"""Relative growth of every message per draw."""


def grown(doc: Mapping[str, Any], eps: float) -> dict[str, Any]:
    """A copy of the scenario document ``doc`` with every job's message ``1 + eps`` times."""
    out = deepcopy(dict(doc))
    for job in out["jobs"]:
        job["message_bytes"] = job["message_bytes"] * (1.0 + eps)
    return out


def drawn(doc: Mapping[str, Any], draw: int) -> dict[str, Any]:
    """A copy of the scenario document ``doc`` as draw ``draw`` (module docstring)."""
    if isinstance(draw, bool) or not isinstance(draw, int) or draw < 0:
        raise ValueError(f"draw must be a non-negative integer, got {draw!r}")
    return grown(doc, draw * DRAW_EPS)


def with_draws(cases: list[tuple[dict[str, Any], dict[str, Any]]], draws: int
               ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every case ``(params, scenario)`` as ``draws`` cases labelled with their seed and draw.

    With one draw the cases come back unchanged, so a figure's default run keeps its points.
    """
    if draws == 1:
        return cases
    return [({**params, "seed": int(doc.get("seed", 0)), "draw": k}, drawn(doc, k))
            for params, doc in cases for k in range(draws)]


def add_draws_argument(parser: argparse.ArgumentParser) -> None:
    """``--draws D`` (default 1: each scenario once, as the committed figure)."""

    def draws(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number") from None
        if not 1 <= value <= 100:
            raise argparse.ArgumentTypeError(f"{value}: expected 1 to 100 draws")
        return value

    parser.add_argument("--draws", type=draws, default=1, metavar="D",
                        help="run every scenario D times on different trajectories (messages "
                             f"1 + k x {DRAW_EPS:g} times as large, k < D) and also write a "
                             "per-seed table, <stem>_seeds.csv (default 1)")
