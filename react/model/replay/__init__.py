"""Replays of one chunk graph kept for the swap space's incremental viability checks.

A swap rewrites one chunk graph (a position swap only a window of its steps), so whether the
swapped pattern still verifies is decided from the original graph's replay: the buffers it held
at every step, which of them a window can reach, and linear algebra on their contents. This
package holds that replay (:class:`GraphReplay`, with the semantics of :mod:`react.model.verify`)
and the cache that shares replays between the swap spaces of related patterns
(:class:`ReplayCache`); :mod:`react.model.swapspace` decides which swaps to check and how
(its docstring says which checks are exact without a replay).

Modules, each one seam of the replay:

- :mod:`~react.model.replay.trajectory`: the original run (flows per step, the collective's
  initial and final buffers, every buffer's history) and the step rule;
- :mod:`~react.model.replay.access`: that run as flat arrays, for questions about every buffer
  at once (equal values, dead values);
- :mod:`~react.model.replay.influence`: which constrained final buffers each value reaches;
- :mod:`~react.model.replay.linear`: the linear test that decides a window without a replay;
- :mod:`~react.model.replay.incremental`: the replay of a swapped window, from the original's
  state, of the buffers that differ;
- :mod:`~react.model.replay.graph`: :class:`GraphReplay`, the questions on one graph, cached;
- :mod:`~react.model.replay.cache`: :class:`ReplayCache`.
"""

from react.model.replay.cache import ReplayCache
from react.model.replay.graph import GraphReplay

__all__ = ["GraphReplay", "ReplayCache"]
