"""Automorphisms of a pattern, so that a swap space computes one rank per orbit.

A rank permutation that maps every flow of the pattern onto a flow (same step, operation and
chunk graph up to a permutation of the graphs) and keeps the collective's meaning maps one
rank's viable, pruned swaps onto another's: the ring's ranks are all alike, the double binary
tree's two trees mirror each other.
"""

from __future__ import annotations

import numpy as np

from react.model.pattern import Pattern

__all__ = ["symmetry"]


def symmetry(
    pattern: Pattern, pos: dict[int, int], arrays: dict[str, np.ndarray]
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """For each rank position ``c``: ``(rep, alpha, beta)`` with ``alpha`` a rank permutation
    (positions) and ``beta`` a chunk-graph permutation that map the pattern onto itself and
    ``rep`` onto ``c``.

    Such an automorphism preserves steps, operations, degrees and (for AllReduce, or a rooted
    kind whose root it fixes) the meaning, so it maps ``rep``'s viable, pruned swaps onto ``c``'s:
    only one rank per orbit is computed. The generators tried are the ring rotation
    ``i -> i+1 mod n`` and the mirror ``i -> n-1-i`` (the two trees of an even double binary
    tree are mirror images); each is checked on every flow, so a pattern without the symmetry
    simply gets none. Owned chunks tie meaning to ranks, so AllGather and ReduceScatter get none.
    """
    n = pattern.n
    ident = np.arange(n)
    graphs = len(pattern.chunk_graphs())
    ident_g = np.arange(graphs)
    none = [(c, ident, ident_g) for c in range(n)]
    if pattern.kind not in ("allreduce", "broadcast", "reduce") or not len(arrays["step"]):
        return none
    step, src, dst = arrays["step"], arrays["src"], arrays["dst"]
    op, graph = arrays["is_copy"].astype(np.int64), arrays["graph"]
    key = ((step * n + src) * n + dst) * 2 + op
    order = np.argsort(key, kind="stable")
    ks = key[order]
    if len(ks) > 1 and np.any(ks[1:] == ks[:-1]):
        return none  # two flows differ only in chunks: the key below would be ambiguous
    gens: list[tuple[np.ndarray, np.ndarray]] = []
    for alpha in ((ident + 1) % n, n - 1 - ident):
        if pattern.root is not None and alpha[pos[pattern.root]] != pos[pattern.root]:
            continue
        image = ((step * n + alpha[src]) * n + alpha[dst]) * 2 + op
        idx = np.searchsorted(ks, image)
        if np.any(idx >= len(ks)) or np.any(ks[np.minimum(idx, len(ks) - 1)] != image):
            continue
        image_graph = graph[order[idx]]
        beta = np.full(graphs, -1, dtype=np.int64)
        beta[graph] = image_graph
        if np.any(beta[graph] != image_graph) or len(np.unique(beta)) != graphs or beta.min() < 0:
            continue
        gens.append((alpha, beta))
    if not gens:
        return none
    out: list[tuple[int, np.ndarray, np.ndarray] | None] = [None] * n
    for c in range(n):
        if out[c] is not None:
            continue
        out[c] = (c, ident, ident_g)
        queue = [c]
        while queue:
            m = queue.pop()
            _, alpha_m, beta_m = out[m]  # type: ignore[misc]
            for alpha, beta in gens:
                m2 = int(alpha[m])
                if out[m2] is None:
                    out[m2] = (c, alpha[alpha_m], beta[beta_m])
                    queue.append(m2)
    return out  # type: ignore[return-value]
