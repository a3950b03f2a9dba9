"""A stand-in interpreter for GpuJob's processes on a machine without GPUs (tests only).

``python gpu_fake_rank.py -m MODULE ARGS...``: for ``react.backends.gpu.rank`` it runs a fake
rank, the real :func:`react.backends.gpu.rank.rank_loop` and :class:`TunerClient`, with a
timing model instead of NCCL; any other module (the tuner's leader) runs as itself. The model:
each flow starts when the flows it depends on end and moves its bytes at 10 GB/s, a few percent
apart per rank pair (no ties), three times slower into rank ``FAKE_SLOW_RANK`` (default 1).
Epoch ``e`` starts at ``1000 + 0.05 e`` s on every rank's clock. ``FAKE_FAIL_RANK`` and
``FAKE_FAIL_EPOCH`` make that rank exit 1 at that epoch.
"""

import json
import os
import runpy
import sys

RATE_BPS = 80e9


def model(pattern, message_bytes, slow):
    """Each flow's (start_s, end_s) from the epoch's start."""
    deps = pattern.dependencies()
    times = []
    for i, flow in enumerate(pattern.flows):
        start = max((times[j][1] for j in deps[i]), default=0.0)
        rate = RATE_BPS * (1 + 0.03 * ((3 * flow.src + 5 * flow.dst) % 7))
        size = pattern.flow_bytes(flow, message_bytes)
        times.append((start, start + 8 * size / (rate / 3 if flow.dst == slow else rate)))
    return times


class _Handle:
    def __init__(self, timings):
        self._timings = timings

    def timings(self):
        return self._timings


def fake_rank(job_file):
    from react.backends.gpu.rank import rank_loop
    from react.model.pattern import Pattern
    from react.runtime.timings import RankEpochTimings, RecvTiming, SendTiming
    from react.runtime.tuner import TunerClient, pattern_fingerprint

    spec = json.loads(open(job_file, encoding="utf-8").read())
    rank = int(os.environ["RANK"])
    slow = int(os.environ.get("FAKE_SLOW_RANK", "1"))
    fail_rank = int(os.environ.get("FAKE_FAIL_RANK", "-1"))
    fail_epoch = int(os.environ.get("FAKE_FAIL_EPOCH", "-1"))
    pattern = Pattern.from_dict(spec["pattern"])
    record = {"rank": rank, "epochs": [], "checks": [], "post_s": 0.0, "ran": []}
    client = None
    if spec["tuner"] is not None:
        client = TunerClient(rank, (spec["tuner"][0], int(spec["tuner"][1])),
                             timeout_s=spec["timeout_s"])

    def post(p, epoch):
        if rank == fail_rank and epoch == fail_epoch:
            print(f"rank {rank}: injected failure at epoch {epoch}", file=sys.stderr, flush=True)
            os._exit(1)
        base = 1000.0 + 0.05 * epoch
        times = model(p, spec["message_bytes"], slow)
        sends = tuple(SendTiming(i, base + s) for i, (s, _) in enumerate(times)
                      if p.flows[i].src == rank)
        recvs = tuple(RecvTiming(i, base + s, base + e) for i, (s, e) in enumerate(times)
                      if p.flows[i].dst == rank)
        last = max([e for i, (_, e) in enumerate(times) if rank in (p.flows[i].src,
                                                                   p.flows[i].dst)])
        record["ran"].append(pattern_fingerprint(p))
        return _Handle(RankEpochTimings(rank, epoch, base, base + last, sends, recvs))

    try:
        rank_loop(pattern, spec["epochs"], post, client=client,
                  report_late=spec["apply_delay_epochs"] >= 1, gap_s=spec["compute_gap_s"],
                  on_timings=lambda t: record["epochs"].append([t.start_s, t.end_s]))
    finally:
        if client is not None:
            client.close()
            record["tuner"] = {"waited_epochs": client.waited_epochs,
                               "waited_s": client.waited_s, "report_s": client.report_s,
                               "failure": client.failure}
    record["loop_wall_s"] = 0.0
    with open(os.path.join(spec["out_dir"], f"rank{rank}.json"), "w", encoding="utf-8") as fh:
        json.dump(record, fh)


def main():
    if len(sys.argv) < 3 or sys.argv[1] != "-m":
        print("usage: gpu_fake_rank.py -m MODULE ARGS...", file=sys.stderr)
        return 2
    module, args = sys.argv[2], sys.argv[3:]
    if module == "react.backends.gpu.rank":
        fake_rank(args[0])
        return 0
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
