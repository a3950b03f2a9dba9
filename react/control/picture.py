"""The congestion picture: which ends (a rank's inbound or outbound side) a batch's congestion is
blamed on, and the evidence behind the blame.

A congested flow has two ends, and only one of them is usually the culprit: a rank whose inbound
link is congested has all its inbound flows slow, while the healthy sender of one of them has
only that one. The *evidence* of an end is the share of its flows in that direction that are
congested; the picture keeps the likelier end of each congested flow. The controller compares
pictures to tell whether congestion moved (a settled job explores again), and remembers failed
swaps per picture (:mod:`react.control.failures`).
"""

from __future__ import annotations

from react.control.detect import CongestionReport
from react.model.pattern import Pattern

__all__ = [
    "End", "Picture", "congestion_picture", "describe_picture", "end_evidence", "same_picture",
]

End = tuple[int, str]
"""A congested end: ``(rank, "in")`` for a rank's inbound side, ``(rank, "out")`` for outbound."""

Picture = frozenset[End]
"""The set of ends a batch's congestion is blamed on."""


def end_evidence(pattern: Pattern, report: CongestionReport) -> dict[End, tuple[float, float]]:
    """For every end of a congested flow: (share of steady, share of any congested) of its flows.

    The share is over all the rank's flows in that direction in the whole pattern, so an end
    whose link is congested scores near 1 and the healthy other end of one slow flow scores low.
    """
    total: dict[End, int] = {}
    for f in pattern.flows:
        for end in ((f.dst, "in"), (f.src, "out")):
            total[end] = total.get(end, 0) + 1
    steady: dict[End, int] = {}
    anyc: dict[End, int] = {}
    for c in report.flows:
        for end in ((c.flow.dst, "in"), (c.flow.src, "out")):
            anyc[end] = anyc.get(end, 0) + 1
            steady[end] = steady.get(end, 0) + (c.kind == "steady")
    return {end: (steady[end] / total[end], anyc[end] / total[end]) for end in anyc}


def congestion_picture(pattern: Pattern, report: CongestionReport) -> Picture:
    """The end each steady-congested flow is blamed on (the likelier by evidence; ties: receiver).

    Erratic flows count only when no flow is steady congested: ECMP re-hashes them every epoch,
    so the ends they touch change from batch to batch while the congestion stays where it was.
    """
    evidence = end_evidence(pattern, report)
    blamed = set()
    for c in report.steady() or report.flows:
        receiver, sender = (c.flow.dst, "in"), (c.flow.src, "out")
        blamed.add(sender if evidence[sender] > evidence[receiver] else receiver)
    return frozenset(blamed)


def same_picture(a: Picture, b: Picture, overlap: float) -> bool:
    """Whether two pictures are the same: Jaccard similarity at least ``overlap`` (both empty:
    the same)."""
    if not a and not b:
        return True
    return len(a & b) / len(a | b) >= overlap


def describe_picture(picture: Picture) -> str:
    """``"3 inbound, 5 outbound"``, or ``"no congestion"``."""
    if not picture:
        return "no congestion"
    return ", ".join(f"{rank} {side}bound" for rank, side in sorted(picture))
