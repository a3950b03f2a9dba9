"""Deciding: what the controller sees in a batch, and which pattern it asks for next.

Above the model, below everything that runs (docs/architecture.md): the controller never knows
which backend produced its observations. ``detect`` (steady and erratic congestion, §5.2),
``estimate`` (the analytical estimate of a candidate), ``controller`` (Algorithm 1) with its
``config``, ``decision``, ``explore`` (the search over swaps), ``picture`` (which end of a flow
is blamed), ``failures``, ``settling`` and ``spaces`` (its memory and budgets) beside it,
``loop`` (``TuningLoop``, the closed loop every driver shares), ``policies`` (baselines, loading
foreign controllers, the guard) and ``backend`` (the interface an engine offers the loop).
"""
