"""The engine's compiled fill (flowsim.kernels.fill_columns) against a reference written here:
residual capacities from the kept flows, the plain vectorised filling, the closure's check."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fill_reference import reference_fill

from flowsim.kernels import fill_columns, water_fill_kernel


def _state(rng: np.random.Generator, n_links: int, slots: int, width: int):
    """A random engine state: paths padded with the virtual link, some slots alive, rates of
    the running flows, capacities with links down (0) and the padding link at inf."""
    paths = np.full((width, slots), n_links, dtype=np.int64)
    for s in range(slots):
        k = int(rng.integers(1, min(width, n_links) + 1))
        paths[:k, s] = rng.choice(n_links, size=k, replace=False)
    alive = rng.random(slots) < 0.8
    rate = np.where(alive, rng.uniform(0.0, 2.0, slots), 0.0)
    cap = rng.uniform(0.0, 20.0, n_links) * (rng.random(n_links) > 0.1)
    return paths, alive, rate, np.append(cap, math.inf)


def _reference(paths, solve, alive, rate, weight, cap_ext, n_links, sat_rtol):
    kept = [s for s in range(alive.size) if alive[s] and s not in set(solve.tolist())]
    load = np.zeros(cap_ext.size)
    for pos in range(paths.shape[0]):  # by path position, then slot: bincount's order
        for s in kept:
            load[paths[pos, s]] += rate[s]
    residual = cap_ext - load
    before = residual.copy()
    cols = paths[:, solve]
    rates = reference_fill(cols, weight[solve], residual, scratch=True)
    on = np.zeros(cap_ext.size)
    for pos in range(cols.shape[0]):
        for j in range(cols.shape[1]):
            on[cols[pos, j]] += rates[j]
    crossed = set(cols.ravel().tolist())
    full = [lk for lk in range(n_links)
            if lk in crossed and on[lk] >= before[lk] - sat_rtol * cap_ext[lk]]
    return rates, full


@pytest.mark.parametrize("weighted", [False, True])
def test_fill_columns_matches_the_reference_bit_for_bit(weighted):
    rng = np.random.default_rng(11 + weighted)
    for _ in range(300):
        n_links = int(rng.integers(2, 30))
        slots = int(rng.integers(1, 40))
        width = int(rng.integers(1, 5))
        paths, alive, rate, cap_ext = _state(rng, n_links, slots, width)
        weight = rng.uniform(0.2, 5.0, slots) if weighted else np.ones(slots)
        running = np.flatnonzero(alive)
        if running.size == 0:
            continue
        solve = np.sort(rng.choice(running, size=int(rng.integers(1, running.size + 1)),
                                   replace=False))
        local_of = np.full(cap_ext.size, -1, dtype=np.int64)
        solved = np.zeros(slots, dtype=bool)
        rates, full = fill_columns(paths, solve, alive, rate, weight, not weighted, cap_ext,
                                   True, 1e-9, n_links, local_of, solved)
        want_rates, want_full = _reference(paths, solve, alive, rate, weight, cap_ext, n_links,
                                           1e-9)
        assert rates.tolist() == want_rates.tolist()
        assert full.tolist() == want_full
        # the scratch is left as it was found
        assert (local_of == -1).all() and not solved.any()


def test_water_fill_kernel_worked_example_in_the_engine_layout():
    # Link a (0) of 10, link b (1) of 4, padding link 2 at inf; f1 on a and b, f2 on a, f3 on
    # b: (2, 8, 2).
    P = np.array([[0, 0, 1], [1, 2, 2]])
    rem = np.array([10.0, 4.0, math.inf])
    assert water_fill_kernel(P, np.ones(3), True, rem).tolist() == [2.0, 8.0, 2.0]
