"""An example of a user controller for ``react regress --controllers react,...:Greedy``.

It implements the interface the job driver uses (``pattern``, ``config``, ``observe``) and nothing
of REACT's: after every batch it takes the receiver of the slowest flow of the batch's last epoch
and tries the first viable swap the pattern's swap space offers for it, never reverting. It is
meant to be read (docs/regress.md) and compared, not used.
"""

from react.control.controller import Decision
from react.model.swapspace import SwapSpace


class Greedy:
    """Always try the first viable swap of the slowest flow's receiver."""

    def __init__(self, pattern, config):
        self.pattern, self.config, self.batches = pattern, config, 0

    def observe(self, batch):
        index, self.batches = self.batches, self.batches + 1
        slowest = max(batch[-1].flows, key=lambda timing: timing.fct_s).flow
        swaps = SwapSpace(self.pattern, check=False).swaps_for(slowest.dst)
        if not swaps:
            return Decision(index, "keep", self.pattern, f"rank {slowest.dst} has no swap")
        self.pattern = swaps[0].apply(self.pattern)
        return Decision(index, "try", self.pattern,
                        f"slowest flow {slowest.src}->{slowest.dst}: {swaps[0].describe()}",
                        swaps=(swaps[0],))
