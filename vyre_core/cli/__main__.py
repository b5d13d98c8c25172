"""``python -m vyre_core.cli``: the ``vyre`` command without its console script."""

import sys

from vyre_core.cli import main

sys.exit(main())
