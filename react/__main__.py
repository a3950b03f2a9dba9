"""``python3 -m react``: the same command as the ``react`` console script (:mod:`react.cli`)."""

import sys

from react.cli import main

if __name__ == "__main__":
    sys.exit(main())
