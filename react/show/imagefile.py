"""Image file names given on the command line: the format comes from the suffix.

matplotlib picks the format from the file name and fails deep inside ``savefig`` on a suffix it
does not know (``x.txt``) or silently adds ``.png`` to a name without one. Both are settled here,
before any drawing: no suffix means PNG and the name says so; an unknown suffix is one clear
error listing the formats that work.
"""

from __future__ import annotations

import os
from pathlib import Path

from react.model.errors import ReactError


class ImageFormatError(ReactError, ValueError):
    """An output file name whose suffix is not an image format matplotlib can write."""


def image_formats() -> tuple[str, ...]:
    """The suffixes (without the dot) matplotlib's Agg backend can write, sorted."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    return tuple(sorted(FigureCanvasAgg(Figure()).get_supported_filetypes()))


def image_path(path: str | os.PathLike[str]) -> Path:
    """``path`` with ``.png`` added when it has no suffix; :class:`ImageFormatError` when its
    suffix is not an image format (the message lists those that are)."""
    out = Path(path)
    suffix = out.suffix.lower().lstrip(".")
    if not suffix:
        return out.with_name(out.name + ".png")
    formats = image_formats()
    if suffix not in formats:
        raise ImageFormatError(
            f"cannot write an image to {os.fspath(path)!r}: .{suffix} is not an image format; "
            f"use one of {', '.join('.' + f for f in formats)}"
        )
    return out
