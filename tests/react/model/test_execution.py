"""The execution rule: Algorithm 2 (default) against the dataflow rule, by hand and per generator.

Star topologies without latency, 100 Gb/s links: a flow of ``b`` bytes alone takes ``b / 12.5e9``
s (1 MB: 80 µs, 0.5 MB: 40 µs). Rank ``i`` runs on host ``h{i}``.
"""

import pytest

from flowsim.network import Network
from flowsim.topologies import star
from flowsim.traffic import long_lived
from react.backends.sim.engine import SimBackend
from react.model.critical import critical_path
from react.model.errors import ReactError
from react.model.execution import (
    EXECUTION_RULES,
    ExecutionError,
    flow_dependencies,
    gate_arrays,
    gates,
    rank_programs,
    replay,
)
from react.model.pattern import Chunk, Flow, Pattern
from react.model.transforms import ChunkLocalSwap, GlobalSwap
from react.patterns import GENERATORS, allreduce_double_binary_tree
from react.runtime.schedule import rank_program

HALVES = (Chunk(0, 0.5), Chunk(1, 0.5))


def run(pattern, execution, *, hosts=4, message=1e6):
    net = Network(star(hosts, latency_s=0.0))
    backend = SimBackend(net, [f"h{i}" for i in range(len(pattern.ranks))], message,
                         connections=1, execution=execution)
    (result,) = backend.run_epochs(pattern, 1)
    return result


def serialised():
    # One chunk graph (2 -> 0 carries both chunks). Step 1: 0 -> 1 (chunk 0); step 2: 1 -> 2
    # (chunk 1); step 3: 2 -> 0 (chunks 0, 1, 1 MB).
    return Pattern("allreduce", (0, 1, 2), HALVES, (
        Flow(1, 0, 1, (0,)), Flow(2, 1, 2, (1,)), Flow(3, 2, 0, (0, 1))))


def test_a_rank_finishes_its_step_before_its_next_one():
    # Dataflow: 1 -> 2 needs no data from 0 -> 1 (other chunk), so both run at once on disjoint
    # links [0, 40]; 2 -> 0 needs 1 -> 2's chunk: [40, 120] µs.
    # Algorithm 2: rank 1 sends at step 2 only after its step-1 receive: 1 -> 2 [40, 80];
    # 2 -> 0 then [80, 160] µs.
    data = run(serialised(), "dataflow")
    assert data.collective_time_s == pytest.approx(120e-6, rel=1e-9)
    assert [t.start_s for t in data.flows] == pytest.approx([0, 0, 40e-6], abs=1e-12)
    alg2 = run(serialised(), "algorithm2")
    assert alg2.collective_time_s == pytest.approx(160e-6, rel=1e-9)
    assert [t.start_s for t in alg2.flows] == pytest.approx([0, 40e-6, 80e-6], abs=1e-12)


def receiver_busy(chunks_of_first=(0, 1)):
    # Step 1: 3 -> 2 carries chunks_of_first; step 2: 0 -> 3 carries chunk 0 (0.5 MB).
    return Pattern("allreduce", (0, 1, 2, 3), HALVES, (
        Flow(1, 3, 2, chunks_of_first), Flow(2, 0, 3, (0,)), Flow(3, 2, 1, (1,))))


def test_a_receive_waits_for_its_receiver_to_reach_the_step():
    # 3 -> 2 (1 MB) [0, 80] on h3's uplink. Rank 0 holds its data from the start, so under the
    # dataflow rule 0 -> 3 (0.5 MB, h3's downlink) runs [0, 40]; under Algorithm 2 rank 3 posts
    # that receive only after its step-1 send: [80, 120]. 2 -> 1 (0.5 MB) follows 3 -> 2 under
    # both rules: [80, 120].
    data = run(receiver_busy(), "dataflow")
    assert data.flows[1].start_s == pytest.approx(0.0, abs=1e-12)
    assert data.collective_time_s == pytest.approx(120e-6, rel=1e-9)
    alg2 = run(receiver_busy(), "algorithm2")
    assert alg2.flows[1].start_s == pytest.approx(80e-6, rel=1e-9)
    assert alg2.flows[1].end_s == pytest.approx(120e-6, rel=1e-9)


def test_chunk_graphs_do_not_wait_for_each_other():
    # 3 -> 2 carries chunk 1 only and 2 -> 1 chunk 1: chunk 0's flow 0 -> 3 is another chunk
    # graph, so it runs [0, 40] under both rules; the collective is 3 -> 2 then 2 -> 1:
    # 40 + 40 = 80 µs.
    for rule in EXECUTION_RULES:
        result = run(receiver_busy((1,)), rule)
        assert result.flows[1].start_s == pytest.approx(0.0, abs=1e-12), rule
        assert result.collective_time_s == pytest.approx(80e-6, rel=1e-9), rule


def test_the_critical_path_follows_the_rule():
    # Weights 1, 2, 4 on serialised(): Algorithm 2 chains all three (7); dataflow only the last
    # two (6).
    p = serialised()
    assert critical_path(p, [1.0, 2.0, 4.0]) == critical_path(p, [1.0, 2.0, 4.0], "algorithm2")
    assert critical_path(p, [1.0, 2.0, 4.0], "algorithm2").flows == (0, 1, 2)
    assert critical_path(p, [1.0, 2.0, 4.0], "algorithm2").length_s == 7.0
    assert critical_path(p, [1.0, 2.0, 4.0], "dataflow").flows == (1, 2)
    assert critical_path(p, [1.0, 2.0, 4.0], "dataflow").length_s == 6.0


def test_algorithm2_waits_imply_the_data_dependencies():
    # A flow's data must have arrived at its sender: Algorithm 2 waits for that, directly (the
    # sender's previous step) or through the earlier steps that step waited for.
    for name, make in sorted(GENERATORS.items()):
        for n in (5, 8):
            p = make(n)
            alg2 = flow_dependencies(p, "algorithm2")
            before: list[set[int]] = []
            for waits in alg2:  # flows in pattern order: every wait points to an earlier flow
                before.append(set(waits).union(*(before[j] for j in waits)))
            for i, data in enumerate(flow_dependencies(p, "dataflow")):
                assert set(data) <= before[i], (name, n, i)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_simulator_runs_flows_in_the_runtimes_order(name):
    # The runtime's own schedule (rank_program: what RCollective and the GPU plan execute) is the
    # truth: in the simulated epoch every operation of a rank's step in a chunk graph ends before
    # any of its operations of the next step in that graph starts, and each flow starts exactly
    # when the later of its two ends finished its previous step there (no sooner, no later).
    # Congestion into rank 2 and uneven chunk sizes make the steps' ends differ.
    pattern = GENERATORS[name](6)
    net = Network(star(8, latency_s=1e-6))
    for port in range(2):
        long_lived(net, "h7", "h2", port=port)
    backend = SimBackend(net, [f"h{i}" for i in range(6)], 3e6, connections=1)
    result = backend.run_epochs(pattern, 2)[1]
    start = [t.start_s for t in result.flows]
    end = [t.end_s for t in result.flows]
    ready = [0.0] * len(pattern.flows)
    for rank in pattern.ranks:
        for program in rank_program(pattern, rank):
            for before, after in zip(program.steps, program.steps[1:], strict=False):
                done = max(end[i] for i in (*before.sends, *before.recvs))
                for i in (*after.sends, *after.recvs):
                    assert start[i] >= done, (rank, program.graph, after.step, i)
                    ready[i] = max(ready[i], done)
    assert start == pytest.approx(ready, abs=1e-12)


def test_replay_of_the_observed_durations_gives_back_the_epoch():
    # With every flow lasting what it lasted, the gates reproduce the simulated timeline.
    tree = allreduce_double_binary_tree(8)
    net = Network(star(9, latency_s=2e-6))
    long_lived(net, "h8", "h3")
    backend = SimBackend(net, [f"h{i}" for i in range(8)], 2e6, connections=1)
    (result,) = backend.run_epochs(tree, 1)
    starts, ends = replay(gates(tree), [t.fct_s for t in result.flows],
                          [t.start_s for t in result.flows])
    assert starts == pytest.approx([t.start_s for t in result.flows], abs=1e-12)
    assert ends == pytest.approx([t.end_s for t in result.flows], abs=1e-12)
    assert critical_path(tree, [t.fct_s for t in result.flows]).length_s == pytest.approx(
        result.collective_time_s, rel=1e-12)


def gates_from_programs(pattern):
    # Algorithm 2's gates read off the rank programs (the rule's one definition), numbered by
    # rank (pattern order), chunk graph and step: what a simulator following them relies on.
    members, waits = [], [[] for _ in pattern.flows]
    for programs in rank_programs(pattern).values():
        for program in programs:
            for before, after in zip(program.steps, program.steps[1:], strict=False):
                for i in (*after.sends, *after.recvs):
                    waits[i].append(len(members))
                members.append(tuple(sorted((*before.sends, *before.recvs))))
    return tuple(members), tuple(tuple(sorted(w)) for w in waits)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_gates_are_the_rank_programs_steps(name):
    # Also on swapped patterns (ranks out of their usual places), as the controller builds them.
    base = GENERATORS[name](8)
    ranks = base.ranks
    for pattern in (base, GlobalSwap(ranks[0], ranks[5]).apply(base),
                    ChunkLocalSwap(0, ranks[1], ranks[6]).apply(base)):
        gs = gates(pattern)
        assert (gs.members, gs.waits) == gates_from_programs(pattern)
        assert gs.opens == tuple(tuple(g for g, m in enumerate(gs.members) if i in m)
                                 for i in range(len(pattern.flows)))
        assert gs.released == tuple(tuple(i for i, w in enumerate(gs.waits) if g in w)
                                    for g in range(len(gs.members)))


def _rows(flat, counts):
    out, at = [], 0
    for c in counts:
        out.append(tuple(flat[at:at + c]))
        at += c
    return tuple(out)


@pytest.mark.parametrize("rule", EXECUTION_RULES)
@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_gate_arrays_hold_the_gates_of_the_rank_programs(name, rule):
    # The arrays the critical path runs on for large patterns, read back into rows: under
    # Algorithm 2 the rank programs' gates (built without the tuples), under the dataflow rule
    # the tuples of gates().
    base = GENERATORS[name](8)
    ranks = base.ranks
    for pattern in (base, GlobalSwap(ranks[0], ranks[5]).apply(base),
                    ChunkLocalSwap(0, ranks[1], ranks[6]).apply(base)):
        ga = gate_arrays(pattern, rule)
        gs = gates(pattern, rule)
        if rule == "algorithm2":
            members, waits = gates_from_programs(pattern)
        else:
            members, waits = gs.members, gs.waits
        n = len(pattern.flows)
        assert ga.gates == len(members)
        width = max(map(len, waits))
        assert ga.waits.shape == (n, width)  # each row: the flow's gates, then the padding
        assert ga.waits.tolist() == [[*w, *[ga.gates] * (width - len(w))] for w in waits]
        sizes = [ga.member_start[g + 1] - ga.member_start[g] for g in range(ga.gates)]
        assert ga.member_start[0] == 0
        assert _rows(ga.member_flows.tolist(), sizes) == members
        opens = tuple(tuple(g for g, m in enumerate(members) if i in m) for i in range(n))
        assert _rows(ga.open_gate.tolist(), ga.open_count.tolist()) == opens


def test_rank_programs_cover_every_rank():
    p = serialised()
    assert set(rank_programs(p)) == {0, 1, 2}
    assert [ops.step for ops in rank_programs(p)[1][0].steps] == [1, 2]


@pytest.mark.parametrize("bad", ["algorithm3", "", None, 2])
def test_an_unknown_rule_is_named_with_the_choices(bad):
    with pytest.raises(ExecutionError, match=r"'algorithm2', 'dataflow'"):
        gates(serialised(), bad)
    with pytest.raises(ReactError, match=rf"execution = {bad!r}: expected one of"):
        SimBackend(Network(star(3)), ["h0", "h1", "h2"], 1e6, execution=bad)
