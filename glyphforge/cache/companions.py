"""An entry's companions: the directories beside it, ``<root>/<kind>/<key><suffix>``, that go with it.

Its ``.work`` scratch (resumable work, see :meth:`~glyphforge.cache.store.CacheStore.work_dir`)
and its ``.decoded`` copy (:mod:`glyphforge.cache.decoded`) are no entries of the store:
listing, ``verify`` and ``gc`` tell them from entries, and removing an entry removes them.
"""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

from glyphforge.cache.decoded import DECODED_SUFFIX
from glyphforge.cache.layout import kind_dirs, listing

#: The suffix of an entry's persistent scratch directory, ``<root>/<kind>/<key>.work``.
WORK_SUFFIX = ".work"
_COMPANIONS = (WORK_SUFFIX, DECODED_SUFFIX)


def entry_dirs(root: Path) -> Iterator[Path]:
    """Yield the entry directories of the store at ``root`` (complete or broken), kind by kind, in name order."""
    for kind_dir in kind_dirs(root):
        for path in listing(kind_dir):
            if path.is_dir() and not path.name.startswith(".") and not path.name.endswith(_COMPANIONS):
                yield path


def remove_companions(entry_dir: Path) -> None:
    """Delete the scratch directory and the decoded copy of the entry that was in ``entry_dir``."""
    for suffix in _COMPANIONS:
        shutil.rmtree(entry_dir.with_name(f"{entry_dir.name}{suffix}"), ignore_errors=True)
