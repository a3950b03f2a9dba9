"""flowsim: a discrete-event, max-min fair, flow-level network simulator on SimPy.

It knows nothing of collectives: topologies, routing, a rate solver and an engine.
"""

from flowsim.errors import (
    FlowError,
    FlowsimError,
    RoutingError,
    TopologyError,
    UnknownLinkError,
    UnknownNodeError,
)
from flowsim.topology import Link, Node, Topology

__all__ = [
    "FlowError",
    "FlowsimError",
    "Link",
    "Node",
    "RoutingError",
    "Topology",
    "TopologyError",
    "UnknownLinkError",
    "UnknownNodeError",
]
