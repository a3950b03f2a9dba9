"""The syntax of an MSCCL XML algorithm: elements, attributes and their ranges, nothing more.

What is read is what MSCCL runtimes read (``algo``: ``name``, ``ngpus``, ``coll``,
``nchunksperloop``, ``inplace``; ``gpu``: ``id``, ``i_chunks``, ``o_chunks``, ``s_chunks``;
``tb``: ``id``, ``send``, ``recv``, ``chan``; ``step``: ``s``, ``type``, ``srcbuf``, ``srcoff``,
``dstbuf``, ``dstoff``, ``cnt``, ``depid``, ``deps``), plus our optional ``react_*`` hints.
Offsets are turned into units of the whole message here (:func:`react.msccl.layout.unit_of`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from react.model.errors import MscclError
from react.model.pattern import KINDS
from react.msccl.layout import unit_of

TYPES = ("s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop")
"""Instruction types REACT reads (MSCCL's send/receive family, local copy/reduce, nop)."""

_READS = {"s": "src", "rrs": "src", "rrcs": "src", "cpy": "src", "re": "src"}
_WRITES = {"r": "dst", "rcs": "dst", "rrc": "dst", "rrcs": "dst", "cpy": "dst", "re": "dst"}


@dataclass(eq=False, slots=True)
class Instr:
    """One ``<step>``: where it is, what it does, on which units, what it waits for."""

    gpu: int
    tb: int
    s: int
    type: str
    src_units: tuple[int, int] | None
    dst_units: tuple[int, int] | None
    cnt: int
    hint: int | None
    dep_ref: tuple[int, int] | None
    prev: Instr | None = None
    dep: Instr | None = None

    @property
    def where(self) -> str:
        return f"gpu {self.gpu} threadblock {self.tb} step {self.s} ({self.type})"

    @property
    def send_units(self) -> tuple[int, int] | None:
        # rcs forwards what it received (its dst); the others send from their source
        return self.dst_units if self.type == "rcs" else self.src_units

    @property
    def recv_units(self) -> tuple[int, int] | None:
        # rrs reduces into the data it forwards without storing it: its source
        return self.src_units if self.type == "rrs" else self.dst_units


@dataclass(slots=True)
class Block:
    id: int
    send: int
    recv: int
    chan: int
    instrs: list[Instr] = field(default_factory=list)


@dataclass(slots=True)
class Gpu:
    id: int
    tbs: list[Block] = field(default_factory=list)


@dataclass(slots=True)
class Algo:
    source: str
    name: str
    coll: str
    ngpus: int
    units: int
    gpus: list[Gpu]
    root: int | None
    chunk_spans: list[tuple[int, int]] | None


def parse_algo(text: str, source: str) -> Algo:
    """Parse and range-check ``text``; :class:`MscclError` naming the element at fault."""
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise MscclError(f"{source}: DOCTYPE/ENTITY declarations are not accepted in MSCCL XML")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise MscclError(f"{source}: not well-formed XML ({exc})") from None
    if root.tag != "algo":
        raise MscclError(f"{source}: expected an <algo> element at the top, got <{root.tag}>")
    where = "<algo>"
    coll = _text(root, "coll", where, source)
    if coll not in KINDS:
        raise MscclError(
            f"{source}: collective coll={coll!r} is not supported; REACT patterns implement "
            f"{', '.join(KINDS)}"
        )
    n = _int(root, "ngpus", where, source, low=2)
    gpus_xml = root.findall("gpu")
    if [g.tag for g in root] != ["gpu"] * len(root):
        other = next(g.tag for g in root if g.tag != "gpu")
        raise MscclError(f"{source}: <algo> may only hold <gpu> elements, found <{other}>")
    ids = [_int(g, "id", f"<gpu> #{k}", source, low=0, high=n - 1)
           for k, g in enumerate(gpus_xml)]
    if sorted(ids) != list(range(n)):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise MscclError(
            f"{source}: expected one <gpu> for each id 0..{n - 1} (ngpus={n}), got ids {ids}"
            + (f" (gpu {dup[0]} twice)" if dup else "")
        )
    pairs = list(zip(ids, gpus_xml, strict=True))
    i_chunks = {i: _int(g, "i_chunks", f"gpu {i}", source, low=0) for i, g in pairs}
    o_chunks = {i: _int(g, "o_chunks", f"gpu {i}", source, low=0) for i, g in pairs}
    units, block = _units(coll, n, i_chunks, o_chunks, source)
    gpus = [_gpu(g, i, n, coll, block, units, source)
            for i, g in sorted(pairs, key=lambda x: x[0])]
    _resolve(gpus, source)
    root_rank = root.get("react_root")
    spans = root.get("react_chunks")
    return Algo(
        source=source, name=root.get("name", ""), coll=coll, ngpus=n, units=units, gpus=gpus,
        root=None if root_rank is None else _int(root, "react_root", where, source, 0, n - 1),
        chunk_spans=None if spans is None else _spans(spans, source),
    )


def _units(coll: str, n: int, i_chunks: dict[int, int], o_chunks: dict[int, int],
           source: str) -> tuple[int, int]:
    sizes = set(i_chunks.values())
    if len(sizes) != 1 or 0 in sizes:
        raise MscclError(f"{source}: expected the same positive i_chunks on every gpu, got "
                         f"{dict(sorted(i_chunks.items()))}")
    size = sizes.pop()
    if coll == "allgather":
        return size * n, size
    if coll == "reduce_scatter":
        if size % n:
            raise MscclError(f"{source}: a reduce_scatter's i_chunks={size} must be a multiple "
                             f"of ngpus={n}")
        return size, size // n
    return size, size // n if size % n == 0 else 0


def _gpu(node: ET.Element, gid: int, n: int, coll: str, block: int, units: int,
         source: str) -> Gpu:
    gpu = Gpu(gid)
    seen: set[int] = set()
    for k, t in enumerate(node):
        where = f"gpu {gid} <{t.tag}> #{k}"
        if t.tag != "tb":
            raise MscclError(f"{source}: {where}: expected <tb>")
        tid = _int(t, "id", where, source, low=0)
        if tid in seen:
            raise MscclError(f"{source}: gpu {gid} has two threadblocks with id {tid}")
        seen.add(tid)
        where = f"gpu {gid} threadblock {tid}"
        send = _int(t, "send", where, source, -1, n - 1)
        recv = _int(t, "recv", where, source, -1, n - 1)
        if gid in (send, recv):
            raise MscclError(f"{source}: {where} names its own gpu as a peer (send={send}, "
                             f"recv={recv})")
        chan = _int(t, "chan", where, source, low=-1)
        if chan < 0 and (send >= 0 or recv >= 0):
            raise MscclError(f"{source}: {where} has peers but chan={chan}; expected >= 0")
        tb = Block(tid, send, recv, chan)
        for j, st in enumerate(t):
            tb.instrs.append(_instr(st, gid, tid, j, tb, coll, block, units, source))
        gpu.tbs.append(tb)
    return gpu


def _instr(node: ET.Element, gid: int, tid: int, j: int, tb: Block, coll: str, block: int,
           units: int, source: str) -> Instr:
    where = f"gpu {gid} threadblock {tid} <{node.tag}> #{j}"
    if node.tag != "step":
        raise MscclError(f"{source}: {where}: expected <step>")
    s = _int(node, "s", where, source)
    if s != j:
        raise MscclError(f"{source}: {where} has s={s}; expected steps numbered 0, 1, ... in "
                         f"order (s={j})")
    where = f"gpu {gid} threadblock {tid} step {s}"
    kind = _text(node, "type", where, source)
    if kind not in TYPES:
        raise MscclError(f"{source}: {where} has type={kind!r}, expected one of {TYPES}")
    if kind in ("s", "rcs", "rrs", "rrcs") and tb.send < 0:
        raise MscclError(f"{source}: {where} ({kind}) sends, but its threadblock has send=-1")
    if kind in ("r", "rcs", "rrs", "rrc", "rrcs") and tb.recv < 0:
        raise MscclError(f"{source}: {where} ({kind}) receives, but its threadblock has recv=-1")
    cnt = _int(node, "cnt", where, source, low=0) if kind == "nop" else _int(
        node, "cnt", where, source, low=1)
    spans: dict[str, tuple[int, int] | None] = {"src": None, "dst": None}
    for side in ("src", "dst"):
        needed = side in (_READS.get(kind), _WRITES.get(kind)) or (kind == "rrc" and side == "src")
        if not needed:
            continue
        buf = _text(node, f"{side}buf", where, source)
        if buf not in ("i", "o"):
            what = "the scratch buffer" if buf == "s" else f"buffer {buf!r}"
            raise MscclError(f"{source}: {where} uses {what}; REACT reads algorithms that work "
                             f"in the input ('i') and output ('o') buffers only")
        off = _int(node, f"{side}off", where, source, low=0)
        first = unit_of(coll, gid, buf, off, block)
        if first + cnt > units:
            raise MscclError(f"{source}: {where}: {side}buf={buf} {side}off={off} cnt={cnt} "
                             f"runs past the {units} chunks of the message")
        spans[side] = (first, cnt)
    depid = _int(node, "depid", where, source, low=-1) if "depid" in node.attrib else -1
    deps = _int(node, "deps", where, source, low=-1) if "deps" in node.attrib else -1
    if (depid < 0) != (deps < 0):
        raise MscclError(f"{source}: {where} has depid={depid} and deps={deps}; expected both "
                         f"-1 or both >= 0")
    hint = _int(node, "react_step", where, source, low=1) if "react_step" in node.attrib else None
    return Instr(gid, tid, s, kind, spans["src"], spans["dst"], cnt, hint,
                 None if depid < 0 else (depid, deps))


def _resolve(gpus: list[Gpu], source: str) -> None:
    for gpu in gpus:
        tbs = {tb.id: tb for tb in gpu.tbs}
        for tb in gpu.tbs:
            for k, i in enumerate(tb.instrs):
                i.prev = tb.instrs[k - 1] if k else None
                if i.dep_ref is None:
                    continue
                other = tbs.get(i.dep_ref[0])
                if other is None or i.dep_ref[1] >= len(other.instrs):
                    raise MscclError(
                        f"{source}: {i.where} depends on threadblock {i.dep_ref[0]} step "
                        f"{i.dep_ref[1]}, which gpu {gpu.id} does not have"
                    )
                i.dep = other.instrs[i.dep_ref[1]]


def _spans(text: str, source: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split():
        try:
            lo, count = (int(x) for x in part.split(":"))
        except ValueError:
            lo, count = -1, 0
        if lo < 0 or count < 1:
            raise MscclError(f"{source}: react_chunks has {part!r}, expected OFFSET:COUNT with "
                             f"OFFSET >= 0 and COUNT >= 1")
        out.append((lo, count))
    if not out:
        raise MscclError(f"{source}: react_chunks is empty")
    return out


def _text(node: ET.Element, name: str, where: str, source: str) -> str:
    value = node.get(name)
    if value is None:
        raise MscclError(f"{source}: {where} has no {name!r} attribute")
    return value


def _int(node: ET.Element, name: str, where: str, source: str, low: int | None = None,
         high: int | None = None) -> int:
    text = _text(node, name, where, source)
    try:
        value = int(text)
    except ValueError:
        raise MscclError(f"{source}: {where} has {name}={text!r}, expected an integer") from None
    if (low is not None and value < low) or (high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f">= {low}"
        raise MscclError(f"{source}: {where} has {name}={value}, expected {span}")
    return value
