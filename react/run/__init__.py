"""Running: jobs on their backends, scenario files, sweeps, their results and regressions.

Above the engines (docs/architecture.md). ``driver`` (``Job``, ``run_jobs``), ``scenario`` (the
file format), ``scenario_runs`` (``open_jobs``, ``run_scenario``, ``compare_scenario``),
``worlds`` (a scenario built on each backend), ``sweep`` and ``store`` (resumable grids into
SQLite), ``metrics`` (what a run's tables hold), ``crossval``, ``trace`` (Perfetto),
``memory`` (a run's memory estimate), ``regress`` (suites and goldens), and helpers for
experiment scripts (``outdir``, ``child_usage``, ``tomlfile``).
"""
