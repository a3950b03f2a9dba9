"""The model: what a collective is, and what running it showed.

The bottom layer of ``react`` (docs/architecture.md); it imports nothing of ``react`` above it
and nothing of a backend, so every layer can read its records. ``pattern`` (the TEN),
``verify``, ``transforms`` (the three swaps of §5.3.1), ``execution`` (Algorithm 2 and the
dataflow rule), ``critical`` (the critical path), ``replay`` (a pattern replayed on whole-state
arrays), ``swapspace`` (the viable, degree-pruned swaps of §5.3.2), ``observation``
(``FlowTiming``, ``EpochResult``), ``errors``.
"""
