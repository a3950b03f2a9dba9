"""Run a random engine test in every re-solve regime of :class:`flowsim.network.Network`."""

import pytest

from flowsim.network import Network
from flowsim.topologies import leaf_spine

every_regime = pytest.mark.parametrize(
    "small_flows,list_flows",
    [(None, None), (0, 10**9), (0, 0), (4, 8)],
    ids=["default", "numpy-solve-list-state", "numpy-only", "switching"],
)
"""The default choice of re-solve (few flows: the plain-Python path), the numpy solve with the
per-flow state in lists, numpy only, and thresholds of 4 and 8 flows, so that the engine
switches between all three during a run."""


def small_leaf_spine(seed, small_flows, list_flows):
    """A 3-leaf, 2-spine, 9-host network with the re-solve thresholds of one regime."""
    topo = leaf_spine(leaves=3, spines=2, hosts_per_leaf=3)
    network = Network(topo, seed=seed)
    if small_flows is not None:
        network._small_flows = small_flows
    if list_flows is not None:
        network._list_flows = list_flows
    return topo, network
