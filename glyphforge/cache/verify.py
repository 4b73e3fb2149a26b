"""What is wrong in a cache store on disk: what :meth:`CacheStore.scan` lists (`scan_store`), and what
:meth:`CacheStore.verify` finds (`check_store`), as `glyphforge.cache.problems.CacheProblem` s.

An entry is checked against its manifest (every data file there, of the recorded size and,
when re-hashed, sha256), and its companions against their records
(`glyphforge.cache.companions.check_companions`; a link or a file in a companion's place is
`FOREIGN`: named, not glyphforge's). What this user may not read is a problem
too, `UNREADABLE`: it could not be checked (and is not known to be broken).
"""
from __future__ import annotations

from pathlib import Path

from glyphforge._files import sha256_file
from glyphforge.cache.companions import check_companions, entry_dirs
from glyphforge.cache.entry import Entry, unreadable_text
from glyphforge.cache.layout import kind_dirs, listable
from glyphforge.cache.manifest import MANIFEST, DamagedManifestError, is_plain_name, read_manifest
from glyphforge.cache.problems import CORRUPT, FOREIGN, UNREADABLE, CacheProblem, Scan

_UNREADABLE = "you may not read it: "


def scan_store(root: Path) -> Scan:
    """List the store at ``root`` once: its complete entries, the folders and entries this user may not read, and the
    manifests failing their checks (see `CacheStore.scan`)."""
    return Scan(*read_store(root))


def check_store(root: Path) -> list[CacheProblem]:
    """Check the store at ``root``: every manifest, data file and companion (see `CacheStore.verify`)."""
    entries, problems = read_store(root)
    for entry in entries:
        problems.extend(check_entry_files(entry, rehash=True))
        problems.extend(CacheProblem(where, problem, CORRUPT if ours else FOREIGN, companion=label)
                        for where, problem, label, ours in check_companions(entry.path, entry.key))
    return problems


def damaged(entry: Entry) -> bool:
    """Whether `check_store` finds a data file of ``entry`` damaged (missing, of another size or sha256): what ``gc``
    removes. A file this user may not read is not known to be damaged."""
    return any(not problem.unreadable for problem in check_entry_files(entry, rehash=True))


def read_store(root: Path, kind: str | None = None) -> tuple[list[Entry], list[CacheProblem]]:
    """The complete entries of the store at ``root`` (of ``kind`` only, when given) by kind then creation time, and
    what `scan_store` leaves out."""
    kinds = kind_dirs(root) if kind is None else [path for path in [root / kind] if is_plain_name(kind)
                                                   and path.is_dir()]
    folders = [root, *kinds] if root.is_dir() else []
    problems = [CacheProblem(folder, _UNREADABLE + unreadable_text(folder), UNREADABLE)
                for folder in folders if not listable(folder)]
    entries = []
    for path in entry_dirs(root, kinds):
        try:
            entries.append(Entry(path, read_manifest(path)))
        except DamagedManifestError as error:
            problems.append(CacheProblem(path / MANIFEST, str(error)))
        except PermissionError:
            problems.append(CacheProblem(path, _UNREADABLE + unreadable_text(path), UNREADABLE))
    entries.sort(key=lambda entry: (entry.kind, entry.manifest.get("created", "")))
    return entries, problems


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
                problems.append(CacheProblem(path, _UNREADABLE + unreadable_text(path), UNREADABLE))
                continue
            if digest != info["sha256"]:
                problems.append(CacheProblem(path, "sha256 differs from the manifest (corrupted)"))
    return problems
