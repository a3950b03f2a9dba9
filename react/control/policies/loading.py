"""Turning a controller reference (``react``, ``pkg.mod:Factory``, ``file.py:Factory``) into a
factory, and a factory into a checked controller (see :mod:`react.control.policies`)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from react.control.controller import ControllerConfig
from react.model.errors import ReactError
from react.model.pattern import Pattern

BUILTIN: dict[str, str] = {
    "react": "react.control.controller:Controller",
    "never": "react.control.policies.baselines:NeverChange",
    "random": "react.control.policies.baselines:RandomSwap",
}
"""Controllers known by a short name."""

_FORMS = "'module:Factory', 'path/to/file.py:Factory' or one of " + ", ".join(BUILTIN)

_FACTORIES: dict[str, Callable[..., Any]] = {}


class ControllerLoadError(ReactError, ValueError):
    """A controller reference is malformed, does not import, or names nothing callable."""


def _split(ref: Any) -> tuple[str, str]:
    if not isinstance(ref, str) or not ref.strip():
        raise ControllerLoadError(f"controller {ref!r}: expected {_FORMS}")
    if ref in BUILTIN:
        ref = BUILTIN[ref]
    module, sep, attr = ref.rpartition(":")
    if not sep or not module or not attr or not all(p.isidentifier() for p in attr.split(".")):
        raise ControllerLoadError(f"controller {ref!r}: expected {_FORMS}")
    return module, attr


def _is_file(module: str) -> bool:
    return module.endswith(".py") or "/" in module or os.sep in module


def resolve(ref: str, base_dir: str | os.PathLike[str] = ".") -> str:
    """Check ``ref`` and return it in a form any process can load (file paths made absolute).

    Raises
    ------
    ControllerLoadError
        If the reference is malformed, its module or file does not import, or the factory it
        names does not exist or is not callable; the message names the reference.
    """
    if isinstance(ref, str) and ref in BUILTIN:
        load_factory(ref)
        return ref
    module, attr = _split(ref)
    if _is_file(module):
        path = Path(module).expanduser()
        if not path.is_absolute():
            path = Path(base_dir) / path
        ref = f"{path.resolve()}:{attr}"
    load_factory(ref)
    return ref


def load_factory(ref: str) -> Callable[..., Any]:
    """The callable a (resolved) reference names; loaded once per process."""
    factory = _FACTORIES.get(ref)
    if factory is not None:
        return factory
    module_name, attr = _split(ref)
    module = _load_file(ref, module_name) if _is_file(module_name) else _import(ref, module_name)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ControllerLoadError(
                f"controller {ref!r}: {module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ControllerLoadError(
            f"controller {ref!r}: {attr} is a {type(obj).__name__}, expected a callable "
            "factory(pattern, config) -> controller")
    _FACTORIES[ref] = obj
    return obj


def _import(ref: str, name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # a user's module may fail in any way while importing
        raise ControllerLoadError(
            f"controller {ref!r}: cannot import module {name!r} ({type(exc).__name__}: {exc})"
        ) from None


def _load_file(ref: str, file: str) -> Any:
    path = Path(file)
    if not path.is_file():
        raise ControllerLoadError(f"controller {ref!r}: file {file!r} does not exist")
    # one module per file, named after its absolute path, so two files called policy.py coexist
    name = "react_user_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ControllerLoadError(f"controller {ref!r}: {file!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ControllerLoadError(
            f"controller {ref!r}: cannot load {file!r} ({type(exc).__name__}: {exc})") from None
    return module


def label(ref: str) -> str:
    """A short, file-name-safe name for a reference (the builtin name, or the factory's)."""
    if ref in BUILTIN:
        return ref
    module, attr = _split(ref)
    stem = Path(module).stem if _is_file(module) else module
    text = f"{stem}.{attr}"
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)


def make_controller(ref: str, pattern: Pattern, config: ControllerConfig) -> Any:
    """The controller ``ref``'s factory builds for a job starting from ``pattern``.

    REACT (``"react"``) is returned as built; any other controller is checked for the interface
    and wrapped in :class:`~react.control.policies.guard.CheckedController`.

    Raises
    ------
    ControllerLoadError
        If ``ref`` does not load.
    ControllerInterfaceError
        If what the factory returns lacks the controller interface.
    ControllerFault
        If the factory raises.
    """
    from react.control.policies.guard import CheckedController, ControllerFault

    factory = load_factory(ref)
    if ref == "react":
        return factory(pattern, config)
    try:
        inner = factory(pattern, config)
    except Exception as exc:
        raise ControllerFault(
            f"controller {ref!r}: the factory raised {type(exc).__name__}: {exc}") from exc
    return CheckedController(inner, ref, pattern, config)


def controller_reference(controller: Any) -> tuple[str, ControllerConfig]:
    """The reference and the configuration that make ``controller`` again in another process.

    RTuner's leader runs in a process of its own (:mod:`react.runtime.tuner`), so a job on real
    ranks carries its controller there as these two plain values and the leader calls
    :func:`make_controller` with them. REACT's own controller is ``"react"`` with its config; a
    controller :func:`make_controller` guarded carries the reference (made loadable from any
    folder, :func:`resolve`) and the config it was made from.

    Raises
    ------
    ControllerLoadError
        For any other object (nothing says how to make it again), naming its type.
    """
    from react.control.controller import Controller
    from react.control.policies.guard import CheckedController

    if type(controller) is Controller:
        return "react", controller.config
    if isinstance(controller, CheckedController) and controller.factory_config is not None:
        return resolve(controller.ref), controller.factory_config
    raise ControllerLoadError(
        f"controller {type(controller).__name__}: no reference says how to make it again in "
        "another process (RTuner's leader); make it with "
        "react.control.policies.make_controller(ref, pattern, config)")
