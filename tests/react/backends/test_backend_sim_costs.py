"""The simulator's switching cost and measurement noise (both off by default).

Star without latency, 100 Gb/s: 1 MB alone takes 80 µs, so the two-flow chain below takes 160 µs
per epoch whichever way it is labelled.
"""

import math

import numpy as np
import pytest

from flowsim.network import Network
from flowsim.topologies import star
from flowsim.traffic import long_lived
from react.backends.sim.engine import SimBackend
from react.control.controller import ControllerConfig, Decision
from react.model.critical import critical_path
from react.model.errors import ReactError
from react.model.execution import flow_dependencies
from react.model.pattern import Chunk, Flow, Pattern
from react.patterns import allreduce_double_binary_tree
from react.run.driver import Job, run_jobs
from react.run.scenario import parse_scenario
from react.run.scenario_runs import run_scenario


def chain(a=1, b=2):
    # Rank 0 sends to a at step 1, a forwards to b at step 2: a broadcast along a path.
    return Pattern("broadcast", (0, 1, 2), (Chunk(0, 1.0),),
                   (Flow(1, 0, a, (0,)), Flow(2, a, b, (0,))), root=0)


def backend(**kw):
    return SimBackend(Network(star(4, latency_s=0.0)), ["h0", "h1", "h2"], 1e6, connections=1,
                      **kw)


def times_us(results):
    return [r.collective_time_s * 1e6 for r in results]


# -- switching cost ---------------------------------------------------------------------------
def test_switch_cost_in_seconds_is_charged_once_per_change():
    # A A | B B | A' A: A' is a new object equal to A, a change from B; the A after it is not.
    # Each change's first epoch starts with 1000 µs of set-up: 160 -> 1160 µs.
    b = backend(switch_cost_s=1e-3)
    a, other = chain(1, 2), chain(2, 1)
    results = (b.run_epochs(a, 2) + b.run_epochs(other, 2) + b.run_epochs(chain(1, 2), 1)
               + b.run_epochs(a, 1))
    assert times_us(results) == pytest.approx([160, 160, 1160, 160, 1160, 160], rel=1e-9)
    assert results[2].flows[0].start_s == pytest.approx(1e-3, rel=1e-12)
    assert results[2].flows[0].fct_s == pytest.approx(80e-6, rel=1e-9)  # FCTs are not charged
    assert b.switch_costs_s == [1e-3, 1e-3]


def test_switch_cost_in_epochs_scales_the_previous_epoch():
    # 0.5 epochs of 160 µs = 80 µs, plus 20 µs in seconds: 160 + 100 = 260 µs.
    b = backend(switch_cost_s=20e-6, switch_cost_epochs=0.5)
    results = b.run_epochs(chain(1, 2), 2) + b.run_epochs(chain(2, 1), 2)
    assert times_us(results) == pytest.approx([160, 160, 260, 160], rel=1e-9)
    assert b.switch_costs_s == pytest.approx([100e-6], rel=1e-9)


class Flip:
    """A controller that switches between two patterns after every batch, recording its input."""

    def __init__(self, pattern, other):
        self.pattern, self.other = pattern, other
        self.config = ControllerConfig(batch_epochs=2)
        self.seen = []

    def observe(self, batch):
        self.seen.append([r.collective_time_s * 1e6 for r in batch])
        self.pattern, self.other = self.other, self.pattern
        return Decision(len(self.seen), "try", self.pattern, "flip")


def test_switch_cost_reaches_the_controller_and_the_record():
    # Batches of 2; every batch after the first starts on a new pattern, so its first epoch is
    # charged: the controller sees [1160, 160] and the job's record keeps it.
    a = chain(1, 2)
    controller = Flip(a, chain(2, 1))
    run = run_jobs([Job("j", backend(switch_cost_s=1e-3), a, 8, controller)])["j"]
    assert times_us(run.results) == pytest.approx([160, 160] + [1160, 160] * 3, rel=1e-9)
    assert [t for batch in controller.seen for t in batch] == pytest.approx(
        [160, 160] + [1160, 160] * 3, rel=1e-9)
    changes = sum(p != q for p, q in zip(run.patterns, run.patterns[1:], strict=False))
    assert changes == 3 and run.info["switch_cost_s"] == [1e-3] * 3


def test_no_switch_cost_by_default():
    a = chain(1, 2)
    run = run_jobs([Job("j", backend(), a, 8, Flip(a, chain(2, 1)))])["j"]
    assert times_us(run.results) == pytest.approx([160] * 8, rel=1e-9)
    assert run.info == {}


# -- measurement noise ------------------------------------------------------------------------
def tree_run(sigma, *, epochs=20, noise_seed=None, execution="algorithm2", background=True):
    # 8-rank dual tree on a star, one long-lived flow into rank 3 so the flows' times differ.
    net = Network(star(9, latency_s=1e-6))
    if background:
        long_lived(net, "h8", "h3")
    b = SimBackend(net, [f"h{i}" for i in range(8)], 4e6, connections=1, noise_sigma=sigma,
                   noise_seed=noise_seed, execution=execution)
    tree = allreduce_double_binary_tree(8)
    return tree, b.run_epochs(tree, epochs), net


def flat(results):
    return [(r.collective_time_s, [(t.start_s, t.end_s) for t in r.flows]) for r in results]


def test_noise_repeats_bit_for_bit_and_follows_its_seed():
    _, first, _ = tree_run(0.02)
    _, again, _ = tree_run(0.02)
    _, other, _ = tree_run(0.02, noise_seed=1)
    assert flat(first) == flat(again)
    assert flat(first) != flat(other)


def test_noise_leaves_the_network_and_the_ports_alone():
    _, _, quiet = tree_run(0.0)
    _, _, noisy = tree_run(0.05)
    assert [(r.start_s, r.end_s, r.port) for r in quiet.records] == [
        (r.start_s, r.end_s, r.port) for r in noisy.records]


@pytest.mark.parametrize("execution", ["algorithm2", "dataflow"])
def test_noisy_epochs_stay_consistent(execution):
    # Each flow's time is its noiseless time times 1 + sigma z with |z| <= 3; each flow starts
    # when the last flow it waits for ends (0 if none); the collective time is the last end,
    # which is the critical path of the reported times.
    tree, quiet, _ = tree_run(0.0, execution=execution)
    _, noisy, _ = tree_run(0.05, execution=execution)
    waits = flow_dependencies(tree, execution)
    ratios = []
    for q, r in zip(quiet, noisy, strict=True):
        ends = [t.end_s for t in r.flows]
        for i, t in enumerate(r.flows):
            assert t.start_s == pytest.approx(max((ends[j] for j in waits[i]), default=0.0),
                                              abs=1e-12)
            ratios.append(t.fct_s / q.flows[i].fct_s - 1)
        assert r.collective_time_s == max(ends)
        assert critical_path(tree, [t.fct_s for t in r.flows], execution).length_s == (
            pytest.approx(r.collective_time_s, rel=1e-12))
    assert max(abs(x) for x in ratios) <= 3 * 0.05 + 1e-9
    assert np.std(ratios) > 0.02


def test_noise_statistics_match_sigma():
    # N relative perturbations (noisy FCT / noiseless FCT - 1) of independent draws sigma z,
    # z standard normal clipped to +-3: mean 0 (symmetric), std sigma * sqrt(1 + 16 Phi(-3)
    # - 6 phi(3)) = 0.9975 sigma. Tolerances: 4 standard errors, sigma / sqrt(N) for the mean
    # and about sigma / sqrt(2N) for the standard deviation.
    sigma, epochs = 0.05, 100
    _, quiet, _ = tree_run(0.0, epochs=1, background=False)
    _, noisy, _ = tree_run(sigma, epochs=epochs, background=False)
    base = [t.fct_s for t in quiet[0].flows]
    x = np.array([t.fct_s / base[i] - 1 for r in noisy for i, t in enumerate(r.flows)])
    n = len(x)
    phi3 = math.exp(-4.5) / math.sqrt(2 * math.pi)
    cdf_minus3 = 0.5 * math.erfc(3 / math.sqrt(2))
    std = sigma * math.sqrt(1 + 16 * cdf_minus3 - 6 * phi3)
    assert abs(x.mean()) <= 4 * sigma / math.sqrt(n)
    assert abs(x.std() - std) <= 4 * sigma / math.sqrt(2 * n)


def test_noise_is_seeded_from_the_scenario():
    def times(seed, sigma=0.02):
        data = {"seed": seed, "connections": 1, "topology": {"name": "star", "n": 4},
                "sim": {"noise_sigma": sigma},
                "jobs": [{"name": "j", "collective": "allreduce_ring", "ranks": 4,
                          "message_bytes": 1e6, "epochs": 5}]}
        return run_scenario(parse_scenario(data))["j"].times_s()

    assert times(0) == times(0)
    assert times(0) != times(1)
    assert times(0, 0.0) == times(1, 0.0)  # on a star the seed changes nothing else


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"noise_sigma": 0.31}, r"noise_sigma must be a number in \[0, 0.3\], got 0.31"),
        ({"noise_sigma": -0.01}, "noise_sigma"),
        ({"noise_sigma": True}, "noise_sigma"),
        ({"switch_cost_s": -1.0}, r"switch_cost_s must be a non-negative number, got -1.0"),
        ({"switch_cost_s": math.inf}, "switch_cost_s"),
        ({"switch_cost_epochs": math.nan}, "switch_cost_epochs"),
    ],
)
def test_bad_costs_are_named(kwargs, message):
    with pytest.raises(ReactError, match=message):
        backend(**kwargs)
