"""When the controller stops exploring, and when it looks again (paper §5.4.2, ``Emax``).

Explorations that come to nothing (a trial reverted, or no swap estimated to gain) are counted;
after ``exploration_rounds`` of them in a row the job *settles* on the fastest pattern measured
in the round. A settled job explores again when the congestion picture changes, when its
collective time rises more than ``revert_threshold`` above the settled time, or once after
``reexplore_epochs`` quiet epochs (the paper's ``Emax x B``, against local optima), the wait
doubling after each such look that finds nothing to keep.
"""

from __future__ import annotations

from dataclasses import dataclass

from react.control.config import ControllerConfig
from react.control.decision import microseconds
from react.control.picture import Picture, describe_picture, same_picture
from react.model.pattern import Pattern
from react.model.transforms import Swap

__all__ = ["Settled", "Settling"]


@dataclass(frozen=True, slots=True)
class Settled:
    """A settled state: the picture and collective time it settled on."""

    picture: Picture
    time_s: float
    batch: int
    """The batch it settled after; the next re-exploration is counted from here."""
    reexplorations: int
    """Re-explorations of this settled picture that found nothing to keep (doubles the wait)."""


class Settling:
    """The fruitless explorations in a row, the patterns measured in the round, the settled state.

    ``reexploring`` is the settled state a periodic look left (None outside one): a look that
    finds nothing settles straight back, with the wait doubled.
    """

    def __init__(self, config: ControllerConfig) -> None:
        self._config = config
        self._fruitless = 0
        self._round: list[tuple[float, Pattern, tuple[Swap, ...]]] = []
        self.settled: Settled | None = None
        self.reexploring: Settled | None = None

    def kept(self) -> None:
        """A trial paid off: the count starts again."""
        self._fruitless = 0
        self._round.clear()

    def reverted(self, time_s: float, tried: Pattern, swaps: tuple[Swap, ...],
                 reexploring: Settled | None) -> None:
        """A trial of ``swaps`` (``tried``, measured at ``time_s``) was reverted; ``reexploring``:
        the settled state its exploration left, if it was a periodic look."""
        self._round.append((time_s, tried, swaps))
        self.reexploring = reexploring

    def stays(self, picture: Picture, time_s: float, index: int, notes: list[str]) -> bool:
        """Whether a settled job stays settled after batch ``index``; if not, it explores."""
        settled = self.settled
        assert settled is not None
        why = self._unsettle_reason(settled, picture, time_s)
        if why is None and not self._reexplore_due(settled, index):
            notes.append("settled: the congestion picture and the collective time are as "
                         "when it settled")
            return True
        self.settled = None
        if why is None:  # a periodic look for a better pattern, same picture
            self.reexploring = settled
            notes.append(f"settled for {(index - settled.batch) * self._config.batch_epochs} "
                         "epochs: exploring once more")
        else:
            self._fruitless = 0
            notes.append(f"{why}: exploring again")
        return False

    def fruitless(self, notes: list[str], picture: Picture, time_s: float,
                  index: int) -> Pattern | None:
        """One more fruitless exploration (decision ``index``); settle after ``Emax`` in a row.

        Settling picks the best pattern measured in the round, returned when it is not the one
        that ran (at ``time_s``): a trial that was faster than its base by less than ``tau_r``
        was reverted, but if it is the fastest pattern seen, keeping it costs nothing and earns
        its gain for as long as the picture lasts.
        """
        self._fruitless += 1
        again = self.reexploring
        if again is not None:  # a re-exploration that found nothing: settle straight back
            self.reexploring = None
            self.settled = Settled(again.picture, again.time_s, index, again.reexplorations + 1)
            notes.append("nothing better: settled again, next look after "
                         f"{self._reexplore_wait(self.settled)} epochs")
            return None
        if self._fruitless < self._config.exploration_rounds:
            return None
        best = min(self._round, key=lambda t: t[0], default=None)
        switch = None
        if best is not None and best[0] < time_s:
            best_time, switch, swaps = best
            notes.append(
                f"settling on the fastest pattern of this round "
                f"({', '.join(s.describe() for s in swaps)}: observed {microseconds(best_time)} "
                f"vs {microseconds(time_s)})"
            )
            time_s = best_time
        self._round.clear()
        self.settled = Settled(picture, time_s, index, 0)
        notes.append(
            f"{self._fruitless} explorations in a row did not pay off: settling until the "
            "congestion picture changes"
            + (f" (or for {self._reexplore_wait(self.settled)} epochs)"
               if self._config.reexplore_epochs else "")
        )
        return switch

    def _reexplore_wait(self, settled: Settled) -> int:
        """Epochs a settled job waits before exploring once more: doubles with each miss."""
        return self._config.reexplore_epochs * 2 ** settled.reexplorations

    def _reexplore_due(self, settled: Settled, index: int) -> bool:
        if not self._config.reexplore_epochs:
            return False
        waited = (index - settled.batch) * self._config.batch_epochs
        return waited >= self._reexplore_wait(settled)

    def _unsettle_reason(self, settled: Settled, picture: Picture, time_s: float) -> str | None:
        if not same_picture(picture, settled.picture, self._config.picture_overlap):
            return (f"the congestion picture changed ({describe_picture(settled.picture)} -> "
                    f"{describe_picture(picture)})")
        if time_s > settled.time_s * (1.0 + self._config.revert_threshold):
            return (f"the collective time rose to {microseconds(time_s)} from "
                    f"{microseconds(settled.time_s)} when it settled")
        return None
