"""One rank of a real job: a process that runs RCollective epoch after epoch under RTuner.

Started by a launcher (the emulator starts one per host namespace) as::

    python -m react.runtime.rank JOB.json RANK

``JOB.json`` (format ``react-rank-job/1``, written by :func:`job_spec`) holds the starting
pattern, the epochs, the message size, the transport and every rank's data address, the tuner's
address and the timeouts. The rank connects its transport (a full mesh of sockets, or a Gloo
process group), connects to the tuner, and then for every epoch: asks its
:class:`~react.runtime.tuner.TunerClient` which pattern is in force, refills its buffer with its
fixed input, runs the collective in place, checks the result against a plain numpy reduction of
every rank's input (every rank can compute every input: they are a function of the rank), hands
its flow timings to the tuner without waiting, and optionally idles ``compute_gap_s``.

Any failure ends the process with a non-zero status and one line on stderr that names the rank,
the epoch and the problem; the launcher turns that into the job's error.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from react.errors import ReactError
from react.pattern import Pattern

FORMAT = "react-rank-job/1"


def job_spec(
    *,
    job: str,
    pattern: Pattern,
    epochs: int,
    message_bytes: float,
    transport: str,
    addresses: Sequence[tuple[str, int]],
    tuner: tuple[str, int],
    connections: int = 1,
    seed: int = 0,
    timeout_s: float = 120.0,
    compute_gap_s: float = 0.0,
    dtype: str = "float32",
) -> dict[str, Any]:
    """The JSON document every rank of a job reads (module docstring)."""
    return {
        "format": FORMAT, "job": job, "pattern": pattern.to_dict(), "epochs": epochs,
        "message_bytes": message_bytes, "transport": transport,
        "addresses": [[h, p] for h, p in addresses], "tuner": list(tuner),
        "connections": connections, "seed": seed, "timeout_s": timeout_s,
        "compute_gap_s": compute_gap_s, "dtype": dtype,
    }


def element_count(message_bytes: float, dtype: str) -> int:
    """Whole elements of ``dtype`` in a message of ``message_bytes`` (at least one)."""
    return max(1, int(message_bytes) // np.dtype(dtype).itemsize)


def rank_input(rank: int, count: int, dtype: str) -> np.ndarray:
    """Rank ``rank``'s fixed input: small integers, so float sums are exact and order-free."""
    return ((np.arange(count) % 13) + 7 * rank + 1).astype(dtype)


def _interface() -> str:
    """The namespace's one non-loopback interface (Gloo must bind it, not loopback)."""
    names = sorted(n for n in os.listdir("/sys/class/net") if n != "lo")
    return names[0] if names else "lo"


def _transport(spec: Mapping[str, Any], rank: int) -> Any:
    addresses = [(str(h), int(p)) for h, p in spec["addresses"]]
    timeout_s = float(spec["timeout_s"])
    if spec["transport"] == "socket":
        from react.runtime.socket_transport import SocketTransport

        return SocketTransport(rank, addresses, connections=int(spec["connections"]),
                               seed=int(spec["seed"]), timeout_s=timeout_s)
    if spec["transport"] == "torch":
        from react.runtime.torch_transport import TorchTransport, init_gloo

        os.environ.setdefault("GLOO_SOCKET_IFNAME", _interface())
        init_gloo(rank, len(addresses), addresses[0], timeout_s=timeout_s)
        return TorchTransport(timeout_s=timeout_s)
    raise ReactError(f"unknown transport {spec['transport']!r}; expected socket or torch")


def run_rank(spec: Mapping[str, Any], rank: int) -> None:
    """The rank's whole life (module docstring)."""
    from react.runtime.collective import RCollective
    from react.runtime.reference import expected_output
    from react.runtime.tuner import TunerClient

    if spec.get("format") != FORMAT:
        raise ReactError(f"job spec: expected format {FORMAT!r}, got {spec.get('format')!r}")
    pattern = Pattern.from_dict(spec["pattern"])
    dtype = str(spec["dtype"])
    count = element_count(float(spec["message_bytes"]), dtype)
    inputs = [rank_input(r, count, dtype) for r in range(pattern.n)]
    mine = inputs[pattern.ranks.index(rank)]
    buffer = np.empty_like(mine)
    timeout_s = float(spec["timeout_s"])
    gap_s = float(spec["compute_gap_s"])
    transport = _transport(spec, rank)
    client = TunerClient(rank, (str(spec["tuner"][0]), int(spec["tuner"][1])),
                         timeout_s=timeout_s)
    collective = RCollective(transport, timeout_s=timeout_s)
    expected: dict[Any, tuple[np.ndarray, np.ndarray]] = {}
    try:
        for epoch in range(int(spec["epochs"])):
            pattern = client.pattern_for(epoch, pattern)
            np.copyto(buffer, mine)
            timings = collective.run(pattern, buffer, epoch)
            client.report(timings)
            key = (pattern.kind, pattern.ranks, pattern.root, pattern.chunks)
            if key not in expected:
                expected[key] = expected_output(pattern, inputs, rank)
            want, defined = expected[key]
            if not np.array_equal(buffer[defined], want[defined]):
                bad = int(np.flatnonzero(buffer[defined] != want[defined])[0])
                raise ReactError(f"wrong result at element {bad}: got "
                                 f"{buffer[defined][bad]!r}, expected {want[defined][bad]!r}")
            if gap_s > 0:
                time.sleep(gap_s)
    finally:
        client.close()
        collective.close() if hasattr(collective, "close") else None
        transport.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or not args[1].isdigit():
        print("usage: python -m react.runtime.rank JOB.json RANK", file=sys.stderr)
        return 2
    rank = int(args[1])
    try:
        with open(args[0], encoding="utf-8") as fh:
            spec = json.load(fh)
        run_rank(spec, rank)
    except (ReactError, OSError, ValueError, KeyError) as exc:
        print(f"rank {rank}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
