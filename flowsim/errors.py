"""Exceptions raised by flowsim.

Every error derives from :class:`FlowsimError` and also from the builtin that fits the mistake,
so callers may catch either. Messages name the argument, the bad value and what was expected.
"""


class FlowsimError(Exception):
    """Base class of every error flowsim raises."""


class TopologyError(FlowsimError, ValueError):
    """A topology description is invalid (bad capacity, disconnected hosts, bad parameter)."""


class UnknownNodeError(FlowsimError, KeyError):
    """A node name that is not in the topology."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownLinkError(FlowsimError, KeyError):
    """A link id or (src, dst) pair that is not in the topology."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RoutingError(FlowsimError, ValueError):
    """No route exists, or an explicit path is not a valid path."""


class FlowError(FlowsimError, ValueError):
    """A flow request is invalid (negative size, src == dst, bad weight)."""
