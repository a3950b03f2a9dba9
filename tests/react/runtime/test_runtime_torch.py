"""RCollective over torch.distributed (Gloo): results against numpy and against torch's own ops.

One group of processes (importing torch costs seconds per process on 2 cores) runs every
generator for every n up to the group size, on subgroups of ranks 0..n-1; each rank also runs
torch's own collective of the same inputs (all_reduce, all_gather, broadcast, reduce), and the
test compares both with the numpy truth of test_runtime_collective.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from test_runtime_collective import DTYPES, check_timings, expected, make_input

from react.patterns import GENERATORS
from react.runtime.local import free_ports, run_local
from react.runtime.timings import RankEpochTimings

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (extra [torch])")


def torch_rank(rank: int, world: int, master_port: int, sizes: list[int]) -> dict:
    """Rank body: for each n in ``sizes``, every generator and dtype on RCollective and torch."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist

    from react.runtime.collective import RCollective
    from react.runtime.torch_transport import TorchTransport, init_torch_group

    init_torch_group(rank, world, ("127.0.0.1", master_port), timeout_s=60.0)
    out: dict = {}
    try:
        epoch = 0
        for n in sizes:
            group = None if n == world else dist.new_group(list(range(n)))
            if rank >= n:
                epoch += len(GENERATORS) * len(DTYPES)  # every rank numbers epochs alike
                continue
            transport = TorchTransport(group, timeout_s=60.0)
            collective = RCollective(transport, timeout_s=60.0)
            for name in sorted(GENERATORS):
                pattern = GENERATORS[name](n)
                for dtype in DTYPES:
                    data = make_input(name, n, rank, dtype)
                    ours = data.copy()
                    timings = collective.run(pattern, ours, epoch)
                    epoch += 1
                    theirs = _torch_reference(torch, dist, group, pattern, data, n)
                    out[(n, name, dtype)] = (ours, theirs, timings.to_dict())
            transport.close()
    finally:
        dist.destroy_process_group()
    return out


def _torch_reference(torch, dist, group, pattern, data: np.ndarray, n: int) -> np.ndarray:
    """What torch's own collective makes of the same input (the part the kind defines)."""
    tensor = torch.from_numpy(data.copy())
    if pattern.kind in ("allreduce", "reduce_scatter"):
        dist.all_reduce(tensor, group=group)
        return tensor.numpy()
    if pattern.kind == "broadcast":
        dist.broadcast(tensor, src=pattern.root, group=group)
        return tensor.numpy()
    if pattern.kind == "reduce":
        dist.reduce(tensor, dst=pattern.root, group=group)
        return tensor.numpy()
    parts = [torch.empty_like(tensor) for _ in range(n)]
    dist.all_gather(parts, tensor, group=group)
    return np.stack([p.numpy() for p in parts])  # allgather: row r is rank r's whole input


def _check(world: int, sizes: list[int], results: list[dict]) -> None:
    from react.runtime.schedule import chunk_bounds

    for n in sizes:
        for name in sorted(GENERATORS):
            pattern = GENERATORS[name](n)
            for dtype in DTYPES:
                want = expected(name, n, dtype)
                for rank in range(n):
                    ours, theirs, _ = results[rank][(n, name, dtype)]
                    if pattern.kind == "allgather":
                        # torch gathers whole inputs; chunk c comes from its owner's row.
                        bounds = chunk_bounds(pattern, ours.size)
                        theirs = np.concatenate([
                            theirs[c.owner, bounds[c.id] : bounds[c.id + 1]]
                            for c in pattern.chunks
                        ])
                    values, mask = want[rank]
                    where = f"torch/gloo {name}, n={n}, {dtype}, rank {rank}"
                    if dtype == "int64":
                        np.testing.assert_array_equal(ours[mask], values[mask], err_msg=where)
                        np.testing.assert_array_equal(ours[mask], theirs[mask], err_msg=where)
                    else:
                        np.testing.assert_allclose(ours[mask], values[mask], rtol=1e-5,
                                                   atol=1e-5, err_msg=where)
                        np.testing.assert_allclose(ours[mask], theirs[mask], rtol=1e-5,
                                                   atol=1e-5, err_msg=where)
                records = [RankEpochTimings.from_dict(results[r][(n, name, dtype)][2])
                           for r in range(n)]
                check_timings(pattern, records, rendezvous=False)


@needs_torch
def test_gloo_every_generator_equals_numpy_and_torch_up_to_4():
    world, sizes = 4, [2, 3, 4]
    (port,) = free_ports(1)
    results = run_local(torch_rank, world, args=(port, sizes), timeout_s=240.0)
    _check(world, sizes, results)


@needs_torch
@pytest.mark.slow
def test_gloo_every_generator_equals_numpy_and_torch_up_to_8():
    world, sizes = 8, [5, 6, 7, 8]
    (port,) = free_ports(1)
    results = run_local(torch_rank, world, args=(port, sizes), timeout_s=480.0)
    _check(world, sizes, results)


def test_missing_torch_is_a_clear_error(monkeypatch):
    import builtins

    from react.runtime.torch_transport import TorchTransport
    from react.runtime.transport import TransportError

    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    monkeypatch.setattr("importlib.import_module", lambda name: no_torch(name))
    with pytest.raises(TransportError, match=r"needs PyTorch.*react\[torch\]"):
        TorchTransport()


@needs_torch
def test_torch_rendezvous_port_taken_is_a_clear_error():
    import socket

    from react.runtime.torch_transport import init_torch_group
    from react.runtime.transport import TransportError

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        with pytest.raises(TransportError, match=f"127.0.0.1:{port}: address already in use"):
            init_torch_group(0, 2, ("127.0.0.1", port), timeout_s=5.0)
    finally:
        holder.close()


@needs_torch
@pytest.mark.slow
@pytest.mark.parametrize("transport", ["socket", "torch"])
def test_bench_reports_positive_times_for_both(transport):
    from react.runtime.bench import bench_local

    result = bench_local(2, transport=transport, message_bytes=1 << 16, epochs=3, warmup=1,
                         timeout_s=120.0)
    assert result.world_size == 2 and result.message_bytes == 1 << 16
    assert len(result.rcollective_s) == len(result.torch_s) == 3
    assert min(result.rcollective_s) > 0 and min(result.torch_s) > 0
    assert result.ratio == pytest.approx(result.rcollective_median_s / result.torch_median_s)
