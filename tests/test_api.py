"""The public API (docs/api.md): the page lists exactly what the packages export, every name
imports, and the page's example runs."""

from __future__ import annotations

import re
from pathlib import Path

import flowsim
import react

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text(encoding="utf-8")


def _names_in_section(title: str) -> set[str]:
    section = PAGE.split(f"## `{title}`")[1].split("\n## ")[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`(\w+)`", row)}


def test_the_page_lists_exactly_what_flowsim_exports():
    assert _names_in_section("flowsim") == set(flowsim.__all__)


def test_the_page_lists_exactly_what_react_exports():
    assert _names_in_section("react") == set(react.__all__)


def test_react_exports_every_name_it_can_load():
    assert sorted(react.__all__) == sorted(react.PUBLIC)


def test_every_public_name_imports():
    for package in (flowsim, react):
        for name in package.__all__:
            assert getattr(package, name) is not None
    assert "Controller" in dir(react)


def test_an_unknown_name_is_an_attribute_error_naming_it():
    try:
        react.Controler  # noqa: B018
    except AttributeError as exc:
        assert "'Controler'" in str(exc)
    else:
        raise AssertionError("react.Controler should not exist")


def test_the_example_on_the_page_runs():
    code = PAGE.split("```python\n")[1].split("```")[0]
    code = code.replace("100,", "12,")  # two batches are enough to run every line
    exec(compile(code, "docs/api.md", "exec"), {})
