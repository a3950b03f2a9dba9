"""Reading a TOML input file with errors a user can act on (scenarios, sweep specs, suites)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from react.model.errors import ReactError


def read_toml(path: str | os.PathLike[str], what: str, error: type[ReactError]) -> dict[str, Any]:
    """The parsed document at ``path``; ``error`` names the file when it is missing, unreadable
    or not TOML (``what`` says what the file was meant to be, e.g. ``"scenario file"``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{what} {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what} {str(path)!r}: {exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML ({exc})") from None
