"""``python -m react.runtime.tuner --spec SPEC.json --out RESULT.json``: the leader."""

import sys

from react.runtime.tuner.command import main

sys.exit(main())
