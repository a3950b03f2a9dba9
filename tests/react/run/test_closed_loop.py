"""REACT in a closed loop on flowsim: the controller must measurably evade congestion.

Setting (issue 4): 8-rank dual-binary-tree AllReduce, 20 MB, 100 epochs, p long-lived background
flows into rank 3 (which aggregates 1 and 5 in tree T1), mean algorithm bandwidth over epochs
25-100, REACT against the same run without it.

Why about 20% on the star: each tree carries 10 MB, 800 µs alone at 100 Gb/s (+2 µs latency);
without congestion the six steps take 1602+1602+802+802+1602+1602 = 8012 µs. With p = 2, rank 3's
downlink is shared with two endless flows: its T1 aggregation (1->3, 5->3) and both broadcasts it
receives slow down, and the collective takes 11744 µs (simulated). Swapping 3 and 2 in T1 leaves 3
receiving only in the last step (1->3 and 2->3 sharing with the two external flows: 3202 µs), so
1602+1602+802+802+1602+3202 = 9612 µs: 11744 / 9612 = 1.22, about +22% algorithm bandwidth.
"""

import numpy as np
import pytest

from flowsim.network import Network
from flowsim.topologies import fat_tree, leaf_spine, star
from flowsim.traffic import long_lived
from react.backends.sim.engine import SimBackend
from react.control.controller import Controller, ControllerConfig
from react.model.transforms import ChunkLocalSwap
from react.patterns import (
    allgather_recursive_doubling,
    allreduce_double_binary_tree,
    allreduce_ring,
)
from react.run.driver import Job, run_jobs

MESSAGE = 20e6


def tree_job(react, p, topology="star", epochs=100, pattern=None):
    if topology == "star":
        net = Network(star(16))
        hosts, external, connections = [f"h{i}" for i in range(8)], "h8", 1
    else:  # k=8 fat-tree, one rank per pod, 4-way ECMP re-hashed every epoch
        net = Network(fat_tree(8), seed=1)
        hosts, external, connections = [f"h{16 * i}" for i in range(8)], "h100", 4
    for port in range(p):
        long_lived(net, external, hosts[3], port=port)
    pattern = pattern or allreduce_double_binary_tree(8)
    controller = Controller(pattern, ControllerConfig(seed=0)) if react else None
    backend = SimBackend(net, hosts, MESSAGE, connections=connections, seed=0)
    return run_jobs([Job("tree", backend, pattern, epochs, controller)])["tree"]


def mean_algbw(run, first=25):
    return float(np.mean([r.algorithm_bandwidth_bps for r in run.results[first:]]))


def test_single_swap_worth_about_20_percent_on_star():
    tree = allreduce_double_binary_tree(8)
    before = tree_job(False, 2, epochs=1).results[0].collective_time_s
    after = tree_job(False, 2, epochs=1, pattern=ChunkLocalSwap(1, 3, 2).apply(tree))
    assert before == pytest.approx(11744e-6, rel=1e-9)
    assert after.results[0].collective_time_s == pytest.approx(9612e-6, rel=1e-9)


@pytest.mark.parametrize("topology", ["star", "fat_tree"])
def test_react_gains_at_least_15_percent_under_p2(topology):
    base = mean_algbw(tree_job(False, 2, topology))
    react = tree_job(True, 2, topology)
    assert mean_algbw(react) >= 1.15 * base
    assert any(d.action == "try" for d in react.decisions)
    # every pattern the job ran is one the verifier accepts
    from react.model.verify import verify
    for pattern in {p.flows: p for p in react.patterns}.values():
        verify(pattern)


# §7.2's bound, where it can bite: every pattern change costs one epoch of connection set-up
# (the simulator's switch_cost_epochs) and every flow time carries 2% measurement noise. A
# controller that tries a random viable swap every other batch (the "random" baseline) pays
# about 16 set-ups in 100 epochs: 12 of them in the 75 measured epochs, each halving one epoch's
# algorithm bandwidth, 12 x 0.5 / 75 = 8% (the control test); REACT must stay within 4%.
P0_CASES = [
    pytest.param("allreduce_double_binary_tree", 20e6, "star", id="tree-20MB-star"),
    pytest.param("allreduce_double_binary_tree", 20e6, "fat_tree", id="tree-20MB-fat-tree",
                 marks=pytest.mark.slow),
    pytest.param("allgather_recursive_doubling", 1e5, "star", id="rd-100KB-star"),
    pytest.param("allgather_recursive_doubling", 1e5, "fat_tree", id="rd-100KB-fat-tree",
                 marks=pytest.mark.slow),
]


def p0_cost(collective, message, topology, controller):
    """1 - REACT-on over REACT-off mean algorithm bandwidth (epochs 25-100), and the on run."""
    from react.run.scenario import parse_scenario
    from react.run.scenario_runs import compare_scenario

    fabric = ({"name": "star", "n": 16} if topology == "star" else {"name": "fat_tree", "k": 8})
    scenario = parse_scenario({
        "seed": 0, "connections": 1 if topology == "star" else 4, "topology": fabric,
        "sim": {"switch_cost_epochs": 1.0, "noise_sigma": 0.02},
        "jobs": [{"name": "j", "collective": collective, "ranks": 8, "message_bytes": message,
                  "placement": "first" if topology == "star" else "spread", "epochs": 100,
                  "react": True, "controller": controller}],
    })
    runs = compare_scenario(scenario)
    off, on = runs.off["j"], runs.on["j"]
    return 1 - mean_algbw(on) / mean_algbw(off), on


@pytest.mark.parametrize(("collective", "message", "topology"), P0_CASES)
def test_p0_switch_cost_and_noise_make_needless_changes_cost_more_than_4_percent(
        collective, message, topology):
    cost, run = p0_cost(collective, message, topology, "random")
    changes = sum(p != q for p, q in zip(run.patterns, run.patterns[1:], strict=False))
    assert changes >= 12 and len(run.info["switch_cost_s"]) == changes
    assert cost > 0.04


@pytest.mark.parametrize(("collective", "message", "topology"), P0_CASES)
def test_react_costs_at_most_4_percent_at_p0_with_switch_cost_and_noise(
        collective, message, topology):
    cost, run = p0_cost(collective, message, topology, "react")
    # the noise is on: one flow's time varies from epoch to epoch although nothing else does
    assert len({r.flows[0].fct_s for r in run.results}) > 1
    assert cost <= 0.04


def test_seeded_run_is_identical_twice():
    first = tree_job(True, 2, "fat_tree", epochs=40)
    second = tree_job(True, 2, "fat_tree", epochs=40)
    assert first.times_s() == second.times_s()
    assert [(d.action, d.swaps, d.reason) for d in first.decisions] == [
        (d.action, d.swaps, d.reason) for d in second.decisions
    ]


@pytest.mark.slow
def test_ring_global_permutation_evades_a_degraded_spine_link():
    # 4 leaves x 2 spines x 4 hosts, ranks alternate leaves; spine0 -> leaf1 degraded to 30 Gb/s.
    # With one connection per pair the ring's leaf-crossing flows keep their hashed spine, so
    # only a global permutation (new src/dst pairs, new hashes) can move them off it.
    def run(react):
        topo = leaf_spine(leaves=4, spines=2, hosts_per_leaf=4)
        net = Network(topo)
        net.set_link_capacity(topo.link("spine0", "leaf1").id, 30e9)
        hosts = [f"h{4 * i}" for i in range(4)] + [f"h{4 * i + 1}" for i in range(4)]
        pattern = allreduce_ring(8)
        controller = Controller(pattern, ControllerConfig(seed=0)) if react else None
        backend = SimBackend(net, hosts, MESSAGE, connections=1, seed=0)
        return run_jobs([Job("ring", backend, pattern, 60, controller)])["ring"]

    base, react = run(False), run(True)
    assert mean_algbw(react) >= 1.15 * mean_algbw(base)
    kept = [s for d in react.decisions for s in d.swaps]
    assert kept and all(s.kind == "global" for s in kept)


@pytest.mark.parametrize(("concurrency", "slack"), [("step", 0.0), ("checked", 0.0),
                                                     ("schedule", 0.03)])
def test_recursive_doubling_moves_the_big_late_step_off_congested_spines(concurrency, slack):
    # 2 leaves x 2 spines; ranks 0-3 under leaf0, 4-7 under leaf1, so RD's last step (r <-> r^4,
    # half the message each way) crosses the spines, where p=2 long-lived flows per host pair run
    # between other hosts of the two leaves. Global permutations that pair r with r^4 inside a
    # leaf move the big late exchange off the congested spine links; only the small first step
    # then crosses them. The bold early trials of the step degrees teach the estimate the pairs
    # that pay later; "checked" keeps them (the overlap estimate vetoes none here), and
    # "schedule" reaches them when its beam may go through slightly worse steps
    # (search_slack; without it the beam stops after one level and REACT reaches about half
    # the gain, docs/deviations.md).
    def run(react):
        topo = leaf_spine(leaves=2, spines=2, hosts_per_leaf=8)
        net = Network(topo)
        for port in range(2):
            for a, b in (("h4", "h12"), ("h5", "h13"), ("h14", "h6"), ("h15", "h7")):
                long_lived(net, a, b, port=port)
        hosts = [f"h{i}" for i in range(4)] + [f"h{8 + i}" for i in range(4)]
        pattern = allgather_recursive_doubling(8)
        config = ControllerConfig(seed=0, concurrency=concurrency, search_slack=slack)
        controller = Controller(pattern, config) if react else None
        backend = SimBackend(net, hosts, MESSAGE, connections=4, seed=0)
        return run_jobs([Job("rd", backend, pattern, 100, controller)])["rd"]

    base, react = run(False), run(True)
    assert mean_algbw(react) >= 1.15 * mean_algbw(base)
