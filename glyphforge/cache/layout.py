"""What lies under a cache store's root, and how its folders are listed.

Names beside the entries of a kind (``<root>/<kind>/``): a writer's staging directory
starts with `STAGING_PREFIX`, a directory moved out of sight to be deleted with
`TRASH_PREFIX` (see :mod:`glyphforge.cache.store` for the whole layout). A folder this
user may not list is listed as empty (:meth:`~glyphforge.cache.store.CacheStore.unreadable`
names it).
"""
from __future__ import annotations

import os
from pathlib import Path

#: The name prefix of a writer's staging directory, ``.tmp-<key>-<random>``.
STAGING_PREFIX = ".tmp-"
#: The name prefix of a directory moved out of sight before it is deleted, ``.trash-<name>-<random>``.
TRASH_PREFIX = ".trash-"


def kind_dirs(root: Path) -> list[Path]:
    """The folders of the kinds in the store at ``root`` (hidden names left out)."""
    return [path for path in listing(root) if path.is_dir() and not path.name.startswith(".")]


def listing(folder: Path) -> list[Path]:
    """The sorted contents of ``folder``; empty when it is missing or this user may not list it."""
    try:
        return sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def listable(folder: Path) -> bool:
    """Whether this user may list ``folder``."""
    try:
        with os.scandir(folder):
            return True
    except PermissionError:
        return False


def folder_bytes(folder: Path) -> int:
    """The bytes of the files in ``folder``; 0 when it is missing, or a symbolic link (its target is not ours)."""
    return 0 if folder.is_symlink() else sum(path.stat().st_size for path in listing(folder) if path.is_file())
