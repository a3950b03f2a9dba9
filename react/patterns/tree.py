"""Tree patterns: NCCL's binary tree and double binary tree, and tree broadcast / reduce.

NCCL builds its AllReduce trees in ``ncclGetBtree`` / ``ncclGetDtree`` (src/graph/trees.cc). The
binary tree is rooted at rank 0 and shaped by the binary representation of the ranks, so it is
defined for any rank count, not just powers of two; the second tree of the double binary tree is
the first one *mirrored* (``r -> n-1-r``) when ``n`` is even and *shifted* (``r -> (r+1) mod n``)
when ``n`` is odd, so that (for even ``n``) every rank is a leaf in one tree and an inner node in
the other. Each tree carries half of the message (paper §4.3, Fig. 1).

Ranks are ``0..n-1``. The code here follows NCCL's rules, written from their description:

- rank 0 is the root; its only child is the largest power of two below ``n``;
- another rank ``r`` with lowest set bit ``b`` has parent ``(r - b) | 2b``, or ``r - b`` if that
  is not a rank (``>= n``);
- its children are ``r - b/2`` and ``r + h`` for the largest ``h`` in ``b/2, b/4, ..., 1`` that
  keeps ``r + h`` a rank (none if ``b == 1``: odd ranks are leaves).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from react.model.pattern import Chunk, Flow, Pattern
from react.patterns._common import check_n, check_root

__all__ = [
    "Tree",
    "allreduce_double_binary_tree",
    "broadcast_binary_tree",
    "nccl_btree",
    "nccl_double_binary_tree",
    "reduce_binary_tree",
]


@dataclass(frozen=True, slots=True)
class Tree:
    """A rooted tree over ranks ``0..n-1``, indexed by rank.

    Attributes
    ----------
    parent : tuple of (int or None)
        ``parent[r]``; ``None`` for the root.
    children : tuple of tuple of int
        ``children[r]`` in NCCL's order (``down0`` then ``down1``; mirrored or shifted for the
        second tree of a double binary tree).
    depth : tuple of int
        Edges from the root (the root has depth 0).
    height : tuple of int
        Edges on the longest path down to a leaf (leaves have height 0).
    """

    parent: tuple[int | None, ...]
    children: tuple[tuple[int, ...], ...]
    depth: tuple[int, ...]
    height: tuple[int, ...]

    @property
    def n(self) -> int:
        """Number of ranks."""
        return len(self.parent)

    @property
    def root(self) -> int:
        """The rank without a parent."""
        return self.parent.index(None)

    def edges(self) -> tuple[tuple[int, int], ...]:
        """``(parent, child)`` pairs, parents in rank order, children in NCCL's order."""
        return tuple((p, c) for p, kids in enumerate(self.children) for c in kids)


def nccl_btree(n: int) -> Tree:
    """NCCL's binary tree over ``n`` ranks, rooted at 0 (``ncclGetBtree``, src/graph/trees.cc).

    Parameters
    ----------
    n : int
        Number of ranks, at least 2.

    Returns
    -------
    Tree

    Examples
    --------
    >>> nccl_btree(8).edges()
    ((0, 4), (2, 1), (2, 3), (4, 2), (4, 6), (6, 5), (6, 7))
    """
    check_n("nccl_btree", n)
    parent: list[int | None] = [None] * n
    children: list[tuple[int, ...]] = [()] * n
    # Rank 0: a single child, the largest power of two below n.
    children[0] = (1 << ((n - 1).bit_length() - 1),)
    for r in range(1, n):
        low = r & -r
        up = (r - low) | (low << 1)
        parent[r] = up if up < n else r - low
        half = low >> 1
        if half:
            right = half
            while r + right >= n:  # the largest of half, half/2, ..., 1 that stays a rank
                right >>= 1
            children[r] = (r - half, r + right) if right else (r - half,)
    return _tree(parent, children)


def nccl_double_binary_tree(n: int) -> tuple[Tree, Tree]:
    """The two trees of NCCL's double binary tree (``ncclGetDtree``, src/graph/trees.cc).

    Tree 0 is :func:`nccl_btree`; tree 1 relabels it by ``r -> n-1-r`` (mirror) when ``n`` is
    even and by ``r -> (r+1) mod n`` (shift) when ``n`` is odd, so its root is ``n-1`` or ``1``
    (NCCL's ``ncclGetDtreeRoots``). In :func:`allreduce_double_binary_tree`, chunk ``k`` (and
    chunk graph ``k``) travels on tree ``k``.

    Examples
    --------
    >>> t0, t1 = nccl_double_binary_tree(8)
    >>> t1.root, t1.children[3]
    (7, (5, 1))
    """
    check_n("nccl_double_binary_tree", n)
    t0 = nccl_btree(n)
    if n % 2:
        t1 = _relabel(t0, lambda r: (r + 1) % n)
    else:
        t1 = _relabel(t0, lambda r: n - 1 - r)
    return t0, t1


def allreduce_double_binary_tree(n: int) -> Pattern:
    """AllReduce on NCCL's double binary tree: each tree reduces half the message up, then
    broadcasts it down (paper §4.3, Fig. 1).

    Chunk 0 (half the bytes) uses tree 0 and chunk 1 uses tree 1 of
    :func:`nccl_double_binary_tree`. Reduce phase: a child sends its partial sum to its parent at
    step ``height(child) + 1``, as early as its subtree allows (leaves at step 1). Broadcast
    phase: both trees start at step ``H + 1``, ``H`` the larger root height, so the trees' steps
    line up; a parent copies the result to a child at step ``H + depth(child)``.

    Parameters
    ----------
    n : int
        Number of ranks, at least 2.

    Returns
    -------
    Pattern
        ``2 * 2 * (n - 1)`` flows in ``2 * H`` steps, two chunk graphs (one per tree).
    """
    check_n("allreduce_double_binary_tree", n)
    trees = nccl_double_binary_tree(n)
    top = max(t.height[t.root] for t in trees)
    flows: list[Flow] = []
    for chunk, tree in enumerate(trees):
        flows.extend(_reduce_flows(tree, chunk, offset=0))
        flows.extend(_broadcast_flows(tree, chunk, offset=top))
    chunks = (Chunk(0, 0.5), Chunk(1, 0.5))
    return Pattern("allreduce", tuple(range(n)), chunks, tuple(flows),
                   name="allreduce_double_binary_tree")


def broadcast_binary_tree(n: int, root: int = 0) -> Pattern:
    """Broadcast down NCCL's binary tree, relabelled ``r -> (r + root) mod n`` to put ``root``
    on top; the message is one chunk, copied to a rank at step ``depth(rank)``."""
    check_n("broadcast_binary_tree", n)
    check_root("broadcast_binary_tree", n, root)
    tree = _relabel(nccl_btree(n), lambda r: (r + root) % n)
    return Pattern(
        "broadcast", tuple(range(n)), (Chunk(0, 1.0),), tuple(_broadcast_flows(tree, 0, offset=0)),
        root=root, name="broadcast_binary_tree",
    )


def reduce_binary_tree(n: int, root: int = 0) -> Pattern:
    """Reduce up NCCL's binary tree, relabelled ``r -> (r + root) mod n`` to put ``root`` on top;
    a rank sends its partial sum to its parent at step ``height(rank) + 1``."""
    check_n("reduce_binary_tree", n)
    check_root("reduce_binary_tree", n, root)
    tree = _relabel(nccl_btree(n), lambda r: (r + root) % n)
    return Pattern(
        "reduce", tuple(range(n)), (Chunk(0, 1.0),), tuple(_reduce_flows(tree, 0, offset=0)),
        root=root, name="reduce_binary_tree",
    )


# -- helpers -------------------------------------------------------------------------------------
def _reduce_flows(tree: Tree, chunk: int, offset: int) -> list[Flow]:
    return [
        Flow(offset + tree.height[r] + 1, r, p, (chunk,), "reduce")
        for r, p in enumerate(tree.parent)
        if p is not None
    ]


def _broadcast_flows(tree: Tree, chunk: int, offset: int) -> list[Flow]:
    return [
        Flow(offset + tree.depth[r], p, r, (chunk,), "copy")
        for r, p in enumerate(tree.parent)
        if p is not None
    ]


def _relabel(tree: Tree, label: Callable[[int], int]) -> Tree:
    """The same tree with rank ``r`` renamed ``label(r)`` (a permutation of ``0..n-1``)."""
    n = tree.n
    parent: list[int | None] = [None] * n
    children: list[tuple[int, ...]] = [()] * n
    for r in range(n):
        p = tree.parent[r]
        parent[label(r)] = None if p is None else label(p)
        children[label(r)] = tuple(label(c) for c in tree.children[r])
    return _tree(parent, children)


def _tree(parent: list[int | None], children: list[tuple[int, ...]]) -> Tree:
    n = len(parent)
    root = parent.index(None)
    depth = [0] * n
    order = [root]  # breadth first: parents before children
    for r in order:
        for c in children[r]:
            depth[c] = depth[r] + 1
            order.append(c)
    height = [0] * n
    for r in reversed(order):
        p = parent[r]
        if p is not None and height[p] < height[r] + 1:
            height[p] = height[r] + 1
    return Tree(tuple(parent), tuple(children), tuple(depth), tuple(height))
