"""The emulated network: a flowsim Topology as Linux network namespaces on one machine.

Real processes (ranks, background senders) exchange real TCP bytes over veth links shaped with
``tc`` at a scaled rate, through a Linux bridge (a star) or router namespaces with kernel ECMP
(leaf-spine, fat-tree), so congestion, queueing and path choice are the kernel's, not a model's.

Needs
    Linux, **root** (namespaces, veth, tc), and **iproute2** (``ip``, ``tc``). Only the kernel
    features measured on the target machines are used: netns, veth, bridge, htb, bfifo, the
    u32 classifier, multipath routes (no netem, fq, sfq or red). Python side: the standard
    library (the traffic script) and numpy (planning). Without root or ``ip`` every entry
    point raises :class:`EmuError` saying so; the tests marked ``emu`` skip.

Starts and stops
    ``EmuNetwork(topology, hosts=...)`` builds everything in its constructor (0.4-0.8 s for
    a 16-host star) and ``close()`` removes it (30-70 ms); use it as a context manager. Teardown
    also runs on a failed build, at interpreter exit and on SIGINT/SIGTERM. Every namespace is
    named ``{prefix}-{node}`` with a per-run prefix ``rct<tag>`` and every link lives inside
    them, so ``clean()`` (``react emu clean``) removes whatever a run killed with SIGKILL left.

Layout: :mod:`.plan` (what to build, pure data), :mod:`.build` (the plan made real: ``ip`` and
``tc`` commands), :mod:`.tc` (shapers), :mod:`.network` (:class:`EmuNetwork`), :mod:`.traffic`
(bounded background sender and sink script), :mod:`.probe` (one timed transfer), :mod:`.job`
(:class:`~.job.EmuJob`: a job of real ranks, started through
:class:`react.runtime.launcher.RankLauncher`), :mod:`.cleanup` (teardown hooks, :func:`clean`),
:mod:`.limits` (:func:`max_hosts`), :mod:`.names`, :mod:`.shell`, :mod:`.spec` (the scenario's
``[emu]`` table). The ``react emu`` command is :mod:`react.commands.emu`. Measured behaviour:
``docs/emulator.md``.
"""

from react.backends.emu.cleanup import clean
from react.backends.emu.errors import EmuError, EmuInputError
from react.backends.emu.limits import line_rate_hosts, max_hosts
from react.backends.emu.names import HOST_IFNAME, PROJECT_PREFIX
from react.backends.emu.network import Background, EmuNetwork
from react.backends.emu.probe import TransferResult, transfer

__all__ = [
    "HOST_IFNAME",
    "PROJECT_PREFIX",
    "Background",
    "EmuError",
    "EmuInputError",
    "EmuNetwork",
    "TransferResult",
    "clean",
    "line_rate_hosts",
    "max_hosts",
    "transfer",
]
