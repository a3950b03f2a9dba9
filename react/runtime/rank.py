"""One rank of a real job: a process that runs RCollective epoch after epoch under RTuner.

Started by a launcher (the emulator starts one per host namespace) as::

    python -m react.runtime.rank JOB.json RANK

``JOB.json`` (format ``react-rank-job/1``, written by :func:`job_spec`) holds the starting
pattern, the epochs, the message size, the transport and every rank's data address, the tuner's
address and the timeouts. The rank connects its transport (a full mesh of sockets, or a Gloo
process group), connects to the tuner, and then for every epoch: asks its
:class:`~react.runtime.tuner.TunerClient` which pattern is in force, refills its buffer with its
fixed input (zero where its kind holds no data yet), runs the collective in place, checks the
result against a plain numpy reduction of
every rank's input (every rank can compute every input: they are a function of the rank), hands
its flow timings to the tuner without waiting, and optionally idles ``compute_gap_s``.

Any failure ends the process with a non-zero status and one line on stderr that names the rank,
the epoch and the problem; the launcher turns that into the job's error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from react.model.errors import ReactError
from react.model.pattern import Pattern

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


def _interface(address: str) -> str:
    """The interface that holds ``address`` (Gloo must bind it, or it binds loopback and hangs).

    Read from ``ip -j -4 addr`` of the rank's namespace; loopback addresses give ``lo``.
    """
    if address.startswith("127."):
        return "lo"
    listing = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True,
                             check=False).stdout
    for link in json.loads(listing or "[]"):
        if any(a.get("local") == address for a in link.get("addr_info", ())):
            return str(link["ifname"])
    raise ReactError(f"no interface holds the rank's address {address}")


def _transport(spec: Mapping[str, Any], rank: int) -> Any:
    addresses = [(str(h), int(p)) for h, p in spec["addresses"]]
    timeout_s = float(spec["timeout_s"])
    if spec["transport"] == "socket":
        from react.runtime.socket_transport import SocketTransport

        return SocketTransport(rank, addresses, connections=int(spec["connections"]),
                               seed=int(spec["seed"]), timeout_s=timeout_s)
    if spec["transport"] == "torch":
        from react.runtime.torch_transport import TorchTransport, init_torch_group

        os.environ.setdefault("GLOO_SOCKET_IFNAME", _interface(addresses[rank][0]))
        init_torch_group(rank, len(addresses), addresses[0], backend="gloo",
                         timeout_s=timeout_s)
        return TorchTransport(timeout_s=timeout_s, owns_group=True)
    raise ReactError(f"unknown transport {spec['transport']!r}; expected socket or torch")


def run_rank(spec: Mapping[str, Any], rank: int) -> None:
    """The rank's whole life (module docstring)."""
    from react.runtime.collective import RCollective
    from react.runtime.reference import expected_output, initial_buffer
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
    start = initial_buffer(pattern, mine, rank)
    want, defined = expected_output(pattern, inputs, rank)
    try:
        for epoch in range(int(spec["epochs"])):
            # a switch keeps the collective (the client checks kind, ranks, chunks, root), so
            # the start and the expected result stay the same
            pattern = client.pattern_for(epoch, pattern)
            np.copyto(buffer, start)
            timings = collective.run(pattern, buffer, epoch)
            client.report(timings)
            if not np.array_equal(buffer[defined], want[defined]):
                bad = int(np.flatnonzero(buffer[defined] != want[defined])[0])
                raise ReactError(f"epoch {epoch}, {pattern.name or pattern.kind}: wrong result at "
                                 f"element {bad}: got {buffer[defined][bad]!r}, expected "
                                 f"{want[defined][bad]!r}")
            if gap_s > 0:
                time.sleep(gap_s)
    finally:
        client.close()
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
