"""Which pattern each epoch runs, and when the controller is asked: the closed loop of one job.

Every driver shares this bookkeeping, so REACT behaves the same whichever backend runs the epochs:
the simulator's job processes (:mod:`react.run.driver`) and the real ranks' tuner
(:mod:`react.runtime.tuner`) both feed each epoch's result to :meth:`TuningLoop.record` and run
the pattern :meth:`TuningLoop.pattern_for` names.

The rules (paper §5.4 and §6.3): epochs are handed to the controller in batches of ``B``
(``batch_epochs``); a batch holds only epochs run with the controller's current pattern, so every
batch it sees ran one pattern. A decision that changes the pattern takes effect
``apply_delay_epochs`` epochs after the batch's last epoch (the paper's prototype lets the job run
5 more epochs on the old pattern while the tuner disseminates the new one); epochs run meanwhile
use the old pattern and are not handed to the controller.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from react.control.controller import Controller, Decision
from react.model.errors import ReactError
from react.model.observation import EpochResult
from react.model.pattern import Pattern


@dataclass(frozen=True, slots=True)
class Switch:
    """A decided pattern change: from ``epoch`` on, every rank runs ``pattern``."""

    epoch: int
    pattern: Pattern


@dataclass
class TuningLoop:
    """The closed loop of one job (module docstring); ``controller=None`` never changes pattern.

    Parameters
    ----------
    pattern : Pattern
        The pattern of epoch 0.
    controller : Controller, optional
        REACT; must start from ``pattern``.
    apply_delay_epochs : int, optional
        Overrides the controller's ``apply_delay_epochs`` (a runtime sets its own).
    """

    pattern: Pattern
    controller: Controller | None = None
    apply_delay_epochs: int | None = None
    decisions: list[Decision] = field(default_factory=list)
    pending: Switch | None = None
    _batch: list[EpochResult] = field(default_factory=list)
    _next_epoch: int = 0

    def __post_init__(self) -> None:
        if self.controller is not None and self.controller.pattern != self.pattern:
            raise ReactError("TuningLoop: the controller starts from another pattern")
        delay = self.apply_delay_epochs
        if delay is None:
            delay = self.controller.config.apply_delay_epochs if self.controller else 0
        if not (isinstance(delay, int) and not isinstance(delay, bool) and delay >= 0):
            raise ReactError(
                f"TuningLoop: apply_delay_epochs must be a non-negative integer, got {delay!r}"
            )
        self.apply_delay_epochs = delay

    def pattern_for(self, epoch: int) -> Pattern:
        """The pattern epoch ``epoch`` runs (epochs are asked for in order, each once)."""
        if epoch != self._next_epoch:
            raise ReactError(f"TuningLoop: expected epoch {self._next_epoch}, got {epoch!r}")
        if self.pending is not None and self.pending.epoch == epoch:
            self.pattern, self.pending = self.pending.pattern, None
        return self.pattern

    def record(self, epoch: int, result: EpochResult) -> Decision | None:
        """Hand epoch ``epoch``'s result (run with :meth:`pattern_for`'s pattern) to the loop.

        Returns the controller's decision when the result completes a batch, else None. A
        decision that changes the pattern is scheduled as :attr:`pending`.
        """
        if epoch != self._next_epoch:
            raise ReactError(f"TuningLoop: expected the result of epoch {self._next_epoch}, "
                             f"got epoch {epoch!r}")
        self._next_epoch += 1
        controller = self.controller
        if controller is None or self.pattern != controller.pattern:
            return None
        self._batch.append(result)
        if len(self._batch) < controller.config.batch_epochs:
            return None
        decision = controller.observe(self._batch)
        self.decisions.append(decision)
        self._batch = []
        if decision.pattern != self.pattern:
            assert self.apply_delay_epochs is not None
            self.pending = Switch(epoch + 1 + self.apply_delay_epochs, decision.pattern)
        return decision
