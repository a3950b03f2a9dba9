"""The flowsim backend: execution rule, pipelining, several jobs, delays, bad input."""

import pytest

from flowsim.network import Network
from flowsim.topologies import star
from flowsim.traffic import long_lived
from react.backends.sim.engine import SimBackend
from react.control.backend import Backend
from react.control.controller import Controller, ControllerConfig
from react.model.errors import ReactError
from react.model.pattern import Chunk, Flow, Pattern
from react.patterns import allreduce_double_binary_tree
from react.run.driver import Job, run_jobs


def chain():
    # 0 -> 1 at step 1, then 1 -> 2 at step 2, one chunk: a broadcast from 0 along a path.
    return Pattern("broadcast", (0, 1, 2), (Chunk(0, 1.0),),
                   (Flow(1, 0, 1, (0,)), Flow(2, 1, 2, (0,))), root=0)


def backend(n_hosts=4, **kw):
    net = Network(star(n_hosts, latency_s=0.0))
    return SimBackend(net, [f"h{i}" for i in range(3)], 1e6, connections=1, **kw)


def test_sim_backend_is_a_backend():
    assert isinstance(backend(), Backend)


def test_execution_rule_chains_flows():
    # 1 MB at 12.5 GB/s = 80 µs per flow; the second starts when the first ends: 160 µs.
    (result,) = backend().run_epochs(chain(), 1)
    assert result.collective_time_s == pytest.approx(160e-6)
    first, second = result.flows
    assert second.start_s == pytest.approx(first.end_s)
    assert result.algorithm_bandwidth_bps == pytest.approx(8e6 / 160e-6)


def test_pipelining_overlaps_steps():
    # Two slices of 0.5 MB (40 µs each): slice 0 of 0->1 [0, 40]; then slice 1 of 0->1 and
    # slice 0 of 1->2 in parallel on disjoint links [40, 80]; slice 1 of 1->2 [80, 120].
    (result,) = backend(slices=2).run_epochs(chain(), 1)
    assert result.collective_time_s == pytest.approx(120e-6)
    assert result.flows[1].start_s == pytest.approx(40e-6)


def test_epochs_run_back_to_back_with_compute_gap():
    results = backend(compute_gap_s=1e-3).run_epochs(chain(), 2)
    assert [r.epoch for r in results] == [0, 1]
    assert all(r.collective_time_s == pytest.approx(160e-6) for r in results)


def test_two_jobs_share_the_network():
    # Job A sends h0 -> h2, job B sends h1 -> h2 at the same time: they halve h2's downlink,
    # so each 1 MB flow takes 160 µs instead of 80 µs.
    net = Network(star(3, latency_s=0.0))
    single = Pattern("broadcast", (0, 1), (Chunk(0, 1.0),), (Flow(1, 0, 1, (0,)),), root=0)
    a = SimBackend(net, ["h0", "h2"], 1e6, connections=1, tenant="A")
    b = SimBackend(net, ["h1", "h2"], 1e6, connections=1, tenant="B")
    runs = run_jobs([Job("A", a, single, 1), Job("B", b, single, 1)])
    assert runs["A"].times_s() == pytest.approx([160e-6])
    assert runs["B"].times_s() == pytest.approx([160e-6])
    assert {r.tenant for r in net.records} == {"A", "B"}


def test_new_pattern_takes_effect_after_the_configured_delay():
    # B = 6: the first decision comes after epoch 5; with a delay of 2 epochs the new pattern
    # runs from epoch 8 on, and epochs 6-7 still run the old one.
    net = Network(star(9))
    for port in range(2):
        long_lived(net, "h8", "h3", port=port)
    tree = allreduce_double_binary_tree(8)
    ctl = Controller(tree, ControllerConfig(apply_delay_epochs=2))
    job = Job("t", SimBackend(net, [f"h{i}" for i in range(8)], 20e6, connections=1), tree, 14, ctl)
    run = run_jobs([job])["t"]
    assert run.decisions[0].action == "try"
    assert all(p == tree for p in run.patterns[:8])
    assert all(p == run.decisions[0].pattern for p in run.patterns[8:14])


def test_ports_rehash_per_epoch_and_repeat_per_seed():
    def ports(seed):
        net = Network(star(4, latency_s=0.0))
        b = SimBackend(net, ["h0", "h1", "h2"], 1e6, connections=4, seed=seed)
        b.run_epochs(chain(), 8)
        return [r.port for r in net.records]

    assert ports(3) == ports(3)
    assert len(set(ports(3))) > 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hosts": ["h0", "h0", "h1"]}, "distinct"),
        ({"hosts": ["h0", "s0", "h1"]}, "switch"),
        ({"message_bytes": -1}, "message_bytes"),
        ({"connections": 0}, "connections"),
        ({"slices": 0}, "slices"),
        ({"compute_gap_s": -1.0}, "compute_gap_s"),
    ],
)
def test_bad_backend_arguments_are_named(kwargs, message):
    net = Network(star(4))
    args = {"hosts": ["h0", "h1", "h2"], "message_bytes": 1e6}
    args.update(kwargs)
    with pytest.raises(ReactError, match=message):
        SimBackend(net, args.pop("hosts"), args.pop("message_bytes"), **args)


def test_too_few_hosts_for_the_pattern():
    net = Network(star(4))
    b = SimBackend(net, ["h0", "h1"], 1e6)
    with pytest.raises(ReactError, match="3 ranks but the job was placed on 2 hosts"):
        b.run_epochs(chain(), 1)
