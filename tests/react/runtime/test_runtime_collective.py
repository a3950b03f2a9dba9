"""RCollective over the socket transport: results against plain numpy, timings against causality.

Ranks are local processes on 127.0.0.1 (``run_local``); one group of ``n`` processes runs every
generator for that ``n``, on int64 (compared exactly) and float32 (to a tolerance) inputs. The
truth is a numpy reduction of the inputs, regenerated here from the same seeds, by the meaning of
each kind (react/model/verify.py): AllReduce -> every rank holds the sum; AllGather -> every rank
holds chunk c of its owner; ReduceScatter -> the owner of chunk c holds its sum; Broadcast -> every
rank holds the root's buffer; Reduce -> the root holds the sum.
"""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from react.model.errors import PatternError, ReactError
from react.model.execution import flow_dependencies
from react.model.pattern import Chunk, Flow, Pattern
from react.patterns import GENERATORS, allreduce_ring
from react.runtime.collective import RCollective
from react.runtime.local import LocalRunError, free_ports, run_local
from react.runtime.schedule import ScheduleError, chunk_bounds, flow_ranges, rank_program
from react.runtime.socket_transport import SocketTransport
from react.runtime.timings import RankEpochTimings, merge_epoch
from react.runtime.transport import TransportError

DTYPES = ("int64", "float32")
COUNT = 1003  # not a multiple of any chunk count: uneven chunk bounds get exercised


def make_input(name: str, n: int, rank: int, dtype: str, count: int = COUNT) -> np.ndarray:
    """Rank ``rank``'s input for one case; chunks a rank does not hold start as zeros."""
    seed = [n, rank, sorted(GENERATORS).index(name), DTYPES.index(dtype)]
    rng = np.random.default_rng(seed)
    if dtype == "int64":
        data = rng.integers(-(10**12), 10**12, size=count, dtype=np.int64)
    else:
        data = rng.standard_normal(count).astype(np.float32)
    pattern = GENERATORS[name](n)
    bounds = chunk_bounds(pattern, count)
    if pattern.kind == "allgather":
        for c in pattern.chunks:
            if c.owner != rank:
                data[bounds[c.id] : bounds[c.id + 1]] = 0
    elif pattern.kind == "broadcast" and rank != pattern.root:
        data[:] = 0
    return data


def expected(name: str, n: int, dtype: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``rank -> (values, mask)``: what each rank must hold where ``mask`` is true."""
    pattern = GENERATORS[name](n)
    inputs = [make_input(name, n, r, dtype) for r in range(n)]
    total = np.sum(np.stack(inputs), axis=0, dtype=inputs[0].dtype)
    bounds = chunk_bounds(pattern, COUNT)
    everywhere = np.ones(COUNT, dtype=bool)
    nowhere = np.zeros(COUNT, dtype=bool)
    if pattern.kind == "allreduce":
        return {r: (total, everywhere) for r in range(n)}
    if pattern.kind == "broadcast":
        return {r: (inputs[pattern.root], everywhere) for r in range(n)}
    if pattern.kind == "reduce":
        return {r: (total, everywhere if r == pattern.root else nowhere) for r in range(n)}
    gathered = np.empty_like(total)
    masks = {r: nowhere.copy() for r in range(n)}
    for c in pattern.chunks:
        lo, hi = bounds[c.id], bounds[c.id + 1]
        gathered[lo:hi] = inputs[c.owner][lo:hi]
        masks[c.owner][lo:hi] = True
    if pattern.kind == "allgather":
        return {r: (gathered, everywhere) for r in range(n)}
    return {r: (total, masks[r]) for r in range(n)}  # reduce_scatter


def run_every_generator(rank: int, world: int, ports: list[int], connections: int,
                        sizes: list[int]) -> dict:
    """Rank body: for each n in ``sizes``, every generator and dtype on ranks 0..n-1.

    Ranks outside a pattern sit it out; epoch numbers count alike on every rank.
    """
    transport = SocketTransport(
        rank, [("127.0.0.1", p) for p in ports], connections=connections, timeout_s=30.0
    )
    out = {}
    try:
        collective = RCollective(transport, timeout_s=30.0)
        epoch = 0
        for n in sizes:
            for name in sorted(GENERATORS):
                for dtype in DTYPES:
                    if rank < n:
                        buffer = make_input(name, n, rank, dtype)
                        timings = collective.run(GENERATORS[name](n), buffer, epoch)
                        out[(n, name, dtype)] = (buffer, timings.to_dict())
                    epoch += 1
    finally:
        transport.close()
    return out


def check_group(sizes: list[int], results: list[dict]) -> None:
    for n in sizes:
        for name in sorted(GENERATORS):
            pattern = GENERATORS[name](n)
            for dtype in DTYPES:
                want = expected(name, n, dtype)
                for rank in range(n):
                    got = results[rank][(n, name, dtype)][0]
                    values, mask = want[rank]
                    where = f"{name}, n={n}, {dtype}, rank {rank}"
                    if dtype == "int64":
                        np.testing.assert_array_equal(got[mask], values[mask], err_msg=where)
                    else:
                        np.testing.assert_allclose(got[mask], values[mask], rtol=1e-5,
                                                   atol=1e-5, err_msg=where)
                records = [RankEpochTimings.from_dict(results[r][(n, name, dtype)][1])
                           for r in range(n)]
                check_timings(pattern, records)


def check_timings(
    pattern: Pattern, records: list[RankEpochTimings], *, rendezvous: bool = True
) -> None:
    """Causality on the shared clock, and the merge into a valid EpochResult.

    ``rendezvous``: the transport stamps ``started_s`` after the receiver's clear-to-send.
    """
    sends = {s.flow_index: s for rec in records for s in rec.sends}
    recvs = {r.flow_index: r for rec in records for r in rec.recvs}
    assert sorted(sends) == sorted(recvs) == list(range(len(pattern.flows)))
    ends = {rec.rank: rec.end_s for rec in records}
    starts = {rec.rank: rec.start_s for rec in records}
    deps = pattern.dependencies()
    waits = flow_dependencies(pattern, "algorithm2")
    for i, flow in enumerate(pattern.flows):
        s, r = sends[i], recvs[i]
        assert starts[flow.src] <= s.post_s and starts[flow.dst] <= r.post_s
        if rendezvous:
            # Clear-to-send: bytes leave only after the receiver posted, and arrive after that.
            assert s.started_s is not None and s.started_s >= max(s.post_s, r.post_s)
            assert r.end_s >= s.started_s
        assert r.end_s >= max(s.post_s, r.post_s) and r.end_s <= ends[flow.dst]
        # Algorithm 2: a send's payload is read only after the flows it depends on landed.
        for j in deps[i]:
            assert s.post_s >= recvs[j].end_s, (i, j)
        # ... and each end posts its side only after every receive of its previous step in the
        # chunk graph landed: the waits the simulator's default rule uses (react.model.execution).
        for j in waits[i]:
            before = pattern.flows[j]
            if before.dst == flow.src:
                assert s.post_s >= recvs[j].end_s, (i, j)
            if before.dst == flow.dst:
                assert r.post_s >= recvs[j].end_s, (i, j)
    result = merge_epoch(pattern, records, message_bytes=COUNT * 8)
    assert len(result.flows) == len(pattern.flows)
    for timing in result.flows:
        assert 0 <= timing.start_s <= timing.end_s <= result.collective_time_s


# -- correctness on real processes ------------------------------------------------------------
def test_socket_every_generator_equals_numpy_n2_to_4():
    ports = free_ports(4)
    results = run_local(run_every_generator, 4, args=(ports, 1, [2, 3, 4]), timeout_s=120.0)
    check_group([2, 3, 4], results)


def test_socket_every_generator_equals_numpy_n5_to_8():
    # Two connections per pair: messages spread over both (the ECMP mode) and still arrive right.
    ports = free_ports(8)
    results = run_local(run_every_generator, 8, args=(ports, 2, [5, 6, 7, 8]), timeout_s=180.0)
    check_group([5, 6, 7, 8], results)


# -- in-process checks (ranks as threads) -----------------------------------------------------
def _threads(n: int, body, *, connections: int = 1, timeout_s: float = 20.0):
    ports = free_ports(n)
    addresses = [("127.0.0.1", p) for p in ports]
    results: list = [None] * n
    errors: list = []

    def go(rank: int) -> None:
        try:
            with SocketTransport(rank, addresses, connections=connections,
                                 timeout_s=timeout_s) as t:
                results[rank] = body(t)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s + 5)
    assert not any(t.is_alive() for t in threads), "a rank thread hung"
    return results, errors


def test_ring_allreduce_by_hand_three_ranks():
    # Rank r holds [r, 10r, 100r, 1000r]; the sum over r = 0, 1, 2 is 3 * [1, 10, 100, 1000].
    def body(t):
        buffer = np.array([1, 10, 100, 1000], dtype=np.int64) * t.rank
        RCollective(t, timeout_s=10).run(allreduce_ring(3), buffer, 0)
        return buffer

    results, errors = _threads(3, body)
    assert not errors
    for buffer in results:
        assert buffer.tolist() == [3, 30, 300, 3000]


def test_many_epochs_reuse_connections_and_tags_wrap():
    # Epochs 1020..1029 cross the tag's epoch wrap (1024); each epoch adds 1 per rank.
    def body(t):
        buffer = np.zeros(64, dtype=np.int64)
        collective = RCollective(t, timeout_s=10)
        for epoch in range(1020, 1030):
            buffer += 1
            collective.run(GENERATORS["allreduce_double_binary_tree"](4), buffer, epoch)
        return buffer

    # After each epoch every rank holds 4x what it held plus 4 (all equal): x -> 4(x + 1).
    results, errors = _threads(4, body, connections=3)
    assert not errors
    x = 0
    for _ in range(10):
        x = 4 * (x + 1)
    for buffer in results:
        assert (buffer == x).all()


def test_messages_spread_over_connections_on_distinct_source_ports():
    # 60 messages of 8 bytes from rank 0 to rank 1 over 3 connections, chosen at random per
    # message: each connection carries some (all on one or two: probability ~3 * (2/3)**60).
    def body(t):
        handles = []
        for tag in range(60):
            if t.rank == 0:
                handles.append(t.isend(1, tag, np.full(1, tag, dtype=np.int64)))
            else:
                out = np.zeros(1, dtype=np.int64)
                handles.append((t.irecv(0, tag, out), out))
        if t.rank == 0:
            for h in handles:
                h.wait(10.0)
            return t.bytes_sent(1), t.source_ports(1)
        for h, _ in handles:
            h.wait(10.0)
        return [int(out[0]) for _, out in handles]

    results, errors = _threads(2, body, connections=3)
    assert not errors
    (per_connection, ports), received = results
    assert received == list(range(60))
    assert sum(per_connection) == 60 * 8 and min(per_connection) > 0
    assert len(set(ports)) == 3


@pytest.mark.parametrize("peer", ["silent", "gone"])
def test_a_peer_that_never_joins_fails_naming_the_flow(peer):
    # Rank 1 connects but never runs the collective (silent: rank 0 times out; gone: it closes
    # its transport, rank 0 sees the connection lost): rank 0 raises instead of hanging.
    from react.runtime.collective import CollectiveError

    def body(t):
        if t.rank == 1:
            if peer == "silent":
                time.sleep(2.0)  # connected, but silent until rank 0 gave up
            return None
        with pytest.raises(CollectiveError, match=r"flow \d+ \([01] -> [01] at step \d+\)"):
            RCollective(t, timeout_s=0.5).run(allreduce_ring(2), np.zeros(4), 0)
        return "timed out"

    results, errors = _threads(2, body)
    assert not errors and results[0] == "timed out"


class _RecordingTransport:
    rank = 0
    world_size = 4

    def __init__(self):
        self.calls = []

    def isend(self, peer, tag, data):
        self.calls.append(("isend", peer))
        raise AssertionError("nothing may be sent")

    def irecv(self, peer, tag, out):
        self.calls.append(("irecv", peer))
        raise AssertionError("nothing may be received")

    def close(self):
        pass


def test_invalid_pattern_refused_before_any_byte():
    # Ring AllReduce with its first flow removed: a contribution is lost, verify must say so.
    ring = allreduce_ring(4)
    broken = ring.with_flows(ring.flows[1:], name="broken_ring")
    transport = _RecordingTransport()
    with pytest.raises(PatternError, match="broken_ring"):
        RCollective(transport).run(broken, np.zeros(8, dtype=np.float32), 0)
    assert transport.calls == []


def test_rank_outside_pattern_and_bad_buffer_refused():
    transport = _RecordingTransport()
    transport.rank = 5
    transport.world_size = 6
    with pytest.raises(ScheduleError, match="rank 5"):
        RCollective(transport).run(allreduce_ring(4), np.zeros(8), 0)
    transport.rank = 0
    with pytest.raises(ScheduleError, match="one-dimensional"):
        RCollective(transport).run(allreduce_ring(4), np.zeros((2, 4)), 0)
    with pytest.raises(ScheduleError, match="epoch"):
        RCollective(transport).run(allreduce_ring(4), np.zeros(8), -1)
    transport.world_size = 3
    with pytest.raises(ScheduleError, match="outside the transport's world"):
        RCollective(transport).run(allreduce_ring(4), np.zeros(8), 0)
    assert transport.calls == []


def test_port_already_taken_is_a_clear_error():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        port = holder.getsockname()[1]
        with pytest.raises(TransportError, match=f"127.0.0.1:{port}: address already in use"):
            SocketTransport(0, [("127.0.0.1", port), ("127.0.0.1", 1)], timeout_s=1.0)
    finally:
        holder.close()


def test_unreachable_peer_times_out_with_its_rank():
    (mine, theirs) = free_ports(2)
    with pytest.raises(TransportError, match="could not connect to rank 1"):
        SocketTransport(0, [("127.0.0.1", mine), ("127.0.0.1", theirs)], timeout_s=0.5)


def test_bad_arguments_name_the_value():
    with pytest.raises(TransportError, match="connections must be"):
        SocketTransport(0, [("127.0.0.1", 1), ("127.0.0.1", 2)], connections=0)
    with pytest.raises(TransportError, match=r"addresses\[1\]"):
        SocketTransport(0, [("127.0.0.1", 1), "nowhere"])
    with pytest.raises(TransportError, match="rank must be in 0..1"):
        SocketTransport(2, [("127.0.0.1", 1), ("127.0.0.1", 2)])


def test_size_mismatch_and_dead_peer_fail_instead_of_hanging():
    def body(t):
        if t.rank == 0:
            # Receives 4 elements where rank 1 sends 5: rank 1's send reports the mismatch.
            handle = t.irecv(1, 7, np.zeros(4, dtype=np.int64))
            with pytest.raises(ReactError):
                handle.wait(1.0)
            return "receiver"
        send = t.isend(0, 7, np.arange(5, dtype=np.int64))
        with pytest.raises(TransportError, match="receive of 32 bytes"):
            send.wait(5.0)
        return "sender"

    results, errors = _threads(2, body)
    assert not errors, errors
    assert results == ["receiver", "sender"]


def test_a_rank_that_raises_is_reported_by_run_local():
    with pytest.raises(LocalRunError, match="rank 1 failed"):
        run_local(_fail_on_rank_one, 2, timeout_s=30.0)


def _fail_on_rank_one(rank: int, n: int) -> int:
    if rank == 1:
        raise ValueError("on purpose")
    return rank


# -- the schedule alone -----------------------------------------------------------------------
def test_chunk_bounds_round_cumulative_fractions():
    # Ring on 3 ranks: fractions 1/3 each; 10 elements -> round(0, 3.33, 6.67, 10) = 0, 3, 7, 10.
    assert chunk_bounds(allreduce_ring(3), 10).tolist() == [0, 3, 7, 10]
    assert flow_ranges((0, 2), np.array([0, 3, 7, 10])) == ((0, 3), (7, 10))
    assert flow_ranges((1, 2), np.array([0, 3, 7, 10])) == ((3, 10),)


def test_rank_program_covers_each_flow_once_in_step_order():
    pattern = GENERATORS["allreduce_halving_doubling"](8)
    seen = []
    for rank in pattern.ranks:
        for program in rank_program(pattern, rank):
            steps = [ops.step for ops in program.steps]
            assert steps == sorted(set(steps))
            for ops in program.steps:
                seen += [("s", i) for i in ops.sends] + [("r", i) for i in ops.recvs]
                for i in ops.sends:
                    assert pattern.flows[i].src == rank and pattern.flows[i].step == ops.step
                for i in ops.recvs:
                    assert pattern.flows[i].dst == rank and pattern.flows[i].step == ops.step
    want = [("s", i) for i in range(len(pattern.flows))] + [("r", i)
                                                            for i in range(len(pattern.flows))]
    assert sorted(seen) == sorted(want)


def test_copy_then_reduce_in_one_pattern_by_hand():
    # Two ranks, one chunk: step 1, 0 -> 1 reduce (rank 1 holds a0 + a1); step 2, 1 -> 0 copy.
    pattern = Pattern("allreduce", (0, 1), (Chunk(0, 1.0),),
                      (Flow(1, 0, 1, (0,), "reduce"), Flow(2, 1, 0, (0,), "copy")))

    def body(t):
        buffer = np.array([[5, 7], [1, 2]][t.rank], dtype=np.int64)
        RCollective(t, timeout_s=10).run(pattern, buffer, 3)
        return buffer

    results, errors = _threads(2, body)
    assert not errors
    assert [b.tolist() for b in results] == [[6, 9], [6, 9]]
