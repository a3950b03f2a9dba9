"""Where an experiment script writes its figures, tables and results store.

A full run of ``experiments/figN.py`` regenerates the committed ``docs/results/`` files, which
is what it is for. A quick run (``--quick``, a smoke test of seconds) must not overwrite them,
nor mix its tiny sweep into the full run's store: unless told where (``--out``, ``--store``), it
writes into a new temporary folder and says so.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["experiment_dirs"]


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
