"""Start and stop one GPU rank process: the device, the NCCL process group, clear errors.

Ranks come from the environment as ``torchrun`` sets it; the process uses GPU ``LOCAL_RANK``.
Two ranks on one GPU are refused (NCCL refuses them too, later and less clearly), as is a host
without CUDA or without NCCL. Every collective gets the process group's timeout: NCCL's watchdog
aborts an operation that exceeds it, so a lost peer ends the process instead of hanging it.
"""

from __future__ import annotations

import datetime
import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from react.model.errors import ReactError

__all__ = ["MULTICAST_OFF", "GpuError", "GpuWorld", "close_gpu_world", "import_cuda_torch",
           "init_gpu_world", "ranks_from_env"]

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}
"""NVLink multicast off: on shared machines a program using it can take the GPUs down."""

_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


class GpuError(ReactError, RuntimeError):
    """The GPU backend cannot run here: no CUDA, no NCCL, too few GPUs, a missing variable."""


@dataclass(frozen=True, slots=True)
class GpuWorld:
    """This process's place in the job."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device_index: int


def import_cuda_torch() -> Any:
    """``torch`` with CUDA and NCCL, or :class:`GpuError` saying what is missing."""
    try:
        torch = importlib.import_module("torch")
        importlib.import_module("torch.distributed")
    except ImportError as exc:
        raise GpuError(f"the GPU backend needs PyTorch with CUDA, which is not importable "
                       f"({exc}); install it with `pip install 'react[torch]'`") from None
    if not torch.cuda.is_available():
        raise GpuError(f"the GPU backend needs a CUDA device; torch {torch.__version__} sees "
                       "none (a CPU-only build, or no GPU on this host)")
    if not (torch.distributed.is_available() and torch.distributed.is_nccl_available()):
        raise GpuError(f"the GPU backend needs NCCL; torch {torch.__version__} was built "
                       "without it")
    return torch


def ranks_from_env(env: Mapping[str, str] | None = None) -> tuple[int, int, int, int]:
    """``(rank, world_size, local_rank, local_world_size)`` from torchrun's variables."""
    env = os.environ if env is None else env
    missing = [k for k in _ENV if k not in env]
    if missing:
        raise GpuError(f"the GPU backend takes its rank from the environment; {missing} "
                       "not set (start each rank with torchrun, or set them)")
    try:
        rank, world, local = (int(env[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
        local_world = int(env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"]))
    except ValueError:
        raise GpuError("RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE must be integers, "
                       f"got {[env.get(k) for k in (*_ENV[:3], 'LOCAL_WORLD_SIZE')]}") from None
    if not (0 <= rank < world and 0 <= local < local_world <= world):
        raise GpuError(f"inconsistent ranks: RANK={rank} WORLD_SIZE={world} LOCAL_RANK={local} "
                       f"LOCAL_WORLD_SIZE={local_world}")
    return rank, world, local, local_world


def init_gpu_world(*, timeout_s: float = 120.0, device_index: int | None = None) -> GpuWorld:
    """Pick this rank's GPU and join the NCCL process group (every rank calls this).

    The GPU is ``LOCAL_RANK`` unless ``device_index`` names another (a launcher that places
    ranks on chosen GPUs of one host, :class:`~react.backends.gpu.job.GpuJob`).

    Raises
    ------
    GpuError
        No CUDA or NCCL, torchrun's variables missing, fewer GPUs on this host than ranks on it,
        or the process group could not form within ``timeout_s``.
    """
    for key, value in MULTICAST_OFF.items():
        os.environ.setdefault(key, value)
    rank, world, local, local_world = ranks_from_env()
    torch = import_cuda_torch()
    gpus = torch.cuda.device_count()
    if gpus < local_world:
        raise GpuError(f"rank {rank}: {local_world} ranks on this host but {gpus} GPU(s); the "
                       "GPU backend runs one rank per GPU")
    device = local if device_index is None else device_index
    if not (isinstance(device, int) and 0 <= device < gpus):
        raise GpuError(f"rank {rank}: GPU {device!r} does not exist; this host has {gpus} "
                       f"GPU(s) (0..{gpus - 1})")
    torch.cuda.set_device(device)
    dist = torch.distributed
    try:
        dist.init_process_group("nccl", rank=rank, world_size=world,
                                device_id=torch.device("cuda", device),
                                timeout=datetime.timedelta(seconds=timeout_s))
    except (RuntimeError, ValueError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else repr(exc)
        raise GpuError(f"rank {rank} of {world}: the NCCL process group did not form: "
                       f"{text}") from None
    return GpuWorld(rank, world, local, local_world, device)


def close_gpu_world() -> None:
    """Leave the process group (idempotent); call on every rank, also after an error."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
