"""Why a test of an optional package skips where that package is missing.

torch and torchdata are not dependencies of glyphforge: `.ci/run` installs torch's CPU build
(the one on this machine's disk is for Python 3.11) and torchdata in the Python 3.11 run only,
so on 3.12 and 3.13 their tests skip with these reasons.
"""
from __future__ import annotations

#: The skip reason of a test that needs torch.
NO_TORCH = ("torch is not installed (not a dependency; .ci/run installs its CPU build on Python 3.11 only): "
            "`pip install torch` to run this test")
#: The skip reason of a test that needs torchdata.
NO_TORCHDATA = "torchdata is not installed (.ci/run installs it beside torch, on Python 3.11 only)"
