"""Read an MSCCL XML algorithm into a :class:`~react.model.pattern.Pattern`, checking it on the way.

Three passes, each rejecting what it cannot accept with the GPU, threadblock and step at fault:

1. *Syntax* (:mod:`react.msccl.parse`): the elements and attributes MSCCL runtimes read.
2. *Matching*: the k-th send of GPU ``u``'s threadblock to ``v`` on channel ``c`` is the k-th
   receive of ``v``'s threadblock from ``u`` on ``c``; counts and sizes must agree, and the data
   must arrive where it left (REACT patterns keep every chunk at its place).
3. *Timing*: each message gets a logical step, one more than the latest of what its two ends
   wait for (the previous instruction of each threadblock, the ``depid``/``deps`` dependency,
   and for a fused receive-and-send the message it forwards). A wait cycle is a deadlock and is
   reported. A ``react_step`` attribute (ours) fixes the step instead, when it is not earlier
   than what the message waits for.

The result is then checked by :func:`react.model.verify.verify`: an unsound algorithm (a lost or
double-counted contribution, data sent before it is held) is rejected naming the message.
"""

from __future__ import annotations

import os
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from react.model.errors import MscclError, PatternError
from react.model.pattern import Chunk, Flow, Pattern
from react.model.verify import verify
from react.msccl.parse import Algo, Instr, parse_algo

_SENDS = ("s", "rcs", "rrs", "rrcs")
_RECEIVES = ("r", "rcs", "rrs", "rrc", "rrcs")
_REDUCES = ("rrs", "rrc", "rrcs")


@dataclass(frozen=True, slots=True)
class _Message:
    """One matched send/receive pair: ``units`` go from GPU ``src`` to ``dst``."""

    src: int
    dst: int
    sender: Instr
    receiver: Instr
    units: tuple[int, int]  # (first unit, count)


def read_msccl(path: str | os.PathLike[str], *, check: bool = True) -> Pattern:
    """:func:`from_msccl_xml` of the file at ``path`` (errors name the file)."""
    source = os.fspath(path)
    text = Path(path).read_text(encoding="utf-8")
    return from_msccl_xml(text, source=source, check=check)


def from_msccl_xml(text: str, *, source: str = "MSCCL XML", check: bool = True) -> Pattern:
    """The pattern an MSCCL XML algorithm implements.

    Parameters
    ----------
    text : str
        The XML (an ``<algo>`` element).
    source : str
        Named in error messages (a file name).
    check : bool
        Run :func:`react.model.verify.verify` on the result (default); off only to inspect an
        algorithm that is known to be unsound.

    Raises
    ------
    MscclError
        Malformed XML, a collective REACT has no pattern for (alltoall, custom), buffers it does
        not model (scratch), unmatched sends, a deadlock, or an unsound algorithm; the message
        names the GPU, threadblock and step.
    """
    algo = parse_algo(text, source)
    _check_in_place(algo)
    messages = _match(algo)
    steps = _time(algo, messages)
    pattern = _pattern(algo, messages, steps)
    if check:
        try:
            verify(pattern)
        except PatternError as exc:
            raise MscclError(
                f"{source}: the algorithm is unsound: {exc}{_where(exc, messages, steps)}"
            ) from None
    return pattern


# -- matching --------------------------------------------------------------------------------------
def _check_in_place(algo: Algo) -> None:
    """An instruction with a source and a destination must keep the data where it is (a cpy or
    re between the input and output views of one chunk is fine: a no-op for REACT)."""
    for gpu in algo.gpus:
        for tb in gpu.tbs:
            for i in tb.instrs:
                if i.src_units and i.dst_units and i.src_units != i.dst_units:
                    raise MscclError(
                        f"{algo.source}: {i.where} moves units {_span(i.src_units)} to "
                        f"{_span(i.dst_units)}; REACT patterns keep every chunk at its place"
                    )


def _match(algo: Algo) -> list[_Message]:
    """Pair the k-th send of every connection (sender, receiver, channel) with its k-th
    receive, checking counts, sizes and places."""
    src = algo.source
    messages: list[_Message] = []
    receivers: dict[tuple[int, int, int], list] = {}
    for gpu in algo.gpus:
        for tb in gpu.tbs:
            if tb.recv >= 0:
                receivers.setdefault((tb.recv, gpu.id, tb.chan), []).append(tb)
    senders: dict[tuple[int, int, int], list] = {}
    for gpu in algo.gpus:
        for tb in gpu.tbs:
            if tb.send >= 0:
                senders.setdefault((gpu.id, tb.send, tb.chan), []).append(tb)
    for table, what in ((senders, "send to"), (receivers, "receive from")):
        for (a, b, chan), tbs in table.items():
            if len(tbs) > 1:
                me, peer = (a, b) if what == "send to" else (b, a)
                raise MscclError(
                    f"{src}: gpu {me} threadblocks {tbs[0].id} and {tbs[1].id} both {what} gpu "
                    f"{peer} on channel {chan}; MSCCL allows one per peer and channel"
                )
    for key in sorted(set(senders) | set(receivers)):
        u, v, chan = key
        out = [i for i in (senders[key][0].instrs if key in senders else ()) if i.type in _SENDS]
        inn = [i for i in (receivers[key][0].instrs if key in receivers else ())
               if i.type in _RECEIVES]
        if len(out) != len(inn):
            longer = out if len(out) > len(inn) else inn
            raise MscclError(
                f"{src}: gpu {u} sends {len(out)} message(s) to gpu {v} on channel {chan} but "
                f"gpu {v} receives {len(inn)} from gpu {u} on that channel (first unmatched: "
                f"{longer[min(len(out), len(inn))].where})"
            )
        for s, r in zip(out, inn, strict=True):
            if s.cnt != r.cnt:
                raise MscclError(f"{src}: {s.where} sends cnt={s.cnt} but {r.where} receives "
                                 f"cnt={r.cnt}")
            sent, got = s.send_units, r.recv_units
            if sent != got:
                raise MscclError(
                    f"{src}: {s.where} sends units {_span(sent)} and {r.where} stores them at "
                    f"units {_span(got)}; REACT patterns keep every chunk at its place"
                )
            messages.append(_Message(u, v, s, r, sent))
    return messages


# -- timing ----------------------------------------------------------------------------------------
def _time(algo: Algo, messages: list[_Message]) -> list[int]:
    """The logical step of every message (see the module docstring)."""
    # Nodes: per instruction its start S and done D (and E, a send's end); per message its
    # step F. Each value is the latest of its predecessors, plus one for F.
    ids: dict[tuple[str, int], int] = {}
    instrs = [i for gpu in algo.gpus for tb in gpu.tbs for i in tb.instrs]

    def node(kind: str, key: int) -> int:
        return ids.setdefault((kind, key), len(ids))

    preds: dict[int, list[int]] = {}
    incoming: dict[int, int] = {}
    outgoing: dict[int, int] = {}
    for m, msg in enumerate(messages):
        outgoing[id(msg.sender)] = m
        incoming[id(msg.receiver)] = m
    for i in instrs:
        start = preds.setdefault(node("S", id(i)), [])
        if i.prev is not None:
            # pieces of one message (a flow split into runs, marked by equal react_step) go
            # together; otherwise a threadblock's next instruction waits for the previous one
            piece = i.hint is not None and (i.prev.hint, i.prev.type) == (i.hint, i.type)
            start.append(node("S" if piece else "D", id(i.prev)))
        if i.dep is not None:
            start.append(node("D", id(i.dep)))
        done = preds.setdefault(node("D", id(i)), [])
        if id(i) in outgoing:
            # sends are buffered (MSCCL connections have FIFO slots): the sender is done once it
            # could send, whether or not the receiver has reached the message yet
            sent = node("E", id(i))
            preds.setdefault(sent, []).append(
                node("F", incoming[id(i)]) if id(i) in incoming else node("S", id(i)))
            done.append(sent)
        elif id(i) in incoming:
            done.append(node("F", incoming[id(i)]))
        else:
            done.append(node("S", id(i)))
    for m, msg in enumerate(messages):
        ready = (node("F", incoming[id(msg.sender)]) if id(msg.sender) in incoming
                 else node("S", id(msg.sender)))
        preds.setdefault(node("F", m), []).extend([ready, node("S", id(msg.receiver))])
    value = _longest(preds, len(ids), {node("F", m): msg for m, msg in enumerate(messages)},
                     algo, {ids[("S", id(i))]: i for i in instrs})
    return [value[node("F", m)] for m in range(len(messages))]


def _longest(preds: dict[int, list[int]], count: int, flows: dict[int, _Message], algo: Algo,
             starts: dict[int, Instr]) -> list[int]:
    succ: list[list[int]] = [[] for _ in range(count)]
    missing = [0] * count
    for v, ps in preds.items():
        missing[v] = len(ps)
        for p in ps:
            succ[p].append(v)
    value = [0] * count
    queue = deque(v for v in range(count) if missing[v] == 0)
    seen = 0
    while queue:
        v = queue.popleft()
        seen += 1
        base = max((value[p] for p in preds.get(v, ())), default=0)
        msg = flows.get(v)
        if msg is not None:
            base += 1
            hint = msg.receiver.hint if msg.receiver.hint is not None else msg.sender.hint
            if hint is not None:
                if hint < base:
                    raise MscclError(
                        f"{algo.source}: {msg.receiver.where} has react_step={hint}, but the "
                        f"message waits for step {base - 1} to end; expected react_step >= {base}"
                    )
                base = hint
        value[v] = base
        for s in succ[v]:
            missing[s] -= 1
            if missing[s] == 0:
                queue.append(s)
    if seen < count:
        stuck = sorted((i.gpu, i.tb, i.s) for v, i in starts.items() if missing[v] > 0)
        g, t, s = stuck[0]
        raise MscclError(
            f"{algo.source}: deadlock: gpu {g} threadblock {t} step {s} waits, through its "
            f"dependencies and messages, for itself"
        )
    return value


# -- the pattern -----------------------------------------------------------------------------------
def _pattern(algo: Algo, messages: list[_Message], steps: list[int]) -> Pattern:
    src = algo.source
    chunk_of, spans = _chunks(algo)
    per_flow: dict[tuple[int, int, int, str], list[set[int]]] = {}
    for msg, step in zip(messages, steps, strict=True):
        first, count = msg.units
        carried = {chunk_of[u] for u in range(first, first + count)}
        for c in carried:
            lo, n = spans[c]
            if lo < first or lo + n > first + count:
                raise MscclError(
                    f"{src}: {msg.sender.where} carries units {_span(msg.units)}, part of "
                    f"chunk {c} (units {_span(spans[c])}); a message carries whole chunks"
                )
        op = "reduce" if msg.receiver.type in _REDUCES else "copy"
        groups = per_flow.setdefault((step, msg.src, msg.dst, op), [])
        for group in groups:
            if not group & carried:  # pieces of one flow (a flow split into runs)
                group |= carried
                break
        else:
            groups.append(set(carried))
    flows = [Flow(t, s, d, tuple(sorted(g)), op)  # type: ignore[arg-type]
             for (t, s, d, op), groups in per_flow.items() for g in groups]
    n = algo.ngpus
    block = algo.units // n if algo.units % n == 0 else 0
    owned = algo.coll in ("allgather", "reduce_scatter")
    chunks = tuple(Chunk(c, spans[c][1] / algo.units, spans[c][0] // block if owned else None)
                   for c in range(len(spans)))
    root = algo.root if algo.root is not None else _root(algo, flows)
    try:
        return Pattern(algo.coll, tuple(range(n)), chunks, tuple(flows), root=root,
                       name=algo.name)
    except PatternError as exc:
        raise MscclError(f"{src}: {exc}") from None


def _chunks(algo: Algo) -> tuple[dict[int, int], list[tuple[int, int]]]:
    """Unit -> chunk id, and each chunk's (first unit, count), from ``react_chunks`` or 1:1."""
    if algo.chunk_spans is None:
        return {u: u for u in range(algo.units)}, [(u, 1) for u in range(algo.units)]
    chunk_of: dict[int, int] = {}
    block = algo.units // algo.ngpus if algo.units % algo.ngpus == 0 else 0
    for c, (lo, count) in enumerate(algo.chunk_spans):
        if algo.coll in ("allgather", "reduce_scatter") and (
                not block or lo // block != (lo + count - 1) // block):
            raise MscclError(f"{algo.source}: react_chunks: chunk {c} (units "
                             f"{_span((lo, count))}) spans two ranks' blocks")
        for u in range(lo, lo + count):
            if u in chunk_of or not 0 <= u < algo.units:
                raise MscclError(
                    f"{algo.source}: react_chunks: unit {u} of chunk {c} is "
                    + ("in two chunks" if u in chunk_of else f"outside 0..{algo.units - 1}"))
            chunk_of[u] = c
    if len(chunk_of) != algo.units:
        lost = min(set(range(algo.units)) - set(chunk_of))
        raise MscclError(f"{algo.source}: react_chunks leaves unit {lost} in no chunk")
    return chunk_of, list(algo.chunk_spans)


def _root(algo: Algo, flows: list[Flow]) -> int | None:
    if algo.coll not in ("broadcast", "reduce"):
        return None
    ends = {f.dst for f in flows} if algo.coll == "broadcast" else {f.src for f in flows}
    idle = [r for r in range(algo.ngpus) if r not in ends]
    if len(idle) != 1:
        what = "receives nothing" if algo.coll == "broadcast" else "sends nothing"
        raise MscclError(
            f"{algo.source}: cannot tell the {algo.coll}'s root: expected exactly one GPU that "
            f"{what}, found {idle or 'none'} (a react_root attribute names it)"
        )
    return idle[0]


def _where(exc: Exception, messages: list[_Message], steps: list[int]) -> str:
    found = (re.search(r"step (\d+), flow (\d+) -> (\d+)", str(exc))
             or re.search(r"at step (\d+) by the \w+ (\d+) -> (\d+)", str(exc)))
    if not found:
        return ""
    t, s, d = (int(x) for x in found.groups())
    for msg, step in zip(messages, steps, strict=True):
        if (step, msg.src, msg.dst) == (t, s, d):
            return f" [the message sent by {msg.sender.where}, received by {msg.receiver.where}]"
    return ""


def _span(units: tuple[int, int]) -> str:
    first, count = units
    return str(first) if count == 1 else f"{first}..{first + count - 1}"
