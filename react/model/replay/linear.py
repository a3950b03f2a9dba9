"""Deciding a swapped window without a replay, by linear algebra on the buffers' contents.

For kinds whose buffers are never empty (AllReduce, ReduceScatter, Reduce) this is exact both
ways. Buffers hold multisets of ranks' inputs; without a violation the state evolves linearly
(a copy replaces, a reduce adds), so a final buffer's content is ``sum over sources s of
N(s -> f) {s}`` with ``N`` the path counts of the flows. With ``A`` the paths from the inputs
to the buffers at ``first - 1`` (the values there), ``M`` those through the window
(:func:`window_paths`), ``B`` those from the buffers at ``last`` to the constrained final
buffers (their influence sets, :func:`~react.model.replay.influence.influence_sets`) and ``P``
the exchange of x and y, the swapped pattern's counts are ``A P M P B`` against the original's
``A M B``; the difference reduces, per chunk, to the rank-two matrix
``ds (x) b + da (x) (i + k b)`` with ``ds = S_last(y) - S_last(x)``,
``da = S_first-1(x) - S_first-1(y)``, ``b = B(x) - B(y)``, ``i = I(y) - I(x)`` (I: the
influence sets at ``first - 1``) and ``k = M_xx - M_xy - M_yx + M_yy``, all vectors of -1/0/1
(in a valid pattern with no empty buffer every count is 0 or 1: two paths would count an input
twice). Non-zero (:func:`rank_two_is_zero` says): some final buffer is wrong, or the run
violates earlier: not viable. Zero: every final buffer is right, so every reduce whose result
reaches one adds no input twice; the only violation left would be a double count in a result
that reaches no final buffer. There is none when the original has no such reduce and the swap
keeps which buffers reach none (``B(x)``, ``B(y)`` both empty or both not, the same for ``I``):
then the swapped pattern verifies.
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

from react.model.replay.trajectory import Trajectory

__all__ = ["decide_by_paths", "rank_two_is_zero", "window_paths"]

Table = list[list[int]]  # per chunk (in the graph's order), per rank position: a bitset


def window_paths(run: Trajectory, first: int) -> dict[int, Table | None]:
    """For every step ``t >= first`` of the graph: per chunk, per rank position ``r``, the
    bitset of positions with a path from their buffer at ``first - 1`` to ``r``'s at ``t`` (a
    replay of the window from one-hot buffers); None from the step on where some buffer is
    reached twice from one source (then ``M`` is not 0/1 and the linear test does not decide).
    One replay per ``first`` serves every window that starts there."""
    out: dict[int, Table | None] = {}
    states = [[1 << r for r in range(run.n)] for _ in run.chunks]
    broken = False
    for t in run.steps[bisect_left(run.steps, first):]:
        if not broken:
            for j, c in enumerate(run.chunks):
                state = states[j]
                new: dict[int, int] = {}
                for d, flows in run.into[t].items():
                    sources = [(s, cp) for s, chunks, cp in flows if c in chunks]
                    if not sources:
                        continue
                    if any(cp for _, cp in sources):  # the only write (valid pattern)
                        new[d] = state[sources[0][0]]
                        continue
                    acc = state[d]
                    for s, _ in sources:
                        if acc & state[s]:
                            broken = True
                        acc |= state[s]
                    new[d] = acc
                for d, v in new.items():
                    state[d] = v
        out[t] = None if broken else [list(state) for state in states]
    return out


def decide_by_paths(
    x: int, ys: np.ndarray, paths: Table, before: Table, after: Table, v0: Table, v1: Table,
    no_dead_reduce: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """For each partner in ``ys`` of ``x``: (proven viable, proven not viable), from the
    window's paths, the influence sets at its bounds (``before``: at ``first - 1``, ``after``:
    at ``last``), the values there (``v0``, ``v1``) and whether every reduce of the original
    reaches a constrained final buffer (module docstring)."""
    m = len(ys)
    proven = np.zeros(m, dtype=bool)
    partners = [int(y) for y in ys]
    bad = [False] * m
    unsafe = [False] * m
    zero = rank_two_is_zero
    for j in range(len(paths)):
        p, i0, i1, s0, s1 = paths[j], before[j], after[j], v0[j], v1[j]
        px, ix, bx, ax, sx = p[x], i0[x], i1[x], s0[x], s1[x]
        pxx = (px >> x) & 1
        for k, y in enumerate(partners):
            if bad[k]:
                continue
            py, iy, by, ay, sy = p[y], i0[y], i1[y], s0[y], s1[y]
            # ds = 0 and da = 0 (equal values at both ends): both terms vanish.
            if not (sy == sx and ay == ax) and not zero(
                    sy & ~sx, sx & ~sy, bx & ~by, by & ~bx, ax & ~ay, ay & ~ax, iy & ~ix,
                    ix & ~iy, pxx - ((py >> x) & 1) - ((px >> y) & 1) + ((py >> y) & 1)):
                bad[k] = True
            elif (bx == 0) != (by == 0) or (ix == 0) != (iy == 0):
                unsafe[k] = True
    rejected = np.asarray(bad, dtype=bool)
    if no_dead_reduce:
        proven = ~rejected & ~np.asarray(unsafe, dtype=bool)
    return proven, rejected


def rank_two_is_zero(p0: int, p1: int, q0: int, q1: int, r0: int, r1: int, i0: int, i1: int,
                     kappa: int) -> bool:
    """Whether ``p (x) q + r (x) (i + kappa q) = 0`` for -1/0/1 vectors given as bitset pairs
    (``v = v0 - v1``, the bits of ``v0`` where ``v`` is 1 and of ``v1`` where it is -1).

    The difference of the swapped and original path counts has this form (module docstring),
    so its vanishing is decided in a few bit operations instead of building the matrix. If
    ``p (x) q = 0`` the rest must vanish: ``r = 0`` or ``i = -kappa q``. Otherwise both terms
    are rank one and equal up to sign: ``r = lam p`` (``lam = +-1``, the entries being +-1)
    and ``i + kappa q = -q / lam``, i.e. ``i = mu q`` with ``mu = -(kappa + lam)``.

    Examples
    --------
    ``p = q = (1)``, ``r = (-1)``, ``i = (0)``, ``kappa = 1``: ``1 * 1 + (-1) * (0 + 1) = 0``.

    >>> rank_two_is_zero(1, 0, 1, 0, 0, 1, 0, 0, 1)
    True
    >>> rank_two_is_zero(1, 0, 1, 0, 0, 1, 0, 0, 0)
    False
    """
    if not (p0 or p1) or not (q0 or q1):
        return not (r0 or r1) or _is_multiple(i0, i1, q0, q1, -kappa)
    if r0 == p0 and r1 == p1:
        lam = 1
    elif r0 == p1 and r1 == p0:
        lam = -1
    else:
        return False
    return _is_multiple(i0, i1, q0, q1, -(kappa + lam))


def _is_multiple(v0: int, v1: int, w0: int, w1: int, mu: int) -> bool:
    """Whether ``v = mu w`` for -1/0/1 vectors given as bitset pairs and an integer ``mu``."""
    if mu == 0:
        return not (v0 or v1)
    if mu == 1:
        return v0 == w0 and v1 == w1
    if mu == -1:
        return v0 == w1 and v1 == w0
    return not (v0 or v1 or w0 or w1)
