"""Export a built dataset as ``.npy`` files for memory-mapped reading, as Parquet files, or as the files
detectors and trackers read (COCO, YOLO, MOTChallenge), shard by shard.

``export(ds, directory)`` writes ``<directory>/<array name>.npy`` for every array
(``images.npy``, ``labels.npy``, ...) and ``<directory>/metadata.json``::

    {"key": ..., "kind": ..., "n_examples": ..., "arrays": {name: {"dtype", "shape"}},
     "metadata": <the spec's metadata()>, "params": <the build's parameters>, "format": "npy"}

``export(ds, directory, format="parquet")`` writes ``data-00000-of-0000N.parquet`` files
instead (`glyphforge.builds.export.parquet`, the ``hf`` extra), named in ``metadata.json``'s
``"files"``, for ``datasets.load_dataset("parquet", data_files=...)`` and other Parquet readers.

``format="coco"``, ``"yolo"`` or ``"mot"`` (MOT: videos only) write a scene dataset's images
as PNG files and its boxes as those formats' annotation files, beside ``metadata.json`` with
the number of files, ``"n_files"``: see `glyphforge.builds.export.coco`,
`glyphforge.builds.export.yolo` and `glyphforge.builds.export.mot`. A dataset the format cannot
take (no boxes; still scenes as MOT) raises `ExportFormatError` before anything is touched.

``numpy.load(directory / "images.npy", mmap_mode="r")`` then gives memory-speed
random access without decoding anything. Each ``.npy`` file gets its header, then the
rows of one decoded shard after another, written sequentially (no memory map: the
export's resident memory stays at one shard, not the files' size).

Safety, in this order:

* ``directory`` is resolved once, up front (``~``, ``..`` and symlinks: an export into
  a symlinked directory lands in the link's target and the link stays a link).
* It may be missing, an empty directory, or an earlier export (``metadata.json`` with
  an export's fields and exactly the ``.npy`` or ``.parquet`` files it names, or the
  ``n_files`` files of a detection format's names (in its folders, no symlink), nothing else;
  replaced only with ``overwrite``; one of the same dataset in the same format is kept).
  Anything else (a file, a directory with other files, the current directory, the data
  dir, a directory holding the data dir or the dataset's entry) raises `ExportTargetError` before anything is touched.
* Exports of one directory take turns: a file lock beside it
  (``<parent>/.<name>.export.lock``, see `glyphforge.cache.locks`), or inside it
  (``.glyphforge-export.lock``, not counted as a file of the directory) when it is a
  directory in one this process may not write, such as a mount point in ``/``.
* The export is staged, then published: a missing ``directory`` is written as a
  hidden ``<parent>/.export-<name>-<random>`` renamed into place; an existing one (an
  empty directory, a mount point) as a hidden ``.glyphforge-export-<random>``
  inside it whose files are moved up, ``metadata.json`` last. So a ``directory``
  with ``metadata.json`` is always a whole export, and a failed export (a full disk)
  leaves ``directory`` as it was. Staging
  directories left by an interrupted export of ``directory`` are removed by the next,
  under the lock; those of other directories are never matched.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import filelock
import numpy as np

from glyphforge import config
from glyphforge._checks import PathLike
from glyphforge._files import make_temp_dir, path_too_long, shown_path, unwritable, writing
from glyphforge.builds.export.coco import COCO
from glyphforge.builds.export.frames import DetectionFormat
from glyphforge.builds.export.mot import MOT
from glyphforge.builds.export.parquet import write_parquet_files
from glyphforge.builds.export.yolo import YOLO
from glyphforge.builds.reading.protocols import ShardReader
from glyphforge.cache.locks import hold, holder_path
from glyphforge.context import DataContext
from glyphforge.errors import ArgumentError
from glyphforge.hf import require
from glyphforge.textfmt import count, human_size

#: The formats that write a scene dataset's images and boxes for detectors and trackers.
DETECTION_FORMATS: dict[str, DetectionFormat] = {detection.name: detection for detection in (COCO, YOLO, MOT)}
FORMATS = ("npy", "parquet", *DETECTION_FORMATS)
METADATA_FILE = "metadata.json"
#: The fields of an export's ``metadata.json``.
METADATA_FIELDS = ("key", "kind", "n_examples", "arrays", "metadata", "params")
#: Staging inside the target: ``<target>/.glyphforge-export-<random>``.
_INSIDE_PREFIX = ".glyphforge-export-"
#: The lock of exports of a directory in a directory this process may not write: ``<target>/<this>``.
_INSIDE_LOCK = ".glyphforge-export.lock"
#: Staging beside a missing target: ``<parent>/.export-<target name>-<random>`` (as earlier versions named it).
_BESIDE_PREFIX = ".export-"
#: The random part `make_temp_dir` adds: no ``-`` and no ``.``, so a staging name has exactly one owner
#: (``.export-foo-bar-x1y2`` is ``foo-bar``'s, never ``foo``'s).
_RANDOM = re.compile(r"[a-z0-9_]+")
_LISTED = 5
_OWN_DIRECTORY = "An export needs a directory of its own: give a new or empty one"


class ExportTargetError(ArgumentError, FileExistsError):
    """The export's directory holds something an export may not replace, or is a file; nothing was touched."""


def export(dataset: ShardReader, directory: PathLike, *, context: DataContext, format: str = "npy",
           overwrite: bool = False) -> Path:
    """Write ``dataset``'s arrays as ``.npy`` files and ``metadata.json`` into ``directory``; return it.

    Parameters
    ----------
    dataset
        A built dataset.
    directory
        Where the files go (symlinks followed). It must not exist, or be an empty
        directory, or hold an earlier export: of the same dataset, it is returned as
        it is; of another, ``overwrite`` must be True.
    context
        The caller's data context: its data dir (on this disk) is refused as a target, as the dataset's is.
    format
        ``"npy"``, ``"parquet"`` (needs the ``hf`` extra: `glyphforge.builds.export.parquet`), or for scene
        datasets ``"coco"``, ``"yolo"`` or ``"mot"`` (videos; see the module docstring).
    overwrite
        Replace an earlier export (of any dataset). Nothing else is ever replaced.

    Returns
    -------
    Path
        The resolved directory.

    Raises
    ------
    ExportTargetError
        ``directory`` is a file, holds other files, holds another export (or this one in
        another format) and ``overwrite`` is False, or is (or holds) the current directory,
        the data dir or the dataset's entry. Nothing was touched.
    ExportFormatError
        ``dataset`` has no boxes for ``"coco"`` or ``"yolo"``, or is no video dataset for ``"mot"``. Nothing was
        touched.
    MissingExtraError
        ``"parquet"`` without pyarrow and datasets (``pip install "glyphforge[hf]"``), or ``"coco"`` of a dataset
        with masks without pycocotools (``pip install "glyphforge[coco]"``). Nothing was touched.
    StorageError
        The disk is full or read-only, or permission is denied; nothing is left behind.
    LockTimeoutError
        Another export of ``directory`` ran longer than the lock timeout.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    if format == "parquet":
        require("Exporting to Parquet")
    if format in DETECTION_FORMATS:
        DETECTION_FORMATS[format].check(dataset)
    target = Path(directory).expanduser().absolute()
    too_long = path_too_long(target)
    if too_long:
        raise ExportTargetError(f"cannot export to {shown_path(target)}: {too_long} (ENAMETOOLONG). Give a shorter "
                                "path")
    target = target.resolve()
    _refuse_protected(target, dataset, context)
    fix = (f"The export needs about {human_size(dataset.nbytes)}: export to a disk with room that you can write "
           "to, and run again; nothing was left behind")
    with writing(target, fix):
        if _existing_export(target, (dataset.key, format), overwrite):  # refuse or return before touching anything
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        with _turn(target):
            if _existing_export(target, (dataset.key, format), overwrite):  # another export finished while we waited
                return target
            _remove_leftovers(target)
            _stage_and_publish(dataset, target, format)
    return target


# -- what the target may be ------------------------------------------------------
def _refuse_protected(target: Path, dataset: ShardReader, context: DataContext) -> None:
    """Refuse the dataset's entry (and inside it), its cache, its data dir, the data dir of ``context`` and the
    current directory, and their parents.

    Checked before anything else, so even an empty current directory is refused.
    """
    entry = dataset.path.resolve()
    if entry in target.parents:
        raise ExportTargetError(f"refusing to export to {target}: it is inside the dataset's cache entry {entry}. "
                                f"{_OWN_DIRECTORY}")
    places = {entry: "the dataset's cache entry", entry.parents[1]: "the cache",
              entry.parents[2]: "the dataset's data dir", Path.cwd().resolve(): "the current directory",
              context.data_dir.resolve(): "the data dir"}  # a URL data dir's: its local one, under the local cache
    if target in places:
        relation = f"it is {places[target]}"
    else:
        held = [(place, what) for place, what in places.items() if target in place.parents]
        if not held:
            return
        relation = f"it holds {held[0][1]}, {held[0][0]}"
    try:
        listing = _listing(list(target.iterdir()))
    except OSError:
        listing = "cannot be listed"
    raise ExportTargetError(f"refusing to export to {target}: {relation}, and {listing}. {_OWN_DIRECTORY}")


def _listing(entries: list[Path]) -> str:
    """``"holds 3 entries (a, b, c)"``, naming the first few, or ``"is empty"``."""
    if not entries:
        return "is empty"
    names = sorted(entry.name for entry in entries)
    more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return f"holds {count(len(names), 'entry', 'entries')} ({', '.join(names[:_LISTED])}{more})"


def _existing_export(target: Path, wanted: tuple[str, str], overwrite: bool) -> bool:
    """Return True when ``target`` holds a whole export ``wanted`` (key, format) to keep; raise when it may not be
    written.

    False means: missing, empty (but for staging of ours), or an earlier export that
    ``overwrite`` replaces.
    """
    if not target.exists():
        _refuse_file_ancestor(target)
        return False
    if not target.is_dir():
        raise ExportTargetError(f"cannot export to {target}: it is a file, not a directory. Give a new or empty "
                                "directory")
    others = _contents(target)
    if not others:
        _refuse_unwritable(target, target)
        return False
    exported = _exported(target)
    if exported == wanted and not overwrite:
        return True
    if exported is not None:
        if overwrite:
            return False
        (key, format), (other, other_format) = wanted, exported
        what = (f"this dataset's export as {other_format}, not {format}" if other == key else
                f"an export of another dataset ({other[:12]}), not of {key[:12]}")
        raise ExportTargetError(f"refusing to export to {target}: it holds {what}. Give a new or empty directory, "
                                "or overwrite=True (--overwrite) to replace that export")
    raise ExportTargetError(
        f"refusing to export to {target}: it {_listing(others)} that no export wrote, and an export replaces only "
        "an earlier glyphforge export or an empty directory, even with --overwrite. Give a new or empty directory, "
        "or move those files away")


def _refuse_file_ancestor(target: Path) -> None:
    """Refuse a missing ``target`` whose nearest existing ancestor is a file (it could not be created)."""
    ancestor = next(folder for folder in target.parents if folder.exists())
    if not ancestor.is_dir():
        raise ExportTargetError(f"cannot export to {target}: {ancestor} is a file, not a directory. Give a "
                                "directory path")
    _refuse_unwritable(ancestor, target)


def _refuse_unwritable(folder: Path, target: Path) -> None:
    """Refuse ``target`` when this user may not write in ``folder``, where it would be made (or it is, empty)."""
    why = unwritable(folder)
    if why:
        where = "" if folder == target else f" (to be made in {folder})"
        raise ExportTargetError(f"cannot export to {target}{where}: {why}. Give a directory you can write to")


def _exported(directory: Path) -> tuple[str, str] | None:
    """The key and format of the export ``directory`` holds: exactly ``metadata.json`` and the files it names (or, of
    a detection format, its ``n_files`` files by the format's names)."""
    try:
        document: Any = json.loads((directory / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(document, dict) and all(field in document for field in METADATA_FIELDS)
            and isinstance(document["key"], str) and isinstance(document["arrays"], dict)):
        return None
    format = document.get("format", "npy")
    if format in DETECTION_FORMATS:
        n_files = document.get("n_files")
        whole = isinstance(n_files, int) and _holds_only(directory, DETECTION_FORMATS[format].files, n_files)
        return (document["key"], format) if whole else None
    files = document.get("files") if format == "parquet" else [f"{name}.npy" for name in document["arrays"]]
    if not (isinstance(files, list) and all(isinstance(name, str) and name.endswith(f".{format}") for name in files)):
        return None
    present = _contents(directory)
    whole = {entry.name for entry in present} == {METADATA_FILE, *files} and all(
        entry.is_file() and not entry.is_symlink() for entry in present)
    return (document["key"], format) if whole else None


def _holds_only(directory: Path, names: re.Pattern[str], n_files: int) -> bool:
    """Whether ``directory`` holds ``metadata.json`` and exactly ``n_files`` more files, each at a path (relative,
    ``/``-separated) ``names`` matches, in folders: no symlink, nothing else (an empty folder is not counted)."""
    found = 0
    pending = [(entry, entry.name) for entry in _contents(directory) if entry.name != METADATA_FILE]
    while pending:
        entry, relative = pending.pop()
        if entry.is_symlink():
            return False
        if entry.is_dir():
            pending.extend((child, f"{relative}/{child.name}") for child in entry.iterdir())
        elif entry.is_file() and names.fullmatch(relative) and found < n_files:
            found += 1
        else:
            return False
    document = directory / METADATA_FILE
    return found == n_files and document.is_file() and not document.is_symlink()


# -- staging and the lock ---------------------------------------------------------------
def _contents(target: Path) -> list[Path]:
    """What ``target`` holds but for the staging directories and the lock of its exports."""
    own = {_INSIDE_LOCK, holder_path(Path(_INSIDE_LOCK)).name}
    return [entry for entry in target.iterdir() if entry.name not in own and not _is_staging(entry, target)]


def _is_staging(path: Path, target: Path) -> bool:
    """True for a staging directory of an export of ``target`` (inside it, or beside it), and only those."""
    if path.parent == target:
        prefix = _INSIDE_PREFIX
    elif path.parent == target.parent:
        prefix = f"{_BESIDE_PREFIX}{target.name}-"
    else:
        return False
    if not (path.name.startswith(prefix) and _RANDOM.fullmatch(path.name[len(prefix):])):
        return False
    return path.is_dir() and not path.is_symlink()


def _lock_path(target: Path) -> Path:
    """Beside ``target``; inside it when it is a directory in one this process may not write (a mount point)."""
    if target.is_dir() and not os.access(target.parent, os.W_OK):
        return target / _INSIDE_LOCK
    return target.parent / f".{target.name}.export.lock"


@contextlib.contextmanager
def _turn(target: Path) -> Iterator[None]:
    """Hold the lock of exports of ``target``, waiting as long as the lock timeout."""
    lock_path = _lock_path(target)
    lock_path.touch(exist_ok=True)  # a read-only or forbidden parent fails here, named by the caller's writing()
    with hold(filelock.FileLock(lock_path), f"exporting to {target}", config.lock_timeout()):
        yield


def _remove_leftovers(target: Path) -> None:
    """Remove staging directories of interrupted exports of ``target`` (call holding its lock)."""
    places = [target.parent, target] if target.is_dir() else [target.parent]
    for place in places:
        for path in place.iterdir():
            if _is_staging(path, target):
                shutil.rmtree(path)


def _stage_and_publish(dataset: ShardReader, target: Path, format: str) -> None:
    """Write the export in a staging directory, then publish it at ``target``; on failure remove the staging.

    A storage error passes on, to be said after the cleanup (so with the free space then).
    """
    if target.is_dir():
        staging = make_temp_dir(_INSIDE_PREFIX, target)
    else:
        staging = make_temp_dir(f"{_BESIDE_PREFIX}{target.name}-", target.parent)
    try:
        if format == "npy":
            write_npy_files(dataset, staging)
        else:
            _write_document(dataset, staging, {"format": format, **_write_files(dataset, staging, format)})
        if staging.parent == target:
            _move_up(staging, target)
        else:
            os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _write_files(dataset: ShardReader, staging: Path, format: str) -> dict[str, Any]:
    """Write ``dataset`` as Parquet or a detection ``format`` into ``staging``; return what ``metadata.json`` says of
    the files."""
    if format == "parquet":
        return {"files": write_parquet_files(dataset, staging)}
    detection = DETECTION_FORMATS[format]
    return {"n_files": detection.write(dataset, detection.check(dataset), staging)}


def _move_up(staging: Path, target: Path) -> None:
    """Replace ``target``'s files and folders (an earlier export, or none) with ``staging``'s; ``metadata.json`` goes
    last."""
    old = _contents(target)
    (target / METADATA_FILE).unlink(missing_ok=True)  # from here on the directory is no whole export
    new = {entry.name for entry in staging.iterdir()}
    for name in sorted(new - {METADATA_FILE}):
        if (target / name).is_dir() or (staging / name).is_dir():  # a folder is not replaced by a rename
            _remove(target / name)
        os.replace(staging / name, target / name)
    for entry in old:
        if entry.name not in new:
            _remove(entry)
    os.replace(staging / METADATA_FILE, target / METADATA_FILE)
    staging.rmdir()


def _remove(path: Path) -> None:
    """Remove the file or folder (of an earlier export) at ``path``, if there is one."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def write_npy_files(dataset: ShardReader, staging: Path) -> None:
    """Write ``<name>.npy`` for every array of ``dataset`` and ``metadata.json`` into the directory ``staging``.

    Shard after shard, sequentially: the resident memory stays at one decoded shard. Also
    the layout of a decoded copy (`glyphforge.builds.decoded_copy.life`).
    """
    reader = dataset.reopened(cache_shards=0)
    n = len(reader)
    dtypes = {name: reader.dtype(name) for name in reader.layout}
    with contextlib.ExitStack() as files:
        outputs = {name: files.enter_context(open(staging / f"{name}.npy", "wb")) for name in reader.layout}
        for name, output in outputs.items():
            header = {"descr": np.lib.format.dtype_to_descr(dtypes[name]), "fortran_order": False,
                      "shape": (n, *reader.layout[name]["shape"])}
            np.lib.format.write_array_header_1_0(output, header)
        for number in range(len(reader.index)):
            for name, array in reader.shard(number).items():
                outputs[name].write(np.ascontiguousarray(array, dtypes[name]).data)
    _write_document(reader, staging, {"format": "npy"})


def _write_document(dataset: ShardReader, staging: Path, fields: dict[str, Any]) -> None:
    """Write the export's ``metadata.json`` into ``staging``: what ``dataset`` is, and ``fields``."""
    n = len(dataset)
    document = {
        "key": dataset.key,
        "kind": dataset.entry.kind,
        "n_examples": n,
        "arrays": {name: {"dtype": str(dataset.dtype(name)), "shape": [n, *info["shape"]]}
                   for name, info in dataset.layout.items()},
        "metadata": dataset.metadata,
        "params": dataset.entry.params,
        **fields,
    }
    (staging / METADATA_FILE).write_text(json.dumps(document, indent=1), encoding="utf-8")
