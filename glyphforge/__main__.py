"""``python -m glyphforge``: the ``glyphforge`` command, with its console script's output and exit statuses."""
from __future__ import annotations

import sys

from glyphforge.cli import main

if __name__ == "__main__":
    sys.exit(main())
