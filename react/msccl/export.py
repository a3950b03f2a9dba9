"""A pattern as an MSCCL XML algorithm (the layout is :mod:`react.msccl.layout`'s).

Each flow ``(t, u -> v)`` becomes a send ``s`` in GPU ``u``'s threadblock that sends to ``v`` and
a receive (``r`` for a copy, ``rrc`` for a reduce) in GPU ``v``'s threadblock that receives from
``u``, on the same channel; a flow whose chunks are not contiguous units becomes one send and one
receive per run. Threadblocks list their instructions in step order, so the k-th send meets the
k-th receive. The channel is the flow's chunk graph (mod 32, MSCCL's most), moved to the next
free one when that threadblock already has a message at the same step, so that independent
chunk graphs use separate connections and one threadblock never holds two messages of one step.

Dependencies are REACT's execution rule (DESIGN.md, Algorithm 2): within one chunk graph, a
rank's step-``t`` instructions wait for all of its instructions of its previous step in that
graph. That covers every read-after-write, write-after-read and write-after-write hazard on a
chunk, so the program has no data race. MSCCL allows one dependency per instruction; the others
go into ``nop`` instructions just before it, as msccl-tools does.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from react.model.errors import MscclError
from react.model.pattern import Flow, Pattern
from react.msccl.layout import buffer_sizes, data_buffer, unit_layout

MAX_CHANNELS = 32
"""MSCCL's limit on channels (``MAXCHANNELS``)."""
MAX_COUNT = 72
"""MSCCL runtimes refuse ``cnt >= 72`` (``MSCCL_MAX_COUNT``): longer runs are split."""
MAX_STEPS = 256
"""Instructions per threadblock (``MSCCL_MAX_NUM_STEPS``)."""
MAX_TBS_PER_CHANNEL = 32
"""Threadblocks of one GPU on one channel (``MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL``)."""

_RECEIVE = {"copy": "r", "reduce": "rrc"}


@dataclass(slots=True)
class _Entry:
    """One flow's instructions in one threadblock (one per contiguous run of units)."""

    flow: Flow
    runs: list[tuple[int, int]]
    kind: str  # "s", "r" or "rrc"
    deps: list[_Entry] = field(default_factory=list)
    tb: _Block | None = None
    first: int = 0  # index of its first instruction (after its nops)
    needed: bool = False  # some instruction depends on it (MSCCL's hasdep)

    @property
    def last(self) -> int:
        return self.first + len(self.runs) - 1


@dataclass(slots=True)
class _Block:
    """A threadblock: one peer to send to or receive from, on one channel."""

    gpu: int
    send: int
    recv: int
    chan: int
    entries: list[_Entry] = field(default_factory=list)
    id: int = -1


def to_msccl_xml(pattern: Pattern, *, proto: str = "Simple") -> str:
    """The MSCCL XML algorithm of ``pattern`` (see the module docstring).

    Parameters
    ----------
    pattern : Pattern
        Ranks must be ``0..n-1`` (MSCCL's GPU ids).
    proto : {"Simple", "LL", "LL128"}
        NCCL protocol written in the ``proto`` attribute.

    Raises
    ------
    MscclError
        When the pattern has no MSCCL form (ranks not ``0..n-1``, chunk sizes without a small
        common unit, more than 32 channels needed).
    """
    if proto not in ("Simple", "LL", "LL128"):
        raise MscclError(f"to_msccl_xml: proto={proto!r}, expected 'Simple', 'LL' or 'LL128'")
    n = pattern.n
    if pattern.ranks != tuple(range(n)):
        raise MscclError(
            f"to_msccl_xml: MSCCL names GPUs 0..{n - 1}, the pattern's ranks are {pattern.ranks}"
        )
    units, layout = unit_layout(pattern)
    blocks = _place(pattern, layout)
    _link(pattern, blocks)
    return _render(pattern, blocks, units, layout, proto)


def write_msccl(pattern: Pattern, path: str | os.PathLike[str], *, proto: str = "Simple") -> Path:
    """Write :func:`to_msccl_xml` of ``pattern`` to ``path``; return the path."""
    out = Path(path)
    out.write_text(to_msccl_xml(pattern, proto=proto) + "\n", encoding="utf-8")
    return out


def _runs(flow: Flow, layout: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    units = sorted(u for c in flow.chunks for u in range(layout[c][0], sum(layout[c])))
    runs: list[tuple[int, int]] = []
    for u in units:
        if runs and runs[-1][0] + runs[-1][1] == u and runs[-1][1] < MAX_COUNT - 1:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((u, 1))
    return runs


def _place(pattern: Pattern, layout: tuple[tuple[int, int], ...]) -> dict[tuple, _Block]:
    """Put every flow's send and receive into threadblocks (keyed by gpu, send, recv, chan)."""
    blocks: dict[tuple, _Block] = {}
    busy: set[tuple[int, int, int, int]] = set()
    for flow in pattern.flows:
        graph = pattern.chunk_graph_of_flow(flow)
        for shift in range(MAX_CHANNELS):
            chan = (graph + shift) % MAX_CHANNELS
            if (flow.src, flow.dst, chan, flow.step) not in busy:
                break
        else:
            raise MscclError(
                f"to_msccl_xml: rank {flow.src} sends to {flow.dst} more than {MAX_CHANNELS} "
                f"messages at step {flow.step}; MSCCL has {MAX_CHANNELS} channels"
            )
        busy.add((flow.src, flow.dst, chan, flow.step))
        runs = _runs(flow, layout)
        for key, kind in (((flow.src, flow.dst, -1, chan), "s"),
                          ((flow.dst, -1, flow.src, chan), _RECEIVE[flow.op])):
            block = blocks.get(key)
            if block is None:
                block = blocks[key] = _Block(*key)
            entry = _Entry(flow, runs, kind, tb=block)
            block.entries.append(entry)
    return blocks


def _link(pattern: Pattern, blocks: dict[tuple, _Block]) -> None:
    """Number threadblocks and instructions and attach each entry's dependencies."""
    per_rank_graph: dict[tuple[int, int], dict[int, list[_Entry]]] = {}
    for block in blocks.values():
        for entry in block.entries:
            graph = pattern.chunk_graph_of_flow(entry.flow)
            steps = per_rank_graph.setdefault((block.gpu, graph), {})
            steps.setdefault(entry.flow.step, []).append(entry)
    for steps in per_rank_graph.values():
        order = sorted(steps)
        for before, now in zip(order, order[1:], strict=False):
            for entry in steps[now]:
                entry.deps = [e for e in steps[before] if e.tb is not entry.tb]
                for e in entry.deps:
                    e.needed = True
    by_gpu: dict[int, list[_Block]] = {}
    for block in blocks.values():
        by_gpu.setdefault(block.gpu, []).append(block)
    for gpu, gpu_blocks in by_gpu.items():
        gpu_blocks.sort(key=lambda b: (b.send, b.recv, b.chan))
        per_channel = Counter(b.chan for b in gpu_blocks)
        chan, count = per_channel.most_common(1)[0]
        if count > MAX_TBS_PER_CHANNEL:
            raise MscclError(f"to_msccl_xml: gpu {gpu} needs {count} threadblocks on channel "
                             f"{chan}; MSCCL allows {MAX_TBS_PER_CHANNEL}")
        for i, block in enumerate(gpu_blocks):
            block.id = i
            at = 0
            for entry in block.entries:
                entry.first = at + max(0, len(entry.deps) - 1)
                at = entry.last + 1
            if at > MAX_STEPS:
                raise MscclError(f"to_msccl_xml: gpu {gpu} threadblock {i} needs {at} steps; "
                                 f"MSCCL allows {MAX_STEPS}")


def _render(pattern: Pattern, blocks: dict[tuple, _Block], units: int,
            layout: tuple[tuple[int, int], ...], proto: str) -> str:
    n = pattern.n
    buf = data_buffer(pattern.kind)
    i_chunks, o_chunks = buffer_sizes(pattern.kind, units, n)
    algo = ET.Element("algo", {
        "name": pattern.name or f"react_{pattern.kind}",
        "proto": proto,
        "nchannels": str(1 + max((b.chan for b in blocks.values()), default=0)),
        "nchunksperloop": str(units),
        "ngpus": str(n),
        "coll": pattern.kind,
        "inplace": "1",
        "react_chunks": " ".join(f"{off}:{cnt}" for off, cnt in layout),
    })
    if pattern.root is not None:
        algo.set("react_root", str(pattern.root))
    by_gpu: dict[int, list[_Block]] = {g: [] for g in range(n)}
    for block in blocks.values():
        by_gpu[block.gpu].append(block)
    for gpu in range(n):
        node = ET.SubElement(algo, "gpu", {"id": str(gpu), "i_chunks": str(i_chunks),
                                           "o_chunks": str(o_chunks), "s_chunks": "0"})
        for block in sorted(by_gpu[gpu], key=lambda b: b.id):
            tb = ET.SubElement(node, "tb", {"id": str(block.id), "send": str(block.send),
                                            "recv": str(block.recv), "chan": str(block.chan)})
            index = 0
            for entry in block.entries:
                for dep in entry.deps[:-1]:
                    _step(tb, index, "nop", buf, (-1, 0), dep, False, None)
                    index += 1
                for k, run in enumerate(entry.runs):
                    last_dep = entry.deps[-1] if entry.deps and k == 0 else None
                    needed = entry.needed and k == len(entry.runs) - 1
                    _step(tb, index, entry.kind, buf, run, last_dep, needed, entry.flow.step)
                    index += 1
    ET.indent(algo, space="  ")
    return ET.tostring(algo, encoding="unicode")


def _step(tb: ET.Element, index: int, kind: str, buf: str, run: tuple[int, int],
          dep: _Entry | None, needed: bool, step: int | None) -> None:
    attrs = {
        "s": str(index), "type": kind,
        "srcbuf": buf, "srcoff": str(run[0]), "dstbuf": buf, "dstoff": str(run[0]),
        "cnt": str(run[1]),
        "depid": str(dep.tb.id) if dep is not None and dep.tb is not None else "-1",
        "deps": str(dep.last) if dep is not None else "-1",
        "hasdep": "1" if needed else "0",
    }
    if step is not None:
        attrs["react_step"] = str(step)
    ET.SubElement(tb, "step", attrs)
