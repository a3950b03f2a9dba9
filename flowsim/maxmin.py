"""Weighted max-min fair rate allocation by progressive filling (water-filling).

A pure solver: no time, no SimPy. The filling itself is one compiled kernel
(:func:`flowsim.kernels.water_fill_kernel`), which the engine (:mod:`flowsim.network`) calls
through :func:`flowsim.kernels.fill_columns`; :func:`water_fill` is its array front, and people
and tests call the front door :func:`max_min_rates`.

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
from typing import TypeVar

import numpy as np

from flowsim.errors import FlowError, UnknownLinkError

K = TypeVar("K", bound=Hashable)
L = TypeVar("L", bound=Hashable)

__all__ = ["max_min_rates", "water_fill"]


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
