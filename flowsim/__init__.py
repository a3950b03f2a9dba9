"""flowsim: a discrete-event, max-min fair, flow-level network simulator on SimPy.

It knows nothing of collectives: topologies, routing, a rate solver and an engine. The names
below are its public API (docs/api.md); internal module paths may change, these do not.
"""

from flowsim.errors import (
    FlowError,
    FlowsimError,
    RoutingError,
    TopologyError,
    UnknownLinkError,
    UnknownNodeError,
)
from flowsim.maxmin import max_min_rates
from flowsim.network import FlowDone, Network
from flowsim.records import FlowRecord, FlowState
from flowsim.routing import Router, ecmp_hash
from flowsim.tcp import TcpModel, TcpNetwork
from flowsim.topologies import alibaba_fabric, fat_tree, leaf_spine, star
from flowsim.topology import Link, Node, Topology
from flowsim.traffic import TrafficSource, long_lived, periodic_bulk, ping_pong, poisson_on_off

__all__ = [
    "FlowDone",
    "FlowError",
    "FlowRecord",
    "FlowState",
    "FlowsimError",
    "Link",
    "Network",
    "Node",
    "Router",
    "RoutingError",
    "TcpModel",
    "TcpNetwork",
    "Topology",
    "TopologyError",
    "TrafficSource",
    "UnknownLinkError",
    "UnknownNodeError",
    "alibaba_fabric",
    "ecmp_hash",
    "fat_tree",
    "leaf_spine",
    "long_lived",
    "max_min_rates",
    "periodic_bulk",
    "ping_pong",
    "poisson_on_off",
    "star",
]
