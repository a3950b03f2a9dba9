"""The swap space of a pattern: for each rank, the viable swaps of each kind (paper §5.3).

REACT computes once, at the start of a job, which swaps keep a pattern's meaning (§5.3.1,
appendix A.3), prunes them by a degree rule (§5.3.2), and at run time picks, for a congested
rank, a swap from that set, preferring those that lower the congested rank's degree (the green
nodes of Fig. 1, against the yellow ones that are viable but do not help). This package is that
set. The interpretations below were fixed against the paper's 16-rank example (§4.3, Fig. 1),
which the tests reproduce.

Candidates
    For a rank ``c`` and every other rank ``y``: the :class:`~react.model.transforms.GlobalSwap`
    ``c<->y``; for every chunk graph ``g`` that ``c`` or ``y`` takes part in, the
    :class:`~react.model.transforms.ChunkLocalSwap` ``(g, c, y)``; and a
    :class:`~react.model.transforms.PositionSwap` ``(g, c, y, a, b)`` for every step window of
    ``g``, as the paper's brute force tries every pair of TEN vertices (appendix A.3). Windows are
    taken in canonical form: the *rewritten steps* of ``(g, c, y)`` are those where relabelling
    the two changes a flow, and the windows are ``[E_i, E_j]`` over them, so that no window is a
    no-op, no two give the same rewrite, and the one spanning all rewritten steps is left to the
    chunk-local swap it equals. A global swap that rewrites one chunk graph only (the two ranks
    are interchangeable in the others) equals that graph's chunk-local swap and is left out too
    (not for owned chunks, whose renaming a finer swap cannot do). Windows are ``O(steps^2)``
    per pair, but the degree rule (below) is a condition per step, decided for all partners at
    once per step, and cuts the windows to runs of passing steps first: the ring's windows are
    all cut there (every step of every rank fails), so its ``O(n^2)`` windows cost nothing.

Viable
    The swapped pattern verifies (:func:`react.model.verify.verify`). Checked as cheaply as is
    exact:

    - a global swap relabels every flow (and, for owned chunks, renames them with their owners),
      so the replay of the swapped pattern is the replay of the original with two ranks renamed:
      it verifies iff the original does, unless the collective's meaning names one of the two
      ranks (the root of a broadcast or reduce). Those are replayed one by one; for the others
      one representative per space is replayed as a guard against a broken transform;
    - a chunk-local swap is the same renaming restricted to one chunk graph, so it is viable
      without a replay when the meaning of that graph's chunks does not name ``c`` or ``y``
      (always for AllReduce; for a rooted kind unless one is the root; for owned chunks unless
      one owns a chunk of the graph). Otherwise it is replayed like a position swap;
    - a position swap is decided without a replay where that is exact: by the start/end
      conditions of :meth:`react.model.replay.GraphReplay.verdicts` (equal or dead buffers at
      the window's bounds), by linear algebra on the buffers' contents for kinds whose buffers
      are never empty (:meth:`GraphReplay.linear_verdicts`: proves and refutes, no replay for
      the double binary tree at all), or, for kinds with empty buffers, by an unheld send at
      the window's first step. The rest is replayed incrementally: only its chunk graph, from
      the window's first step, starting from the original's state cached there, and only the
      ranks whose buffers differ from the original's. The tests cross-check every verdict
      against :func:`react.model.verify.first_violation` on every pair and window of small
      patterns, and the whole space against a brute force that shares nothing with this
      package.

Degree rule (§5.3.2)
    With ``deg(t, r) = max(in-degree, out-degree)`` of rank ``r`` at step ``t`` over the whole
    pattern (all chunk graphs; §5.2 uses ``max(in, out)`` too), a swap of ``x`` and ``y`` is
    kept iff for every step ``t`` and ``r`` in ``{x, y}``:
    ``deg_after(t, r) <= max(deg_before(t, x), deg_before(t, y))``; no other rank's degree can
    change. A global swap exchanges the two ranks' whole degree profiles, so it always passes.
    In Fig. 1 (n = 16, tree T1 = chunk graph 1, where 3 aggregates 5 and 1 at step 2) the rule
    removes 3<->4 and 3<->12 in T1: rank 4 already receives from 2 and 6 in T0 at step 2 and
    would then also receive from 5 and 1 (in-degree 4 > 2).

Preferred (green vs yellow, §5.3.2)
    A viable swap is preferred for the congested rank ``c`` if it strictly lowers ``c``'s total
    degree load, ``sum over t of deg(t, c)``; with ``direction="in"`` or ``"out"`` only that
    direction's degree is summed (incoming congestion: lower what ``c`` receives).

Cost
    The paper's brute force is ``O((N log N)^3)``. Here a rank's space is computed on first
    request and cached (``SwapSpace`` itself only builds degree tables, ``O(flows)``, with numpy):
    the degree rule for all partners ``y`` of ``c`` at one step is a handful of vectorised
    operations over that chunk graph's (rank, step) entries; the windows that survive it are
    decided per window for all partners where provable, by a few bitset operations per
    candidate otherwise, and only the rest is replayed. See docs/swapspace.md for the measured
    figures and docs/deviations.md for what the all-window space costs at 1,024 ranks.

Modules, one seam each: :mod:`~react.model.swapspace.tables` (degree tables),
:mod:`~react.model.swapspace.enumeration` (candidates by kind, canonical windows),
:mod:`~react.model.swapspace.pruning` (the degree rule, no-op swaps),
:mod:`~react.model.swapspace.viability` (the meaning kept, via the replays of
:mod:`react.model.replay`), :mod:`~react.model.swapspace.symmetry` (one rank per orbit),
:mod:`~react.model.swapspace.loads` (preferred swaps) and :mod:`~react.model.swapspace.space`
(:class:`SwapSpace`, which composes them).
"""

from react.model.swapspace.space import Direction, SwapSpace

__all__ = ["Direction", "SwapSpace"]
