"""The architecture as checked facts: the import contracts hold, the code's units stay small, and
the tests of react/ speak only through public names (docs/architecture.md)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MAX_CLASS_LINES = 400
MAX_FUNCTION_LINES = 80
LONGER = {
    # "path:qualified name": why it is longer (docs/architecture.md repeats each reason)
}
"""Units allowed past the limits, each with its reason; empty while none needs it."""


def _units(path: Path) -> list[tuple[str, str, int]]:
    """``(kind, qualified name, lines)`` of every class and function in one file."""
    out: list[tuple[str, str, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                assert child.end_lineno is not None
                out.append((kind, name, child.end_lineno - child.lineno + 1))
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(path.read_text(encoding="utf-8")), "")
    return out


def test_units_rule_counts_nested_definitions(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text("class A:\n    def f(self):\n        def g():\n            pass\n"
                    "        return g\n")
    assert _units(path) == [("class", "A", 5), ("function", "A.f", 4), ("function", "A.f.g", 2)]


def test_no_class_or_function_of_react_is_too_long() -> None:
    long = []
    for path in sorted((ROOT / "react").rglob("*.py")):
        for kind, name, lines in _units(path):
            limit = MAX_CLASS_LINES if kind == "class" else MAX_FUNCTION_LINES
            where = f"{path.relative_to(ROOT)}:{name}"
            if lines > limit and where not in LONGER:
                long.append(f"{where} ({kind}, {lines} lines > {limit})")
    assert not long, "split these along their seams: " + "; ".join(long)


@pytest.mark.skipif(shutil.which("lint-imports") is None and
                    not (Path(sys.executable).parent / "lint-imports").exists(),
                    reason="needs import-linter (pip install 'react-collectives[test]')")
def test_import_contracts_hold() -> None:
    # the layers of react/, flowsim apart from react, no cycle (pyproject.toml)
    exe = Path(sys.executable).parent / "lint-imports"
    cmd = [str(exe)] if exe.exists() else ["lint-imports"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([*cmd, "--no-cache"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 kept, 0 broken" in done.stdout


PUBLIC_UNDERSCORED = {("os", "_exit")}
"""Standard-library names that are public despite their underscore."""


def _private_uses(path: Path) -> list[str]:
    """Private attributes read or written on anything but ``self``/``cls``, and private names
    imported from the project's packages."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner not in ("self", "cls") and (owner, node.attr) not in PUBLIC_UNDERSCORED:
                found.append(f"line {node.lineno}: .{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] in ("react", "flowsim", "experiments"):
            found += [f"line {node.lineno}: imports {node.module}.{a.name}"
                      for a in node.names if a.name.startswith("_")]
    return found


def test_private_use_rule(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text("from react.model.pattern import _x, Pattern\n"
                    "class T:\n    def f(self):\n        return self._ok, obj._bad\n")
    assert _private_uses(path) == ["line 1: imports react.model.pattern._x", "line 4: ._bad"]


@pytest.mark.parametrize("folder", ["react", "experiments"])
def test_tests_use_only_public_names(folder: str) -> None:
    # tests/flowsim still pins the simulator's list/array twins; the fluid core replaces them
    bad = {str(p.relative_to(ROOT)): uses for p in sorted((ROOT / "tests" / folder).rglob("*.py"))
           if (uses := _private_uses(p))}
    assert not bad, bad
