"""Why a test of an optional package skips where that package is missing.

torch and torchdata are not dependencies of glyphforge: the README's test command installs them
first (:data:`INSTALL_TORCH`: torch's CPU build, which lies on this machine's disk for Python 3.11),
so under it no torch test skips on 3.11; `.ci/run`'s runs on 3.12 and 3.13 go without them, and
their tests skip with these reasons (counted at the end of a run: `support.skip_count`).
"""
from __future__ import annotations

#: The first step of the README's test command: torch and torchdata, pinned.
INSTALL_TORCH = "pip install torch==2.13.0 torchdata==0.11.0"
#: The skip reason of a test that needs torch.
NO_TORCH = (f"torch is not installed (not a dependency; the README's test command installs it): `{INSTALL_TORCH}` "
            "to run this test")
#: The skip reason of a test that needs torchdata.
NO_TORCHDATA = f"torchdata is not installed (the README's test command installs it beside torch): `{INSTALL_TORCH}`"
