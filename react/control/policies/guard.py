"""Holding a controller that REACT did not write to the contract the job driver relies on.

The driver trusts its controller: it runs whatever pattern a decision names. A user's policy may
return something that is not a :class:`~react.control.controller.Decision`, a pattern of another
collective, or one that loses a rank's contribution; run as is, the job would time a collective
that computes the wrong result. :class:`CheckedController` stands between the two and turns every
such mistake into a :class:`ControllerFault` naming the controller and the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from react.control.controller import ControllerConfig, Decision
from react.model.errors import PatternError, ReactError
from react.model.observation import EpochResult
from react.model.pattern import Pattern


class ControllerInterfaceError(ReactError, TypeError):
    """An object lacks the controller interface (pattern, config, observe)."""


class ControllerFault(ReactError, RuntimeError):
    """A controller raised, or decided something the job cannot run."""


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def check_interface(obj: Any, ref: str, pattern: Pattern) -> None:
    """Raise :class:`ControllerInterfaceError` unless ``obj`` can drive a job from ``pattern``.

    It needs ``pattern`` (equal to the job's starting pattern), ``config.batch_epochs`` (an
    integer >= 1), ``config.apply_delay_epochs`` (an integer >= 0) and a callable ``observe``.
    """
    where = f"controller {ref!r} ({type(obj).__name__})"
    if not callable(getattr(obj, "observe", None)):
        raise ControllerInterfaceError(f"{where} has no method observe(batch) -> Decision")
    if not isinstance(getattr(obj, "pattern", None), Pattern):
        raise ControllerInterfaceError(f"{where} has no attribute 'pattern' holding a Pattern")
    if obj.pattern != pattern:
        raise ControllerInterfaceError(
            f"{where}: its pattern is not the job's starting pattern; a factory must start "
            "from the pattern it is given")
    config = getattr(obj, "config", None)
    for name, minimum in (("batch_epochs", 1), ("apply_delay_epochs", 0)):
        value = getattr(config, name, None)
        if not _is_int(value, minimum):
            raise ControllerInterfaceError(
                f"{where}: config.{name} = {value!r}, expected an integer >= {minimum}")


class CheckedController:
    """A controller that verifies what ``inner`` decides (module docstring).

    Every pattern a decision names must be a :class:`~react.model.pattern.Pattern` of the same
    collective over the same ranks that passes :func:`react.model.verify.verify`, and
    ``inner.pattern`` must be that pattern after ``observe`` returns (the driver compares the two to
    know which epochs belong to the controller's batch). Patterns that passed are remembered, so a
    policy that swaps back and forth is verified once per pattern.

    ``ref`` and ``config`` (the reference and the configuration the factory was given, as
    :func:`~react.control.policies.loading.make_controller` passes them) are kept as :attr:`ref` and
    :attr:`factory_config`: RTuner's leader runs in a process of its own and makes the same
    controller again from them (:func:`~react.control.policies.loading.controller_reference`).
    """

    def __init__(self, inner: Any, ref: str, pattern: Pattern,
                 config: ControllerConfig | None = None) -> None:
        check_interface(inner, ref, pattern)
        self.inner = inner
        self.ref = ref
        self.factory_config = config
        self._start = pattern
        self._verified: set[tuple[Any, ...]] = {pattern.flows}
        self._batches = 0

    @property
    def pattern(self) -> Pattern:
        return self.inner.pattern  # type: ignore[no-any-return]

    @property
    def config(self) -> Any:
        return self.inner.config

    def observe(self, batch: Sequence[EpochResult]) -> Decision:
        index = self._batches
        self._batches += 1
        where = f"controller {self.ref!r}, batch {index}"
        try:
            decision = self.inner.observe(batch)
        except Exception as exc:
            raise ControllerFault(f"{where}: observe raised {type(exc).__name__}: {exc}"
                                  ) from exc
        if not isinstance(decision, Decision):
            raise ControllerFault(f"{where}: observe returned a {type(decision).__name__}, "
                                  "expected a react.control.controller.Decision")
        self._check_pattern(decision.pattern, where)
        if self.inner.pattern != decision.pattern:
            raise ControllerFault(f"{where}: its pattern attribute is not the pattern its "
                                  "decision names; set it to the decided pattern")
        return decision

    def _check_pattern(self, pattern: Any, where: str) -> None:
        from react.model.verify import verify

        if not isinstance(pattern, Pattern):
            raise ControllerFault(f"{where}: the decision's pattern is a "
                                  f"{type(pattern).__name__}, expected a Pattern")
        if pattern.flows in self._verified:
            return
        start = self._start
        if (pattern.kind, sorted(pattern.ranks), pattern.root) != (
                start.kind, sorted(start.ranks), start.root):
            raise ControllerFault(
                f"{where}: decided a {pattern.kind} over ranks {list(pattern.ranks)} (root "
                f"{pattern.root}), expected a {start.kind} over ranks {list(start.ranks)} (root "
                f"{start.root})")
        try:
            verify(pattern)
        except PatternError as exc:
            raise ControllerFault(f"{where}: decided an invalid pattern: {exc}") from None
        self._verified.add(pattern.flows)
