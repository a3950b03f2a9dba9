"""Pattern generators, one module per family, and a string registry for the edges (CLI, files).

Generators are plain functions ``f(n) -> Pattern`` named collective-first
(``allreduce_ring(n)``); code should call them directly. :data:`GENERATORS` and
:func:`generator` exist only for places that name a pattern in text, such as scenario files.
"""

from __future__ import annotations

from collections.abc import Callable

from react.model.errors import PatternError, ReactError
from react.model.pattern import Pattern
from react.patterns.recursive import allgather_recursive_doubling, allreduce_halving_doubling
from react.patterns.ring import allgather_ring, allreduce_ring, reduce_scatter_ring
from react.patterns.tree import (
    Tree,
    allreduce_double_binary_tree,
    broadcast_binary_tree,
    nccl_btree,
    nccl_double_binary_tree,
    reduce_binary_tree,
)

__all__ = [
    "GENERATORS",
    "Tree",
    "allgather_recursive_doubling",
    "allgather_ring",
    "allreduce_double_binary_tree",
    "allreduce_halving_doubling",
    "allreduce_ring",
    "broadcast_binary_tree",
    "generator",
    "nccl_btree",
    "nccl_double_binary_tree",
    "patterns_at",
    "reduce_binary_tree",
    "reduce_scatter_ring",
]

GENERATORS: dict[str, Callable[[int], Pattern]] = {
    "allreduce_double_binary_tree": allreduce_double_binary_tree,
    "allreduce_ring": allreduce_ring,
    "allreduce_halving_doubling": allreduce_halving_doubling,
    "allgather_ring": allgather_ring,
    "allgather_recursive_doubling": allgather_recursive_doubling,
    "reduce_scatter_ring": reduce_scatter_ring,
    "broadcast_binary_tree": broadcast_binary_tree,
    "reduce_binary_tree": reduce_binary_tree,
}
"""Every generator by name; each takes the rank count ``n`` (rooted ones use root 0)."""


def generator(name: str) -> Callable[[int], Pattern]:
    """The generator registered as ``name``; :class:`PatternError` listing the known names if
    there is none."""
    try:
        return GENERATORS[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(GENERATORS))
        raise PatternError(f"unknown pattern generator {name!r}; known: {known}") from None


def patterns_at(n: int) -> dict[str, Pattern]:
    """Every generator's pattern at ``n`` ranks, by name in sorted order; generators that do not
    exist at ``n`` (they raise :class:`~react.model.errors.ReactError`) are left out."""
    out = {}
    for name in sorted(GENERATORS):
        try:
            out[name] = GENERATORS[name](n)
        except ReactError:
            continue
    return out
