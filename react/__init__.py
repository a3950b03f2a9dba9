"""react: collective patterns as time-expanded networks, and the REACT controller."""

from react.model.errors import PatternError, ReactError
from react.model.swapspace import SwapSpace
from react.model.transforms import ChunkLocalSwap, GlobalSwap, PositionSwap
from react.model.verify import first_violation, verify

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
