"""``python -m react.run.regress SUITE ...``: the same as ``react regress SUITE ...``."""

import sys

from react.cli import main

sys.exit(main(["regress", *sys.argv[1:]]))
