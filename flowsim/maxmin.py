"""Weighted max-min fair rate allocation by progressive filling (water-filling).

A pure solver: no time, no SimPy. The filling itself is one compiled kernel
(:func:`flowsim.kernels.water_fill_kernel`), which the engine (:mod:`flowsim.network`) calls
through :func:`flowsim.kernels.fill_columns` for many flows; :func:`water_fill` is its array
front; :func:`water_fill_lists` is the same algorithm on lists, the engine's path for a few
flows (same rates, bit for bit); people and tests call the front door :func:`max_min_rates`.

The problem
-----------
Flows ``f`` with weights ``w_f > 0`` cross sets of links ``L(f)``; link ``l`` has capacity
``C_l >= 0``. A rate vector ``r`` is *feasible* when, for every link,

.. math::  \\sum_{f \\ni l} r_f \\le C_l ,

and it is *weighted max-min fair* when the vector of normalised rates ``r_f / w_f``, sorted
ascending, is lexicographically largest among feasible vectors: no flow can get more without taking
from a flow whose normalised rate is already no larger. Equivalently, every flow crosses a
*bottleneck* link, a saturated link on which no other flow has a larger ``r / w``.

Progressive filling finds it: raise a common level ``lambda`` from 0, every unfrozen flow at rate
``w_f * lambda``; when a link fills up, freeze the flows crossing it at their current rate and keep
raising the level for the others.

A worked example (in the style of SimGrid's LMM notes). Three flows, two links of capacity 10 and
4; ``f1`` crosses both, ``f2`` only the first, ``f3`` only the second, all of weight 1::

    f1 + f2 <= 10        (link a)
    f1 + f3 <= 4         (link b)

The level rises to 2, where link b is full (2 + 2 = 4): ``f1 = f3 = 2`` freeze. Link a has 8 left
for ``f2`` alone: ``f2 = 8``. Result ``(2, 8, 2)``. With ``w_f1 = 3`` instead, link b fills at
``3 lambda + lambda = 4``, i.e. ``lambda = 1``: ``f1 = 3, f3 = 1`` and ``f2 = 7``.

A link of capacity 0 (a link that is down) fills at level 0: every flow crossing it gets rate 0.

The algorithm
-------------
:func:`water_fill` freezes many links per round instead of one: a link whose every unfrozen flow
has that link as its tightest one (lowest current fair share ``remaining / weight sum``) is
certain to saturate at exactly its current share, because shares only rise as flows freeze below
them. The link of globally lowest share always qualifies, so each round makes progress, and on a
Clos fabric a handful of rounds replaces one round per distinct level. Each round is a pass over
the (flow, link) incidence, kept as a dense ``max_path_length x flows`` array.

Round-off: rates are exact up to float accumulation in the remaining capacities (a few ulps);
rates are clamped at 0, so none is ever negative.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from itertools import zip_longest
from typing import TypeVar

import numpy as np

from flowsim.errors import FlowError, UnknownLinkError

K = TypeVar("K", bound=Hashable)
L = TypeVar("L", bound=Hashable)

__all__ = ["max_min_rates", "water_fill", "water_fill_lists"]


def water_fill(paths: np.ndarray, weights: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Weighted max-min fair rates of flows on links (the array core the engine uses).

    Parameters
    ----------
    paths : ndarray of int, shape (n_flows, max_len)
        Row ``i`` holds the link indices flow ``i`` crosses, padded on the right with ``-1``.
        A flow must cross at least one link and no link twice.
    weights : ndarray of float, shape (n_flows,)
        Positive weights.
    capacity : ndarray of float, shape (n_links,)
        Capacity (or residual capacity) of each link, non-negative, in any rate unit.

    Returns
    -------
    ndarray of float, shape (n_flows,)
        The rates, in the unit of ``capacity``.

    Notes
    -----
    No validation: :func:`max_min_rates` checks its inputs and the engine builds valid arrays.
    """
    if paths.shape[0] == 0:
        return np.zeros(0)
    from flowsim.kernels import water_fill_kernel  # numba loads on first use

    n_links = capacity.shape[0]
    # The kernel's layout: one column per flow, padded with a virtual link of infinite capacity.
    rem = np.empty(n_links + 1)
    rem[:n_links] = capacity
    rem[n_links] = math.inf
    w = np.asarray(weights, dtype=float)
    columns = np.ascontiguousarray(np.where(paths.T < 0, n_links, paths.T), dtype=np.int64)
    return water_fill_kernel(columns, w, bool((w == 1.0).all()), rem)


def water_fill_lists(paths: Sequence[Sequence[int]], weights: Sequence[float],
                     capacity: Mapping[int, float],
                     unit_weights: bool | None = None) -> list[float]:
    """The compiled filling in plain Python, for small problems (the engine's small path).

    Below a few dozen flows numpy's per-call overhead, not arithmetic, sets the cost of a
    vectorised round; this version uses dicts and lists instead. It freezes the same links in the
    same rounds and sums in the same order as the array core (per link: by path position, then by
    flow), so both return bit-for-bit the same rates.

    Parameters
    ----------
    paths : sequence of sequences of int
        Links of each flow (at least one, none twice).
    weights : sequence of float
        Positive weight of each flow.
    capacity : mapping int -> float
        Capacity (or residual capacity) of at least every link a path names, non-negative.
    unit_weights : bool, optional
        Whether every weight is 1; computed if not given.

    Returns
    -------
    list of float
        The rates, in the unit of ``capacity``.
    """
    n = len(paths)
    if n == 0:
        return []
    unit = all(w == 1.0 for w in weights) if unit_weights is None else unit_weights
    if n == 1:  # one round: the flow's tightest link
        path = paths[0]
        if unit:
            r = min([capacity[lk] for lk in path])
        else:
            w = weights[0]
            r = w * min([capacity[lk] / w for lk in path])
        return [r if r > 0.0 else 0.0]
    rem: dict[int, float] = {}
    # Per live link (one crossed by a flow not yet frozen): the weight sum of those flows. A
    # link leaves when its last flow freezes.
    wsum: dict[int, float] = {}
    if unit:  # counts are exact whatever the order
        for path in paths:
            for lk in path:
                if lk in wsum:
                    wsum[lk] += 1.0
                else:
                    wsum[lk] = 1.0
                    rem[lk] = capacity[lk]
    else:
        _add_by_position(paths, weights, wsum)
        rem = {lk: capacity[lk] for lk in wsum}
    rates = [0.0] * n
    active: Sequence[int] = range(n)
    inf = math.inf
    while True:
        share = {lk: rem[lk] / s for lk, s in wsum.items()}
        get = share.__getitem__
        apaths = [paths[i] for i in active]
        fmins = [min(map(get, p)) for p in apaths]
        # A link saturates now when none of its flows has a tighter link elsewhere (such a flow
        # may freeze first and release capacity, so the link's share may still rise): when the
        # lowest tightest share among its flows is its own share. A flow freezes when it crosses
        # such a link. (The array core's "blocked" links are exactly the others.)
        low = dict.fromkeys(share, inf)
        for p, f in zip(apaths, fmins, strict=True):
            for lk in p:
                if f < low[lk]:
                    low[lk] = f
        sat = {lk for lk, x in share.items() if low[lk] >= x}
        clear = sat.isdisjoint
        fixed: list[int] = []
        fixed_rate: list[float] = []
        waiting: list[int] = []
        for i, p, f in zip(active, apaths, fmins, strict=True):
            if clear(p):
                waiting.append(i)
            else:
                fixed.append(i)
                fixed_rate.append(f if unit else weights[i] * f)
        for i, r in zip(fixed, fixed_rate, strict=True):
            rates[i] = r
        if not waiting:
            break
        # Per-link sums of the frozen flows, by path position then flow, as bincount adds them.
        dec: dict[int, float] = {}
        _add_by_position([paths[i] for i in fixed], fixed_rate, dec)
        for lk, d in dec.items():
            rem[lk] -= d
        if unit:
            for i in fixed:  # counts: exact in any order
                for lk in paths[i]:
                    c = wsum[lk] - 1.0
                    if c:
                        wsum[lk] = c
                    else:
                        del wsum[lk]
        else:
            # The weight sums of the flows still rising, afresh (the array core's order):
            # subtracting frozen weights would swamp tiny weights beside large ones.
            wsum = {}
            _add_by_position([paths[i] for i in waiting], [weights[i] for i in waiting], wsum)
        active = waiting
    # Round-off can leave a full link a hair below zero; no rate is negative.
    return [r if r > 0.0 else 0.0 for r in rates]


def _add_by_position(paths: Sequence[Sequence[int]], values: Sequence[float],
                     sums: dict[int, float]) -> None:
    """Add each path's value to each of its links in ``sums``, by path position then path: the
    order in which ``bincount`` adds them in the array core, so both give the same floats."""
    get = sums.get
    for column in zip_longest(*paths):  # path position by path position, None past a path's end
        for lk, v in zip(column, values, strict=True):
            if lk is not None:
                s = get(lk)
                sums[lk] = 0.0 + v if s is None else s + v


def max_min_rates(
    routes: Mapping[K, Sequence[L]],
    capacities: Mapping[L, float],
    weights: Mapping[K, float] | None = None,
) -> dict[K, float]:
    """Weighted max-min fair rates of flows given by their routes.

    Parameters
    ----------
    routes : mapping flow key -> sequence of link keys
        The links each flow crosses (at least one; a link listed twice counts once).
    capacities : mapping link key -> float
        Capacity of every link a route names; ``>= 0`` (0 = link down, its flows get rate 0).
    weights : mapping flow key -> float, optional
        Positive weight of each flow (default 1 for flows not listed).

    Returns
    -------
    dict
        Rate of every flow, in the unit of ``capacities``, keyed and ordered as ``routes``.

    Raises
    ------
    FlowError
        On a negative or non-finite capacity, an empty route, or a non-positive weight.
    UnknownLinkError
        When a route names a link that ``capacities`` lacks.

    Examples
    --------
    >>> max_min_rates({"f1": ["ab", "bc"], "f2": ["bc"]}, {"ab": 10.0, "bc": 4.0})
    {'f1': 2.0, 'f2': 2.0}
    """
    link_index: dict[L, int] = {}
    cap = np.empty(len(capacities))
    for i, (link, c) in enumerate(capacities.items()):
        c = float(c)
        if not (math.isfinite(c) and c >= 0):
            raise FlowError(
                f"max_min_rates: capacity of link {link!r} is {c!r}, expected a finite number >= 0"
            )
        link_index[link] = i
        cap[i] = c
    weights = weights or {}
    for key in weights:
        if key not in routes:
            raise FlowError(f"max_min_rates: weight given for unknown flow {key!r}")
    keys = list(routes)
    rows: list[list[int]] = []
    w = np.ones(len(keys))
    for i, key in enumerate(keys):
        row: list[int] = []
        for link in routes[key]:
            try:
                j = link_index[link]
            except (KeyError, TypeError):
                raise UnknownLinkError(
                    f"max_min_rates: route of flow {key!r} names link {link!r}, which has no "
                    f"capacity"
                ) from None
            if j not in row:
                row.append(j)
        if not row:
            raise FlowError(f"max_min_rates: route of flow {key!r} is empty; expected >= 1 link")
        rows.append(row)
        if key in weights:
            wk = float(weights[key])
            if not (math.isfinite(wk) and wk > 0):
                raise FlowError(
                    f"max_min_rates: weight of flow {key!r} is {weights[key]!r}, expected a "
                    f"positive finite number"
                )
            w[i] = wk
    width = max((len(r) for r in rows), default=1)
    paths = np.full((len(keys), width), -1, dtype=np.int64)
    for i, row in enumerate(rows):
        paths[i, : len(row)] = row
    rates = water_fill(paths, w, cap)
    return {key: float(rates[i]) for i, key in enumerate(keys)}
