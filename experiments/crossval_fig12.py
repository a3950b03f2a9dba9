"""Fig. 12 on three models: exact max-min, the TCP-aware mode and ns-3, with and without REACT.

Does the packet-level model explain why our Fig. 12 gains are smaller than the paper's? Each
point of Fig. 12 (``experiments/fig12.py``: 8-rank dual tree on a 16-host star, x congested
pairs with p long-lived flows each) runs without and with REACT on each backend, same seeds.

Scaled so that the ns-3 points fit in minutes: 2 MB messages instead of 20 MB, 12 epochs
instead of 100 (two batches of B = 6: REACT observes the first and, when it swaps, the second
batch runs its swap), one scenario seed per point instead of 10. The gain is the ratio of the
mean collective times over the second batch, without / with REACT, minus one (the algorithm
bandwidth improvement of the paper's figure).

    python experiments/crossval_fig12.py           # x in 1,2; p in 1,2,4; sim, tcp, ns3
    python experiments/crossval_fig12.py --quick   # seconds: x=1, p=2, sim and tcp only

Writes ``crossval_fig12.csv`` into ``--out`` (default docs/results; with --quick a temporary
folder).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fig12 import scenario as fig12_scenario  # noqa: E402

from react.outdir import experiment_dirs  # noqa: E402

BATCH = 6


def run_point(doc: dict[str, Any], backend: str) -> dict[str, Any]:
    """One point on one backend: second-batch mean times off and on, and REACT's decisions."""
    from react.scenario import parse_scenario, run_scenario

    scenario = parse_scenario(doc, source=doc["name"])
    scenario = (scenario.with_backend("sim").with_sharing(backend) if backend in ("maxmin", "tcp")
                else scenario.with_backend(backend))
    clock = time.perf_counter()
    off = run_scenario(scenario, react=False)["tree"]
    on = run_scenario(scenario, react=True)["tree"]
    wall = time.perf_counter() - clock
    t_off = float(np.mean(off.times_s()[BATCH:2 * BATCH]))
    t_on = float(np.mean(on.times_s()[BATCH:2 * BATCH]))
    first = on.decisions[0] if on.decisions else None
    return {"off_us": round(t_off * 1e6, 1), "on_us": round(t_on * 1e6, 1),
            "gain": round(t_off / t_on - 1, 4),
            "first_batch_us": round(float(np.mean(off.times_s()[:BATCH])) * 1e6, 1),
            "decision": "" if first is None else
            f"{first.action}: " + "; ".join(s.describe() for s in first.swaps),
            "wall_s": round(wall, 1)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="crossval_fig12", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="x=1, p=2 on the simulator's two modes only (a smoke run)")
    parser.add_argument("--backends", default="maxmin,tcp,ns3",
                        help="maxmin (flowsim exact), tcp (flowsim TCP-aware), ns3 (default: all)")
    parser.add_argument("--message-bytes", type=float, default=2e6,
                        help="message size (default 2e6; the paper's 20e6 takes 10x longer)")
    parser.add_argument("--out", default=None, help="folder for crossval_fig12.csv")
    args = parser.parse_args(argv)
    xs, ps, backends = (1, 2), (1, 2, 4), args.backends.split(",")
    if args.quick:
        xs, ps, backends = (1,), (2,), ["maxmin", "tcp"]
    out_dir, _ = experiment_dirs("crossval_fig12", quick=args.quick, out=args.out,
                                 default_out=Path("docs/results"))
    rows = []
    with ExitStack() as stack:
        if "ns3" in backends:
            from react.backends.ns3 import shared_child

            stack.enter_context(shared_child())
        for x in xs:
            for p in ps:
                doc = fig12_scenario(x, p, 0, epochs=2 * BATCH,
                                     message_bytes=args.message_bytes)
                for backend in backends:
                    row = {"x": x, "p": p, "backend": backend, **run_point(doc, backend)}
                    rows.append(row)
                    print(f"x={x} p={p} {backend:<7} off {row['off_us']:>9,.1f} µs  on "
                          f"{row['on_us']:>9,.1f} µs  gain {row['gain']:+.1%}  "
                          f"({row['decision'] or 'no decision'}; {row['wall_s']} s)",
                          flush=True)
    path = out_dir / "crossval_fig12.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
