"""``python -m react.runtime.tuner --spec SPEC.json --out RESULT.json``: the leader."""

import sys

from react.runtime.tuner.leader import main

sys.exit(main())
