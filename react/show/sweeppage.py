"""``react report --html DIR`` and ``react run --html DIR``: write the pages of
:mod:`react.show.runpage`.

A results store keeps each run's scenario (after the sweep's overrides), its seed and summary
metrics, not the epochs themselves. Runs are seeded and deterministic, so a page is made by
running the stored scenario again, without and with REACT (the pair the store compared), which
is why the number of pages is limited (``limit``, newest points first is not needed: store
order). An ``index.html`` links them.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from react.run.store import RunRecord
from react.show.runpage import run_page, write_page

__all__ = ["write_run_html", "write_store_pages"]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:80] or "run"


def write_run_html(out_dir: str | os.PathLike[str], scenario: Any, on: Any, off: Any = None, *,
                   warmup: int = 0, header: Sequence[str] = ()) -> Path:
    """Write the page of one run into ``out_dir`` (created); return the page's path. With
    ``off`` (a comparison) every job of ``on`` ran with REACT."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    page = folder / f"{_slug(scenario.name)}.html"
    forced = None if off is None else {name: True for name in on}
    return write_page(page, run_page(scenario, on, off, warmup=warmup, header=header,
                                     react=forced))


def write_store_pages(out_dir: str | os.PathLike[str], runs: Sequence[RunRecord], *,
                      limit: int = 20, base_dir: Path | None = None,
                      progress: Callable[[int, int], None] | None = None) -> list[Path]:
    """One page per stored pair (REACT off and on, both finished), at most ``limit``, and an
    index; return the pages' paths (the index last)."""
    from react.run.scenario import parse_scenario
    from react.run.scenario_runs import run_scenario

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    pairs: dict[str, dict[str, RunRecord]] = {}
    for r in runs:
        if r.status == "ok":
            pairs.setdefault(r.pair_key, {})[r.react] = r
    chosen = [p for p in pairs.values() if "on" in p and "off" in p][:limit]
    pages: list[tuple[Path, RunRecord]] = []
    for k, pair in enumerate(chosen):
        on_rec = pair["on"]
        params = " ".join(f"{key}={value}" for key, value in on_rec.params.items())
        scenario = parse_scenario(dict(on_rec.scenario), source=f"{on_rec.sweep} {params}",
                                  base_dir=base_dir or Path.cwd())
        warmup = min((m.get("first_epoch", 0) for m in (on_rec.metrics or {}).values()),
                     default=0)
        on = run_scenario(scenario, react=True)
        off = run_scenario(scenario, react=False)
        header = [f"sweep {on_rec.sweep}, point {params or '(base)'}, seed {on_rec.seed}",
                  f"stored by {on_rec.version} at {on_rec.finished_at}"]
        page = folder / f"{k:03d}-{_slug(on_rec.sweep + '-' + params)}.html"
        write_page(page, run_page(scenario, on, off, warmup=int(warmup), header=header,
                                  react={name: True for name in on}))
        pages.append((page, on_rec))
        if progress is not None:
            progress(k + 1, len(chosen))
    items = "\n".join(
        f'<li><a href="{html.escape(p.name)}">{html.escape(r.sweep)}: '
        f'{html.escape(" ".join(f"{a}={b}" for a, b in r.params.items()) or "(base)")}, '
        f"seed {r.seed}</a></li>" for p, r in pages)
    more = len([p for p in pairs.values() if "on" in p and "off" in p]) - len(pages)
    note = f"<p>{more} more pair(s) not shown (--pages).</p>" if more > 0 else ""
    index = write_page(folder / "index.html",
                       "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                       "<title>REACT runs</title></head><body><h1>REACT runs</h1>"
                       f"<ul>\n{items}\n</ul>{note}</body></html>\n")
    return [p for p, _ in pages] + [index]
