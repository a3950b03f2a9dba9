"""Every pattern generator, run for real on one group of rank processes, checked against numpy.

``python -m react.runtime.selfcheck JOB.json RANK`` (the same job document as
:mod:`react.runtime.rank`; its pattern only fixes the ranks) runs RCollective over the job's
transport for every generator of :data:`react.patterns.GENERATORS` at the job's rank count, two
epochs each, and compares every rank's buffer with :func:`react.runtime.reference.expected_output`
(the collective's meaning in plain numpy; inputs are small integers, so float sums are exact).
On the torch transport, AllReduce results are also compared with ``torch.distributed``'s own
``all_reduce`` on the same process group. One process group serves every generator, so a
transport that starts slowly (``import torch``) starts once. Exit status 0 when every check held;
otherwise one line on stderr naming the generator, the epoch and the first wrong element.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from react.model.errors import ReactError
from react.patterns import patterns_at


def check_rank(spec: Mapping[str, Any], rank: int) -> list[str]:
    """Run every generator on this rank; return the names checked (raise on the first error)."""
    from react.model.verify import verify
    from react.runtime.collective import RCollective
    from react.runtime.rank import _transport, element_count, rank_input
    from react.runtime.reference import expected_output, initial_buffer

    n = len(spec["addresses"])
    dtype = str(spec["dtype"])
    count = element_count(float(spec["message_bytes"]), dtype)
    inputs = [rank_input(r, count, dtype) for r in range(n)]
    transport = _transport(spec, rank)
    collective = RCollective(transport, timeout_s=float(spec["timeout_s"]))
    checked = []
    epoch = 0
    try:
        for name, pattern in patterns_at(n).items():
            verify(pattern)
            want, defined = expected_output(pattern, inputs, rank)
            start = initial_buffer(pattern, inputs[rank], rank)
            for _ in range(2):
                buffer = start.copy()
                collective.run(pattern, buffer, epoch)
                if not np.array_equal(buffer[defined], want[defined]):
                    bad = int(np.flatnonzero(buffer[defined] != want[defined])[0])
                    raise ReactError(f"{name} at n={n}, epoch {epoch}: element {bad} is "
                                     f"{buffer[defined][bad]!r}, expected {want[defined][bad]!r}")
                if spec["transport"] == "torch" and pattern.kind == "allreduce":
                    _against_torch(name, inputs[rank], buffer)
                epoch += 1
            checked.append(name)
    finally:
        transport.close()
    return checked


def _against_torch(name: str, mine: np.ndarray, ours: np.ndarray) -> None:
    import torch

    tensor = torch.from_numpy(mine.copy())
    torch.distributed.all_reduce(tensor)
    if not np.array_equal(tensor.numpy(), ours):
        raise ReactError(f"{name}: RCollective's AllReduce differs from torch's all_reduce")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or not args[1].isdigit():
        print("usage: python -m react.runtime.selfcheck JOB.json RANK", file=sys.stderr)
        return 2
    rank = int(args[1])
    try:
        with open(args[0], encoding="utf-8") as fh:
            spec = json.load(fh)
        checked = check_rank(spec, rank)
    except (ReactError, OSError, ValueError, KeyError) as exc:
        print(f"rank {rank}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"rank": rank, "checked": checked}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
