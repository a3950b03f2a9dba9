"""A plain reference for the compiled filling (:mod:`flowsim.kernels`): progressive filling
that freezes every unblocked link per round, vectorised with numpy (the engine's solver before
the kernels). Independent of the kernels' loops; the tests hold them to it bit for bit."""

from __future__ import annotations

import math

import numpy as np


def reference_fill(P: np.ndarray, weights: np.ndarray | None, capacity: np.ndarray,
                       unit_weights: bool | None = None, *, scratch: bool = False) -> np.ndarray:
    """:func:`water_fill` on the engine's layout: one column per flow, padding ``len(capacity)``.

    Parameters
    ----------
    P : ndarray of int, shape (max_len, n_flows)
        Column ``i`` holds the links of flow ``i``, padded with ``len(capacity)`` (a virtual link
        of infinite capacity).
    weights : ndarray of float, shape (n_flows,), or None
        As in :func:`water_fill`; None: every weight is 1.
    capacity
        As in :func:`water_fill`.
    unit_weights : bool, optional
        Whether every weight is 1 (then link weight sums are plain counts); computed if not given.
    scratch : bool
        The caller hands ``capacity`` over as scratch space: its last entry is the padding link
        (``inf``), which ``P``'s padding indexes, and the solver overwrites it instead of copying.

    Notes
    -----
    At the engine's sizes (tens to hundreds of flows) a round costs about twenty numpy calls
    whatever the size, so the loop avoids calls rather than arithmetic: counts instead of
    weight sums when every weight is 1, and the columns' positions in the result ride along
    below their links, so that one compress per round keeps both.
    """
    n_flows = P.shape[1]
    if n_flows == 0:
        return np.zeros(0)
    if scratch:
        rem = capacity
        n_links = capacity.shape[0] - 1  # P's padding: the last entry
    else:
        n_links = capacity.shape[0]
        rem = np.empty(n_links + 1)
        rem[:n_links] = capacity
        rem[n_links] = math.inf
    size = n_links + 1
    width = P.shape[0]
    if weights is None:  # every weight is 1; w is never read
        unit = True
        w = np.empty(0)
    else:
        w = np.asarray(weights, dtype=float)
        unit = bool((w == 1.0).all()) if unit_weights is None else unit_weights
    if unit:  # the common case: counts instead of weight sums
        wsum = np.bincount(P.ravel(), minlength=size).astype(float)
    else:  # each flow's weight once per path position
        wsum = np.bincount(P.ravel(), weights=np.concatenate((w,) * width), minlength=size)
    rates = np.empty(n_flows)
    # The columns still rising, with one more row below their links: each column's position in
    # the result, so that one compress per round moves both.
    PI = np.empty((width + 1, n_flows), dtype=P.dtype)
    PI[:width] = P
    PI[width] = np.arange(n_flows)
    n = n_flows
    with np.errstate(divide="ignore", invalid="ignore"):
        while True:
            # Links without flows give inf or nan, which no flow reads; the padding link gives inf.
            share = rem / wsum
            S = share[P]
            fmin = np.minimum.reduce(S, axis=0)  # the ufunc's own reduce: no Python wrapper
            if n == 1:  # a lone flow freezes at its tightest share: no blocking to check
                k = 1
            else:
                # A link is blocked when one of its flows has a tighter link elsewhere: that
                # flow may freeze first and release capacity, so the link's share may still
                # rise. An unblocked link is every one of its flows' tightest, so a flow freezes
                # now exactly when it crosses an unblocked link (the padding link, at share inf,
                # is blocked).
                blocked = np.bincount(P[S > fmin], minlength=size)
                wait = np.logical_and.reduce(blocked[P], axis=0)
                k = n - np.count_nonzero(wait)  # flows freezing now (at least one)
            if k == n:
                rates[PI[width]] = fmin if unit else w * fmin
                break
            fix = ~wait
            F = PI.compress(fix, axis=1)
            Pf = F[:width].ravel()
            r = fmin.compress(fix)
            if unit:
                wsum -= np.bincount(Pf, minlength=size)  # counts: exact
            else:
                r = w.compress(fix) * r
                w = w.compress(wait)
            rates[F[width]] = r
            # Each frozen flow's rate once per path position, summed per link by position, then
            # column.
            rem -= np.bincount(Pf, weights=np.concatenate((r,) * width), minlength=size)
            PI = PI.compress(wait, axis=1)
            P = PI[:width]
            n -= k
            if not unit:
                # Weight sums of the flows still rising, summed afresh: subtracting the frozen
                # flows' weights would swamp a weight of 1e-9 beside one of 1 in round-off.
                wsum = np.bincount(P.ravel(), weights=np.concatenate((w,) * width),
                                   minlength=size)
    # Round-off can leave a full link a hair below zero; no rate is negative.
    return np.maximum(rates, 0.0, out=rates)
