"""An entry's companions: the directories beside it, ``<root>/<kind>/<key><suffix>``, that belong to it.

:data:`COMPANIONS` lists them, and what the store does with each: its ``.work`` scratch
(resumable work, see :meth:`~glyphforge.cache.store.CacheStore.work_dir`) and the decoded copy
a reader makes of it (:mod:`glyphforge.cache.decoded`). The rest of the store knows companions
only through this listing: they are no entries (listing, ``verify`` and ``gc`` tell them apart),
``rm`` and eviction remove them with their entry, eviction counts the bytes of those
``counted``, replacing an entry drops those ``derived`` from it (``gc`` removes them once their
entry is gone), and ``verify`` runs their ``verify`` check.
"""
from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from glyphforge.cache.decoded import DECODED_SUFFIX, verify_copy
from glyphforge.cache.layout import folder_bytes, kind_dirs, listing


@dataclass(frozen=True)
class Companion:
    """A kind of directory beside an entry, ``<key><suffix>``; removed with the entry (``rm``, eviction).

    Attributes
    ----------
    suffix
        What follows the entry's key in its name.
    derived
        Made from the entry's files: replacing the entry drops it, and ``gc`` removes it once the entry is gone.
    counted
        Its bytes count with the entry's when the store is evicted down to a size.
    verify
        ``verify(folder, key) -> [(path, problem), ...]``, what ``cache verify`` finds wrong with it (None: nothing).
    """

    suffix: str
    derived: bool = False
    counted: bool = False
    verify: Callable[[Path, str], list[tuple[Path, str]]] | None = None

    def of(self, entry_dir: Path) -> Path:
        """The companion of the entry in ``entry_dir``: ``<root>/<kind>/<key><suffix>``."""
        return entry_dir.with_name(f"{entry_dir.name}{self.suffix}")


#: An entry's persistent scratch directory, ``<root>/<kind>/<key>.work``.
WORK = Companion(".work")
#: Every companion an entry may have.
COMPANIONS = (WORK, Companion(DECODED_SUFFIX, derived=True, counted=True, verify=verify_copy))
_SUFFIXES = tuple(companion.suffix for companion in COMPANIONS)


def entry_dirs(root: Path) -> Iterator[Path]:
    """Yield the entry directories of the store at ``root`` (complete or broken), kind by kind, in name order."""
    for kind_dir in kind_dirs(root):
        for path in listing(kind_dir):
            if path.is_dir() and not path.name.startswith(".") and not path.name.endswith(_SUFFIXES):
                yield path


def remove_companions(entry_dir: Path, derived: bool = False) -> None:
    """Delete the companions of the entry that was in ``entry_dir`` (``derived``: only those made from its files)."""
    for companion in COMPANIONS:
        if companion.derived or not derived:
            shutil.rmtree(companion.of(entry_dir), ignore_errors=True)


def companion_bytes(entry_dir: Path) -> int:
    """The bytes of the ``counted`` companions of the entry in ``entry_dir`` (see `folder_bytes`)."""
    return sum(folder_bytes(companion.of(entry_dir)) for companion in COMPANIONS if companion.counted)


def check_companions(entry_dir: Path, key: str) -> list[tuple[Path, str]]:
    """What the ``verify`` checks of the companions of the entry ``key`` in ``entry_dir`` find wrong."""
    return [problem for companion in COMPANIONS if companion.verify is not None
            for problem in companion.verify(companion.of(entry_dir), key)]


def orphans(kind_dir: Path) -> list[Path]:
    """The ``derived`` companions in ``kind_dir`` whose entry is gone (removed, or deleted by hand)."""
    return [path for path in listing(kind_dir) for companion in COMPANIONS
            if companion.derived and path.name.endswith(companion.suffix)
            and not (kind_dir / path.name.removesuffix(companion.suffix)).exists()]
