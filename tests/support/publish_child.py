"""Publish one entry in a separate process that stops once a file is partly written, to be killed there:
``python -m support.publish_child DATA_DIR KIND URL``.

The real `glyphforge.publish`, with one change: one file at a time, and once the first bytes of
the first (the largest) are in its temporary file (its progress bar is told them), the process prints
``staged`` and waits to be killed (a deterministic kill point).
"""
from __future__ import annotations

import sys
import time

import glyphforge as gf
from glyphforge.cache.remote import publish


def stall(inc: int = 1) -> None:
    """Say a file is partly written, then wait (forever) for the test's SIGKILL."""
    print("staged", flush=True)
    while True:
        time.sleep(60)


def stalling_bar(total: int, place: object, progress: bool) -> object:
    """The publish's progress bar, told the first bytes sent: it stalls there (`stall`)."""
    bar = made_bar(total, place, progress)
    bar.update = stall
    return bar


if __name__ == "__main__":
    publish.FILES_AT_ONCE = 1  # one file at a time: the largest first, the one left partly written
    made_bar = publish._progress_bar
    publish._progress_bar = stalling_bar  # type: ignore[assignment]
    data_dir, kind, url = sys.argv[1:]
    gf.publish(kind, url, data_dir=data_dir, progress=False)
