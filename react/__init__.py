"""react: collective patterns as time-expanded networks, and the REACT controller."""

from react.errors import PatternError, ReactError
from react.swapspace import SwapSpace
from react.transforms import ChunkLocalSwap, GlobalSwap, PositionSwap
from react.verify import first_violation, verify

__all__ = [
    "ChunkLocalSwap",
    "GlobalSwap",
    "PatternError",
    "PositionSwap",
    "ReactError",
    "SwapSpace",
    "first_violation",
    "verify",
]
