"""The simulator's hot loops, compiled: plain Python on numpy arrays under ``numba.njit``.

Each kernel does the arithmetic of the algorithm it stands for in a fixed order, written out
(a sum is accumulated from ``0.0`` in the order :func:`numpy.bincount` would add it: by path
position, then by column), so its results do not depend on how it is run: compiled, or as plain
Python under ``NUMBA_DISABLE_JIT=1`` (how the tests check them against the references they hold).
Compiled kernels are cached on disk (``cache=True``): the first run of a fresh install compiles
them once (:func:`warm_up` says so on screen), later runs load them.

Layout (the engine's): ``P`` holds one column per flow, the flow's link ids from the top,
padded with the id of a virtual link of infinite capacity (the last entry of the capacity
array).
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import TextIO

import numpy as np
from numba import njit

__all__ = ["fill_columns", "water_fill_kernel", "warm_up"]


@njit(cache=True)
def water_fill_kernel(P: np.ndarray, w: np.ndarray, unit: bool, rem: np.ndarray) -> np.ndarray:
    """Weighted max-min rates of the columns of ``P`` on capacities ``rem`` (overwritten).

    Progressive filling that freezes every *unblocked* link each round (:mod:`flowsim.maxmin`):
    a link whose flows all have it as their tightest link saturates at its current share.
    ``w`` is read only when ``unit`` is false (then every weight is 1 and link weight sums are
    counts). Rates are clamped at 0.
    """
    width, n = P.shape
    size = rem.shape[0]
    rates = np.empty(n)
    if n == 0:
        return rates
    wsum = np.zeros(size)
    for pos in range(width):
        for c in range(n):
            wsum[P[pos, c]] += 1.0 if unit else w[c]
    act = np.arange(n)  # the columns still rising, in order
    n_act = n
    fmin = np.empty(n)
    wait = np.empty(n, dtype=np.bool_)
    blocked = np.zeros(size, dtype=np.int64)
    dec = np.zeros(size)
    share = np.empty(size)
    while True:
        # Each live link's fair share, once per round (links of no rising flow are never read).
        for i in range(n_act):
            c = act[i]
            for pos in range(width):
                lk = P[pos, c]
                share[lk] = rem[lk] / wsum[lk]
        for i in range(n_act):
            c = act[i]
            low = share[P[0, c]]
            for pos in range(1, width):
                s = share[P[pos, c]]
                if s < low:
                    low = s
            fmin[i] = low
        if n_act == 1:  # a lone flow freezes at its tightest share: no blocking to check
            k = 1
            wait[0] = False
        else:
            # A link is blocked when one of its flows has a tighter link elsewhere: that flow
            # may freeze first and release capacity. A flow freezes now when it crosses an
            # unblocked link (the padding link, at share inf, is blocked).
            for i in range(n_act):
                c = act[i]
                for pos in range(width):
                    lk = P[pos, c]
                    if share[lk] > fmin[i]:
                        blocked[lk] += 1
            k = 0
            for i in range(n_act):
                c = act[i]
                every = True
                for pos in range(width):
                    if blocked[P[pos, c]] == 0:
                        every = False
                        break
                wait[i] = every
                if not every:
                    k += 1
            for i in range(n_act):
                c = act[i]
                for pos in range(width):
                    blocked[P[pos, c]] = 0
        if k == n_act:
            for i in range(n_act):
                c = act[i]
                rates[c] = fmin[i] if unit else w[c] * fmin[i]
            break
        # The frozen columns' rates, summed per link by position, then column, and subtracted
        # from the remaining capacity once (as numpy's bincount adds them).
        for i in range(n_act):
            if not wait[i]:
                c = act[i]
                rates[c] = fmin[i] if unit else w[c] * fmin[i]
        for pos in range(width):
            for i in range(n_act):
                if not wait[i]:
                    c = act[i]
                    dec[P[pos, c]] += rates[c]
        for i in range(n_act):
            if not wait[i]:
                c = act[i]
                for pos in range(width):
                    lk = P[pos, c]
                    rem[lk] -= dec[lk]  # once: dec is 0.0 on a second visit
                    dec[lk] = 0.0
        if unit:
            for i in range(n_act):
                if not wait[i]:
                    c = act[i]
                    for pos in range(width):
                        wsum[P[pos, c]] -= 1.0  # counts: exact
        else:
            # The weight sums of the flows still rising, summed afresh: subtracting the frozen
            # flows' weights would swamp a weight of 1e-9 beside one of 1 in round-off.
            for i in range(n_act):
                c = act[i]
                for pos in range(width):
                    wsum[P[pos, c]] = 0.0
            for pos in range(width):
                for i in range(n_act):
                    if wait[i]:
                        c = act[i]
                        wsum[P[pos, c]] += w[c]
        m = 0
        for i in range(n_act):
            if wait[i]:
                act[m] = act[i]
                m += 1
        n_act = m
    for c in range(n):
        if not rates[c] > 0.0:  # round-off can leave a full link a hair below zero
            rates[c] = 0.0
    return rates


@njit(cache=True)
def fill_columns(paths: np.ndarray, solve: np.ndarray, alive: np.ndarray, rate: np.ndarray,
                 weight: np.ndarray, unit: bool, cap_ext: np.ndarray, check: bool,
                 sat_rtol: float, n_links: int, local_of: np.ndarray, solved: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """New rates of the flows in slots ``solve`` (ascending); every other ``alive`` flow keeps
    its ``rate``. ``unit``: every running flow has weight 1 (else the solved flows' weights
    are looked at: all 1 still fills by counts, the same rates).

    The residual capacity of each link a solved flow crosses is its capacity less the kept
    flows' rates (summed by path position, then slot). With ``check``, also the real links that
    the new rates fill (their load within ``sat_rtol`` of the residual), ascending: the
    engine's test of a closure. The links are renumbered to those the solved flows cross, so
    the work grows with the flows, not with the fabric (the filling's arithmetic does not
    depend on link ids). Scratch: ``local_of`` (int, one per link, -1) and ``solved`` (bool,
    one per slot, False) are left as they were found.
    """
    width = paths.shape[0]
    k = solve.shape[0]
    links = np.empty(k * width, dtype=np.int64)
    P = np.empty((width, k), dtype=np.int64)
    w = np.empty(k)
    m = 0
    for j in range(k):
        s = solve[j]
        solved[s] = True
        w[j] = weight[s]
        for pos in range(width):
            lk = paths[pos, s]
            li = local_of[lk]
            if li < 0:
                li = local_of[lk] = m
                links[m] = lk
                m += 1
            P[pos, j] = li
    if not unit:
        unit = True
        for j in range(k):
            if w[j] != 1.0:
                unit = False
                break
    load = np.zeros(m)
    n_slots = alive.shape[0]
    for pos in range(width):
        for s in range(n_slots):
            if alive[s] and not solved[s]:
                li = local_of[paths[pos, s]]
                if li >= 0:
                    load[li] += rate[s]
    residual = np.empty(m)
    for i in range(m):
        residual[i] = cap_ext[links[i]] - load[i]
    before = residual.copy() if check else residual[:0]
    rates = water_fill_kernel(P, w, unit, residual)
    count = 0
    full = np.empty(m, dtype=np.int64)
    if check:
        on = np.zeros(m)
        for pos in range(width):
            for j in range(k):
                on[P[pos, j]] += rates[j]
        for i in range(m):
            lk = links[i]
            if lk < n_links and on[i] >= before[i] - sat_rtol * cap_ext[lk]:
                full[count] = lk
                count += 1
    for i in range(m):
        local_of[links[i]] = -1
    for j in range(k):
        solved[solve[j]] = False
    out = full[:count].copy()
    out.sort()
    return rates, out


_WARM = False


def warm_up(stream: TextIO | None = None) -> None:
    """Load (or, on a fresh install, compile) the engine's kernel now, once per process; say so
    when compiling takes long enough to notice. (:func:`water_fill_kernel` alone, for
    :func:`flowsim.maxmin.water_fill`, loads on its first call.)"""
    global _WARM
    if _WARM:
        return
    _WARM = True
    start = time.perf_counter()
    P = np.zeros((1, 1), dtype=np.intp)
    fill_columns(P, np.zeros(1, dtype=np.intp), np.ones(1, dtype=np.bool_), np.zeros(1),
                 np.ones(1), True, np.array([1.0, math.inf]), True, 1e-9, 1,
                 np.full(2, -1, dtype=np.int64), np.zeros(1, dtype=np.bool_))
    took = time.perf_counter() - start
    if took > 1.0 and os.environ.get("NUMBA_DISABLE_JIT") != "1":
        out = stream if stream is not None else sys.stderr
        print(f"flowsim: compiled the simulator core in {took:.1f} s (first run only; cached "
              "for later runs)", file=out)
