"""Figures from the results store: REACT's improvement in mean algorithm bandwidth per grid value.

The paper's simulation figures (Figs. 5-8, 12) all plot one quantity: the improvement in a job's
mean algorithm bandwidth with REACT over the same scenario without it, ``algbw_on / algbw_off - 1``,
against one swept parameter (congested flows, failed links, overlapping nodes), one group of
bars per value of another (p, the failed links' capacity) and per job. :func:`improvement_rows`
pairs every run with REACT with its baseline run (same ``pair_key``: same scenario and seed);
:func:`aggregate` reduces them to one row per grid value (mean, min and max over the seeds);
:func:`plot_improvement` draws bars of the mean with every scenario as a dot, and
:func:`write_csv` writes the aggregated rows. ``react plot`` is the command-line front.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from react.model.errors import ReactError
from react.run.store import ResultStore, RunRecord, StoreError, write_csv_rows

__all__ = [
    "CSV_FIELDS",
    "Improvement",
    "aggregate",
    "improvement_rows",
    "plot_improvement",
    "run_and_plot",
    "write_csv",
]

MODE_LABELS = {"on": "REACT on", "scenario": "REACT as scenario"}
"""Default legend words for a run's ``react`` mode (``off`` is the baseline, never plotted)."""

CSV_FIELDS = ("sweep", "job", "react", "series", "x", "runs", "mean_gain", "min_gain",
              "max_gain", "mean_algbw_off_gbps", "mean_algbw_on_gbps")
"""Columns of :func:`write_csv`; gains are fractions (0.25 = +25%)."""


@dataclass(frozen=True, slots=True)
class Improvement:
    """One job of one scenario: its mean algorithm bandwidth without and with REACT."""

    sweep: str
    job: str
    react: str
    params: Mapping[str, Any]
    seed: int
    algbw_off_gbps: float
    algbw_on_gbps: float

    @property
    def gain(self) -> float:
        return self.algbw_on_gbps / self.algbw_off_gbps - 1.0


def improvement_rows(runs: Sequence[RunRecord]) -> list[Improvement]:
    """Every (scenario, REACT mode, job) with both a finished baseline and a finished REACT run.

    Runs pair by ``pair_key``; failed runs and points missing a half are left out (``react
    report`` lists them).
    """
    by_pair: dict[str, dict[str, RunRecord]] = {}
    for run in runs:
        if run.status == "ok":
            by_pair.setdefault(run.pair_key, {})[run.react] = run
    rows = []
    for sides in by_pair.values():
        off = sides.get("off")
        if off is None or off.metrics is None:
            continue
        for mode, run in sides.items():
            if mode == "off" or run.metrics is None:
                continue
            for job, metrics in run.metrics.items():
                base = off.metrics.get(job, {}).get("mean_algbw_gbps")
                value = metrics.get("mean_algbw_gbps")
                if base is None or value is None or base <= 0:
                    continue
                rows.append(Improvement(run.sweep, job, mode, run.params, run.seed,
                                        float(base), float(value)))
    return rows


def _key_value(params: Mapping[str, Any], key: str | None) -> Any:
    if key is None:
        return ""
    if key not in params:
        raise StoreError(f"no grid parameter {key!r} in the runs; they have "
                         f"{', '.join(sorted(params)) or 'none'}")
    return params[key]


def default_keys(rows: Sequence[Improvement]) -> tuple[str | None, str | None]:
    """The x key and the series key when none is given: the grid parameters with the most and
    the second most distinct values (ties by name). The store keeps parameters by name, not in
    the order a spec wrote them, so the order cannot decide."""
    values: dict[str, set[str]] = {}
    for r in rows:
        for key, value in r.params.items():
            values.setdefault(key, set()).add(repr(value))
    keys = sorted(values, key=lambda k: (-len(values[k]), k))
    return (keys[0] if keys else None), (keys[1] if len(keys) > 1 else None)


def aggregate(rows: Sequence[Improvement], *, x: str | None = None,
              series: str | None = None) -> list[dict[str, Any]]:
    """One row per (sweep, job, REACT mode, series value, x value): mean, min, max gain.

    Rows come out sorted by sweep, job, mode, series and x (numbers numerically).
    """
    groups: dict[tuple[Any, ...], list[Improvement]] = {}
    for r in rows:
        key = (r.sweep, r.job, r.react, _key_value(r.params, series), _key_value(r.params, x))
        groups.setdefault(key, []).append(r)
    out = []
    for (sweep, job, mode, s, xv), members in groups.items():
        gains = [m.gain for m in members]
        out.append({
            "sweep": sweep, "job": job, "react": mode, "series": s, "x": xv,
            "runs": len(members),
            "mean_gain": sum(gains) / len(gains), "min_gain": min(gains),
            "max_gain": max(gains),
            "mean_algbw_off_gbps": sum(m.algbw_off_gbps for m in members) / len(members),
            "mean_algbw_on_gbps": sum(m.algbw_on_gbps for m in members) / len(members),
        })
    out.sort(key=lambda r: (r["sweep"], r["job"], r["react"], _order(r["series"]),
                            _order(r["x"])))
    return out


def _order(value: Any) -> tuple[int, Any]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    return (1, str(value))


def write_csv(path: str | os.PathLike[str], rows: Sequence[Mapping[str, Any]]) -> None:
    """Write :func:`aggregate` rows (columns :data:`CSV_FIELDS`)."""
    write_csv_rows(path, rows, CSV_FIELDS)


def plot_improvement(
    path: str | os.PathLike[str],
    rows: Sequence[Improvement],
    *,
    x: str | None = None,
    series: str | None = None,
    title: str = "",
    xlabel: str | None = None,
    series_label: str | None = None,
    mode_labels: Mapping[str, str] | None = None,
    series_format: str | None = None,
) -> None:
    """Bars of the mean improvement (%) per x value, one bar per job, mode and series value;
    every scenario a dot on its bar.

    A series value is named ``series_format.format(value)`` (e.g. ``"links at {} Gb/s"``) or
    ``"series_label=value"``; a series whose bars are all about zero says so in the legend, and
    every bar has an outline in its colour, so that a bar of height zero still shows where it
    is.

    Raises
    ------
    ReactError
        If there is nothing to plot.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise ReactError("plot_improvement: no paired runs to plot")
    labels = {**MODE_LABELS, **(mode_labels or {})}
    xs = sorted({_key_value(r.params, x) for r in rows}, key=_order)
    bars = _gains_per_bar(rows, x, series)
    keys = sorted(bars, key=lambda k: (_order(k[2]), k[0], k[1]))
    several_jobs = len({k[0] for k in keys}) > 1
    several_modes = len({k[1] for k in keys}) > 1
    width = 0.8 / len(keys)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(xs) + 0.3 * len(keys)), 4.2))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, key in enumerate(keys):
        job, mode, s = key
        parts = []
        if series is not None:
            parts.append(series_format.format(_tick(s)) if series_format
                         else f"{series_label or readable_key(series)}={_tick(s)}")
        if several_jobs:
            parts.append(job)
        if several_modes or not parts:
            parts.append(labels.get(mode, mode))
        _draw_bar(ax, bars[key], xs, offset=(i - (len(keys) - 1) / 2) * width, width=width,
                  colour=colours[i % len(colours)], label_parts=parts)
    ax.axhline(0, color="grey", linewidth=0.8, zorder=1)
    ax.set_xticks(range(len(xs)), [_tick(v) for v in xs])
    ax.set_xlabel(xlabel or (readable_key(x) if x else ""))
    ax.set_ylabel("improvement in mean algorithm bandwidth (%)")
    if title:
        ax.set_title(title, fontsize="medium")
    ax.grid(axis="y", alpha=0.3, zorder=0)
    # below the axes: inside, it hides the dots of the tallest bars
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _gains_per_bar(
    rows: Sequence[Improvement], x: str | None, series: str | None
) -> dict[tuple[Any, ...], dict[Any, list[float]]]:
    """Each scenario's gain in %, by bar (job, mode, series value) and then by x value."""
    bars: dict[tuple[Any, ...], dict[Any, list[float]]] = {}
    for r in rows:
        key = (r.job, r.react, _key_value(r.params, series))
        bars.setdefault(key, {}).setdefault(_key_value(r.params, x), []).append(100 * r.gain)
    return bars


def _draw_bar(
    ax: Any,
    gains_at: Mapping[Any, list[float]],
    xs: Sequence[Any],
    *,
    offset: float,
    width: float,
    colour: str,
    label_parts: list[str],
) -> None:
    """One series of bars, shifted by ``offset`` beside the others at each x value: the mean
    gain as a bar, every scenario as a dot on it; x values it has no runs at are left empty."""
    means, positions = [], []
    for j, xv in enumerate(xs):
        gains = gains_at.get(xv)
        if not gains:
            continue
        positions.append(j + offset)
        means.append(sum(gains) / len(gains))
        ax.plot([j + offset] * len(gains), gains, ".", color="black", markersize=3,
                alpha=0.6, zorder=3)
    parts = list(label_parts)
    if means and all(abs(m) < _FLAT_PCT for m in means):
        parts.append(f"no change at any point (|mean| < {_FLAT_PCT:g}%)")
    ax.bar(positions, means, width=width * 0.95, color=colour, edgecolor=colour,
           linewidth=2.0, label=", ".join(parts), zorder=2)


_FLAT_PCT = 0.05
"""A series whose every mean improvement is below this (in %) is called unchanged."""

_KEY_WORDS = {
    "p": "external flows per congested pair (p)",
    "capacity_bps": "link capacity (bit/s)",
    "message_bytes": "message size (bytes)",
    "ranks": "ranks",
    "epochs": "epochs",
    "seed": "seed",
}


def readable_key(key: str) -> str:
    """A grid key as an axis label: ``background.0.p`` -> ``external flows per congested pair
    (p) [background.0.p]``; a plain key with its underscores as spaces."""
    last = key.rsplit(".", 1)[-1]
    words = _KEY_WORDS.get(last, last.replace("_", " "))
    return f"{words} [{key}]" if "." in key else words


def _tick(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}"
    return str(value)


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:+.1f}%"


def format_rows(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Text lines of :func:`aggregate` rows: mean [min, max] gain per grid value."""
    lines = [f"{'job':<10} {'react':<9} {'series':>8} {'x':>8} {'runs':>5} {'mean':>8} "
             f"{'min':>8} {'max':>8}"]
    for r in rows:
        lines.append(f"{r['job']:<10} {r['react']:<9} {_tick(r['series']):>8} "
                     f"{_tick(r['x']):>8} {r['runs']:>5} {_pct(r['mean_gain']):>8} "
                     f"{_pct(r['min_gain']):>8} {_pct(r['max_gain']):>8}")
    return lines


# -- experiment scripts ----------------------------------------------------------------------------
def run_and_plot(
    points: Sequence[Any],
    *,
    store: str | os.PathLike[str],
    png: str | os.PathLike[str],
    csv_path: str | os.PathLike[str],
    x: str,
    series: str | None = None,
    workers: int = 1,
    progress: bool = True,
    out: TextIO | None = None,
    seeds_csv: str | os.PathLike[str] | None = None,
    **plot_options: Any,
) -> list[dict[str, Any]]:
    """Run sweep points (resuming from ``store``), then plot and tabulate exactly those points.

    The experiment scripts (``experiments/fig*.py``) share this tail:
    :func:`react.run.sweep.execute` the points into the store, pair the runs of these points only (a
    store may also hold other sweeps or a quick run), write the PNG and the CSV, and return the
    aggregated rows. ``seeds_csv``: also the rows aggregated per ``seed`` parameter (its value in
    the ``series`` column), for points run several times per seed (``experiments/draws.py``).

    Raises
    ------
    ReactError
        If any run failed (the store keeps the error; ``react report`` shows it).
    """
    from react.run.sweep import execute

    with ResultStore(store) as db:
        summary = execute(points, db, workers=workers, progress=progress)
        keys = {p.key for p in points}
        runs = [r for r in db.runs() if r.point_key in keys]
    if summary.failed or not summary.complete:
        first = ((summary.failures[0].error or "failed").splitlines()[0] if summary.failures
                 else "stopped")
        raise ReactError(f"{summary.failed} of {summary.total} runs failed or did not run "
                         f"(first: {first}); see 'react report --store {store}'")
    rows = improvement_rows(runs)
    table = aggregate(rows, x=x, series=series)
    plot_improvement(png, rows, x=x, series=series, **plot_options)
    write_csv(csv_path, table)
    if seeds_csv is not None:
        write_csv(seeds_csv, aggregate(rows, x=x, series="seed"))
    if out is not None:
        for line in format_rows(table):
            print(line, file=out)
    return table
