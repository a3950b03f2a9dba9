"""The GPU backend: RCollective on NCCL, one process per GPU, every flow timed with CUDA events.

Needs PyTorch built with CUDA and NCCL (the optional extra ``[torch]``; imported lazily, so
importing this package needs neither) and one GPU per rank process. Ranks come from the
environment as ``torchrun`` sets it (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), so the same code runs on any number of
GPUs on one or several hosts.

Start and stop, on every rank::

    world = init_gpu_world()                 # set the device, NCCL process group (timeout)
    coll = GpuCollective(world)              # NCCL communicators ("lanes"), made here, once
    epoch = coll.run(pattern, tensor, e)     # posts everything, returns at once
    timings = epoch.timings()                # RankEpochTimings (waits for the GPU)
    coll.close(); close_gpu_world()

Pieces, one module each: :mod:`.plan` (one rank's posting order, pure), :mod:`.eventclock`
(CUDA event times -> the host clock's :class:`~react.runtime.timings.RankEpochTimings`, pure),
:mod:`.cuda` (process start and stop, errors), :mod:`.collective` (the NCCL RCollective),
:mod:`.selfcheck` (every generator against numpy and NCCL's own collectives, under torchrun),
:mod:`.rank` (one rank's process), :mod:`.job` (:class:`~.job.GpuJob`: a job on this host's GPUs,
started through :class:`react.runtime.launcher.RankLauncher`), :mod:`.copystream` (background
copies).

NVLink multicast must stay off on shared machines: :func:`init_gpu_world` sets
``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and ``NVSHMEM_DISABLE_NVLS=1``
unless the environment already sets them.
"""

from __future__ import annotations

__all__ = ["GpuCollective", "GpuEpoch", "GpuError", "GpuWorld", "close_gpu_world",
           "init_gpu_world"]


def __getattr__(name: str):  # lazy: importing the package must not import torch
    if name in ("GpuCollective", "GpuEpoch"):
        from react.backends.gpu import collective

        return getattr(collective, name)
    if name in ("GpuError", "GpuWorld", "close_gpu_world", "init_gpu_world"):
        from react.backends.gpu import cuda as world

        return getattr(world, name)
    raise AttributeError(name)
