"""Tests of the max-min solver: hand-computed systems, bad input, and invariants on random ones."""

import math

import numpy as np
import pytest
from fill_reference import reference_fill
from hypothesis import given, settings
from hypothesis import strategies as st

from flowsim.errors import FlowError, UnknownLinkError
from flowsim.maxmin import max_min_rates, water_fill, water_fill_lists


def test_max_min_two_flows_share_one_bottleneck():
    # f1 uses a->b->c, f2 uses b->c; bc has 4 units, ab has 10.
    # bc is the bottleneck: 4/2 = 2 each; f1 cannot use ab's spare 8.
    rates = max_min_rates({"f1": ["ab", "bc"], "f2": ["bc"]}, {"ab": 10.0, "bc": 4.0})
    assert rates == pytest.approx({"f1": 2.0, "f2": 2.0})


def test_max_min_single_bottleneck_splits_equally():
    # Three flows on one link of 9: 9/3 = 3 each.
    rates = max_min_rates({"a": ["l"], "b": ["l"], "c": ["l"]}, {"l": 9.0})
    assert rates == pytest.approx({"a": 3.0, "b": 3.0, "c": 3.0})


def test_max_min_chain_spare_capacity_goes_to_the_unconstrained_flow():
    # Links x (cap 10) and y (cap 4). f1 crosses x and y, f2 only x, f3 only y.
    # y fills first at level 2 (f1 + f3 = 4): f1 = f3 = 2. x has 10 - 2 = 8 left for f2.
    rates = max_min_rates({"f1": ["x", "y"], "f2": ["x"], "f3": ["y"]}, {"x": 10.0, "y": 4.0})
    assert rates == pytest.approx({"f1": 2.0, "f2": 8.0, "f3": 2.0})


def test_max_min_parking_lot():
    # Parking lot: links l1, l2, l3 of capacity 1; the long flow crosses all three, one short
    # flow per link. Every link holds 2 flows: all saturate at level 1/2, so every flow gets 1/2.
    routes = {"long": ["l1", "l2", "l3"], "s1": ["l1"], "s2": ["l2"], "s3": ["l3"]}
    rates = max_min_rates(routes, {"l1": 1.0, "l2": 1.0, "l3": 1.0})
    assert rates == pytest.approx({"long": 0.5, "s1": 0.5, "s2": 0.5, "s3": 0.5})


def test_max_min_parking_lot_with_two_short_flows_on_one_link():
    # As above but l2 carries two short flows: l2 fills at 1/3 (3 flows), so long = s2a = s2b =
    # 1/3; l1 and l3 then give their short flows 1 - 1/3 = 2/3.
    routes = {"long": ["l1", "l2", "l3"], "s1": ["l1"], "s2a": ["l2"], "s2b": ["l2"], "s3": ["l3"]}
    rates = max_min_rates(routes, {"l1": 1.0, "l2": 1.0, "l3": 1.0})
    third = 1 / 3
    assert rates == pytest.approx(
        {"long": third, "s1": 2 * third, "s2a": third, "s2b": third, "s3": 2 * third}
    )


def test_max_min_heterogeneous_capacities():
    # Links a (cap 12) and b (cap 3). f1, f2 on a only; f3 on a and b; f4 on b only.
    # Shares: a 12/3 = 4, b 3/2 = 1.5 -> b first: f3 = f4 = 1.5. a: 12 - 1.5 = 10.5 for f1, f2:
    # 5.25 each.
    routes = {"f1": ["a"], "f2": ["a"], "f3": ["a", "b"], "f4": ["b"]}
    rates = max_min_rates(routes, {"a": 12.0, "b": 3.0})
    assert rates == pytest.approx({"f1": 5.25, "f2": 5.25, "f3": 1.5, "f4": 1.5})


def test_max_min_weighted_flows_share_in_proportion():
    # One link of 8; weights 1 and 3: level x with x + 3x = 8 -> x = 2: rates 2 and 6.
    rates = max_min_rates({"a": ["l"], "b": ["l"]}, {"l": 8.0}, weights={"b": 3.0})
    assert rates == pytest.approx({"a": 2.0, "b": 6.0})


def test_max_min_weighted_chain():
    # The chain with w_f1 = 3: y fills at 3x + x = 4 -> x = 1: f1 = 3, f3 = 1; x gives f2 10 - 3.
    rates = max_min_rates(
        {"f1": ["x", "y"], "f2": ["x"], "f3": ["y"]}, {"x": 10.0, "y": 4.0}, weights={"f1": 3}
    )
    assert rates == pytest.approx({"f1": 3.0, "f2": 7.0, "f3": 1.0})


def test_max_min_zero_capacity_link_gives_its_flows_rate_zero():
    # Link d is down (0): f1 (d, e) and f2 (d) get 0; f3 alone on e gets all 5 of e.
    rates = max_min_rates({"f1": ["d", "e"], "f2": ["d"], "f3": ["e"]}, {"d": 0.0, "e": 5.0})
    assert rates == {"f1": 0.0, "f2": 0.0, "f3": 5.0}


def test_max_min_repeated_link_in_route_counts_once():
    # f1 lists l twice; l (cap 2) still carries two flows: 1 each.
    rates = max_min_rates({"f1": ["l", "l"], "f2": ["l"]}, {"l": 2.0})
    assert rates == pytest.approx({"f1": 1.0, "f2": 1.0})


def test_max_min_rejects_negative_capacity():
    with pytest.raises(FlowError, match=r"capacity of link 'l' is -1\.0"):
        max_min_rates({"f": ["l"]}, {"l": -1.0})


def test_max_min_rejects_unknown_link():
    with pytest.raises(UnknownLinkError, match="names link 'zz'"):
        max_min_rates({"f": ["l", "zz"]}, {"l": 1.0})


@pytest.mark.parametrize("bad", [0.0, -2.0, math.nan, math.inf])
def test_max_min_rejects_non_positive_weight(bad):
    with pytest.raises(FlowError, match="weight of flow 'f'"):
        max_min_rates({"f": ["l"]}, {"l": 1.0}, weights={"f": bad})


def test_max_min_rejects_empty_route():
    with pytest.raises(FlowError, match="route of flow 'f' is empty"):
        max_min_rates({"f": []}, {"l": 1.0})


def test_water_fill_empty_problem():
    assert water_fill(np.zeros((0, 3), dtype=int), np.zeros(0), np.ones(4)).shape == (0,)


# -- invariants on random instances ----------------------------------------------------------


@st.composite
def instances(draw):
    n_links = draw(st.integers(1, 8))
    caps = draw(st.lists(st.sampled_from([0.0, 1.0, 2.5, 3.0, 7.0, 10.0, 0.3]),
                         min_size=n_links, max_size=n_links))
    n_flows = draw(st.integers(1, 12))
    routes = {}
    weights = {}
    for f in range(n_flows):
        links = draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=4, unique=True))
        routes[f] = links
        weights[f] = draw(st.sampled_from([1.0, 1.0, 2.0, 0.5, 3.0]))
    return routes, dict(enumerate(caps)), weights


@settings(max_examples=300, deadline=None)
@given(instances())
def test_max_min_invariants_on_random_instances(instance):
    routes, caps, weights = instance
    rates = max_min_rates(routes, caps, weights)
    tol = 1e-9
    load = {lk: 0.0 for lk in caps}
    for f, links in routes.items():
        assert rates[f] >= 0
        for lk in links:
            load[lk] += rates[f]
    # Feasible: no link over capacity.
    for lk, c in caps.items():
        assert load[lk] <= c + tol
    # Fair: every flow crosses a bottleneck, a saturated link where no flow has a higher
    # rate / weight.
    for f, links in routes.items():
        level = rates[f] / weights[f]
        assert any(
            load[lk] >= caps[lk] - tol
            and all(rates[g] / weights[g] <= level + tol for g in routes if lk in routes[g])
            for lk in links
        ), f"flow {f} at level {level} has no bottleneck"


def _sequential_fill(routes, caps):
    """One link at a time, the textbook way (unit weights): an independent implementation."""
    rem = dict(caps)
    unfixed = set(routes)
    rates = {}
    while unfixed:
        share = {}
        for lk in caps:
            n = sum(1 for f in unfixed if lk in routes[f])
            if n:
                share[lk] = rem[lk] / n
        best = min(share, key=lambda lk: (share[lk], lk))
        level = share[best]
        for f in sorted(unfixed):
            if best in routes[f]:
                rates[f] = level
                unfixed.discard(f)
                for lk in routes[f]:
                    rem[lk] -= level
    return rates


@settings(max_examples=200, deadline=None)
@given(instances())
def test_max_min_matches_sequential_filling(instance):
    routes, caps, _weights = instance
    got = max_min_rates(routes, caps)
    expected = _sequential_fill(routes, caps)
    for f in routes:
        assert got[f] == pytest.approx(expected[f], rel=1e-9, abs=1e-12)


def _columns(paths, n_links):
    width = max(len(q) for q in paths)
    cols = np.full((width, len(paths)), n_links, dtype=np.int64)
    for i, q in enumerate(paths):
        cols[: len(q), i] = q
    return cols


@settings(max_examples=100, deadline=None)
@given(instances())
def test_water_fill_agrees_bit_for_bit_with_the_plain_reference(instance):
    # The compiled kernel and the vectorised reference in the tests freeze the same links in the
    # same rounds and sum in the same order, so they agree exactly (the contract is 1e-12
    # relative; bit-equality is what they achieve), weighted or not.
    routes, caps, weights = instance
    paths = [list(dict.fromkeys(links)) for links in routes.values()]
    w = np.array([weights[f] for f in routes])
    n = len(caps)
    arr = _columns(paths, -1).T.copy()
    cap = np.array([caps[lk] for lk in range(n)])
    for ww in (w, np.ones(len(w))):
        got = water_fill(arr, ww, cap)
        expected = reference_fill(_columns(paths, n), ww, cap.copy())
        assert got.tolist() == pytest.approx(expected.tolist(), rel=1e-12, abs=1e-15)
        assert got.tolist() == expected.tolist()


def test_water_fill_worked_example():
    # The module's worked example: link a (0) of 10, link b (1) of 4; f1 on both, f2 on a, f3
    # on b. With unit weights (2, 8, 2); with w_f1 = 3, (3, 7, 1).
    paths = np.array([[0, 1], [0, -1], [1, -1]])
    cap = np.array([10.0, 4.0])
    assert water_fill(paths, np.ones(3), cap).tolist() == [2.0, 8.0, 2.0]
    assert water_fill(paths, np.array([3.0, 1.0, 1.0]), cap).tolist() == [3.0, 7.0, 1.0]


def test_water_fill_one_flow():
    # One flow takes its tightest link (the one-round shortcut), whatever its weight; a
    # residual a hair below zero (round-off in the engine) gives rate 0, never a negative one.
    cap = np.array([10.0, 4.0, -1e-18])
    assert water_fill(np.array([[0, 1]]), np.ones(1), cap).tolist() == [4.0]
    assert water_fill(np.array([[1, 0]]), np.array([3.0]), cap).tolist() == [4.0]
    assert water_fill(np.array([[0, 2]]), np.array([0.5]), cap).tolist() == [0.0]
    for w in (1e-9, 0.4, 7.0, 1e9):  # w * (c / w), bit for bit
        assert water_fill(np.array([[0, 1]]), np.array([w]), cap).tolist() == [w * (4.0 / w)]


@settings(max_examples=100, deadline=None)
@given(instances())
def test_water_fill_lists_agrees_with_the_array_core(instance):
    # The engine solves few flows with the plain-Python solver and many with the kernel; they
    # freeze the same links in the same rounds and sum in the same order, so they agree exactly
    # (the stated bound, 1e-12 relative, is the contract; bit-equality is what they achieve).
    routes, caps, weights = instance
    paths = [list(dict.fromkeys(links)) for links in routes.values()]
    w = [weights[f] for f in routes]
    width = max(len(p) for p in paths)
    arr = np.full((len(paths), width), -1, dtype=np.int64)
    for i, p in enumerate(paths):
        arr[i, : len(p)] = p
    cap = np.array([caps[lk] for lk in range(len(caps))])
    expected = water_fill(arr, np.array(w), cap).tolist()
    for unit in (False, True):
        ww = [1.0] * len(w) if unit else w
        if unit:
            expected = water_fill(arr, np.ones(len(w)), cap).tolist()
        got = water_fill_lists(paths, ww, caps)
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)
        assert got == expected


def test_water_fill_lists_empty_and_worked_example():
    assert water_fill_lists([], [], {}) == []
    # The module's worked example: link a (0) of 10, link b (1) of 4; f1 on both, f2 on a, f3
    # on b. With unit weights (2, 8, 2); with w_f1 = 3, (3, 7, 1).
    caps = {0: 10.0, 1: 4.0}
    assert water_fill_lists([[0, 1], [0], [1]], [1.0, 1.0, 1.0], caps) == [2.0, 8.0, 2.0]
    assert water_fill_lists([[0, 1], [0], [1]], [3.0, 1.0, 1.0], caps) == [3.0, 7.0, 1.0]


def test_water_fill_lists_one_flow():
    # One flow takes its tightest link (the solver's one-round shortcut), whatever its weight;
    # a residual a hair below zero (round-off in the engine) gives rate 0, never a negative one.
    caps = {0: 10.0, 1: 4.0, 2: -1e-18}
    assert water_fill_lists([[0, 1]], [1.0], caps) == [4.0]
    assert water_fill_lists([[1, 0]], [3.0], caps) == [4.0]
    assert water_fill_lists([[0, 2]], [0.5], caps) == [0.0]
    for w in (1e-9, 0.4, 7.0, 1e9):  # bit for bit as the array core: w * (c / w)
        expected = water_fill(np.array([[0, 1]]), np.array([w]), np.array([10.0, 4.0]))
        assert water_fill_lists([[0, 1]], [w], caps) == expected.tolist()


def test_max_min_docstring_examples_run():
    import doctest

    import flowsim.maxmin

    result = doctest.testmod(flowsim.maxmin)
    assert result.attempted > 0
    assert result.failed == 0


# -- weights many orders of magnitude apart --------------------------------------------------

def _exact_max_min(paths, weights, caps):
    """Progressive filling in exact rationals, one level at a time (the reference).

    Every input float converts to a Fraction exactly; at each step the links' fair shares
    (capacity left / weight of the flows still rising) are exact, the lowest one is taken, and
    every rising flow on a link at that share freezes at weight x share.
    """
    from fractions import Fraction

    w = [Fraction(x) for x in weights]
    left = {lk: Fraction(c) for lk, c in caps.items()}
    rate = [None] * len(paths)
    while any(r is None for r in rate):
        share = {}
        for lk in left:
            rising = [i for i, p in enumerate(paths) if rate[i] is None and lk in p]
            if rising:
                share[lk] = left[lk] / sum(w[i] for i in rising)
        low = min(share.values())
        for i, p in enumerate(paths):
            if rate[i] is None and any(share.get(lk) == low for lk in p):
                rate[i] = w[i] * low
                for lk in p:
                    left[lk] -= rate[i]
    return rate


def _ulps(x, exact):
    return abs(x - float(exact)) / math.ulp(float(exact)) if exact else abs(x)


WIDE_WEIGHTS = (1e-12, 3e-9, 1e-9, 1e-3, 1.0, 7.0, 1e6, 1e9)


def _wide_instances(count=150, seed=3):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n_links = int(rng.integers(1, 5))
        n_flows = int(rng.integers(1, 6))
        paths = [sorted(rng.choice(n_links, size=int(rng.integers(1, n_links + 1)),
                                   replace=False).tolist()) for _ in range(n_flows)]
        weights = [float(rng.choice(WIDE_WEIGHTS)) for _ in range(n_flows)]
        caps = {lk: float(rng.uniform(1.0, 10.0)) for lk in range(n_links)}
        out.append((paths, weights, caps))
    return out


def test_weighted_max_min_exact_when_weights_differ_by_many_orders():
    # Worked case: link a (cap 1) carries f (w 1) and g (w 1e-9); f also crosses b (cap 0.5).
    # f freezes on b at 0.5 (level 0.5); a then has 0.5 left for g alone: g = 0.5 exactly.
    # Summing a's weights (1 + 1e-9) and later subtracting f's 1 leaves 1.00000008e-9, an
    # error of 8e-8 in g; the solvers must give g to a few ulps.
    paths, weights, caps = [[0, 1], [0]], [1.0, 1e-9], {0: 1.0, 1: 0.5}
    exact = _exact_max_min(paths, weights, caps)
    assert exact == [0.5, 0.5]
    solvers = {
        "water_fill": lambda p, w, c: water_fill(
            np.array([q + [-1] * (4 - len(q)) for q in p]), np.array(w),
            np.array([c[k] for k in range(len(c))])).tolist(),
        "water_fill_lists": water_fill_lists,
        "reference": lambda p, w, c: reference_fill(
            _columns(p, len(c)), np.array(w), np.array([c[k] for k in range(len(c))])).tolist(),
    }
    for name, solve in solvers.items():
        got = solve(paths, weights, caps)
        assert max(_ulps(x, e) for x, e in zip(got, exact, strict=True)) <= 2, (name, got)
    # Random systems with weights from 1e-12 to 1e9: every solver within 8 ulps of exact.
    worst = dict.fromkeys(solvers, 0.0)
    for paths, weights, caps in _wide_instances():
        exact = _exact_max_min(paths, weights, caps)
        for name, solve in solvers.items():
            got = solve(paths, weights, caps)
            worst[name] = max(worst[name], *(_ulps(x, e) for x, e in zip(got, exact, strict=True)))
    assert all(v <= 8 for v in worst.values()), worst
