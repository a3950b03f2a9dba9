"""Where REACT's chunks live in MSCCL's buffers, for both directions of the conversion.

MSCCL counts every buffer in equal chunks ("units" here, to keep the word chunk for REACT's).
A pattern's chunk ``c`` of fraction ``f`` becomes ``f * L`` consecutive units, ``L`` the smallest
count that makes every chunk whole. The collective fixes which buffer holds what (the meaning
msccl-tools' ``collectives.py`` gives each kind, in place):

- allreduce, broadcast, reduce: every GPU's input buffer ``i`` holds all ``L`` units, unit ``x``
  at offset ``x``; an output offset ``x`` is the same unit;
- allgather: GPU ``g``'s input is block ``g`` (``k = L / n`` units) of the output ``o``: input
  offset ``j`` is unit ``g * k + j``, output offset ``x`` is unit ``x``;
- reduce_scatter: the input holds all ``L`` units; output offset ``j`` of GPU ``g`` is unit
  ``g * k + j``.

So an AllGather's or ReduceScatter's chunks are laid out block by block in owner order.
"""

from __future__ import annotations

import math
from fractions import Fraction

from react.model.errors import MscclError
from react.model.pattern import Pattern

MAX_UNITS = 1 << 16
"""The most units one algorithm may use (MSCCL counts are small integers)."""

BLOCKED = ("allgather", "reduce_scatter")


def unit_layout(pattern: Pattern) -> tuple[int, tuple[tuple[int, int], ...]]:
    """``(L, ((offset, count) per chunk id))`` for ``pattern``; :class:`MscclError` when the
    chunk fractions have no small common denominator or an owner's share is not ``1/n``."""
    exact = [Fraction(c.fraction).limit_denominator(MAX_UNITS) for c in pattern.chunks]
    total = 1
    for fr in exact:
        total = total * fr.denominator // math.gcd(total, fr.denominator)
    if total > MAX_UNITS:
        raise MscclError(
            f"to_msccl_xml: chunk fractions need {total} equal MSCCL chunks, expected at most "
            f"{MAX_UNITS}"
        )
    for chunk, fr in zip(pattern.chunks, exact, strict=True):
        if abs(float(fr) - chunk.fraction) > 1e-12:
            raise MscclError(
                f"to_msccl_xml: chunk {chunk.id} has fraction {chunk.fraction!r}, which is not a "
                f"whole number of 1/{MAX_UNITS} parts"
            )
    counts = [int(fr * total) for fr in exact]
    order = list(range(len(pattern.chunks)))
    if pattern.kind in BLOCKED:
        share = total // pattern.n if total % pattern.n == 0 else -1
        for rank in pattern.ranks:
            owned = sum(counts[c.id] for c in pattern.chunks if c.owner == rank)
            if owned * pattern.n != total:
                raise MscclError(
                    f"to_msccl_xml: rank {rank} owns {owned}/{total} of the message; MSCCL's "
                    f"{pattern.kind} needs every rank to own 1/{pattern.n} (share {share})"
                )
        position = {r: i for i, r in enumerate(pattern.ranks)}
        order.sort(key=lambda c: (position[pattern.chunks[c].owner], c))  # type: ignore[index]
    offsets = [0] * len(counts)
    at = 0
    for c in order:
        offsets[c] = at
        at += counts[c]
    return total, tuple(zip(offsets, counts, strict=True))


def buffer_sizes(kind: str, units: int, n: int) -> tuple[int, int]:
    """``(i_chunks, o_chunks)`` of every GPU for a ``kind`` over ``units`` units."""
    if kind == "allgather":
        return units // n, units
    if kind == "reduce_scatter":
        return units, units // n
    return units, 0


def data_buffer(kind: str) -> str:
    """The buffer our export reads and writes: the output for an AllGather, else the input."""
    return "o" if kind == "allgather" else "i"


def unit_of(kind: str, gpu: int, buffer: str, offset: int, block: int) -> int:
    """The unit at ``offset`` of ``buffer`` on ``gpu`` (``block`` = units per rank)."""
    if kind == "allgather" and buffer == "i":
        return gpu * block + offset
    if kind == "reduce_scatter" and buffer == "o":
        return gpu * block + offset
    return offset
