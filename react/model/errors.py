"""Exceptions raised by react.

Every error derives from :class:`ReactError` and also from the builtin that fits the mistake.
Messages name the argument, the bad value and what was expected.
"""


class ReactError(Exception):
    """Base class of every error react raises."""


class PatternError(ReactError, ValueError):
    """A collective pattern is malformed or does not implement its collective."""


class MscclError(PatternError):
    """An MSCCL XML algorithm cannot be read or written: malformed, unsupported or unsound."""
