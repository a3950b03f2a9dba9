"""Showing: pages, plots and drawings of patterns and runs, and the §4.3 demo.

Above ``run`` (docs/architecture.md), so a picture is made from the same records a table is.
``runpage`` and ``sweeppage`` (self-contained HTML), ``plots``, ``draw`` (TEN drawings),
``demo`` (the worked example, narrated), ``imagefile`` (which image formats can be written).
"""
