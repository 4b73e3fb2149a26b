"""What is wrong in a cache store: the `CacheProblem` s :meth:`CacheStore.verify` (`check_store`) finds.

An entry is checked against its manifest (every data file there, of the recorded size and,
when re-hashed, sha256), and its companions by their own checks
(`glyphforge.cache.companions.check_companions`: each against its record). What
this user may not read is a problem too, with ``unreadable`` True: it could not be checked
(and is not known to be broken).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from glyphforge._files import sha256_file
from glyphforge.cache.companions import check_companions, entry_dirs
from glyphforge.cache.entry import Entry, UnreadableEntryError, read_entry, unreadable_text
from glyphforge.cache.layout import kind_dirs, listable
from glyphforge.cache.manifest import MANIFEST, BrokenManifestError, read_manifest

_UNREADABLE = "you may not read it: "


@dataclass(frozen=True)
class CacheProblem:
    """One thing :meth:`CacheStore.verify` found wrong; ``unreadable``: this user may not read it (not known broken)."""

    path: Path
    message: str
    unreadable: bool = False
    companion: str = ""
    """The label of the entry's companion the problem is in (``"decoded"``), "" for the entry's own files."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def find_unreadable(root: Path) -> list[CacheProblem]:
    """Name every folder and entry of the store at ``root`` this user may not read (see `CacheStore.unreadable`)."""
    folders = [root, *kind_dirs(root)] if root.is_dir() else []
    problems = [CacheProblem(folder, _UNREADABLE + unreadable_text(folder), unreadable=True)
                for folder in folders if not listable(folder)]
    for path in entry_dirs(root):
        try:
            read_entry(path)
        except UnreadableEntryError:
            problems.append(CacheProblem(path, _UNREADABLE + unreadable_text(path), unreadable=True))
    return problems


def check_store(root: Path) -> list[CacheProblem]:
    """Check the store at ``root``: every manifest, data file and companion (see `CacheStore.verify`)."""
    problems = find_unreadable(root)
    for path in entry_dirs(root):
        try:
            entry = Entry(path, read_manifest(path))
        except BrokenManifestError as error:
            problems.append(CacheProblem(path / MANIFEST, str(error)))
            continue
        except PermissionError:
            continue  # named by find_unreadable()
        problems.extend(check_entry_files(entry, rehash=True))
        problems.extend(CacheProblem(where, problem, companion=label)
                        for where, problem, label in check_companions(path, entry.key))
    return problems


def check_entry_files(entry: Entry, rehash: bool) -> list[CacheProblem]:
    problems = []
    for name, info in sorted(entry.manifest["files"].items()):
        path = entry.path / name
        if not path.is_file():
            problems.append(CacheProblem(path, "missing (deleted, or the disk lost it)"))
        elif path.stat().st_size != info["size"]:
            problems.append(
                CacheProblem(path, f"size {path.stat().st_size} bytes, manifest says {info['size']} (truncated?)")
            )
        elif rehash:
            try:
                digest = sha256_file(path)
            except PermissionError:
                problems.append(CacheProblem(path, _UNREADABLE + unreadable_text(path), unreadable=True))
                continue
            if digest != info["sha256"]:
                problems.append(CacheProblem(path, "sha256 differs from the manifest (corrupted)"))
    return problems
