"""The parallel builder: seeded shards fanned out through a session (see issue 7)."""
from __future__ import annotations

from typing import Any


def build(spec: Any, session: Any = None, data_dir: Any = None, progress: bool = True) -> Any:
    """Build ``spec`` in shards through ``session`` and return the cached dataset."""
    raise NotImplementedError("the parallel builder is not written yet")
