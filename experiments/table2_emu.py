"""The paper's Table 2 on the emulator: real ranks, real bytes, a real congested network.

Dual binary tree AllReduce on 4 and 8 ranks of a star (one emulated switch), ``p`` = 0, 1, 2
long-lived background flows from outside hosts into one rank, each run without and with REACT
on identical settings; the speedup is baseline / REACT of the mean and of the p95 collective
time over all epochs (as the paper's Table 2, §7.2), and "changes" counts REACT's pattern changes.
Beside each row: the paper's numbers and flowsim on the same scenario at the same scaled rates
(200 Mbit/s links, a 4 MiB message, the same 5-epoch switching delay).

Every emulated run uses the socket transport; ``--gloo`` adds the 8-rank p = 2 row on
torch.distributed's Gloo transport (needs the ``[torch]`` extra). Needs root (namespaces).

Run::

    sudo python3 experiments/table2_emu.py --gloo --out docs/results   # table2_emu_gloo.csv
    sudo python3 experiments/table2_emu.py --quick   # a minute, to a new temporary folder
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a file: make `experiments` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.table2 import PAPER
from react.run import metrics as report
from react.run.outdir import experiment_dirs, variant_name
from react.run.scenario import parse_scenario
from react.run.scenario_runs import run_scenario
from react.run.store import write_csv_rows

ROOT = Path(__file__).resolve().parents[1]
CONGESTED_RANK = 1
"""The rank the background flows go into: an aggregating rank of tree T1 at 4 and 8 ranks."""


def scenario_doc(ranks: int, p: int, *, backend: str, epochs: int, link_rate_bps: float,
                 message_bytes: float, transport: str, seed: int = 0) -> dict[str, Any]:
    """One Table 2 cell as a scenario document: hosts h0..h{ranks-1} run the ranks, each of the
    next ``p`` hosts sends one long-lived flow into rank :data:`CONGESTED_RANK`.

    The paper's ``p`` flows come from one outside node. The emulator shares each switch port
    fairly among source *hosts* (:mod:`react.backends.emu.tc`), so ``p`` flows from one host
    would take one share; from ``p`` hosts they take ``p`` shares, the per-flow max-min share
    flowsim gives either way (the sender's uplink is never the bottleneck here).
    """
    doc: dict[str, Any] = {
        "name": f"table2-emu-{ranks}r-p{p}-{backend}",
        "seed": seed,
        "backend": backend,
        "connections": 1,
        "topology": {"name": "star", "n": ranks + max(p, 1), "capacity_bps": link_rate_bps},
        "jobs": [{
            "name": "tree", "collective": "allreduce_double_binary_tree", "ranks": ranks,
            "placement": "first", "message_bytes": message_bytes, "epochs": epochs,
            "react": {"enabled": True, "apply_delay_epochs": 5},
        }],
        "emu": {"link_rate_bps": link_rate_bps, "message_bytes": message_bytes,
                "transport": transport, "apply_delay_epochs": 5},
    }
    if p:
        doc["background"] = [{"kind": "long_lived", "src": f"h{ranks + k}",
                              "dst": f"tree:{CONGESTED_RANK}"} for k in range(p)]
    return doc


def measure(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Run one cell without and with REACT; the two runs' statistics."""
    scenario = parse_scenario(doc, source=str(doc["name"]))
    out: dict[str, Any] = {}
    for react in (False, True):
        t0 = time.monotonic()
        run = run_scenario(scenario, react=react)["tree"]
        times = np.array(run.times_s())
        tag = "on" if react else "off"
        out[f"mean_{tag}_s"] = float(times.mean())
        out[f"p95_{tag}_s"] = float(np.percentile(times, 95))
        out[f"wall_{tag}_s"] = time.monotonic() - t0
        if react:
            out["changes"] = len(report.change_epochs(run))
            out["decisions"] = len(run.decisions)
    out["speedup_mean"] = out["mean_off_s"] / out["mean_on_s"]
    out["speedup_p95"] = out["p95_off_s"] / out["p95_on_s"]
    return out


FIELDS = ("ranks", "p", "backend", "transport", "epochs", "mean_off_s", "mean_on_s",
          "p95_off_s", "p95_on_s", "speedup_mean", "speedup_p95", "changes", "changes_per_5k",
          "paper_speedup_mean", "paper_speedup_p95", "paper_changes", "wall_off_s",
          "wall_on_s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.table2_emu",
        description="Paper Table 2 on the emulator (needs root): tree AllReduce, 4 and 8 ranks, "
                    "p = 0, 1, 2 background flows into one rank, without and with REACT, beside "
                    "the paper and flowsim at the same scaled rates.")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 4 ranks, p = 2, 24 epochs, 1 MiB")
    parser.add_argument("--ranks", nargs="+", type=int, default=[4, 8])
    parser.add_argument("--p", nargs="+", type=int, default=[0, 1, 2], dest="ps")
    parser.add_argument("--epochs", type=int, default=90,
                        help="epochs per run (default 90: REACT settles within ~60)")
    parser.add_argument("--message-bytes", type=float, default=4 * 1024 * 1024)
    parser.add_argument("--link-rate-bps", type=float, default=200e6)
    parser.add_argument("--gloo", action="store_true",
                        help="also run the 8-rank p = 2 row on torch's Gloo transport")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for the CSV (default ./results/table2_emu; with --quick "
                             "a new temporary folder; docs/results only when asked)")
    args = parser.parse_args(argv)
    if args.quick:
        args.ranks, args.ps, args.epochs, args.message_bytes = [4], [2], 24, 1024 * 1024
        name = "table2_emu-quick"
    else:  # other options than the defaults: a file of their own
        name = variant_name(
            "table2_emu", {"n": args.ranks, "p": args.ps, "e": args.epochs,
                           "m": args.message_bytes, "rate": args.link_rate_bps,
                           "gloo": args.gloo},
            {"n": [4, 8], "p": [0, 1, 2], "e": 90, "m": 4 * 1024 * 1024, "rate": 200e6,
             "gloo": False})
    args.out, _ = experiment_dirs(name, quick=args.quick, out=args.out,
                                  default_out=ROOT / "results" / "table2_emu")
    cells = [(n, p, "emu", "socket") for n in args.ranks for p in args.ps]
    cells += [(n, p, "sim", "-") for n in args.ranks for p in args.ps]
    if args.gloo:
        cells.append((8, 2, "emu", "torch"))
    rows = []
    t0 = time.monotonic()
    for n, p, backend, transport in cells:
        doc = scenario_doc(n, p, backend=backend, epochs=args.epochs,
                           link_rate_bps=args.link_rate_bps, message_bytes=args.message_bytes,
                           transport="socket" if transport == "-" else transport)
        stats = measure(doc)
        paper = PAPER.get((n, p), (float("nan"),) * 3)
        row = {"ranks": n, "p": p, "backend": backend, "transport": transport,
               "epochs": args.epochs, **stats,
               "changes_per_5k": stats["changes"] * 5000 / args.epochs,
               "paper_speedup_mean": paper[0], "paper_speedup_p95": paper[1],
               "paper_changes": paper[2]}
        rows.append(row)
        print(f"{n:>2} ranks p={p} {backend:<3} {transport:<6} mean {stats['mean_off_s']*1e3:8.1f}"
              f" -> {stats['mean_on_s']*1e3:8.1f} ms (x{stats['speedup_mean']:.3f}), p95 "
              f"x{stats['speedup_p95']:.3f}, {stats['changes']} changes; paper x{paper[0]:.3f}"
              f" / x{paper[1]:.3f}, {paper[2]:g} changes per 5k", flush=True)
    path = args.out / f"{name}.csv"
    write_csv_rows(path, [{k: r.get(k) for k in FIELDS} for r in rows], FIELDS)
    print()
    for line in markdown_table(rows):
        print(line)
    print(f"\n{len(rows)} cells in {time.monotonic() - t0:.0f} s -> {path}")
    return 0


def markdown_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The emulated rows beside flowsim's and the paper's (the page's table)."""
    sim = {(r["ranks"], r["p"]): r for r in rows if r["backend"] == "sim"}
    out = ["| ranks | p | transport | mean ms off -> on | speedup mean (emu / flowsim / paper) "
           "| speedup p95 (emu / flowsim / paper) | changes (emu / flowsim; paper per 5k) |",
           "|---:|---:|---|---|---|---|---|"]
    for r in rows:
        if r["backend"] != "emu":
            continue
        f = sim.get((r["ranks"], r["p"]), {})
        out.append(
            f"| {r['ranks']} | {r['p']} | {r['transport']} | {r['mean_off_s'] * 1e3:.0f} -> "
            f"{r['mean_on_s'] * 1e3:.0f} | {r['speedup_mean']:.3f} / "
            f"{f.get('speedup_mean', float('nan')):.3f} / {r['paper_speedup_mean']:.3f} | "
            f"{r['speedup_p95']:.3f} / {f.get('speedup_p95', float('nan')):.3f} / "
            f"{r['paper_speedup_p95']:.3f} | {r['changes']} / {f.get('changes', '-')}; "
            f"{r['paper_changes']:g} |")
    return out


if __name__ == "__main__":
    sys.exit(main())
