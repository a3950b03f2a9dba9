"""Where an experiment script writes its figures, tables and results store.

A full run of ``experiments/figN.py`` regenerates the committed ``docs/results/`` files, which
is what it is for. A quick run (``--quick``, a smoke test of seconds) must not overwrite them,
nor mix its tiny sweep into the full run's store: unless told where (``--out``, ``--store``), it
writes into a new temporary folder and says so. A run with other options than the defaults must
not overwrite them either: :func:`variant_name` puts every option that differs from its default
into the file name, so each file says which command made it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["experiment_dirs", "variant_name"]


def experiment_dirs(name: str, *, quick: bool, out: str | os.PathLike[str] | None,
                    default_out: Path, store: str | os.PathLike[str] | None = None,
                    default_store: Path | None = None) -> tuple[Path, Path | None]:
    """``(output folder, store path)`` for experiment ``name``; folders are created.

    Given values win. Otherwise a full run uses the defaults (the committed ``docs/results`` and
    ``results/NAME.sqlite``) and a quick run a fresh ``react-NAME-quick-*`` temporary folder for
    both. The store path is None for a script without a store (no ``default_store``).
    """
    wants_store = store is not None or default_store is not None
    scratch: Path | None = None
    if quick and (out is None or (store is None and wants_store)):
        scratch = Path(tempfile.mkdtemp(prefix=f"react-{name}-quick-"))
    folder = Path(out) if out is not None else (scratch if scratch is not None else default_out)
    folder.mkdir(parents=True, exist_ok=True)
    if not wants_store:
        return folder, None
    if store is not None:
        db = Path(store)
    elif scratch is not None:
        db = scratch / f"{name}.sqlite"
    else:
        assert default_store is not None
        db = default_store
    db.parent.mkdir(parents=True, exist_ok=True)
    return folder, db


def variant_name(base: str, chosen: Mapping[str, Any], defaults: Mapping[str, Any]) -> str:
    """``base`` followed by ``_LABELVALUE`` for each option whose value differs from its default.

    Lists are joined by ``-``, floats written compactly (``2e+06``), booleans by their label
    alone. For example ``variant_name("table2", {"e": 5000}, {"e": 1000}) == "table2_e5000"``
    and the defaults give ``base`` itself, the name of the committed file.
    """
    parts = [base]
    for label, value in chosen.items():
        if _normal(value) == _normal(defaults[label]):
            continue
        if isinstance(value, bool):
            parts.append(label)
        else:
            parts.append(label + _text(value))
    return "_".join(parts)


def _normal(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_normal(v) for v in value)
    return value


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "-".join(_text(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
