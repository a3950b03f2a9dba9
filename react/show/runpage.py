"""Self-contained HTML pages of runs, for teaching: one file a student opens in a browser.

A page carries everything inline: styles in a ``<style>`` element, pictures as ``data:`` PNG
URIs, no script and no external resource, so it can be mailed, put on a course site or opened
offline. :func:`run_page` shows one scenario run (the scenario, a summary table, the decisions
with their reasons, the timeline plot, the TEN before and after REACT with the congested flows
of the first batch in red, and the per-epoch table); :func:`story_page` lays out the §4.3 demo's
paragraphs with its pictures. Text is escaped; nothing from a scenario file reaches the page
unescaped.
"""

from __future__ import annotations

import base64
import html
import io
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from react.run.driver import JobRun

__all__ = ["png_data_uri", "run_page", "story_page", "write_page"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222;
       line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td.text { text-align: left; max-width: 60em; }
tr.changed td { background: #fff6d5; }
img { max-width: 100%; border: 1px solid #eee; }
.note { color: #555; font-size: 0.9em; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; }
details { margin: 0.5em 0; }
"""


def png_data_uri(figure: Any) -> str:
    """A matplotlib figure as a ``data:image/png;base64,...`` URI (the figure is not closed)."""
    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=100)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _file_uri(path: str | os.PathLike[str]) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def _page(title: str, body: Sequence[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def _img(uri: str, alt: str) -> str:
    return f'<p><img src="{uri}" alt="{html.escape(alt)}"></p>'


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, text_cols: Sequence[int] = (),
           changed: Sequence[bool] | None = None) -> str:
    out = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for i, row in enumerate(rows):
        cls = ' class="changed"' if changed is not None and changed[i] else ""
        cells = "".join(
            f'<td class="text">{html.escape(str(v))}</td>' if j in text_cols
            else f"<td>{html.escape(str(v))}</td>" for j, v in enumerate(row))
        out.append(f"<tr{cls}>{cells}</tr>")
    out.append("</table>")
    return "\n".join(out)


def write_page(path: str | os.PathLike[str], text: str) -> Path:
    """Write a page; return its path."""
    out = Path(path)
    out.write_text(text, encoding="utf-8")
    return out


# -- one scenario run ------------------------------------------------------------------------------
def run_page(scenario: Any, on: Mapping[str, JobRun], off: Mapping[str, JobRun] | None = None,
             *, warmup: int = 0, header: Sequence[str] = (),
             react: Mapping[str, bool] | None = None) -> str:
    """The page of one run of ``scenario``: ``on`` holds the jobs as run (REACT on where the
    file says, or where ``react`` says: a comparison forces it on for every job), ``off`` the
    same scenario without REACT when compared."""
    react_of = {j.name: j.react for j in scenario.jobs} | dict(react or {})
    from react.run import metrics as report

    title = f"REACT run: {scenario.name}"
    body = [f"<h1>{html.escape(title)}</h1>",
            f"<p>{html.escape(scenario.description or str(scenario.source))}</p>"]
    if header:
        body.append("<h2>The scenario</h2>")
        body.append("<pre>" + html.escape("\n".join(header)) + "</pre>")
    rows = []
    for name, run in on.items():
        s_on = report.summarise(run, react=react_of[name], warmup=warmup)
        line = [name, "on" if react_of[name] else "off", f"{s_on.mean_time_s * 1e6:.1f}",
                f"{s_on.p95_time_s * 1e6:.1f}", f"{s_on.mean_algbw_gbps:.2f}"]
        if off is not None and name in off:
            s_off = report.summarise(off[name], react=False, warmup=warmup)
            gain = s_on.mean_algbw_gbps / s_off.mean_algbw_gbps - 1
            line += [f"{s_off.mean_algbw_gbps:.2f}", f"{gain:+.1%}"]
        rows.append(line)
    head = ["job", "REACT", "mean us", "p95 us", "algbw Gb/s"]
    if off is not None:
        head += ["algbw without REACT", "gain"]
    body += ["<h2>Summary</h2>", _table(head, rows),
             f'<p class="note">Statistics leave out the first {warmup} epoch(s) (warm-up).</p>']
    for name, run in on.items():
        body += _job_sections(name, scenario.job(name), react_of[name], run,
                              None if off is None else off.get(name))
    return _page(title, body)


def _job_sections(name: str, spec: Any, react: bool, run: JobRun,
                  off: JobRun | None) -> list[str]:
    from react.run import metrics as report

    out = [f"<h2>Job {html.escape(name)}: {html.escape(spec.collective)}, {spec.ranks} ranks, "
           f"{spec.message_bytes / 1e6:g} MB</h2>"]
    if run.decisions:
        decided: list[tuple[Any, ...]] = [
            (d.batch, d.action, "; ".join(s.describe() for s in d.swaps) or "-",
             "-" if d.estimated_gain is None else f"{d.estimated_gain:+.1%}",
             "-" if d.observed_gain is None else f"{d.observed_gain:+.1%}", d.reason)
            for d in run.decisions]
        out += ["<h3>Decisions, with their reasons</h3>",
                _table(["batch", "action", "swaps", "estimated", "observed", "why"], decided,
                       text_cols=(1, 2, 5))]
    else:
        out.append('<p class="note">No controller decisions (REACT off for this job).</p>')
    fig = _timeline_figure(run if react else None, off if react else run)
    out += ["<h3>Collective time per epoch</h3>", _img(fig, f"timeline of job {name}")]
    ten = _ten_figure(run)
    if ten is not None:
        out += ["<h3>The pattern before and after REACT</h3>",
                '<p class="note">Red: flows the controller found congested in its first batch '
                '(and their ranks); blue: the ranks of a swap; thick: the flows the swaps '
                'rewrote.</p>',
                _img(ten, f"TEN of job {name} before and after")]
    changed = set(report.change_epochs(run))
    rows = [(e, "yes" if e in changed else "", f"{r.collective_time_s * 1e6:.1f}",
             f"{r.algorithm_bandwidth_bps / 1e9:.2f}") for e, r in enumerate(run.results)]
    out += ["<h3>Per epoch</h3>", "<details open><summary>epochs (highlighted: a new pattern "
            "starts)</summary>",
            _table(["epoch", "new pattern", "time us", "algbw Gb/s"], rows,
                   changed=[e in changed for e in range(len(rows))]), "</details>"]
    return out


def _timeline_figure(on: JobRun | None, off: JobRun | None) -> str:
    from react.run.metrics import plot_timeline

    buf = io.BytesIO()
    plot_timeline(buf, off=off, on=on, title="collective time per epoch")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _ten_figure(run: JobRun) -> str | None:
    """Before (first pattern, congested flows of the first batch red) and after (last pattern);
    None when the patterns are too large to draw legibly.

    The red flows are those of the first decision's report: what the controller saw with the
    job's own thresholds (none where REACT was off or found nothing), never a detection re-run
    here with other settings.
    """
    from react.show.draw import draw

    first, last = run.patterns[0], run.patterns[-1]
    if first.n > 32 or first.num_steps > 40:
        return None
    from matplotlib.figure import Figure

    report = run.decisions[0].report if run.decisions else None
    hot = report.flows if report is not None else ()
    highlight = [c.flow for c in hot] + sorted({c.flow.dst for c in hot})
    steps = max(first.num_steps, 1)
    fig = Figure(figsize=(2 * (1.6 + 0.95 * steps), 1.6 + 0.42 * first.n), dpi=100)
    left, right = fig.subplots(1, 2, sharey=True)
    draw(first, highlight, ax=left, title="before: congested flows in red")
    changed = set(last.flows) - set(first.flows)
    draw(last, (), ax=right, emphasised=changed,
         title="after REACT (rewritten flows thick)" if changed else "after: unchanged")
    fig.tight_layout()
    return png_data_uri(fig)


# -- the demo --------------------------------------------------------------------------------------
def story_page(title: str, paragraphs: Sequence[str],
               pictures: Mapping[int, Sequence[str | os.PathLike[str]]]) -> str:
    """The demo's story: each paragraph (its "N. Title." opening as a heading), then the
    pictures that belong to it (``pictures[i]``: PNG files shown after paragraph ``i``)."""
    body = [f"<h1>{html.escape(title)}</h1>"]
    for i, text in enumerate(paragraphs):
        found = re.match(r"\s*(\d+\. [^.]+\.)\s*(.*)", text, re.S)
        if found:
            body.append(f"<h2>{html.escape(found.group(1))}</h2>")
            text = found.group(2)
        if text.strip():
            body.append("<p>" + html.escape(text.strip()).replace("\n", "<br>\n") + "</p>")
        for path in pictures.get(i, ()):
            body.append(_img(_file_uri(path), Path(path).stem.replace("_", " ")))
    return _page(title, body)
