"""The ``react`` subcommands: one module each, its parser (``add_parser(sub, parents)``) and its
handler (``(args, out) -> exit status``); :mod:`react.cli` assembles them.

``run``, ``demo``, ``patterns``, ``sweep``, ``report``, ``plot``, ``emu``, ``regress``,
``crossval``; ``common`` (exit statuses, the usage error, the progress bar) and ``argtypes``
(argparse value types that name the bad value).
"""
