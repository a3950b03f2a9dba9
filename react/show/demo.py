"""The paper's worked example (§4.3) told step by step, for ``react demo``.

:func:`narrate` runs each step on the simulator and yields paragraphs of plain text that quote the
run's own numbers (nothing in the story is hard-coded except the setting), and saves two pictures:
the tree before and after REACT's swap, and a timeline of the collective time per epoch with and
without REACT. It yields text instead of printing so that the CLI decides where text goes.

The story: 16 ranks on one switch run NCCL's dual binary tree AllReduce of 2 MB (α = 4 µs per
flow, 100 Gb/s, so β·s/2 = 80 µs); two long-lived external flows into rank 3 slow the reduce phase
from 576 µs to 656 µs; REACT's detection (Eq. 1) flags rank 3's inbound flows; among the viable
swaps of rank 3 in tree T1 the ones that lower its fan-in are preferred, and swapping 3 with 2
brings the reduce phase back to 576 µs. Then the controller runs in a closed loop on the full
AllReduce (the setting of ``tests/react/run/test_closed_loop.py``: 8 ranks, 20 MB).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from react.model.observation import EpochResult
from react.model.pattern import Pattern

if TYPE_CHECKING:
    from react.control.backend import JobRun
    from react.control.detect import CongestionReport
    from react.model.transforms import Swap

__all__ = ["narrate"]

RANKS = 16
MESSAGE_BYTES = 2e6
LATENCY_S = 2e-6  # per link: alpha = 4 us per flow on a star
EXTERNAL_FLOWS = 2
CONGESTED = 3
PARTNER = 2  # the paper's choice among the preferred ("green") partners
T1 = 1  # chunk graph of the second tree
BETA_HALF_US = MESSAGE_BYTES / 2 / 12.5e9 * 1e6  # one chunk (half the message) at 100 Gb/s

LOOP_RANKS = 8
LOOP_MESSAGE_BYTES = 20e6


def _reduce_phase(pattern: Pattern) -> Pattern:
    return pattern.with_flows(f for f in pattern.flows if f.op == "reduce")


def _run(pattern: Pattern, external: int, epochs: int) -> list[EpochResult]:
    from flowsim.network import Network
    from flowsim.topologies import star
    from flowsim.traffic import long_lived
    from react.backends.sim.engine import SimBackend

    net = Network(star(RANKS + 1, latency_s=LATENCY_S))
    for port in range(external):
        long_lived(net, f"h{RANKS}", f"h{CONGESTED}", port=port)
    backend = SimBackend(net, [f"h{i}" for i in range(RANKS)], MESSAGE_BYTES, connections=1)
    return backend.run_epochs(pattern, epochs)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} us"


def _closed_loop(react: bool, epochs: int):  # type: ignore[no-untyped-def]
    from flowsim.network import Network
    from flowsim.topologies import star
    from flowsim.traffic import long_lived
    from react.backends.sim.engine import SimBackend
    from react.control.controller import Controller, ControllerConfig
    from react.patterns import allreduce_double_binary_tree
    from react.run.driver import Job, run_jobs

    net = Network(star(2 * LOOP_RANKS))
    hosts = [f"h{i}" for i in range(LOOP_RANKS)]
    for port in range(EXTERNAL_FLOWS):
        long_lived(net, f"h{LOOP_RANKS}", hosts[CONGESTED], port=port)
    pattern = allreduce_double_binary_tree(LOOP_RANKS)
    controller = Controller(pattern, ControllerConfig(seed=0)) if react else None
    backend = SimBackend(net, hosts, LOOP_MESSAGE_BYTES, connections=1, seed=0)
    return run_jobs([Job("tree", backend, pattern, epochs, controller)])["tree"]


def story_pictures(paragraphs: list[str], out_dir: Path) -> dict[int, list[Path]]:
    """Which saved pictures illustrate which paragraph of :func:`narrate` (by its number):
    the TEN before and after the swap goes with "6. The result", the timeline with "7."."""
    wanted = {"6.": out_dir / "ten_swap.png", "7.": out_dir / "timeline.png"}
    found: dict[int, list[Path]] = {}
    for i, text in enumerate(paragraphs):
        picture = wanted.get(text.lstrip()[:2])
        if picture is not None and picture.exists():
            found.setdefault(i, []).append(picture)
    return found


def narrate(out_dir: Path, *, epochs: int = 60) -> Iterator[str]:
    """Run the worked example step by step, yielding one paragraph of narration per step.

    Each act is a helper of its own; this function is the story's table of contents and carries
    what one act hands the next (the runs, the detection report, the swap).

    Parameters
    ----------
    out_dir : Path
        Created if missing; receives ``ten_swap.png`` (if :mod:`react.show.draw` is available) and
        ``timeline.png``.
    epochs : int
        Epochs of each closed-loop run (with and without REACT).
    """
    from react.control.detect import detect_congestion
    from react.model.transforms import ChunkLocalSwap
    from react.patterns import allreduce_double_binary_tree

    out_dir.mkdir(parents=True, exist_ok=True)
    tree = allreduce_double_binary_tree(RANKS)
    reduce = _reduce_phase(tree)
    yield "REACT demo: the paper's worked example (section 4.3)\n\n" + _setting(tree, reduce)

    clean = _run(reduce, 0, 1)[0].collective_time_s
    congested_batch = _run(reduce, EXTERNAL_FLOWS, 6)
    congested = congested_batch[0].collective_time_s
    yield _no_congestion(clean)
    yield _congestion(congested)

    report = detect_congestion(reduce, congested_batch)
    yield _detection(report, len(congested_batch))

    swap = ChunkLocalSwap(T1, CONGESTED, PARTNER)
    swapped = swap.apply(tree)
    yield _choice(tree, swap, swapped, congested_batch)

    fixed = _run(_reduce_phase(swapped), EXTERNAL_FLOWS, 1)[0].collective_time_s
    yield _result(clean, congested, fixed)

    ten_note = _draw_ten(out_dir, tree, swapped, swap, report)
    timeline = out_dir / "timeline.png"
    yield _closed_loop_paragraph(timeline, epochs)
    yield (
        "Pictures:\n" + ten_note + "\n   - collective time per epoch, with and without REACT:\n"
        f"     {timeline}\n"
        "Next: 'react run experiments/scenarios/closed_loop_fat_tree.toml --compare' runs the "
        "same loop on a k=8 fat-tree with ECMP."
    )


def _setting(tree: Pattern, reduce: Pattern) -> str:
    """Act 1: the network, the collective, and rank 3's place in tree T1 (read off the tree)."""
    into = sorted(f.src for f in reduce.flows
                  if f.dst == CONGESTED and tree.chunk_graph_of_flow(f) == T1)
    onto = sorted(f.dst for f in reduce.flows
                  if f.src == CONGESTED and tree.chunk_graph_of_flow(f) == T1)
    return (
        f"1. The setting. {RANKS} ranks (hosts h0..h{RANKS - 1}) hang off one switch with "
        f"100 Gb/s links of {LATENCY_S * 1e6:g} us each, so every flow pays alpha = "
        f"{2 * LATENCY_S * 1e6:g} us of latency. They run NCCL's dual binary tree AllReduce of "
        f"{MESSAGE_BYTES / 1e6:g} MB: the message is cut in two chunks and each tree (T0, T1) "
        f"reduces and broadcasts one of them, {MESSAGE_BYTES / 2e6:g} MB, which takes "
        f"{BETA_HALF_US:.0f} us alone on a link. In T1, rank {CONGESTED} adds up what ranks "
        f"{' and '.join(map(str, into))} send it and passes the sum on to rank "
        f"{', '.join(map(str, onto))}."
    )


def _no_congestion(clean_s: float) -> str:
    """Act 2: the simulated reduce phase matches the paper's hand count."""
    return (
        f"2. No congestion. The reduce phase of both trees takes {_us(clean_s)} on the simulator: "
        f"4 steps of latency plus fan-ins 2, 2, 2, 1 sharing a link, 4 x 4 us + (2+2+2+1) x "
        f"{BETA_HALF_US:.0f} us = 576 us, as the paper computes."
    )


def _congestion(congested_s: float) -> str:
    """Act 3: what the external flows into rank 3 cost the reduce phase."""
    return (
        f"3. Congestion. Another tenant now sends {EXTERNAL_FLOWS} long-lived flows from "
        f"h{RANKS} into rank {CONGESTED}'s host (checkpoint traffic, say). Rank {CONGESTED}'s "
        f"downlink is shared by its two tree children and the two external flows, so that step "
        f"takes 4 x {BETA_HALF_US:.0f} us instead of 2 x: the reduce phase now takes "
        f"{_us(congested_s)} (paper: 656 us). The job only sees a slower AllReduce."
    )


def _detection(report: CongestionReport, batch: int) -> str:
    """Act 4: the flows Eq. 1 flags, quoted from the detector's own report."""
    quoted = "\n".join(f"   - {c.describe()}" for c in report.flows) or "   - nothing"
    return (
        f"4. What REACT detects. After a batch of {batch} epochs it compares each "
        f"flow's throughput with the flows of the same fan-in (Eq. 1: p90 below 80% of their "
        f"mean means steady congestion). It reports:\n{quoted}\n"
        f"   Ranks whose every inbound flow is steadily congested: "
        f"{sorted(report.steady_inbound) or 'none'}."
    )


def _choice(tree: Pattern, swap: Swap, swapped: Pattern, batch: list[EpochResult]) -> str:
    """Act 5: the viable partners, the preferred ones, and the model's estimate for the swap."""
    from react.model.swapspace import SwapSpace

    space = SwapSpace(tree)
    viable = space.swaps_for(CONGESTED, "chunk_local", T1)
    green = space.preferred(CONGESTED, "in", "chunk_local", T1)
    green_partners = sorted(s.y for s in green)
    yellow = sorted(s.y for s in viable if s not in green)
    before_est, after_est = _estimated_reduce_s(tree, swapped, batch)
    return (
        f"5. Which swap, and why. REACT may move rank {CONGESTED} to another position of T1 by "
        f"swapping it with a rank that keeps the AllReduce correct. Here it is a chunk-local "
        f"swap: the two ranks exchange places in all of T1 (its reduce and its broadcast), "
        f"the paper's Fig. 1 (a position swap would exchange them in a window of steps only, "
        f"e.g. T1's reduce phase; the verifier checks every candidate). Viable partners: "
        f"{', '.join(map(str, sorted(s.y for s in viable)))}. It prefers those that lower rank "
        f"{CONGESTED}'s fan-in (the paper's green nodes): "
        f"{', '.join(map(str, green_partners))}; the others ({', '.join(map(str, yellow))}) "
        f"would leave it receiving as much. Like the paper we take rank {PARTNER}: "
        f"{swap.describe()}. From the observed flow times alone, the model of section 5.4.1 "
        f"estimates the reduce phase at {_us(before_est)} before and {_us(after_est)} after, "
        f"well over the 5% REACT requires to try a change."
    )


def _estimated_reduce_s(
    tree: Pattern, swapped: Pattern, batch: list[EpochResult]
) -> tuple[float, float]:
    """The reduce phase's critical path before and after the swap, from the flow times observed
    in ``batch`` only (§5.4.1), as the controller would estimate it before trying the swap."""
    from react.control.estimate import FctHistory
    from react.model.critical import critical_path

    reduce = _reduce_phase(tree)
    history = FctHistory(60)
    history.add(reduce, batch)
    model = history.model()
    before = critical_path(reduce, model.pattern_fcts(reduce, MESSAGE_BYTES)).length_s
    after_reduce = _reduce_phase(swapped)
    after = critical_path(after_reduce, model.pattern_fcts(after_reduce, MESSAGE_BYTES)).length_s
    return before, after


def _result(clean_s: float, congested_s: float, fixed_s: float) -> str:
    """Act 6: the swapped reduce phase under the same congestion."""
    return (
        f"6. The result. With the swap, rank {CONGESTED} is a leaf of T1 and receives nothing "
        f"in the reduce phase: it takes {_us(fixed_s)} despite the congestion "
        f"({_us(clean_s)} -> {_us(congested_s)} -> {_us(fixed_s)}; "
        f"{congested_s / fixed_s - 1:+.1%} throughput, paper: 14%). Nobody changed the network."
    )


def _draw_ten(
    out_dir: Path, tree: Pattern, swapped: Pattern, swap: Swap, report: CongestionReport
) -> str:
    """Save the TEN before and after the swap; the line of the closing list that names it (or
    says why it was skipped: the drawing module is optional in an installation)."""
    try:
        from react.show.draw import draw_swap
    except ImportError:
        return "   - (TEN picture skipped: react.show.draw is not available in this installation)"
    ten = out_dir / "ten_swap.png"
    # the flows step 4 found congested, and their rank, in red on the "before" side
    hot = [c.flow for c in report.flows]
    draw_swap(tree, swapped, swap, path=ten,
              highlight=hot + sorted({f.dst for f in hot} | {CONGESTED}))
    return f"   - the TEN before and after the swap:\n     {ten}"


def _closed_loop_paragraph(timeline: Path, epochs: int) -> str:
    """Act 7: the controller in a closed loop on the full AllReduce, with and without REACT;
    saves the timeline of both runs to ``timeline``."""
    from react.run.metrics import plot_timeline

    off = _closed_loop(False, epochs)
    on = _closed_loop(True, epochs)
    warmup = 25 if epochs > 25 else 0
    mean_off = float(np.mean(off.times_s()[warmup:]))
    mean_on = float(np.mean(on.times_s()[warmup:]))
    plot_timeline(timeline, off=off, on=on,
                  title=f"dual binary tree AllReduce, {LOOP_RANKS} ranks, "
                        f"{LOOP_MESSAGE_BYTES / 1e6:g} MB, p={EXTERNAL_FLOWS} into rank "
                        f"{CONGESTED}")
    return (
        f"7. The closed loop. REACT runs after every batch of 6 epochs, on the whole AllReduce "
        f"(reduce and broadcast), here {LOOP_RANKS} ranks and {LOOP_MESSAGE_BYTES / 1e6:g} MB "
        f"with the same {EXTERNAL_FLOWS} external flows into rank {CONGESTED}, for {epochs} "
        f"epochs. On the full AllReduce it prefers the finest move, a position swap: rank "
        f"{CONGESTED} leaves its aggregating position in T1's reduce phase only, which is the "
        f"move of step 5 restricted to the steps where it matters.\n{_first_try(on)}\n"
        f"   Mean collective time over epochs {warmup}-{epochs - 1}: {_us(mean_off)} without "
        f"REACT, {_us(mean_on)} with it ({mean_off / mean_on - 1:+.1%} algorithm bandwidth)."
    )


def _first_try(on: JobRun) -> str:
    """The first swap the closed loop tried, why, and whether the next batch kept it."""
    tried = next((d for d in on.decisions if d.action == "try"), None)
    if tried is None:
        return "   REACT found nothing worth trying in this run."
    first = (f"   Batch {tried.batch}: it tries "
             f"{'; '.join(s.describe() for s in tried.swaps)} "
             f"(estimated {tried.estimated_gain:+.1%}). Why: {tried.reason}.")
    verdict = next((d for d in on.decisions[tried.batch + 1:]
                    if d.observed_gain is not None), None)
    if verdict is not None:
        kept = "kept it" if verdict.action in ("try", "keep", "settled") else "reverted it"
        first += f"\n   Next batch it observed {verdict.observed_gain:+.1%} and {kept}."
    return first
