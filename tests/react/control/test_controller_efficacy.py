"""What the controller must achieve in closed loops (issue 10), against independent truths.

* The best single swap, found by running every viable swap of the pattern as a fixed pattern
  (a brute force over the swap space that never consults the controller), bounds what one
  exploration can reach; REACT must reach most of it and never lose.
* Under stationary congestion REACT must settle: no swap tried more than twice in 1,000 epochs,
  and pattern changes within twice the paper's Table 2 rate (33-41 per 5,000 epochs).
* Without background traffic nothing is congested: no generator, no message size, star or
  fat-tree, with or without 2% measurement noise, may make REACT flag a flow.
"""

from collections import Counter

import numpy as np
import pytest

from flowsim.network import Network
from flowsim.topologies import star
from flowsim.traffic import long_lived
from react.backends.sim.engine import SimBackend
from react.control.controller import Controller, ControllerConfig
from react.model.swapspace import SwapSpace
from react.patterns import GENERATORS, allreduce_double_binary_tree
from react.run.driver import Job, run_jobs
from react.run.scenario import parse_scenario
from react.run.scenario_runs import open_jobs

MESSAGE = 20e6


def star_run(pattern, into, p, epochs, react, **config):
    net = Network(star(16))
    hosts = [f"h{i}" for i in range(8)]
    for port in range(p):
        long_lived(net, "h8", hosts[into], port=port)
    controller = Controller(pattern, ControllerConfig(seed=0, **config)) if react else None
    backend = SimBackend(net, hosts, MESSAGE, connections=1, seed=0)
    return run_jobs([Job("t", backend, pattern, epochs, controller)])["t"]


def mean_time(run, first=0):
    return float(np.mean([r.collective_time_s for r in run.results[first:]]))


def best_single_swap_time(pattern, into, p):
    """The fastest pattern one viable swap reaches, each run as a fixed pattern (brute force)."""
    best = mean_time(star_run(pattern, into, p, 2, False), 1)
    space = SwapSpace(pattern)
    for rank in pattern.ranks:
        for swap in space.swaps_for(rank):
            if swap.x < swap.y:
                best = min(best, mean_time(star_run(swap.apply(pattern), into, p, 2, False), 1))
    return best


@pytest.mark.parametrize("into", [3, 5])
def test_react_reaches_the_best_single_swap_under_p2(into):
    # Star, 8-rank tree, p=2 into one rank: the star is deterministic, so two epochs time a
    # fixed pattern exactly. Over its last 50 of 100 epochs REACT must reach at least 70% of
    # the best single swap's gain (it may do better by combining swaps), and never be slower.
    tree = allreduce_double_binary_tree(8)
    base = mean_time(star_run(tree, into, 2, 2, False), 1)
    best = best_single_swap_time(tree, into, 2)
    assert best < base / 1.05  # there is something to find
    react = star_run(tree, into, 2, 100, True)
    assert base / mean_time(react, 50) - 1 >= 0.7 * (base / best - 1)
    assert mean_time(react) <= base


@pytest.mark.parametrize("into", range(8))
def test_react_never_loses_at_p1(into):
    # One flow into any of the 8 ranks: whatever REACT tries, it must not end more than 1%
    # below no-REACT (epochs 25-100, its trials included).
    tree = allreduce_double_binary_tree(8)
    base = star_run(tree, into, 1, 100, False)
    react = star_run(tree, into, 1, 100, True)
    assert mean_time(react, 25) <= mean_time(base, 25) * 1.01


def degraded_uplink_run(react, concurrency):
    # Fig. 8's scenario (1 link at 30 Gb/s, seed 3): the k=8 fat-tree, one rank per pod, 4 ECMP
    # connections per pair, rank 7's host uplink degraded to 30 Gb/s.
    doc = {"name": "degraded", "seed": 3, "connections": 4,
           "topology": {"name": "fat_tree", "k": 8},
           "jobs": [{"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": 8,
                     "placement": "spread", "message_bytes": MESSAGE, "epochs": 100,
                     "react": {"enabled": react, "concurrency": concurrency}}],
           "failures": [{"link": "h112->edge28", "capacity_bps": 30e9, "at_s": 0.0}]}
    with open_jobs(parse_scenario(doc)) as jobs:
        return run_jobs(jobs)["tree"]


@pytest.mark.parametrize("concurrency", ["schedule", "checked"])
def test_overlap_sharing_does_not_lose_on_a_degraded_uplink(concurrency):
    # The swaps that look good at the step's degrees make rank 7 send two flows of different
    # steps at once over its 30 Gb/s uplink (each then gets 15); priced at their overlap in
    # time, and the link read as degraded rather than shared, they are not tried ("checked":
    # found with the step degrees, vetoed by the overlap estimate once a failed trial has shown
    # the link at two sharings), and REACT ends within 1% of no-REACT (epochs 25-99). With
    # concurrency = "step" it ends 2.3% below (docs/results/fig8.md).
    base = degraded_uplink_run(False, concurrency)
    react = degraded_uplink_run(True, concurrency)
    assert mean_time(react, 25) <= mean_time(base, 25) * 1.01


@pytest.mark.slow
def test_react_reaches_most_of_the_best_single_swaps_over_all_ranks():
    # Over the 8 possible congested ranks at p=2, REACT's mean gain (last 50 epochs) is at least
    # 80% of the best single swaps' mean gain.
    tree = allreduce_double_binary_tree(8)
    react_gains, best_gains = [], []
    for into in range(8):
        base = mean_time(star_run(tree, into, 2, 2, False), 1)
        best_gains.append(base / best_single_swap_time(tree, into, 2) - 1)
        react_gains.append(base / mean_time(star_run(tree, into, 2, 100, True), 50) - 1)
    assert np.mean(react_gains) >= 0.8 * np.mean(best_gains)


def test_stationary_congestion_settles():
    # 1,000 epochs, p=2 into rank 0 (the case that used to retry 13 swaps 65 times): no swap is
    # tried more than twice, and the change rate is within 2x the paper's (41 per 5,000 epochs,
    # so at most 82 / 5 = 16 per 1,000).
    tree = allreduce_double_binary_tree(8)
    react = star_run(tree, 0, 2, 1000, True)
    tries = Counter(s for d in react.decisions if d.action == "try" for s in d.swaps)
    assert max(tries.values(), default=0) <= 2
    patterns = react.patterns
    changes = sum(a.flows != b.flows for a, b in zip(patterns, patterns[1:], strict=False))
    assert changes <= 16
    assert react.decisions[-1].action == "settled"
    base = star_run(tree, 0, 2, 1000, False)
    assert mean_time(react) <= mean_time(base) * 1.01


def _no_background_scenario(generator, message, topology, noise):
    fabric = {"name": "star", "n": 8} if topology == "star" else {"name": "fat_tree", "k": 8}
    placement = "first" if topology == "star" else "spread"
    return parse_scenario({
        "seed": 3, "connections": 4, "topology": fabric, "sim": {"noise_sigma": noise},
        "jobs": [{"name": "j", "collective": generator, "ranks": 8, "message_bytes": message,
                  "placement": placement, "epochs": 100, "react": True}],
    })


FALSE_POSITIVE_CASES = [
    pytest.param(g, m, t, noise, id=f"{g}-{m:g}B-{t}-noise{noise}",
                 marks=() if (t, noise) == ("star", 0.02) else pytest.mark.slow)
    for g in GENERATORS for m in (1e5, 2e6, 20e6) for t in ("star", "fat_tree")
    for noise in (0.0, 0.02)
]


@pytest.mark.parametrize(("generator", "message", "topology", "noise"), FALSE_POSITIVE_CASES)
def test_no_false_positive_without_background(generator, message, topology, noise):
    # Default run: the star with 2% noise for every generator and size; the rest is `slow`.
    with open_jobs(_no_background_scenario(generator, message, topology, noise)) as jobs:
        run = run_jobs(jobs)["j"]
    flagged = [d.reason for d in run.decisions if "congested flow" in d.reason]
    assert not flagged, flagged[0]
    assert all(p.flows == run.patterns[0].flows for p in run.patterns)
