"""A companion's record: the sizes and sha256 of the files of a folder beside an entry, checked by the cache.

A layer above the cache may keep a folder of its own beside an entry, made from the entry's
files: ``<root>/<kind>/<key>.<label>`` (a built dataset's decoded copy,
`glyphforge.builds.decoded_copy.life`, is ``<key>.decoded``). The cache knows such a folder only
as a companion (:mod:`glyphforge.cache.companions`) and by its record, which its maker writes
last (`write_record`): ``checks.json`` holding the entry's key, each file's size and sha256,
and what else the maker records (the record is a JSON object; the cache reads ``key`` and
``files`` only). A reader checks the sizes when it opens the folder (`read_record`),
``glyphforge cache verify`` every byte (`verify_record`).

A companion whose record is not its entry's, or whose files are not what it records, is
damaged (`DamagedCompanionError`). A ``<key>.<label>`` directory without a record is not
glyphforge's (`recorded`): the cache neither counts, checks nor removes it, and its maker
neither reads nor replaces it (`glyphforge.builds.decoded_copy.life.ForeignCopyError`). One that
is no directory (a symbolic link, a file) is not glyphforge's either (`foreign`): nothing is
read from it or done to it.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from glyphforge._files import sha256_file
from glyphforge.errors import IntegrityError, StorageError

#: The record of a companion, written last by its maker.
RECORD = "checks.json"
_REMOVE = ("It is only a copy (the entry itself is intact), and glyphforge drops it at its next read and makes it "
           "again when it is needed; to remove it now: `glyphforge cache gc` (or rm -r '{folder}')")


class DamagedCompanionError(StorageError, IntegrityError):
    """A file of a companion is not what its record says (``path``: that file, ``problem``: what is wrong)."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path} {problem}")
        self.path, self.problem = path, problem


def label(folder: Path, key: str) -> str:
    """What the companion ``folder`` of entry ``key`` is, from its name ``<key>.<label>``: ``"decoded"``."""
    return folder.name.removeprefix(key).lstrip(".")


def recorded(folder: Path) -> bool:
    """Whether ``folder`` is a directory (not a link) holding a record (`RECORD`, written last by its maker): a
    companion glyphforge made, whole or damaged since. A folder without one is not glyphforge's."""
    return not folder.is_symlink() and (folder / RECORD).is_file()


def foreign(folder: Path) -> str | None:
    """What ``folder`` is when it exists but is no directory ("a symbolic link to /etc", "a file"), else None."""
    try:
        mode = folder.lstat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return f"a symbolic link to {os.readlink(folder)}"
    return None if stat.S_ISDIR(mode) else "a file, not a directory"


def write_record(folder: Path, key: str, files: dict[str, dict[str, Any]], **fields: Any) -> None:
    """Write the record of the companion in ``folder`` of entry ``key``: ``files`` (name: size and sha256, as far as
    the maker has them) completed with every other file of the folder, and the maker's own ``fields``."""
    files = dict(files)
    for path in sorted(folder.iterdir()):
        if path.name not in files:
            files[path.name] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
    record = {"key": key, **fields, "files": files}
    (folder / RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")


def read_record(folder: Path, key: str) -> dict[str, Any]:
    """Return the record of the companion in ``folder`` (a directory) once each file it records has its recorded size.

    Raises
    ------
    DamagedCompanionError
        No record (made by a glyphforge before recorded companions, or lost), not the record of ``key``'s
        companion, or a file missing or of another size.
    """
    path = folder / RECORD
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        sizes = {name: int(info["size"]) for name, info in record["files"].items()}
        if record["key"] != key:
            raise ValueError(f"not the record of the copy of {key[:12]}")
    except FileNotFoundError:
        raise DamagedCompanionError(path, "is missing: the copy has no checksums (made by an older glyphforge, or "
                                          "damaged)") from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise DamagedCompanionError(path, f"is not a copy's record ({error})") from None
    for name, size in sizes.items():
        try:
            found = (folder / name).stat().st_size
        except FileNotFoundError:
            raise DamagedCompanionError(folder / name, "is missing") from None
        if found != size:
            raise DamagedCompanionError(folder / name, f"is {found:,} bytes where the copy's record says {size:,} "
                                                       "(truncated or changed since it was made)")
    return dict(record)


def verify_record(folder: Path, key: str) -> list[tuple[Path, str]]:
    """Check every byte of the companion in ``folder`` of entry ``key`` against its record: what is wrong, as
    (path, message).

    Empty when it is whole, or when there is none. A ``folder`` that is not a directory is reported
    as not glyphforge's (with what to do), and left as it is.
    """
    what, copy = foreign(folder), f"{label(folder, key)} copy"
    if what is not None:
        return [(folder, f"is {what}, not glyphforge's {copy} of {key[:12]}: glyphforge neither reads nor changes "
                         "it. Remove it (rm, which leaves a link's target as it is) so that a copy can be made there")]
    if not folder.exists():
        return []
    advice = _REMOVE.format(folder=folder)
    try:
        record = read_record(folder, key)
    except DamagedCompanionError as error:
        return [(error.path, f"{error.problem}. {advice}")]
    problems = []
    for name, info in sorted(record["files"].items()):
        try:
            digest = sha256_file(folder / name)
        except OSError as error:
            problems.append((folder / name, f"cannot be read ({error.strerror or error}). {advice}"))
            continue
        if digest != info["sha256"]:
            problems.append((folder / name, f"sha256 differs from the {copy}'s record (changed on disk). {advice}"))
    return problems
