"""The three readings of a regression: a terminal table, a Markdown summary, JUnit XML.

All three are built from the same :class:`~react.run.regress.compare.Verdict` records. The terminal
and Markdown versions show, per case and job, each watched metric as its new value and its change
from the golden (green when better, red when worse, ``!`` when outside the tolerance), then, for
every case whose decisions changed, the first differing decision side by side with the golden's.
The JUnit XML has one ``testcase`` per case, with a ``failure`` (or ``error``) whose message is the
first problem and whose text lists all of them, which is what CI systems show per test.
"""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from react.run.regress.compare import MetricDelta, TraceDiff, Verdict
from react.run.regress.metrics import METRICS, TRACE_FIELDS, value_text
from react.run.regress.runner import CaseRun

__all__ = ["controllers_table", "junit_xml", "markdown", "results_table", "terminal"]

_GREEN, _RED, _BOLD, _RESET = "\033[32m", "\033[31m", "\033[1m", "\033[0m"
_SHORT = {"mean_time_s": "mean", "p95_time_s": "p95", "gain": "gain",
          "pattern_changes": "changes", "settle_epoch": "settled", "kept_swaps": "kept swaps"}


def delta_text(d: MetricDelta) -> str:
    """The change from the golden: relative for times, percentage points for the gain."""
    if d.direction == "same":
        return "="
    if d.golden is None or d.new is None:
        return "new"
    if d.metric.endswith("_time_s"):
        return f"{d.new / d.golden - 1.0:+.2%}" if d.golden else "changed"
    if d.metric == "gain":
        return f"{(d.new - d.golden) * 100:+.2f} pp"
    if d.metric == "kept_swaps":
        from react.run.regress.metrics import edit_distance

        return f"{edit_distance(d.golden, d.new)} edit(s)"
    return f"{d.new - d.golden:+d}"


def _cell(d: MetricDelta, color: bool) -> str:
    text = f"{value_text(d.metric, d.new)} ({delta_text(d)})"
    if not d.ok:
        text = "!" + text
    if color and d.direction in ("better", "worse"):
        text = (_GREEN if d.direction == "better" else _RED) + text + _RESET
    if color and not d.ok:
        text = _BOLD + text + _RESET
    return text


def _status(v: Verdict, color: bool) -> str:
    text = {"pass": "ok", "fail": "FAIL", "error": "ERROR"}[v.status]
    if color:
        return (_GREEN if v.status == "pass" else _RED + _BOLD) + text + _RESET
    return text


def _grid(rows: Sequence[Sequence[str]], visible: Sequence[Sequence[int]]) -> list[str]:
    """Left-aligned columns; ``visible`` gives each cell's printed width (colour codes aside)."""
    widths = [max(w[i] for w in visible) for i in range(len(rows[0]))]
    lines = []
    for row, vis in zip(rows, visible, strict=True):
        lines.append("  ".join(cell + " " * (widths[i] - vis[i]) for i, cell in enumerate(row))
                     .rstrip())
    return lines


def _metric_names(verdicts: Sequence[Verdict]) -> list[str]:
    seen = {d.metric for v in verdicts for d in v.deltas}
    return [m for m in METRICS if m in seen]


def terminal(verdicts: Sequence[Verdict], *, color: bool = False, width: int = 100) -> list[str]:
    """The terminal report: the delta table, the problems, the first differing decisions."""
    metrics = _metric_names(verdicts)
    header = ["case", "job", "status", *[_SHORT[m] for m in metrics], "trace"]
    rows = [header]
    visible = [[len(c) for c in header]]
    for v in verdicts:
        jobs = sorted({d.job for d in v.deltas}) or ["-"]
        for job in jobs:
            by_metric = {d.metric: d for d in v.deltas if d.job == job}
            plain = [v.case, job, _status(v, False)]
            shown = [v.case, job, _status(v, color)]
            for m in metrics:
                d = by_metric.get(m)
                plain.append("" if d is None else _cell(d, False))
                shown.append("" if d is None else _cell(d, color))
            changed = any(t.job == job for t in v.trace_diffs)
            plain.append("changed" if changed else ("same" if v.deltas else "-"))
            shown.append(plain[-1])
            rows.append(shown)
            visible.append([len(c) for c in plain])
    lines = _grid(rows, visible)
    lines.insert(1, "-" * len(lines[0]))
    failing = [v for v in verdicts if v.status != "pass"]
    for v in failing:
        lines.append("")
        lines.append(f"{v.case}: {_status(v, color)}")
        for problem in v.problems:
            lines.extend(textwrap.wrap(problem, width=width, initial_indent="  - ",
                                       subsequent_indent="    "))
        for diff in v.trace_diffs:
            lines.extend(side_by_side(diff, width=width))
    passed = sum(v.status == "pass" for v in verdicts)
    lines.append("")
    lines.append(f"{passed} of {len(verdicts)} cases pass"
                 + (f"; {len(failing)} fail: {', '.join(v.case for v in failing)}"
                    if failing else ""))
    return lines


def _field_text(record: Mapping[str, Any] | None, field: str) -> str:
    if record is None:
        return "(no decision)" if field == "batch" else ""
    value = record.get(field)
    if field == "swaps":
        return "; ".join(value) if value else "-"
    if field.endswith("_gain"):
        return "-" if value is None else f"{value:+.2%}"
    return str(value)


def side_by_side(diff: TraceDiff, *, width: int = 100) -> list[str]:
    """The first differing decision of a job: golden on the left, new on the right."""
    column = (width - 20) // 2
    lines = [f"  first differing decision of job {diff.job} (decision {diff.index}):",
             f"    {'':<16}  {'golden':<{column}}  new"]
    for field in TRACE_FIELDS:
        left = textwrap.wrap(_field_text(diff.golden, field), column) or [""]
        right = textwrap.wrap(_field_text(diff.new, field), column) or [""]
        mark = "*" if field in diff.fields else " "
        for i in range(max(len(left), len(right))):
            name = f"{mark} {field}" if i == 0 else ""
            a = left[i] if i < len(left) else ""
            b = right[i] if i < len(right) else ""
            lines.append(f"    {name:<16}  {a:<{column}}  {b}".rstrip())
    return lines


def markdown(verdicts: Sequence[Verdict], *, suite: str) -> str:
    """A Markdown summary for a pull-request comment."""
    metrics = _metric_names(verdicts)
    failing = [v for v in verdicts if v.status != "pass"]
    icon = {"pass": "✅", "fail": "❌", "error": "💥"}
    out = [f"### react regress: suite `{suite}`", "",
           f"**{len(verdicts) - len(failing)} of {len(verdicts)} cases pass**"
           + (f"; failing: {', '.join(f'`{v.case}`' for v in failing)}" if failing else ""), "",
           "| case | job | | " + " | ".join(_SHORT[m] for m in metrics) + " | decisions |",
           "|---|---|---|" + "---|" * len(metrics) + "---|"]
    for v in verdicts:
        for job in sorted({d.job for d in v.deltas}) or ["-"]:
            by_metric = {d.metric: d for d in v.deltas if d.job == job}
            cells = []
            for m in metrics:
                d = by_metric.get(m)
                if d is None:
                    cells.append("")
                    continue
                mark = {"better": "🟢 ", "worse": "🔴 "}.get(d.direction, "")
                text = f"{mark}{value_text(m, d.new)} ({delta_text(d)})"
                cells.append(f"**{text}**" if not d.ok else text)
            changed = "changed" if any(t.job == job for t in v.trace_diffs) else "same"
            out.append(f"| `{v.case}` | {job} | {icon[v.status]} | " + " | ".join(cells)
                       + f" | {changed if v.deltas else '-'} |")
    for v in failing:
        out += ["", f"<details><summary><code>{v.case}</code>: {v.status}</summary>", ""]
        out += [f"- {_md(p)}" for p in v.problems]
        for diff in v.trace_diffs:
            out += ["", f"First differing decision of job `{diff.job}` "
                        f"(decision {diff.index}):", "",
                    "| | golden | new |", "|---|---|---|"]
            for field in TRACE_FIELDS:
                name = f"**{field}**" if field in diff.fields else field
                out.append(f"| {name} | {_md(_field_text(diff.golden, field))} | "
                           f"{_md(_field_text(diff.new, field))} |")
        out += ["", "</details>"]
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def junit_xml(verdicts: Sequence[Verdict], *, suite: str, timestamp: str | None = None,
              properties: Mapping[str, str] | None = None) -> str:
    """JUnit XML: a ``testsuites`` root, one ``testsuite``, one ``testcase`` per case.

    A failing case holds a ``failure`` (an erroring one an ``error``) with ``message`` (the first
    problem) and ``type``; its text lists every problem and the first differing decisions. The
    attributes and elements satisfy both Jenkins' ``junit-10.xsd`` and Ant's stricter schema
    (``timestamp``, ``hostname``, ``id``, ``package``; ``properties``, ``system-out``,
    ``system-err`` in that order around the test cases).
    """
    import socket
    from datetime import UTC, datetime

    failures = sum(v.status == "fail" for v in verdicts)
    errors = sum(v.status == "error" for v in verdicts)
    total = sum(v.duration_s for v in verdicts)
    counts = {"tests": str(len(verdicts)), "failures": str(failures), "errors": str(errors),
              "time": f"{total:.3f}"}
    stamp = timestamp or datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="seconds")
    root = ET.Element("testsuites", {"name": f"react regress {suite}", **counts})
    ts = ET.SubElement(root, "testsuite", {
        "name": suite, **counts, "skipped": "0", "timestamp": stamp,
        "hostname": socket.gethostname() or "localhost", "id": "0", "package": "react.run.regress"})
    props = ET.SubElement(ts, "properties")
    for name, value in (properties or {}).items():
        ET.SubElement(props, "property", {"name": name, "value": value})
    for v in verdicts:
        tc = ET.SubElement(ts, "testcase", {"name": v.case, "classname": f"regress.{suite}",
                                            "time": f"{v.duration_s:.3f}"})
        if v.status == "pass":
            continue
        tag = "failure" if v.status == "fail" else "error"
        kind = "regression" if v.status == "fail" else "run-error"
        first = v.problems[0] if v.problems else v.status
        body = [f"- {p}" for p in v.problems]
        for diff in v.trace_diffs:
            body.extend(side_by_side(diff))
        el = ET.SubElement(tc, tag, {"message": first, "type": kind})
        el.text = "\n".join(body)
    ET.SubElement(ts, "system-out").text = ""
    ET.SubElement(ts, "system-err").text = ""
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def results_table(runs: Sequence[CaseRun]) -> list[str]:
    """Every case's metrics, without goldens (what ``--record`` and a plain run print)."""
    header = ["case", "job", "status", *[_SHORT[m] for m in METRICS]]
    rows = [header]
    for r in runs:
        if r.result is None:
            rows.append([r.case, "-", "ERROR"] + [""] * len(METRICS))
            continue
        status = "ok" if r.ok else "NOT DETERMINISTIC"
        for job, data in r.result["jobs"].items():
            rows.append([r.case, job, status]
                        + [value_text(m, data["metrics"][m]) for m in METRICS])
    lines = _grid(rows, [[len(c) for c in row] for row in rows])
    lines.insert(1, "-" * len(lines[0]))
    for r in runs:
        if r.error:
            lines.append(f"{r.case}: ERROR: {r.error}")
        elif r.nondeterministic:
            lines.append(f"{r.case}: not deterministic: {r.nondeterministic}")
    return lines


def controllers_table(runs: Sequence[CaseRun]) -> list[str]:
    """Scenario by scenario, each controller's gain and mean time side by side."""
    controllers: list[str] = []
    for r in runs:
        if r.controller not in controllers:
            controllers.append(r.controller)
    if len(controllers) < 2:
        return []
    from react.control.policies import label

    names = [c if c == "scenario" else label(c) for c in controllers]
    by = {(r.scenario, r.controller): r for r in runs}
    header = ["scenario", "job", *[f"{n} gain / mean" for n in names]]
    rows = [header]
    scenarios = list(dict.fromkeys(r.scenario for r in runs))
    for s in scenarios:
        results = [by[(s, c)].result if (s, c) in by else None for c in controllers]
        jobs = next((list(res["jobs"]) for res in results if res is not None), ["-"])
        for job in jobs:
            row = [s, job]
            for res in results:
                if res is None or job not in res["jobs"]:
                    row.append("error")
                    continue
                m = res["jobs"][job]["metrics"]
                row.append(f"{value_text('gain', m['gain'])} / "
                           f"{value_text('mean_time_s', m['mean_time_s'])}")
            rows.append(row)
    lines = _grid(rows, [[len(c) for c in row] for row in rows])
    lines.insert(1, "-" * len(lines[0]))
    return ["controllers side by side (gain over no controller / mean collective time):", *lines]
