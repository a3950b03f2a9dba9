"""react: collective patterns as time-expanded networks, and the REACT controller."""

from react.errors import PatternError, ReactError

__all__ = ["PatternError", "ReactError"]
