#!/usr/bin/env python
"""Run ``prepare-data`` without installing the console script: ``python scripts/prepare_data.py all``."""
import sys

from glyphforge.cli import prepare_data_main

if __name__ == "__main__":
    sys.exit(prepare_data_main())
