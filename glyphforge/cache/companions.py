"""An entry's companions: the folders beside it, ``<root>/<kind>/<key>.<label>``, that belong to it.

The store's own is the entry's ``.work`` scratch (resumable work, see
:meth:`~glyphforge.cache.store.CacheStore.work_dir`), made without a record. Every other is
derived: made from the entry's files by a layer above the cache (a built dataset's decoded
copy, `glyphforge.builds.decoded_copy.life`, is ``<key>.decoded``), carrying a record of its files
(:mod:`glyphforge.cache.companion_record`). The cache knows no more of them than that: they
are no entries (an entry's name, its key, has no dot), ``rm`` and eviction remove every
companion with its entry, eviction counts the bytes of the derived ones, replacing an entry
drops its derived companions (``gc`` removes them once their entry is gone, and those
failing their record), and ``verify`` checks each derived one against its record.

glyphforge deletes only what it wrote: a ``<key>.<label>`` directory without a record (a
user's ``<key>.notes``) is no companion, and stays, uncounted and unchecked. A link or a file
in a companion's place is never read, counted or removed; ``verify`` names it.
"""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

from glyphforge.cache.companion_record import foreign, label, recorded, verify_record
from glyphforge.cache.layout import folder_bytes, kind_dirs, listing

#: The suffix of an entry's persistent scratch folder, ``<root>/<kind>/<key>.work``: the store's own companion.
WORK = ".work"


def work_of(entry_dir: Path) -> Path:
    """The scratch folder of the entry in ``entry_dir``: ``<root>/<kind>/<key>.work``."""
    return entry_dir.with_name(f"{entry_dir.name}{WORK}")


def _is_companion(path: Path) -> bool:
    return not path.name.startswith(".") and "." in path.name


def entry_dirs(root: Path, kinds: list[Path] | None = None) -> Iterator[Path]:
    """Yield the entry directories of the store at ``root`` (complete or broken), kind by kind, in name order (of the
    kind folders ``kinds`` only, when given)."""
    for kind_dir in kind_dirs(root) if kinds is None else kinds:
        for path in listing(kind_dir):
            if path.is_dir() and not path.name.startswith(".") and not _is_companion(path):
                yield path


def companions(entry_dir: Path, derived: bool = False) -> list[Path]:
    """The companions of the entry that is (or was) in ``entry_dir`` (``derived``: only those made from its files):
    its ``.work`` scratch, the folders beside it holding a record, and what is in a companion's place but no
    directory (a link, a file: never read or removed)."""
    work = work_of(entry_dir)
    found = entry_dir.parent.glob(f"{entry_dir.name}.*")
    return sorted(path for path in found if (path == work and not derived) or (path != work and _derived(path)))


def _derived(path: Path) -> bool:
    """Whether ``path`` is a derived companion: a folder holding its maker's record, or (`foreign`) in one's place."""
    return recorded(path) or foreign(path) is not None


def remove_companions(entry_dir: Path, derived: bool = False) -> None:
    """Delete the companions of the entry that was in ``entry_dir`` (``derived``: only those made from its files).

    A folder without a record, and a link or file in a companion's place, are not glyphforge's, and stay.
    """
    for path in companions(entry_dir, derived):
        if foreign(path) is None:
            shutil.rmtree(path, ignore_errors=True)


def companion_sizes(entry_dir: Path) -> dict[str, int]:
    """The bytes of each derived companion of the entry in ``entry_dir`` that has any, by label (``{"decoded": n}``).

    A link in a companion's place counts nothing (see `folder_bytes`).
    """
    sizes = {label(path, entry_dir.name): folder_bytes(path) for path in companions(entry_dir, derived=True)}
    return {name: size for name, size in sizes.items() if size}


def companion_bytes(entry_dir: Path) -> int:
    """The bytes of the derived companions of the entry in ``entry_dir`` (see `companion_sizes`)."""
    return sum(companion_sizes(entry_dir).values())


def check_companions(entry_dir: Path, key: str) -> list[tuple[Path, str, str, bool]]:
    """What re-hashing the derived companions of the entry ``key`` in ``entry_dir`` against their records finds wrong:
    (path, problem, the companion's label, whether the companion is glyphforge's: False for a link or a file in its
    place)."""
    return [(path, problem, label(folder, key), foreign(folder) is None)
            for folder in companions(entry_dir, derived=True) for path, problem in verify_record(folder, key)]


def damaged_companions(entry_dir: Path, key: str) -> list[Path]:
    """The derived companions of the entry ``key`` in ``entry_dir`` that are glyphforge's and fail `check_companions`:
    what ``gc`` removes."""
    return [folder for folder in companions(entry_dir, derived=True)
            if foreign(folder) is None and verify_record(folder, key)]


def orphans(kind_dir: Path) -> list[Path]:
    """The derived companions in ``kind_dir`` whose entry is gone (removed, or deleted by hand).

    Only those are looked into: a companion of an entry that is there may be another user's, closed to this one.
    """
    return [path for path in listing(kind_dir) if _is_companion(path) and not path.name.endswith(WORK)
            and not (kind_dir / path.name.split(".", 1)[0]).exists() and recorded(path)]
