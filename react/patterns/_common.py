"""Helpers shared by the pattern generators: argument checks and equal chunks."""

from __future__ import annotations

from react.model.errors import PatternError
from react.model.pattern import Chunk


def check_n(name: str, n: object) -> int:
    """Return ``n`` if it is an integer >= 2, else raise naming the generator and the value."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise PatternError(f"{name}: n must be an integer >= 2, got n={n!r}")
    return n


def check_root(name: str, n: int, root: object) -> int:
    """Return ``root`` if it is one of the ranks ``0..n-1``, else raise naming the value."""
    if not isinstance(root, int) or isinstance(root, bool) or not 0 <= root < n:
        raise PatternError(f"{name}: root must be a rank in 0..{n - 1}, got root={root!r}")
    return root


def equal_chunks(count: int, owned: bool = False) -> tuple[Chunk, ...]:
    """``count`` chunks of ``1/count`` of the message each; chunk ``c`` owned by rank ``c`` if
    ``owned`` (the AllGather / ReduceScatter convention of this package)."""
    return tuple(Chunk(c, 1.0 / count, c if owned else None) for c in range(count))
