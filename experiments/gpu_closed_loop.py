"""REACT's closed loop on this host's GPUs under copy-stream congestion, beside NCCL.

For each congestion degree ``p`` (copy streams into the GPU of rank ``--congested``, sources
from :func:`react.backends.gpu.copystream.copy_sources`), one after another under the same
streams, each a fresh :class:`~react.backends.gpu.job.GpuJob` of ``--epochs`` epochs:

- ``nccl``: NCCL's own ``all_reduce`` (the baseline of the paper's Fig. 11);
- ``bare``: RCollective, flows timed, no tuner (what the tuner costs is measured against it);
- ``collect``: RCollective with RTuner gathering every epoch's flow timings, no controller;
- ``react``: RCollective with RTuner and REACT's controller (decides, switches at the agreed
  epoch).

Reported: every run's epoch *spans* (longest enter-to-exit of any rank, the same events for
NCCL and RCollective) and its host wall time per epoch; the tuner's cost per batch (the
leader's merge + decide + send, against the batch's GPU time) and the ranks' waits for it;
``collect``/``bare`` ratios of mean span and wall time per epoch; what detection (§5.2, the
controller's thresholds) flags in each batch of the ``react`` run that ran the starting pattern,
against the flows into the congested rank; the controller's decisions; and a CDF of epoch
times (``fig11_gpu.png``, like the paper's Fig. 11).

Run (no torchrun: it starts the ranks itself, one per GPU)::

    python3 experiments/gpu_closed_loop.py --out DIR   # ~2 min on 2 GPUs (600 epochs a run)
    python3 experiments/gpu_closed_loop.py --quick --out DIR    # smoke: 60 epochs, p = 0, 2

Writes ``gpu_closed_loop.json`` (everything), ``gpu_closed_loop.md`` (the table),
``fig11_gpu.png`` and ``tuner_p{p}.json`` (the tuner's result file of each REACT run: every
merged flow time of every epoch, the decisions) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a file: make `react` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from react.backends.gpu.copystream import CopyStreams, copy_sources  # noqa: E402
from react.backends.gpu.eventclock import STAMPS  # noqa: E402
from react.backends.gpu.job import GpuJob, visible_gpus  # noqa: E402
from react.control.controller import Controller, ControllerConfig  # noqa: E402
from react.control.detect import detect_congestion  # noqa: E402
from react.model.errors import ReactError  # noqa: E402
from react.model.pattern import Pattern  # noqa: E402
from react.patterns import generator  # noqa: E402

RUNS = ("nccl", "bare", "collect", "react")


def check_args(args: argparse.Namespace, gpus: int) -> None:
    """Refuse arguments that cannot run here, naming the value and what was expected."""
    n = args.ranks or gpus
    if n < 2:
        raise ReactError(f"gpu_closed_loop: needs at least 2 GPUs for a collective, this host "
                         f"has {gpus}")
    if n > gpus:
        raise ReactError(f"gpu_closed_loop: --ranks {n} but this host has {gpus} GPU(s); the "
                         "GPU backend runs one rank per GPU")
    if not 0 <= args.congested < n:
        raise ReactError(f"gpu_closed_loop: --congested must be a rank in 0..{n - 1}, got "
                         f"{args.congested}")
    if any(p < 0 for p in args.ps):
        raise ReactError(f"gpu_closed_loop: --p values must be >= 0, got {args.ps}")
    if args.epochs < 2 * args.batch:
        raise ReactError(f"gpu_closed_loop: --epochs must be at least two batches "
                         f"({2 * args.batch}), got {args.epochs}")


def detection(run: Any, batch: int, congested: int, sources: Sequence[int],
              config: ControllerConfig) -> dict[str, Any]:
    """What detection flags in each full batch that ran the starting pattern."""
    pattern = run.patterns[0]
    into = sorted(i for i, f in enumerate(pattern.flows) if f.dst == congested)
    out_of = sorted(i for i, f in enumerate(pattern.flows) if f.src in set(sources))
    batches = []
    for b in range(len(run.results) // batch):
        span = range(b * batch, (b + 1) * batch)
        if any(run.patterns[e] is not pattern and run.patterns[e] != pattern for e in span):
            break
        report = detect_congestion(pattern, [run.results[e] for e in span],
                                   delta1=config.delta1, delta2=config.delta2)
        flagged = {pattern.flows.index(c.flow): c.kind for c in report.flows}
        batches.append({"batch": b, "flagged": sorted(flagged),
                        "kinds": [flagged[i] for i in sorted(flagged)],
                        "steady_inbound": sorted(report.steady_inbound)})
    exact = sum(1 for b in batches if b["flagged"] == into)
    return {"flows": [[f.step, f.src, f.dst] for f in pattern.flows], "into_congested": into,
            "out_of_sources": out_of, "batches": batches, "batches_exact": exact,
            "batches_total": len(batches)}


def flow_timing(tuner_doc: Mapping[str, Any], congested: int) -> dict[str, Any]:
    """How trustworthy the merged flow times of a REACT run are, from its tuner file.

    The median FCT of the flows into the congested rank against the others' (congestion should
    make the first larger), the spread (p90 / median), and the flows timed at zero (the end
    stamped no later than the start: the ranks' clocks disagree by more than the flow took).
    Epochs of the starting pattern only."""
    pattern = Pattern.from_dict(tuner_doc["patterns"][0])
    into = [i for i, f in enumerate(pattern.flows) if f.dst == congested]
    other = [i for i in range(len(pattern.flows)) if i not in into]
    fct = np.array([[end - start for start, end, _ in e["flows"]]
                    for e in tuner_doc["epochs"] if e["pattern"] == 0]) * 1e3
    if fct.size == 0:
        return {"epochs": 0}

    def median(cols: Sequence[int]) -> float | None:
        return float(np.median(fct[:, cols])) if cols else None

    return {"epochs": int(fct.shape[0]), "flows": int(fct.size),
            "zero_time_flows": int((fct <= 1e-6).sum()),
            "median_into_congested_ms": median(into), "median_other_ms": median(other),
            "p90_over_median": float(np.percentile(fct, 90) / max(np.median(fct), 1e-12))}


def summary(run: Any, batch: int) -> dict[str, Any]:
    info = run.info
    spans = [float(s) for s in info["spans_s"]]
    walls = [w for w in info["loop_wall_s"] if w is not None]
    out: dict[str, Any] = {
        "epochs": len(spans), "spans_s": spans,
        "mean_span_s": float(np.mean(spans)), "median_span_s": float(np.median(spans)),
        "p95_span_s": float(np.percentile(spans, 95)),
        "wall_per_epoch_s": max(walls) / len(spans) if walls else None,
        "post_s": info["post_s"], "checks": info["checks"],
    }
    if "tuner_overhead_s" in info:
        times = [r.collective_time_s for r in run.results]
        overhead = info["tuner_overhead_s"]
        out.update({
            "merged_times_s": times, "mean_merged_s": float(np.mean(times)),
            "tuner_overhead_s": overhead,
            "tuner_overhead_per_batch_s": statistics.median(overhead) if overhead else None,
            "tuner_overhead_vs_batch": (statistics.median(overhead) / (batch * np.mean(spans))
                                        if overhead else None),
            "epochs_waited": info["epochs_waited"], "client": info["client"],
            "switch_cost_s": info["switch_cost_s"], "events": info["events"],
            "decisions": [{"batch": d.batch, "action": d.action, "reason": d.reason}
                          for d in run.decisions],
            "patterns_run": len({id(p) for p in run.patterns}),
            "switch_epochs": [e for e in range(1, len(run.patterns))
                              if run.patterns[e] != run.patterns[e - 1]],
        })
    return out


def measure(args: argparse.Namespace, gpus: int) -> dict[str, Any]:
    n = args.ranks or gpus
    devices = list(range(n))
    pattern = generator(args.pattern)(n)
    config = ControllerConfig(batch_epochs=args.batch, apply_delay_epochs=args.delay, seed=0)
    doc: dict[str, Any] = {"gpus": gpus, "ranks": n, "pattern": args.pattern,
                           "message_bytes": args.message_bytes, "epochs": args.epochs,
                           "batch_epochs": args.batch, "apply_delay_epochs": args.delay,
                           "congested": args.congested, "stamp": args.stamp,
                           "graph": args.graph, "cells": []}
    for p in args.ps:
        sources = copy_sources(args.congested, p, gpus, devices)
        cell: dict[str, Any] = {"p": p, "sources": list(sources)}
        t0 = time.monotonic()
        with CopyStreams([(s, args.congested) for s in sources], duration_s=args.stream_s) as cs:
            for kind in RUNS:
                job = GpuJob(devices, message_bytes=args.message_bytes,
                             mode="nccl" if kind == "nccl" else "rcollective",
                             tuner=kind != "bare", apply_delay_epochs=args.delay,
                             timeout_s=args.timeout_s, stamp=args.stamp, graph=args.graph)
                try:
                    controller = Controller(pattern, config) if kind == "react" else None
                    run = job.run_job(f"{kind}-p{p}", pattern, args.epochs, controller)
                    if kind == "react":  # the tuner's record: every merged flow of every epoch
                        args.out.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(run.info["result_file"], args.out / f"tuner_p{p}.json")
                        cell["flow_timing"] = flow_timing(
                            json.loads((args.out / f"tuner_p{p}.json").read_text()),
                            args.congested)
                finally:
                    job.close()
                cell[kind] = summary(run, args.batch)
                if kind == "react":
                    cell["detection"] = detection(run, args.batch, args.congested, sources,
                                                  config)
                print(f"p={p} {kind:<7} mean span {cell[kind]['mean_span_s'] * 1e3:.3f} ms, "
                      f"p95 {cell[kind]['p95_span_s'] * 1e3:.3f} ms, wall/epoch "
                      f"{(cell[kind]['wall_per_epoch_s'] or 0) * 1e3:.3f} ms", flush=True)
        cell["copy_streams"] = cs.reports
        cell["wall_s"] = time.monotonic() - t0
        b, c = cell["bare"], cell["collect"]
        cell["collect_vs_bare_span"] = c["mean_span_s"] / b["mean_span_s"]
        cell["collect_vs_bare_wall"] = (c["wall_per_epoch_s"] / b["wall_per_epoch_s"]
                                        if b["wall_per_epoch_s"] and c["wall_per_epoch_s"]
                                        else None)
        cell["react_vs_nccl_mean"] = cell["react"]["mean_span_s"] / cell["nccl"]["mean_span_s"]
        det = cell["detection"]
        print(f"p={p}: detection flagged exactly the flows into rank {args.congested} in "
              f"{det['batches_exact']}/{det['batches_total']} batches; collect/bare span "
              f"{cell['collect_vs_bare_span']:.3f}; decisions "
              f"{[d['action'] for d in cell['react'].get('decisions', [])][:12]}", flush=True)
        doc["cells"].append(cell)
    return doc


def plot_cdf(doc: Mapping[str, Any], path: Path) -> None:
    """Epoch-time CDFs, NCCL and REACT at every p (the paper's Fig. 11 on GPUs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    styles = {"nccl": "--", "react": "-"}
    for cell in doc["cells"]:
        for kind, label in (("nccl", "NCCL all_reduce"), ("react", "RCollective + REACT")):
            x = np.sort(np.asarray(cell[kind]["spans_s"]) * 1e3)
            y = np.arange(1, len(x) + 1) / len(x)
            ax.plot(x, y, styles[kind], label=f"{label}, p = {cell['p']}")
    ax.set_xscale("log")  # the tails reach 10-30x the median
    ax.set_xlabel("epoch time (ms, log scale)")
    ax.set_ylabel("CDF")
    ax.set_title(f"{doc['pattern']}, {doc['message_bytes'] / 1e6:g} MB, {doc['ranks']} GPUs; "
                 f"p copy streams into rank {doc['congested']}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(doc: Mapping[str, Any]) -> str:
    lines = [f"{doc['ranks']} GPUs, {doc['pattern']}, {doc['message_bytes'] / 1e6:g} MB, "
             f"{doc['epochs']} epochs per run, B = {doc['batch_epochs']}, apply delay "
             f"{doc['apply_delay_epochs']} epochs; copy streams into rank {doc['congested']}; "
             f"ready stamps: {doc.get('stamp', 'post')}"
             f"{'; posted as CUDA graphs' if doc.get('graph') else ''}.",
             "", "| p | sources | NCCL mean / p95 ms | bare | collect | REACT | REACT/NCCL mean "
             "| collect/bare span | collect/bare wall | tuner per batch ms (vs batch) | epochs "
             "waited | detection exact | switches |",
             "|---:|---|---|---|---|---|---:|---:|---:|---|---:|---|---:|"]
    for c in doc["cells"]:
        def ms(k: str, _c: Mapping[str, Any] = c) -> str:
            return f"{_c[k]['mean_span_s'] * 1e3:.3f} / {_c[k]['p95_span_s'] * 1e3:.3f}"

        r = c["react"]
        tb = r.get("tuner_overhead_per_batch_s")
        tuner = "-" if tb is None else f"{tb * 1e3:.2f} ({r['tuner_overhead_vs_batch']:.1f}x)"
        wall = c["collect_vs_bare_wall"]
        lines.append(
            f"| {c['p']} | {c['sources']} | {ms('nccl')} | {ms('bare')} | {ms('collect')} | "
            f"{ms('react')} | {c['react_vs_nccl_mean']:.2f} | {c['collect_vs_bare_span']:.3f} "
            f"| {'-' if wall is None else f'{wall:.3f}'} | {tuner} | {r['epochs_waited']} | "
            f"{c['detection']['batches_exact']}/{c['detection']['batches_total']} | "
            f"{len(r['switch_epochs'])} |")
    lines += ["", "Merged flow times of each REACT run's starting pattern (`flow_timing`): "
              "median FCT into the congested rank and of the other flows, p90 / median of all, "
              "flows timed at zero; and what detection flagged in its batches: nothing, only "
              "flows into the congested rank, only other flows.", "",
              "| p | epochs | into congested ms | other ms | p90 / median | zero-time flows | "
              "batches | nothing | only into | only others |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in doc["cells"]:
        t = c.get("flow_timing") or {}
        if not t.get("epochs"):
            continue

        def f3(x: float | None) -> str:
            return "-" if x is None else f"{x:.3f}"

        into = set(c["detection"]["into_congested"])
        flagged = [set(b["flagged"]) for b in c["detection"]["batches"]]
        lines.append(f"| {c['p']} | {t['epochs']} | {f3(t['median_into_congested_ms'])} | "
                     f"{f3(t['median_other_ms'])} | {t['p90_over_median']:.2f} | "
                     f"{t['zero_time_flows']} of {t['flows']} | {len(flagged)} | "
                     f"{sum(1 for f in flagged if not f)} | "
                     f"{sum(1 for f in flagged if f and f <= into)} | "
                     f"{sum(1 for f in flagged if f and not f & into)} |")
    return "\n".join(lines) + "\n"


def replot(folder: Path) -> str:
    """Rewrite the table and the CDF from a finished run's folder (no GPU needed)."""
    doc = json.loads((folder / "gpu_closed_loop.json").read_text())
    for cell in doc["cells"]:
        path = folder / f"tuner_p{cell['p']}.json"
        if path.exists():
            cell["flow_timing"] = flow_timing(json.loads(path.read_text()), doc["congested"])
    text = markdown(doc)
    (folder / "gpu_closed_loop.md").write_text(text)
    plot_cdf(doc, folder / "fig11_gpu.png")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 experiments/gpu_closed_loop.py",
        description="REACT's closed loop on this host's GPUs under p copy streams into one "
                    "rank, beside NCCL's all_reduce; tuner cost, detection, Fig. 11 CDF.")
    parser.add_argument("--out", type=Path, default=Path("results") / "gpu_closed_loop",
                        help="folder for gpu_closed_loop.json/.md and fig11_gpu.png")
    parser.add_argument("--pattern", default="allreduce_double_binary_tree")
    parser.add_argument("--ranks", type=int, default=0, help="ranks (default: every GPU)")
    parser.add_argument("--p", type=int, nargs="+", default=[0, 1, 2], dest="ps")
    parser.add_argument("--congested", type=int, default=1, help="the congested rank")
    parser.add_argument("--epochs", type=int, default=600)
    parser.add_argument("--batch", type=int, default=6, help="the controller's batch (B)")
    parser.add_argument("--delay", type=int, default=5, help="apply delay in epochs")
    parser.add_argument("--message-bytes", type=float, default=100e6)
    parser.add_argument("--timeout-s", type=float, default=120.0)
    parser.add_argument("--stream-s", type=float, default=600.0,
                        help="upper bound on each copy stream's life")
    parser.add_argument("--stamp", choices=STAMPS, default="post",
                        help="where a flow group's ready event is recorded: before the host "
                             "posts it (post, default) or after the posting call (launch)")
    parser.add_argument("--graph", action="store_true",
                        help="RCollective posts each pattern as a CUDA graph (after one eager "
                             "epoch per pattern)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 60 epochs, p = 0, 2")
    parser.add_argument("--replot", type=Path, metavar="DIR",
                        help="no run: rewrite DIR's gpu_closed_loop.md and fig11_gpu.png from its "
                             "gpu_closed_loop.json and tuner_p*.json (on any machine)")
    args = parser.parse_args(argv)
    if args.replot is not None:
        if not (args.replot / "gpu_closed_loop.json").is_file():
            print(f"error: --replot {args.replot}: no gpu_closed_loop.json there",
                  file=sys.stderr)
            return 1
        print(replot(args.replot))
        return 0
    if args.quick:
        args.epochs, args.ps = 60, [0, 2]
    try:
        gpus = visible_gpus()
        check_args(args, gpus)
        doc = measure(args, gpus)
    except ReactError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_closed_loop.json").write_text(json.dumps(doc, indent=1))
    text = markdown(doc)
    (args.out / "gpu_closed_loop.md").write_text(text)
    plot_cdf(doc, args.out / "fig11_gpu.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
