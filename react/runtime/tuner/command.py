"""RTuner's leader as a process: its spec file, starting it, and its command line.

A job on real ranks writes the spec with :func:`tuner_spec`, starts the leader with
:func:`spawn_leader` (``python -m react.runtime.tuner --spec SPEC.json --out RESULT.json``,
:func:`main`) and reads its result with :func:`~react.runtime.tuner.messages.read_result`.

The controller crosses the process boundary as plain values: the spec's ``controller`` key holds
its reference (``"react"``, a baseline's name, ``"package.module:Factory"`` or
``"/abs/path/file.py:Factory"``, :mod:`react.control.policies`) and ``react`` the
:class:`~react.control.controller.ControllerConfig` it was made with; :func:`leader_from_spec`
makes it again with :func:`react.control.policies.make_controller`, so any controller other than
REACT runs inside the same guard as on the simulator.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import select
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from react.control.controller import ControllerConfig
from react.control.policies import ControllerFault, controller_reference, make_controller
from react.model.errors import ReactError
from react.model.pattern import Pattern
from react.runtime.channel import MAX_MESSAGE_BYTES
from react.runtime.tuner.leader import TunerLeader

__all__ = ["leader_from_spec", "main", "spawn_leader", "tuner_spec"]

_SPEC_KEYS = {"pattern", "world_size", "message_bytes", "flow_bytes", "controller", "react",
              "batch_epochs", "apply_delay_epochs", "host", "port", "timeout_s",
              "max_message_bytes"}


def tuner_spec(pattern: Pattern, controller: Any, *, message_bytes: float,
               apply_delay_epochs: int, host: str, timeout_s: float,
               flow_bytes: Sequence[float] | None = None) -> dict[str, Any]:
    """The spec of a job's leader (what :func:`leader_from_spec` reads), listening on any port.

    ``controller`` (None: the leader only collects) goes by reference and configuration
    (:func:`react.control.policies.controller_reference`).

    Raises
    ------
    ControllerLoadError
        If ``controller`` cannot be made again in another process (it names the controller).
    """
    ref, config = ("react", None) if controller is None else controller_reference(controller)
    return {
        "pattern": pattern.to_dict(), "world_size": pattern.n,
        "message_bytes": float(message_bytes),
        "flow_bytes": None if flow_bytes is None else [float(b) for b in flow_bytes],
        "controller": ref, "react": None if config is None else asdict(config),
        "apply_delay_epochs": int(apply_delay_epochs), "host": host, "port": 0,
        "timeout_s": float(timeout_s),
    }


def leader_from_spec(spec: Mapping[str, Any]) -> TunerLeader:
    """Build a leader from a spec mapping (keys: see ``python -m react.runtime.tuner --help``)."""
    if not isinstance(spec, Mapping):
        raise ReactError(f"tuner spec: expected a JSON object, got {type(spec).__name__}")
    unknown = sorted(set(spec) - _SPEC_KEYS)
    if unknown:
        raise ReactError(f"tuner spec: unknown key(s) {unknown}; expected some of "
                         f"{sorted(_SPEC_KEYS)}")
    for key in ("pattern", "message_bytes"):
        if key not in spec:
            raise ReactError(f"tuner spec: missing key {key!r}")
    pattern = Pattern.from_dict(spec["pattern"])
    react = spec.get("react")
    controller = None
    if react not in (None, False):
        if react is True:
            react = {}
        if not isinstance(react, Mapping):
            raise ReactError(f"tuner spec: react must be true, false, null or a table of "
                             f"controller parameters, got {react!r}")
        params = {"batch_epochs": spec.get("batch_epochs", 6), **react}
        config = ControllerConfig.from_mapping(params, where="tuner spec react")
        controller = make_controller(spec.get("controller", "react"), pattern, config)
    return TunerLeader(
        pattern, spec.get("world_size", pattern.n), controller=controller,
        apply_delay_epochs=spec.get("apply_delay_epochs", 5),
        message_bytes=spec["message_bytes"], flow_bytes=spec.get("flow_bytes"),
        host=spec.get("host", "0.0.0.0"), port=spec.get("port", 0),
        timeout_s=spec.get("timeout_s", 30.0),
        max_message_bytes=spec.get("max_message_bytes", MAX_MESSAGE_BYTES),
    )


def spawn_leader(
    spec_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    popen: Callable[..., subprocess.Popen[str]] = subprocess.Popen,
    timeout_s: float = 30.0,
) -> tuple[subprocess.Popen[str], tuple[str, int]]:
    """Start ``python -m react.runtime.tuner`` and read the address it listens on.

    ``popen`` runs the command (e.g. ``lambda argv, **kw: network.popen("h0", argv, **kw)`` to
    start it inside an emulated host); it gets ``stdout=PIPE, text=True``. Returns the process
    and ``(host, port)`` as the leader printed them (``0.0.0.0`` when it listens on every
    address: use the host's IP). The caller waits for or kills the process.

    Raises
    ------
    ReactError
        If the leader exits or prints nothing within ``timeout_s`` (its stderr in the message).
    """
    argv = [sys.executable, "-m", "react.runtime.tuner", "--spec", os.fspath(spec_path),
            "--out", os.fspath(out_path)]
    proc = popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    ready = select.select([proc.stdout], [], [], timeout_s)[0]
    line = proc.stdout.readline() if ready else ""
    try:
        message = json.loads(line)
        address = (str(message["host"]), int(message["port"]))
    except (ValueError, TypeError, KeyError):
        proc.kill()
        _, err = proc.communicate(timeout=timeout_s)
        raise ReactError(f"the tuner leader did not start within {timeout_s} s "
                         f"(printed {line!r}; stderr: {(err or '').strip()[-500:]!r})") from None
    return proc, address


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m react.runtime.tuner --spec SPEC.json --out RESULT.json``.

    Prints ``{"type": "listening", "host": h, "port": p}`` as one line on stdout once it
    listens, then ``{"type": "epoch", "epoch": e}`` as each epoch is merged (progress); serves
    the job, writes the result. Exit status: 0 when every rank finished and every epoch merged,
    3 when the result is partial (see its ``events``), 2 on a bad spec (a controller that does
    not load included), 1 when the controller failed (a
    :class:`~react.control.policies.ControllerFault`, named on stderr; no result is written).
    """
    parser = argparse.ArgumentParser(
        prog="python -m react.runtime.tuner",
        description="RTuner's leader. Spec keys: pattern (Pattern.to_dict), message_bytes; "
                    "optional world_size, flow_bytes, controller (a reference: react, never, "
                    "random, module:Factory or file.py:Factory; default react), react (true or "
                    "a table of controller parameters; absent: collect only), batch_epochs (6), "
                    "apply_delay_epochs (5), host (0.0.0.0), port (0: any), timeout_s (30), "
                    "max_message_bytes.",
    )
    parser.add_argument("--spec", required=True, help="the job's spec (JSON)")
    parser.add_argument("--out", required=True, help="where to write the result (JSON)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        with open(args.spec, encoding="utf-8") as fh:
            spec = json.load(fh)
        leader = leader_from_spec(spec)
    except (OSError, ValueError, ReactError) as exc:
        print(f"error: tuner spec {args.spec!r}: {exc}", file=sys.stderr)
        return 2
    host, port = leader.address
    print(json.dumps({"type": "listening", "host": host, "port": port}), flush=True)
    leader.on_epoch = lambda epoch: print(json.dumps({"type": "epoch", "epoch": epoch}),
                                          flush=True)
    try:
        doc = leader.run()
    except ControllerFault as exc:  # the policy's own mistake: the job must fail, not go on
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    tmp = f"{args.out}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, allow_nan=False)
        fh.write("\n")
    os.replace(tmp, args.out)
    return 0 if doc["complete"] else 3
