"""REACT with ``unseen_pairs = "links_least"``, as a controller for ``react regress``.

``react regress experiments/suites/default.toml --controllers
react,experiments/controllers/least_excess.py:LeastExcess`` compares it with the default on every
case of the suite (docs/deviations.md has the comparison). It is REACT itself with one parameter
changed: an unseen (src, dst) pair is priced from its endpoints' links plus the least path excess
any observed pair showed instead of the mean (:mod:`react.control.estimate`).
"""

import dataclasses

from react.control.controller import Controller


def LeastExcess(pattern, config):  # noqa: N802 - named like the class it stands for
    """REACT's controller for ``pattern`` with ``config`` and unseen pairs at the least excess."""
    return Controller(pattern, dataclasses.replace(config, unseen_pairs="links_least"))
