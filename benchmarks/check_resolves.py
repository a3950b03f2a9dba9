"""Check the engine's incremental re-solve against a from-scratch max-min, solve by solve.

The engine re-solves only the flows a change can reach (``flowsim.network``: the level cut and,
with few flows, the closure over saturated links), so its rates after a re-solve could in
principle differ from the max-min fair rates of all running flows. This script runs a scenario
on the simulator and, after every ``--every``-th re-solve, computes the max-min rates of every
running flow afresh (:func:`flowsim.maxmin.water_fill` over all flows and the full link
capacities, which shares no state with the engine's re-solve) and compares them with the rates
the engine holds. Max-min fair rates are unique, so the two may differ by round-off only.

Usage::

    python benchmarks/check_resolves.py experiments/scenarios/whatif_alibaba_64.toml --epochs 2
    python benchmarks/check_resolves.py SCENARIO --every 10 --closure-everywhere

``--closure-everywhere`` makes the engine narrow every re-solve to its closure (the default does
so up to 48 running flows; the closure reads per-flow state the engine keeps in lists, so that
mode is forced too), to check that path at sizes the default never gives it. Exits 1 if
any rate differs by more than ``--rtol`` (default 1e-12) relative.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

import flowsim.network as engine
from flowsim.maxmin import water_fill
from react.run.scenario import ScenarioError, load_scenario
from react.run.scenario_runs import run_scenario


def install_check(every: int, rtol: float) -> dict[str, Any]:
    """Wrap ``Network._resolve_now`` so that it checks every ``every``-th re-solve; the returned
    dict counts re-solves, checks and bad rates, and keeps the worst relative difference."""
    stats: dict[str, Any] = {"resolves": 0, "checked": 0, "rates": 0, "bad": 0, "worst": 0.0}
    solve = engine.Network._resolve_now

    def checked(net: engine.Network) -> None:
        before = net.resolves
        solve(net)
        if net.resolves == before:
            return  # nothing to re-solve at this instant
        stats["resolves"] += 1
        if stats["resolves"] % every:
            return
        slots = sorted(net._slot_of.values())
        held = net._rt if net._lists_mode else net._rate.tolist()
        metas = [net._meta[s] for s in slots]
        width = max(len(m.links) for m in metas)
        paths = np.full((len(metas), width), -1, dtype=np.int64)
        for i, m in enumerate(metas):
            paths[i, : len(m.links)] = m.links
        fresh = water_fill(paths, np.array([m.weight for m in metas]),
                           np.array(net._cap_list)).tolist()
        stats["checked"] += 1
        stats["rates"] += len(slots)
        for slot, want in zip(slots, fresh, strict=True):
            got = held[slot]
            diff = abs(got - want) / abs(want) if want else abs(got)
            stats["worst"] = max(stats["worst"], diff)
            if diff > rtol:
                stats["bad"] += 1

    engine.Network._resolve_now = checked  # type: ignore[method-assign]
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", help="a scenario file (TOML) on the simulator")
    parser.add_argument("--epochs", type=int, metavar="N", help="every job N epochs")
    parser.add_argument("--every", type=int, default=1, metavar="K",
                        help="check every K-th re-solve (default 1: all)")
    parser.add_argument("--rtol", type=float, default=1e-12,
                        help="largest relative difference counted as round-off (default 1e-12)")
    parser.add_argument("--closure-everywhere", action="store_true",
                        help="narrow every re-solve to its closure, at any number of flows")
    args = parser.parse_args(argv)
    if args.every < 1:
        parser.error(f"--every {args.every}: expected at least 1")
    try:
        scenario = load_scenario(args.scenario)
        if args.epochs is not None:
            scenario = scenario.with_epochs(args.epochs)
    except ScenarioError as exc:
        parser.error(str(exc))
    if scenario.backend != "sim":
        parser.error(f"{args.scenario}: backend {scenario.backend!r}; expected the simulator")
    if args.closure_everywhere:  # read when each Network is built
        engine._CLOSURE_FLOWS = engine._LIST_FLOWS = sys.maxsize
    stats = install_check(args.every, args.rtol)
    run_scenario(scenario)
    print(f"{stats['resolves']:,} re-solves, {stats['checked']:,} checked "
          f"({stats['rates']:,} rates): worst relative difference {stats['worst']:.2e}, "
          f"{stats['bad']} rates beyond {args.rtol:g}")
    return 1 if stats["bad"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
