"""The paper's Table 2 on this host's GPUs: dual binary tree AllReduce, 100 MB, p copy streams.

One rank per GPU (every GPU of the host unless ``--ranks``), the job's scenario on
``backend = "gpu"`` (:mod:`react.run.worlds.gpu`): ``p`` = 0, 1, 2 copy streams into rank
:data:`CONGESTED_RANK`'s GPU (sources distinct where possible,
:func:`react.backends.gpu.copystream.copy_sources`), each cell run without and with REACT under
the same streams. The speedup is baseline / REACT of the mean and of the p95 collective time
(the tuner's merged epoch times, as on the emulator) over every epoch, as the paper's Table 2
(§7.2); "changes" counts REACT's pattern changes. "Until REACT settles": a REACT run whose
last change falls in its last ``--settle-batches`` batches is run again with twice the epochs
(up to ``--max-epochs``); the table says whether it settled.

At 2 GPUs the dual tree has little to swap: both trees connect the same two ranks, and any
AllReduce moves the same bytes into each rank whichever rank plays which role, so REACT can
detect the congested direction but no swap removes it (docs/results/gpu.md). From 4 GPUs on a
swap can move aggregation away from the congested rank.

Run (no torchrun: it starts one rank per GPU itself)::

    python3 experiments/table2_gpu.py --out DIR            # 2 GPUs: ~1 min
    python3 experiments/table2_gpu.py --quick --out DIR    # smoke: p = 2, 60 epochs
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a file: make `react` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from react.model.errors import ReactError  # noqa: E402
from react.run.store import write_csv_rows  # noqa: E402

CONGESTED_RANK = 1
"""The rank the copy streams go into: an aggregating rank of tree T1 from 4 ranks on."""
PAPER = {  # (ranks, p) -> (mean speedup, p95 speedup, #changes per 5,000 epochs), Table 2
    (4, 0): (0.964, 0.963, 34.0), (4, 1): (0.999, 0.980, 35.6), (4, 2): (1.138, 1.180, 33.2),
    (8, 0): (1.101, 1.165, 41.25), (8, 1): (1.348, 1.383, 40.0), (8, 2): (1.145, 1.222, 36.25),
}
FIELDS = ("ranks", "p", "sources", "epochs", "settled", "mean_off_s", "mean_on_s", "p95_off_s",
          "p95_on_s", "speedup_mean", "speedup_p95", "changes", "changes_per_5k",
          "last_change_epoch", "epochs_waited", "paper_speedup_mean", "paper_speedup_p95",
          "paper_changes")


def scenario_doc(ranks: int, p: int, *, epochs: int, message_bytes: float = 100e6,
                 apply_delay_epochs: int = 5, timeout_s: float = 120.0) -> dict[str, Any]:
    """One cell as a scenario: hosts h0..h{ranks-1} (GPUs 0..ranks-1) run the tree; ``p`` copy
    streams into rank :data:`CONGESTED_RANK`, the first from the next GPU."""
    doc: dict[str, Any] = {
        "name": f"table2-gpu-{ranks}r-p{p}", "backend": "gpu",
        "topology": {"name": "star", "n": ranks},
        "jobs": [{"name": "tree", "collective": "allreduce_double_binary_tree",
                  "ranks": ranks, "placement": "first", "message_bytes": message_bytes,
                  "epochs": epochs,
                  "react": {"enabled": True, "apply_delay_epochs": apply_delay_epochs}}],
        "gpu": {"apply_delay_epochs": apply_delay_epochs, "timeout_s": timeout_s},
    }
    if p:
        doc["background"] = [{"kind": "long_lived", "src": f"h{(CONGESTED_RANK + 1) % ranks}",
                              "dst": f"tree:{CONGESTED_RANK}", "p": p}]
    return doc


def check_args(args: argparse.Namespace, gpus: int) -> int:
    """The rank count to run, or a ReactError naming the bad value."""
    n = args.ranks or gpus
    if gpus < 2:
        raise ReactError(f"table2_gpu: needs at least 2 GPUs, this host has {gpus}")
    if not 2 <= n <= gpus:
        raise ReactError(f"table2_gpu: --ranks must be in 2..{gpus} (one rank per GPU), got {n}")
    if any(p < 0 for p in args.ps):
        raise ReactError(f"table2_gpu: --p values must be >= 0, got {args.ps}")
    if not 12 <= args.epochs <= args.max_epochs:
        raise ReactError(f"table2_gpu: --epochs must be in 12..--max-epochs "
                         f"({args.max_epochs}), got {args.epochs}")
    if args.settle_batches < 1:
        raise ReactError(f"table2_gpu: --settle-batches must be >= 1, got "
                         f"{args.settle_batches}")
    return n


def settled(run: Any, batch: int, settle_batches: int) -> tuple[bool, int | None]:
    """Whether the run's last pattern change lies before its last ``settle_batches`` batches."""
    from react.run import metrics as report

    changes = report.change_epochs(run)
    last = changes[-1] if changes else None
    return (last is None or last < len(run.results) - settle_batches * batch), last


def measure(n: int, p: int, args: argparse.Namespace) -> dict[str, Any]:
    from react.run.scenario import parse_scenario
    from react.run.scenario_runs import run_scenario
    from react.run.worlds.gpu import copy_pairs

    epochs = args.epochs
    while True:
        scenario = parse_scenario(scenario_doc(n, p, epochs=epochs,
                                               message_bytes=args.message_bytes),
                                  source=f"table2_gpu n={n} p={p}")
        off = run_scenario(scenario, react=False)["tree"]
        on = run_scenario(scenario, react=True)["tree"]
        ok, last = settled(on, 6, args.settle_batches)
        if ok or epochs * 2 > args.max_epochs:
            break
        epochs *= 2
        print(f"  n={n} p={p}: REACT changed pattern at epoch {last}; again with {epochs} "
              "epochs", flush=True)
    t_off, t_on = np.array(off.times_s()), np.array(on.times_s())
    from react.run import metrics as report

    changes = len(report.change_epochs(on))
    paper = PAPER.get((n, p), (float("nan"),) * 3)
    return {
        "ranks": n, "p": p, "sources": [s for s, _ in copy_pairs(scenario, n)],
        "epochs": epochs, "settled": ok,
        "mean_off_s": float(t_off.mean()), "mean_on_s": float(t_on.mean()),
        "p95_off_s": float(np.percentile(t_off, 95)), "p95_on_s": float(np.percentile(t_on, 95)),
        "speedup_mean": float(t_off.mean() / t_on.mean()),
        "speedup_p95": float(np.percentile(t_off, 95) / np.percentile(t_on, 95)),
        "changes": changes, "changes_per_5k": changes * 5000 / epochs,
        "last_change_epoch": last, "epochs_waited": on.info.get("epochs_waited"),
        "paper_speedup_mean": paper[0], "paper_speedup_p95": paper[1], "paper_changes": paper[2],
        "decisions": [f"{d.action}: {d.reason}" for d in on.decisions],
    }


def markdown_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    out = ["| GPUs | p | copy sources | epochs (settled) | mean ms off -> on | speedup mean "
           "(GPU / paper) | speedup p95 (GPU / paper) | changes (per 5k; paper) |",
           "|---:|---:|---|---|---|---|---|---|"]
    def paper(x: float, spec: str) -> str:  # the paper has rows for 4 and 8 nodes only
        return "-" if math.isnan(x) else format(x, spec)

    for r in rows:
        out.append(
            f"| {r['ranks']} | {r['p']} | {r['sources']} | {r['epochs']} "
            f"({'yes' if r['settled'] else 'no'}) | {r['mean_off_s'] * 1e3:.3f} -> "
            f"{r['mean_on_s'] * 1e3:.3f} | {r['speedup_mean']:.3f} / "
            f"{paper(r['paper_speedup_mean'], '.3f')} | {r['speedup_p95']:.3f} / "
            f"{paper(r['paper_speedup_p95'], '.3f')} | {r['changes']} "
            f"({r['changes_per_5k']:.0f}; {paper(r['paper_changes'], 'g')}) |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 experiments/table2_gpu.py",
        description="Paper Table 2 on this host's GPUs: dual binary tree AllReduce of 100 MB, "
                    "p = 0, 1, 2 copy streams into one rank, without and with REACT.")
    parser.add_argument("--ranks", type=int, default=0, help="ranks (default: every GPU)")
    parser.add_argument("--p", type=int, nargs="+", default=[0, 1, 2], dest="ps")
    parser.add_argument("--epochs", type=int, default=600,
                        help="epochs per run (doubled until REACT settles)")
    parser.add_argument("--max-epochs", type=int, default=2400)
    parser.add_argument("--settle-batches", type=int, default=10,
                        help="settled: no pattern change in the last this many batches")
    parser.add_argument("--message-bytes", type=float, default=100e6)
    parser.add_argument("--quick", action="store_true", help="smoke run: p = 2, 60 epochs")
    parser.add_argument("--out", type=Path, default=Path("results") / "table2_gpu",
                        help="folder for table2_gpu.csv and table2_gpu.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.ps, args.epochs, args.max_epochs, args.settle_batches = [2], 60, 60, 1
    try:
        from react.backends.gpu.job import visible_gpus

        n = check_args(args, visible_gpus())
        rows = []
        t0 = time.monotonic()
        for p in args.ps:
            row = measure(n, p, args)
            rows.append(row)
            print(f"{n} GPUs p={p}: mean {row['mean_off_s'] * 1e3:.3f} -> "
                  f"{row['mean_on_s'] * 1e3:.3f} ms (x{row['speedup_mean']:.3f}), p95 "
                  f"x{row['speedup_p95']:.3f}, {row['changes']} changes, settled "
                  f"{row['settled']}", flush=True)
    except ReactError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv_rows(args.out / "table2_gpu.csv", [{k: r.get(k) for k in FIELDS} for r in rows],
                   FIELDS)
    lines = markdown_table(rows)
    decisions = [f"- {r['ranks']} GPUs p={r['p']}: " + "; ".join(r["decisions"][:3])
                 for r in rows]
    (args.out / "table2_gpu.md").write_text("\n".join(lines + [""] + decisions) + "\n")
    print("\n".join(lines))
    print(f"\n{len(rows)} cells in {time.monotonic() - t0:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
