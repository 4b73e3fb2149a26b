"""The upstream files in ``<data dir>/raw/``: which glyphforge downloaded, whether each is the pinned file, removing.

Layout of ``<data dir>/raw/<dataset>/``::

    <filename>              an upstream file, downloaded by glyphforge or placed there by hand
    <filename>.part         a download not finished (the next fetch resumes it)
    .<filename>.lock        the download's lock (see glyphforge.cache.locks)
    .<filename>.record      what glyphforge knows of the file (JSON, below)

A record::

    {"downloaded": bool,              # glyphforge downloaded it (renamed its verified download into place)
     "source": str | null,            # where from (a download's URL or mirror path)
     "hash": str,                     # the pinned hash it was checked against
     "matches": bool,                 # whether it has that hash
     "size": int, "mtime_ns": int,    # the file it describes: its stamp (glyphforge._files.file_stamp)
     "ctime_ns": int, "inode": int}

A record describes the file only while the file's stamp is the record's (its size and
modification time, which a user may keep on other bytes, and its change time and inode, which
they cannot): a file replaced since (by hand) is hashed again and is no download. A download
writes its record (`record_download`, called by `glyphforge.pipelines.download.fetch`);
listing writes one for a file placed by hand once it has hashed it, so ``glyphforge cache
ls`` hashes each file at most once, while ``glyphforge cache verify`` (``rehash``) always
hashes. Where the folder is not writable no record is written and files are hashed each time.

Removing (`remove_downloads`, ``glyphforge cache gc --raw``) deletes only files
glyphforge downloaded whose record still describes them and that the cache holds an entry
of their dataset made since (`converted`), never one placed by hand: glyphforge deletes
only what it wrote itself.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import filelock

from glyphforge._files import atomic_path, file_stamp
from glyphforge.cache.entry import Entry
from glyphforge.cache.locks import LockTimeoutError, hold
from glyphforge.cache.manifest import MANIFEST
from glyphforge.hashes import check_hash


class PinnedFile(Protocol):
    """What `raw_files` reads of an upstream file's declaration (a `glyphforge.pipelines.resource.Resource`)."""

    @property
    def filename(self) -> str: ...

    @property
    def hash(self) -> str: ...

RECORD_SUFFIX = ".record"
PART_SUFFIX = ".part"

#: What each hash state means, for listings.
STATES = {
    "matches": "matches the pinned hash",
    "differs": "differs from the pinned hash (a custom copy: used only with --no-verify)",
    "unknown": "not a file of a registered dataset (not checked)",
    "partial": "a download not finished (the next fetch resumes it)",
}


@dataclass(frozen=True)
class RawFile:
    """One file of ``<data dir>/raw/<dataset>/``.

    Attributes
    ----------
    dataset
        The folder it is in (a dataset's name).
    path, size
        The file and its size in bytes.
    downloaded
        Whether glyphforge downloaded it (else it was placed by hand, or is unknown).
    state
        ``"matches"``, ``"differs"``, ``"unknown"`` or ``"partial"`` (see `STATES`).
    """

    dataset: str
    path: Path
    size: int
    downloaded: bool
    state: str

    @property
    def origin(self) -> str:
        """``"downloaded"`` or ``"placed"`` (by hand)."""
        return "downloaded" if self.downloaded else "placed"


def record_path(path: Path) -> Path:
    """Return the record of the upstream file ``path``: ``.<filename>.record`` beside it."""
    return path.with_name(f".{path.name}{RECORD_SUFFIX}")


def _write_record(path: Path, downloaded: bool, source: str | None, hash_: str, matches: bool) -> None:
    """Record what is known of ``path`` now; raises OSError when the folder is not writable."""
    record = {"downloaded": downloaded, "source": source, "hash": hash_, "matches": matches,
              **file_stamp(path.stat())}
    with atomic_path(record_path(path)) as temporary:
        temporary.write_text(json.dumps(record), encoding="utf-8")


def record_download(path: Path, hash_: str, source: str) -> None:
    """Record that glyphforge downloaded ``path`` from ``source`` and verified it against ``hash_``.

    A record that cannot be written is left out: the file then counts as placed by hand,
    which glyphforge never removes.
    """
    try:
        _write_record(path, True, source, hash_, True)
    except OSError:
        pass


def read_record(path: Path) -> dict[str, Any] | None:
    """Return the record of ``path`` if it still describes the file (the same `file_stamp`), else None."""
    try:
        record = json.loads(record_path(path).read_text(encoding="utf-8"))
        status = path.stat()
    except (OSError, ValueError):
        return None
    fields = {"downloaded": bool, "hash": str, "matches": bool}
    if not isinstance(record, dict) or not all(isinstance(record.get(name), kind) for name, kind in fields.items()):
        return None
    stamp = file_stamp(status)
    return record if all(record.get(name) == value for name, value in stamp.items()) else None


def raw_files(raw_root: Path, resources: Callable[[str], Iterable[PinnedFile]], *,
              rehash: bool = False) -> list[RawFile]:
    """List every upstream file under ``raw_root`` (``<data dir>/raw``) with its origin and hash state.

    Parameters
    ----------
    raw_root
        The raw folder; missing: nothing is listed.
    resources
        The upstream files a dataset declares, by its name (none for a folder no dataset owns).
    rehash
        Hash every known file again (``cache verify``) instead of trusting a record that still describes it.

    Returns
    -------
    list of RawFile
        By dataset, then file name.
    """
    found = []
    for folder in _listing(raw_root):
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        known = {resource.filename: resource for resource in resources(folder.name)} if _listing(folder) else {}
        for path in _listing(folder):
            if path.name.startswith(".") or not path.is_file():
                continue
            found.append(_describe(folder.name, path, known.get(path.name), rehash))
    return found


def _describe(dataset: str, path: Path, resource: PinnedFile | None, rehash: bool) -> RawFile:
    size = path.stat().st_size
    record = read_record(path)
    downloaded = bool(record and record["downloaded"])
    if path.name.endswith(PART_SUFFIX):
        return RawFile(dataset, path, size, True, "partial")
    if resource is None:
        return RawFile(dataset, path, size, downloaded, "unknown")
    if record is None or record["hash"] != resource.hash or rehash:
        matches = check_hash(path, resource.hash)[0]
        try:
            _write_record(path, downloaded, record["source"] if downloaded and record else None, resource.hash,
                          matches)
        except OSError:  # a folder this user may not write: hashed again next time
            pass
    else:
        matches = record["matches"]
    return RawFile(dataset, path, size, downloaded, "matches" if matches else "differs")


def converted(file: RawFile, entries: Iterable[Entry]) -> bool:
    """Whether ``entries`` hold one of ``file``'s dataset made since the file was downloaded (converted from it)."""
    try:
        downloaded_at = file.path.stat().st_mtime
    except OSError:
        return False
    return any(entry.kind == file.dataset and _made_at(entry) >= downloaded_at for entry in entries)


def _made_at(entry: Entry) -> float:
    try:
        return (entry.path / MANIFEST).stat().st_mtime
    except OSError:
        return 0.0


def remove_downloads(files: Iterable[RawFile], entries: Iterable[Entry]) -> list[RawFile]:
    """Delete each of ``files`` that glyphforge downloaded and has converted since (`converted`); return those.

    A file placed by hand, or replaced since it was downloaded, is never deleted, and
    neither is one whose download lock another process holds (it is fetching it). Making
    something new from a deleted file (another EMNIST split, another size of a set not
    prepared yet) downloads it again.
    """
    entries = list(entries)
    return [file for file in files if file.downloaded and file.state != "partial" and read_record(file.path)
            and converted(file, entries) and _remove(file)]


def remove_damaged(files: Iterable[RawFile]) -> list[RawFile]:
    """Delete each of ``files`` that glyphforge downloaded and that no longer has its pinned hash (``files`` hashed
    again: what ``cache verify`` reports damaged); return those. Never a file placed by hand or replaced since."""
    return [file for file in files if file.downloaded and file.state == "differs" and read_record(file.path)
            and _remove(file)]


def _remove(file: RawFile) -> bool:
    """Delete the download ``file`` and its record, unless another process holds its download lock (fetching it)."""
    lock = filelock.FileLock(file.path.with_name(f".{file.path.name}.lock"))
    try:
        with hold(lock, f"fetching {file.dataset}/{file.path.name}", 0):
            file.path.unlink()
            record_path(file.path).unlink(missing_ok=True)
    except LockTimeoutError:
        return False
    return True


def _listing(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []
