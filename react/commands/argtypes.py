"""argparse value types shared by the ``react`` subcommands: one-line errors naming the value."""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def controller_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE``: one controller parameter (:class:`react.control.controller.ControllerConfig`),
    the value read as a TOML value (``0.1``, ``true``, ``"links"``) or else taken as a bare
    string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE with a controller parameter as KEY (e.g. "
            f"unseen_pairs=links_least), got {text!r}")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key, value


def add_controller_settings(parser: argparse.ArgumentParser) -> None:
    """The ``--react-set KEY=VALUE`` option of the experiments (repeatable)."""
    parser.add_argument(
        "--react-set", metavar="KEY=VALUE", action="append", type=controller_setting,
        default=[], dest="react_set",
        help="set a controller parameter of every REACT run "
             "(react.control.controller.ControllerConfig, e.g. unseen_pairs=links_least; "
             "repeatable); the outputs' names then say so")


def controller_settings(parser: argparse.ArgumentParser,
                        settings: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """``--react-set``'s values as a mapping, checked by building the controller's config
    (a bad key or value ends the program with the config's error)."""
    from react.control.controller import ControllerConfig
    from react.model.errors import ReactError

    values = dict(settings)
    try:
        ControllerConfig.from_mapping(values, where="--react-set")
    except ReactError as exc:
        parser.error(str(exc))
    return values


def react_entry(settings: Mapping[str, Any], enabled: bool = True) -> bool | dict[str, Any]:
    """A scenario job's ``react`` value: ``enabled``, or with ``settings`` a table of them (also
    when not enabled: a run that forces REACT on for every job then uses them)."""
    return {"enabled": enabled, **settings} if settings else enabled


def settings_label(settings: Mapping[str, Any]) -> list[str]:
    """``settings`` as a list for :func:`react.run.outdir.variant_name` (``key-value-...``)."""
    return [str(part) for key, value in settings.items() for part in (key, value)]
