"""The paper's worked example (§4.3), end to end on flowsim and with the §5.4.1 estimate.

Setting: 16 ranks on one switch (a star), 100 Gbps links of 2 µs each (α = 4 µs per flow),
NCCL's dual binary tree, s = 2 MB (2e6 bytes), each tree carrying s/2 = 1e6 bytes.
β·s/2 = 1e6 B / 12.5e9 B/s = 80 µs.

Reduce phase, no congestion: in both trees the first three steps have fan-in 2 and the last
fan-in 1, so 4α + (2+2+2+1)·80 µs = 16 + 560 = 576 µs.
With p = 2 long-lived external flows into rank 3: in T1 rank 3 aggregates 1 and 5 at step 2, and
its downlink is shared four ways, so that step takes 4·80 µs; 3 -> 7 then runs alone (7's other
child finished long before): 4α + (2 + (p+2) + 1 + 1)·80 µs = 16 + 640 = 656 µs.
After swapping 3 and 2 in T1 rank 3 receives nothing in the reduce phase: back to 576 µs.

The example holds under both execution rules (react.model.execution): in this reduce phase no flow
is ready before both of its ends have finished their previous steps, so Algorithm 2's extra waits
(receiver readiness, a rank's steps in order) never delay a flow; the tests run both rules.
"""

import pytest

from flowsim.network import Network
from flowsim.topologies import star
from flowsim.traffic import long_lived
from react.backends.sim.engine import SimBackend
from react.control.estimate import FctHistory
from react.model.critical import critical_path
from react.model.transforms import ChunkLocalSwap
from react.patterns import allreduce_double_binary_tree

MESSAGE = 2e6
T1 = 1  # chunk graph of the mirror tree (chunk 1)


def reduce_phase(pattern):
    return pattern.with_flows(f for f in pattern.flows if f.op == "reduce")


def run_reduce(pattern, external_flows, epochs=2, execution="algorithm2"):
    net = Network(star(17, latency_s=2e-6))
    for port in range(external_flows):
        long_lived(net, "h16", "h3", port=port)
    backend = SimBackend(net, [f"h{i}" for i in range(16)], MESSAGE, connections=1,
                         execution=execution)
    return backend.run_epochs(reduce_phase(pattern), epochs)


@pytest.mark.parametrize("execution", ["algorithm2", "dataflow"])
def test_worked_example_flowsim_576_656_576(execution):
    tree = allreduce_double_binary_tree(16)
    swapped = ChunkLocalSwap(T1, 3, 2).apply(tree)
    for result in run_reduce(tree, 0, execution=execution):
        assert result.collective_time_s == pytest.approx(576e-6, rel=1e-9)
    for result in run_reduce(tree, 2, execution=execution):
        assert result.collective_time_s == pytest.approx(656e-6, rel=1e-9)
    for result in run_reduce(swapped, 2, execution=execution):
        assert result.collective_time_s == pytest.approx(576e-6, rel=1e-9)


@pytest.mark.parametrize("execution", ["algorithm2", "dataflow"])
def test_worked_example_estimate_predicts_the_swap_gain(execution):
    # From the congested run's FCTs alone, the §5.4.1 model must put the original reduce phase at
    # 656 µs (its observed critical path) and the swapped one at 576 µs: the new flows 5->2 and
    # 1->2 take the median FCT of degree-2 flows (4 + 160 µs), as uncongested fan-in-2 flows do.
    tree = allreduce_double_binary_tree(16)
    swapped = reduce_phase(ChunkLocalSwap(T1, 3, 2).apply(tree))
    batch = run_reduce(tree, 2, epochs=3, execution=execution)
    history = FctHistory(60)
    history.add(reduce_phase(tree), batch)
    model = history.model()
    before = critical_path(reduce_phase(tree), model.pattern_fcts(reduce_phase(tree), MESSAGE),
                           execution)
    after = critical_path(swapped, model.pattern_fcts(swapped, MESSAGE), execution)
    assert before.length_s == pytest.approx(656e-6, rel=1e-9)
    assert after.length_s == pytest.approx(576e-6, rel=1e-9)
