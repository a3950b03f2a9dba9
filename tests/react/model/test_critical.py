"""Critical paths over the TEN weighted by FCTs (§5.4.1)."""

import pytest

from react.model.critical import CriticalPath, critical_path, schedule
from react.model.errors import ReactError
from react.model.pattern import Chunk, Flow, Pattern


def chain_pattern():
    # Two independent chains over chunks 0 and 1:
    #   chunk 0: 1->0 (step 1), 0->2 (step 2)       weights 1 + 5 = 6
    #   chunk 1: 3->0 (step 1), 0->1 (step 2)       weights 4 + 1 = 5
    return Pattern(
        "broadcast",
        (0, 1, 2, 3),
        (Chunk(0, 0.5), Chunk(1, 0.5)),
        (Flow(1, 1, 0, (0,)), Flow(2, 0, 2, (0,)), Flow(1, 3, 0, (1,)), Flow(2, 0, 1, (1,))),
        root=0,
    )


def test_critical_path_follows_the_longest_chain():
    p = chain_pattern()
    weights = {Flow(1, 1, 0, (0,)): 1.0, Flow(2, 0, 2, (0,)): 5.0,
               Flow(1, 3, 0, (1,)): 4.0, Flow(2, 0, 1, (1,)): 1.0}
    path = critical_path(p, [weights[f] for f in p.flows])
    assert [p.flows[i] for i in path.flows] == [Flow(1, 1, 0, (0,)), Flow(2, 0, 2, (0,))]
    assert path.length_s == pytest.approx(6.0)


def test_critical_path_respects_chunk_independence():
    # 0->2 carries chunk 0 only, so it does not wait for 3->0 (chunk 1) even if that is slow:
    # chunk 1's chain 9 + 1 = 10 beats chunk 0's 1 + 5 = 6.
    p = chain_pattern()
    weights = {Flow(1, 1, 0, (0,)): 1.0, Flow(2, 0, 2, (0,)): 5.0,
               Flow(1, 3, 0, (1,)): 9.0, Flow(2, 0, 1, (1,)): 1.0}
    path = critical_path(p, [weights[f] for f in p.flows])
    assert [p.flows[i] for i in path.flows] == [Flow(1, 3, 0, (1,)), Flow(2, 0, 1, (1,))]
    assert path.length_s == pytest.approx(10.0)


def test_critical_path_rejects_wrong_weights():
    with pytest.raises(ReactError, match="expected 4 flow weights"):
        critical_path(chain_pattern(), [1.0, 2.0])
    with pytest.raises(ReactError, match="non-negative"):
        critical_path(chain_pattern(), [1.0, -2.0, 1.0, 1.0])


def test_schedule_starts_each_flow_when_its_waits_end():
    # chunk 0: 1->0 takes 1, then 0->2 (waits for it) takes 5: [0, 1], [1, 6];
    # chunk 1: 3->0 takes 4, then 0->1 takes 1: [0, 4], [4, 5].
    p = chain_pattern()
    weights = {Flow(1, 1, 0, (0,)): 1.0, Flow(2, 0, 2, (0,)): 5.0,
               Flow(1, 3, 0, (1,)): 4.0, Flow(2, 0, 1, (1,)): 1.0}
    start, end = schedule(p, [weights[f] for f in p.flows])
    expected = {Flow(1, 1, 0, (0,)): (0.0, 1.0), Flow(2, 0, 2, (0,)): (1.0, 6.0),
                Flow(1, 3, 0, (1,)): (0.0, 4.0), Flow(2, 0, 1, (1,)): (4.0, 5.0)}
    assert {f: (s, e) for f, s, e in zip(p.flows, start, end, strict=True)} == expected
    assert end.max() == critical_path(p, [weights[f] for f in p.flows]).length_s


def test_critical_path_breaks_ties_towards_the_lowest_flow():
    # 1->0 and 3->0 (step 1) both end at 2; 0->2 (step 2) waits for rank 0's step 1, so it
    # starts at 2 and ends at 3. Two chains of length 3: the one through the lower index wins.
    p = Pattern("broadcast", (0, 1, 2, 3), (Chunk(0, 1.0),),
                (Flow(1, 1, 0, (0,)), Flow(1, 3, 0, (0,)), Flow(2, 0, 2, (0,))), root=0)
    path = critical_path(p, [2.0, 2.0, 1.0])
    assert path.flows == (0, 2) and path.length_s == 3.0
    # 3->0 slower: the chain goes through it, 3 + 1 = 4.
    assert critical_path(p, [2.0, 3.0, 1.0]).flows == (1, 2)
    # Nothing takes time: every flow ends at 0; the path is the first flow alone.
    assert critical_path(p, [0.0, 0.0, 0.0]).flows == (0,)
    # Under the dataflow rule 0->2 waits for each flow into 0 carrying chunk 0: the same.
    assert critical_path(p, [2.0, 2.0, 1.0], "dataflow").flows == (0, 2)


def _reference(gs, w):
    """Starts, ends and chain from the definitions, in plain Python over the gates: a gate opens
    at the latest end of its members, a flow starts at the latest opening of its gates (0
    without any) and ends its weight later; the flow that let it start is the lowest-indexed
    member of its gates that ended at its start (-1: it starts at 0). Members precede the flows
    waiting for them, so one pass in flow order sees every member's end first."""
    n = len(w)
    start, end = [0.0] * n, [0.0] * n
    for i in range(n):
        start[i] = max((end[j] for g in gs.waits[i] for j in gs.members[g]), default=0.0)
        end[i] = start[i] + w[i]
    last = max(range(n), key=lambda i: (end[i], -i))  # the latest end, ties: the lowest index
    chain = [last]
    while start[chain[-1]] > 0:
        i = chain[-1]
        chain.append(min(j for g in gs.waits[i] for j in gs.members[g] if end[j] == start[i]))
    return start, end, CriticalPath(tuple(reversed(chain)), end[last])


@pytest.mark.parametrize("execution", ["algorithm2", "dataflow"])
def test_small_and_large_patterns_match_the_definitions(execution):
    import numpy as np

    from react.model.critical import ARRAY_FLOWS
    from react.model.execution import gates
    from react.patterns import allgather_recursive_doubling, allreduce_double_binary_tree
    # Below ARRAY_FLOWS the pass runs flow by flow, above one step at a time on arrays; both
    # must give the starts, ends and chain of the definitions, with random, tied and zero
    # weights (ties are where the lowest-index rule decides).
    rng = np.random.default_rng(3)
    patterns = (allreduce_double_binary_tree(16), allgather_recursive_doubling(8),
                allreduce_double_binary_tree(128), allgather_recursive_doubling(64))
    assert {len(p.flows) >= ARRAY_FLOWS for p in patterns} == {False, True}
    for p in patterns:
        for w in (rng.uniform(0, 1, len(p.flows)), rng.integers(0, 3, len(p.flows)) * 0.5,
                  np.zeros(len(p.flows))):
            begin, finish, path = _reference(gates(p, execution), w.tolist())
            start, end = schedule(p, w, execution)
            assert start.tolist() == begin and end.tolist() == finish
            assert critical_path(p, w, execution) == path
