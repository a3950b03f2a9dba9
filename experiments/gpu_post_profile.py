"""Where RCollective's host time goes on NCCL: cProfile of posting, rank 0 prints the top.

``torchrun --standalone --nproc-per-node=N experiments/gpu_post_profile.py [--mb 100]``: runs
the ring AllReduce back to back (timing on, read one epoch late) for 200 epochs after warm-up
and prints the functions with the most own time on rank 0.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from react.backends.gpu.cuda import close_gpu_world, init_gpu_world  # noqa: E402
from react.patterns import generator  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--epochs", type=int, default=200)
    args = parser.parse_args()
    world = init_gpu_world()
    import torch

    from react.backends.gpu.collective import GpuCollective

    coll = GpuCollective(timing=True)
    pattern = generator("allreduce_ring")(world.world_size)
    buf = torch.zeros(int(args.mb * 1e6) // 4, device="cuda")
    prev = None
    for e in range(20):
        ep = coll.run(pattern, buf, e)
        if prev is not None:
            prev.timings()
        prev = ep
    prof = cProfile.Profile()
    prof.enable()
    for e in range(20, 20 + args.epochs):
        ep = coll.run(pattern, buf, e)
        prev.timings()
        prev = ep
    prev.timings()
    prof.disable()
    if world.rank == 0:
        stats = pstats.Stats(prof)
        stats.sort_stats("tottime").print_stats(18)
    coll.close()
    close_gpu_world()
    return 0


if __name__ == "__main__":
    sys.exit(main())
