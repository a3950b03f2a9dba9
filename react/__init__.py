"""react: collective patterns as time-expanded networks, and the REACT controller."""

from react.errors import PatternError, ReactError
from react.verify import first_violation, verify

__all__ = ["PatternError", "ReactError", "first_violation", "verify"]
