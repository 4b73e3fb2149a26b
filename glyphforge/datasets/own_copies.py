"""Own copies: upstream files used unchecked (``verify=False``), keyed by their own bytes and found again by loads.

A dataset prepared from files that are not upstream's (a custom copy placed in
``<data dir>/raw/<dataset>/`` or given as ``archives=``, with ``verify=False``,
``--no-verify``) is cached under the key of *those* files: the ``source`` param names, for
each file, the pinned hash when the file is upstream's and ``sha256:<hex>`` of its bytes
when it is not (:meth:`OwnCopy.source`). So an own copy never stands in for upstream's
entry, nor for another own copy; files that are upstream's keep upstream's key, whatever
``verify`` says. A file is hashed once for both (pinned and sha256, one read). Datasets
whose files make separate entries key each entry by its own files only (:attr:`OwnCopy.own`):
an Omniglot set's ``source`` is its zip's hash, a backgrounds entry adds ``source``
``{name: sha256:<hex>}`` of its own images to upstream's params (none: upstream's key).

Which copy a load serves: a prepare that used own files leaves a record,
``<data dir>/raw/<dataset>/.own-copy.json``, naming them (path, stamp,
sha256, whether each is the pinned file); a prepare from upstream's files removes it (a
prepare of some of the files, ``covered`` in :func:`remember`, changes only what it says of them). A
load with a record looks at the files it names (:func:`in_use`): an unchanged one (the same
:func:`~glyphforge._files.file_stamp`: size and mtime, which a user may keep on other bytes, and
ctime and inode, which they cannot) keeps its recorded hash, a changed one is hashed again (and the
record updated), a missing one keeps its recorded hash. So own files replaced in place are served
(prepared from them when the load may prepare), files replaced by upstream's serve
upstream's entry, and without a record a load serves upstream's entry.

An entry made from own files says so (``meta["verified"]`` False): :func:`announce` logs a
WARNING "your own copy (unverified)" once per process per entry when one is loaded, and
``glyphforge info`` and ``cache ls`` mark it (:func:`note`).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from glyphforge._checks import PathLike
from glyphforge._files import atomic_path, existing_file, file_stamp
from glyphforge.cache import Entry, raw
from glyphforge.context import DataContext
from glyphforge.hashes import file_hashes, normalise_hash, parse_hash
from glyphforge.pipelines.resource import Resource

#: What every listing and load calls an entry made from files that are not upstream's.
OWN_COPY = "your own copy (unverified)"
#: The record of the own copy in use, in ``<data dir>/raw/<dataset>/``.
RECORD = ".own-copy.json"

_logger = logging.getLogger(__name__)
_announced: set[str] = set()
_announced_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class SourceFile:
    """A file a prepare used (or a record names): where, its stamp then, its sha256, if it is upstream's.

    ``stamp`` is its :func:`~glyphforge._files.file_stamp` (empty: none recorded, it is hashed again).
    ``sha256`` is None only for a file known to be upstream's from its download record (never hashed for a key).
    """

    path: Path
    stamp: Mapping[str, int]
    sha256: str | None
    matches: bool


@dataclasses.dataclass(frozen=True)
class OwnCopy:
    """The local files of a dataset's resources, by resource name (those to be fetched are not in it)."""

    files: Mapping[str, SourceFile]

    @property
    def verified(self) -> bool:
        """Every file is upstream's (an empty copy too: everything is fetched, verified)."""
        return all(file.matches for file in self.files.values())

    @property
    def own(self) -> dict[str, str]:
        """``{resource name: sha256:<hex>}`` of the files that are not upstream's (none: an upstream copy)."""
        return {name: file.sha256 for name, file in self.files.items() if not file.matches and file.sha256}

    def source(self, resources: Mapping[str, Resource]) -> dict[str, str] | None:
        """The hashes that key entries made from these files: None when all are upstream's (upstream's key)."""
        if self.verified:
            return None
        own = self.own
        return {name: own.get(name, resource.hash) for name, resource in resources.items()}

    def checked(self, files: Mapping[str, tuple[Path, bool]]) -> dict[str, tuple[Path, bool]]:
        """``files`` (``{name: (path, hash checked)}``) with every file found to be upstream's counted as checked."""
        return {name: (path, checked or (name in self.files and self.files[name].matches))
                for name, (path, checked) in files.items()}

    def paths(self) -> dict[str, Path]:
        """The files by resource name, as ``archives=`` takes them."""
        return {name: file.path for name, file in self.files.items()}


def describe(path: Path, resource: Resource, known: SourceFile | None = None, *, trust: bool = True) -> SourceFile:
    """Return what ``path`` is: ``known`` while it still describes it (same path and stamp), else hashed.

    A file whose download record (see :mod:`glyphforge.cache.raw`) says it is upstream's is not hashed.
    With ``trust`` False (a prepare, which may write an entry under upstream's key) no record makes a
    file upstream's: only its hash does. A file whose size is not upstream's pinned size is not
    upstream's: only its sha256 is computed.
    """
    status = path.stat()
    if _still(known, path, status, trust):
        assert known is not None
        return known
    record = raw.read_record(path) if trust else None
    if record is not None and record["matches"] and record["hash"] == resource.hash:
        return SourceFile(path, file_stamp(status), None, True)
    if resource.size is not None and status.st_size != resource.size:
        [own] = file_hashes(path, ["sha256"])
        return SourceFile(path, file_stamp(status), own, False)
    pinned, own = file_hashes(path, [parse_hash(resource.hash)[0], "sha256"])
    return SourceFile(path, file_stamp(status), own, pinned == normalise_hash(resource.hash))


def _still(known: SourceFile | None, path: Path, status: os.stat_result, trust: bool) -> bool:
    """Whether ``known`` still describes ``path`` (of ``status``): see :func:`describe`."""
    return (known is not None and (trust or not known.matches)
            and (known.path, dict(known.stamp)) == (path, file_stamp(status)))


@dataclasses.dataclass(frozen=True)
class Choice:
    """The local files a prepare uses unchecked (:func:`choose`), before they are hashed (:meth:`describe`).

    ``files``: by resource name, the file and the record's description of it (None: not recorded);
    ``gone``: recorded files that are no longer there (their recorded description stands); ``order``: the
    names of both in the resources' order.
    """

    files: Mapping[str, tuple[Path, Resource, SourceFile | None]]
    gone: Mapping[str, SourceFile]
    order: tuple[str, ...]

    @property
    def paths(self) -> dict[str, Path]:
        """The files that are there, by resource name."""
        return {name: path for name, (path, _, _) in self.files.items()}

    @property
    def hashes(self) -> bool:
        """Whether :meth:`describe` reads a file (one not described by the record as it is now)."""
        return any(not _still(known, path, path.stat(), False) for path, _, known in self.files.values())

    def describe(self) -> OwnCopy:
        """The copy: each file described (hashed unless the record still describes it, see :func:`describe`)."""
        return OwnCopy({name: self.gone[name] if name in self.gone else describe(*self.files[name], trust=False)
                        for name in self.order})


def chosen(dataset: str, resources: Mapping[str, Resource], context: DataContext,
           given: Mapping[str, PathLike]) -> OwnCopy:
    """The local files a prepare with ``context`` uses unchecked, described: :func:`choose`, then
    :meth:`Choice.describe`."""
    return choose(dataset, resources, context, given).describe()


def choose(dataset: str, resources: Mapping[str, Resource], context: DataContext,
           given: Mapping[str, PathLike]) -> Choice:
    """The local files a prepare with ``context`` uses unchecked (none with ``verify``: only upstream's are used).

    Each is the one ``given``, else the one placed in the raw dir, else the one the record names (the
    copy loads serve); a resource with none is fetched (verified) and not in the result. A file unchanged
    since the record was written is not hashed again, and one gone since keeps its recorded hash (its
    entries are found without it); one taken for upstream's is hashed (see :func:`describe`).

    Raises
    ------
    FileNotFoundError, IsADirectoryError
        A file ``given`` is not there, nor the one the record names.
    """
    if context.verify:
        return Choice({}, {}, ())
    raw_dir = context.raw_dir(dataset)
    recorded = _read(raw_dir, resources)
    files, gone = {}, {}
    for name, resource in resources.items():
        known, placed = recorded.get(name), raw_dir / resource.filename
        path = (Path(given[name]).expanduser().absolute() if name in given else placed if placed.is_file()
                else known.path if known else None)
        if path is not None and known is not None and known.path == path and not path.exists():
            gone[name] = known
        elif path is not None:
            files[name] = (existing_file(path, f"a copy of {resource.url}"), resource, known)
    return Choice(files, gone, tuple(name for name in resources if name in files or name in gone))


def remember(dataset: str, context: DataContext, copy: OwnCopy, covered: Iterable[str] | None = None) -> None:
    """After a prepare: record ``copy`` as the one loads serve, or remove the record when upstream's was used.

    ``covered``: the resources the prepare chose files for, when it did not cover them all (datasets whose
    files make separate entries, Omniglot's sets and the backgrounds); the record keeps what it says of the others.
    """
    raw_dir = context.raw_dir(dataset)
    if covered is not None:
        names = set(covered)
        kept = {name: file for name, file in _read(raw_dir, None).items() if name not in names}
        copy = OwnCopy({**kept, **copy.files})
    if copy.verified:
        try:
            (raw_dir / RECORD).unlink(missing_ok=True)
        except OSError:
            pass
        return
    if not _write(raw_dir, copy):
        _logger.warning("cannot write %s: loads of %s will not find your own copy (unverified) of it; make the "
                        "folder writable and prepare it again", raw_dir / RECORD, dataset)


def in_use(dataset: str, resources: Mapping[str, Resource], context: DataContext) -> OwnCopy:
    """The copy loads of ``dataset`` serve (see the module docstring): none recorded, or all upstream's: upstream's."""
    raw_dir = context.raw_dir(dataset)
    recorded = _read(raw_dir, resources)
    files = {name: describe(file.path, resources[name], file) if file.path.is_file() else file
             for name, file in recorded.items()}
    if files != recorded:
        _write(raw_dir, OwnCopy({**_read(raw_dir, None), **files}))  # what it says of other resources stays
    return OwnCopy(files)


def unverified(meta: Mapping[str, Any]) -> bool:
    """Whether an entry's meta says it was made from files that are not upstream's (``verified`` False; Omniglot's
    ``verified_archive``)."""
    return any(meta.get(name) is False for name in ("verified", "verified_archive"))


def note(meta: Mapping[str, Any]) -> str:
    """``" (your own copy (unverified))"`` for an entry made from own files, else ``""``: what listings append."""
    return f" ({OWN_COPY})" if unverified(meta) else ""


def announce(entry: Entry, label: str, raw_dir: Path | None, fix: str | None = None) -> Entry:
    """Log, once per process per entry, a WARNING that the loaded ``entry`` (``label``, its files in ``raw_dir``)
    is an own copy; return it. ``fix``: what to do for upstream's instead (default: move the files out of
    ``raw_dir`` and prepare the entry's kind again)."""
    if unverified(entry.meta):
        with _announced_lock:
            first = entry.key not in _announced
            _announced.add(entry.key)
        if first:
            _logger.warning(
                "%s (entry %s) is %s: it was made from files that are not upstream's, used with verify=False "
                "(--no-verify). %s", label, entry.key[:12], OWN_COPY,
                fix or f"To use upstream's, move them out of {raw_dir} and run `prepare-data {entry.kind}`")
    return entry


def said(key: str) -> None:
    """Count entry ``key`` as announced in this process: the process it came from said so (a pickled reader)."""
    with _announced_lock:
        _announced.add(key)


def _read(raw_dir: Path, resources: Mapping[str, Resource] | None) -> dict[str, SourceFile]:
    """The files the record in ``raw_dir`` names, of ``resources`` (None: all; none when there is no record, or
    it is not one glyphforge wrote)."""
    try:
        document = json.loads((raw_dir / RECORD).read_text(encoding="utf-8"))
        files = {name: SourceFile(raw_dir / item["path"],  # no stamp recorded: hashed again
                                  {field: int(value) for field, value in (item.get("stamp") or {}).items()},
                                  None if item["matches"] is True else normalise_hash(item["sha256"]),
                                  item["matches"] is True)
                 for name, item in document["files"].items() if resources is None or name in resources}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    return files


def _write(raw_dir: Path, copy: OwnCopy) -> bool:
    """Write the record of ``copy`` in ``raw_dir`` (paths in it relative); False when the folder is not writable."""
    files = {name: {"path": str(file.path.relative_to(raw_dir) if file.path.parent == raw_dir else file.path),
                    "stamp": dict(file.stamp), "sha256": file.sha256, "matches": file.matches}
             for name, file in copy.files.items()}
    try:
        raw_dir.mkdir(parents=True, exist_ok=True)
        with atomic_path(raw_dir / RECORD) as temporary:
            temporary.write_text(json.dumps({"files": files}), encoding="utf-8")
    except OSError:
        return False
    return True
