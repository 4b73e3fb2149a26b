"""Removing what a cache store no longer needs: `sweep` (``cache gc`` before eviction) and `CleanupError`.

Abandoned staging and trash directories, broken entries (a manifest that fails
`glyphforge.cache.manifest.read_manifest`, a data file missing, of the wrong size or sha256:
`glyphforge.cache.verify.damaged`), the temporary files of an entry's files whose writer was
killed (a publish to this data dir: `glyphforge._files.remove_abandoned_staging`), derived
companions failing their record and those whose entry is gone (`glyphforge.cache.companions`)
are glyphforge's own, and removed: what ``cache verify`` reports damaged, ``gc`` removes (so
every data file is re-hashed). An entry this user may not read is not known to be broken: it is
left alone; a link or a file in a companion's place is not glyphforge's, and stays. What another
user's files stop being removed is named, with its owner and what to do, in one `CleanupError`
at the end.
"""
from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from glyphforge._files import describe_owner, remove_abandoned_staging, remove_tree
from glyphforge.cache.companions import damaged_companions, entry_dirs, orphans
from glyphforge.cache.entry import UnreadableEntryError, read_entry
from glyphforge.cache.layout import STAGING_PREFIX, TRASH_PREFIX, kind_dirs, listing
from glyphforge.cache.locks import LockTimeoutError
from glyphforge.cache.manifest import MANIFEST
from glyphforge.cache.verify import damaged
from glyphforge.errors import StorageError


class CleanupError(StorageError):
    """:meth:`CacheStore.gc` removed what it could but not everything it should; the message names each and why.

    Attributes
    ----------
    removed
        What it did remove.
    """

    def __init__(self, message: str, removed: list[Path]) -> None:
        super().__init__(message)
        self.errno = errno.EACCES
        self.removed = removed


def sweep(root: Path, remove_staging: Callable[[Path], OSError | None], hide: Callable[[Path], Path]) -> list[Path]:
    """Remove the abandoned, the broken and the orphaned from the store at ``root``; return what was removed.

    ``remove_staging(path)`` deletes a staging directory holding its key's lock (`LockTimeoutError`: a
    live writer's), ``hide(path)`` moves an entry directory out of sight (see `CacheStore.gc`).

    Raises
    ------
    CleanupError
        After removing all it could, when something it should remove is another user's that this
        one may not delete.
    """
    removed: list[Path] = []
    failed: list[str] = []
    for kind_dir in kind_dirs(root):
        for path in listing(kind_dir):
            if path.name.startswith(TRASH_PREFIX):
                _collect(path, remove_tree, removed, failed)
            elif path.name.startswith(STAGING_PREFIX):
                _collect(path, remove_staging, removed, failed)
    for path in list(entry_dirs(root)):
        try:
            entry = read_entry(path)
        except UnreadableEntryError:
            continue  # not known to be broken: another user's (`unreadable` names it)
        if entry is None or damaged(entry):
            _collect(path, lambda broken: remove_tree(hide(broken)), removed, failed)
        else:
            for companion in damaged_companions(entry.path, entry.key):
                _collect(companion, remove_tree, removed, failed)
            left, errors = remove_abandoned_staging(path, [*entry.files, MANIFEST])
            removed += left
            failed += [failure(Path(error.filename or path), error) for error in errors]
    for kind_dir in kind_dirs(root):  # derived companions of entries gone
        for path in orphans(kind_dir):
            _collect(path, remove_tree, removed, failed)
    if failed:
        raise CleanupError(
            f"`glyphforge cache gc` removed {len(removed)} item(s) but could not remove {len(failed)}: "
            + "; ".join(failed) + ". Where they are another user's, ask their owner to run `glyphforge cache gc`, "
            "or to let the group write their files (`chmod -R g+rwX` on them, and `umask 002` from then on).",
            removed)
    return removed


def _collect(path: Path, remove: Callable[[Path], OSError | None], removed: list[Path], failed: list[str]) -> None:
    """Run ``remove(path)``; add ``path`` to ``removed``, or what stopped it to ``failed``.

    A `LockTimeoutError` is no failure: a live writer holds the key, the path is its own.
    """
    try:
        error = remove(path)
    except LockTimeoutError:
        return
    except OSError as raised:
        error = raised
    if error is None:
        removed.append(path)
    else:
        failed.append(failure(path, error))


def failure(path: Path, error: OSError) -> str:
    """Why ``path`` could not be removed, for `CleanupError`: the error, where, and whose that is."""
    where = error.filename or path
    why = os.strerror(error.errno) if error.errno else str(error)
    return f"{path} ({why} at {where}: {describe_owner(where)})"
