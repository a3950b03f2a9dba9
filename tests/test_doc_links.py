"""Every relative link in the README and under docs/ names a file that exists, and a section
that exists when it names one (GitHub's heading anchors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#+\s+(.*)$", re.M)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_anchor_rule() -> None:
    assert anchor("Three draws per seed") == "three-draws-per-seed"
    assert anchor("What-if memory (2026-12-01, eighth look)") == \
        "what-if-memory-2026-12-01-eighth-look"
    assert anchor("The paper's worked example (§4.3), reproduced exactly") == \
        "the-papers-worked-example-43-reproduced-exactly"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    bad = []
    for link in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        path, _, section = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            bad.append(f"{link}: no such file")
        elif section and target.suffix == ".md":
            sections = {anchor(h) for h in HEADING.findall(target.read_text(encoding="utf-8"))}
            if section not in sections:
                bad.append(f"{link}: no such section in {target.name}")
    assert not bad, f"{page.relative_to(ROOT)}: " + "; ".join(bad)
