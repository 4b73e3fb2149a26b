"""Publish a cache entry (built or prepared) to a data dir URL, so readers anywhere find it whole.

An entry ``kind/key`` of a local cache lands at ``<url>/cache/<kind>/<key>/``: the data
files its manifest lists, then ``manifest.json`` (byte for byte the local one) last. A
reader trusts an entry at a URL only once its manifest is there, so it never sees a
partial one. The entry URL ``<url>/cache/<kind>/<key>`` is what `glyphforge.open_built` takes.

Publishing again is cheap and safe:

* the target already holds this entry's manifest (the same kind, key, params, meta and
  files table: the same ``entry_sha256``): nothing is uploaded (one small GET);
* an interrupted publish resumes: a data file already there is kept, not uploaded again,
  when its bytes are the ones the manifest records (the store's MD5 of it where reliable,
  else its sha256 read back: `glyphforge.storage.object_match`); an object store's put is
  atomic, and on a ``file://`` target each file is written under a temporary name and
  renamed, so only the missing files are uploaded;
* glyphforge replaces only what it wrote itself: a manifest of another entry, an object
  of another size or other bytes at a data file's place, or a symbolic link at a file's place
  (``file://``), is an error naming it (`PublishConflictError`), and nothing there is touched:
  nothing is uploaded, and no manifest is written beside what is not the entry's;
* on a ``file://`` target, the temporary files a killed publish left (``.<name>.<random>.tmp``
  of the entry's files, whose writer is gone) are removed first (``glyphforge cache gc`` of
  the target data dir removes them too).

Files are uploaded a few at once, large ones in parts (``s3://``: multipart uploads of
:data:`PART_BYTES` parts, :data:`PARTS_AT_ONCE` at once per file), so at most about
``FILES_AT_ONCE * PARTS_AT_ONCE * PART_BYTES`` bytes of file data are in memory. The
entry's read lock is held throughout, so ``glyphforge cache gc --max-size`` does not evict
it mid-upload. Credentials are the store's business (see `glyphforge.storage.location`):
errors name the URL, what failed and what to do, never a secret.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from glyphforge import config
from glyphforge._checks import PathLike
from glyphforge._files import path_too_long, shown_path
from glyphforge.cache.keys import entry_sha256
from glyphforge.cache.lookup import of_kind
from glyphforge.cache.manifest import MANIFEST, DamagedManifestError, is_built, parse_manifest
from glyphforge.cache.remote.files import entry_location
from glyphforge.cache.store import CacheStore
from glyphforge.errors import ArgumentError
from glyphforge.storage.location import Location, is_url
from glyphforge.storage.object_match import object_mismatch
from glyphforge.storage.objects import listed_files, upload_file, write_bytes
from glyphforge.storage.store_errors import StoreTask, translated, translated_call
from glyphforge.urls import redacted

if TYPE_CHECKING:
    from tqdm import tqdm

    from glyphforge.cache.entry import Entry

__all__ = [
    "LocalSourceError", "PublishConflictError", "Published", "find_entry", "identity", "publish", "publish_entry",
    "published_manifest", "put_bytes", "read_object", "source_store", "target_location",
]

#: Data files uploaded at once.
FILES_AT_ONCE = 4
#: The part size of a multipart upload (``s3://``); larger for files of more than 10,000 parts (S3's limit).
PART_BYTES = 8 << 20
#: Parts of one file uploaded at once (``s3://``).
PARTS_AT_ONCE = 4
#: S3's limit on the parts of one multipart upload.
MAX_PARTS = 10_000
#: What the store's errors while publishing say (`glyphforge.storage.store_errors`).
PUBLISHING = StoreTask("publish to", "run the same command again: files uploaded whole are kept and not uploaded "
                       "again, and readers see the entry only once its manifest, written last, is there")


class LocalSourceError(ArgumentError, ValueError):
    """The data dir to publish from is a URL: publish copies from a local data dir (the message says what works)."""


class PublishConflictError(ArgumentError, FileExistsError):
    """Something that is not this entry is where it would be published; it was left untouched (the message names it)."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Published:
    """What `publish_entry` did.

    Attributes
    ----------
    url
        The entry's URL (``<data dir URL>/cache/<kind>/<key>``), what `glyphforge.open_built` takes.
    uploaded
        The data files uploaded now (the manifest is uploaded when anything is).
    present
        The data files that were there already, their bytes the manifest's (an earlier, interrupted publish).
    manifest_uploaded
        Whether the manifest was uploaded (False: the entry was there already, nothing was uploaded).
    """

    url: str
    uploaded: tuple[str, ...]
    present: tuple[str, ...]
    manifest_uploaded: bool

    @property
    def already(self) -> bool:
        """Whether the entry was published already (nothing was uploaded)."""
        return not self.manifest_uploaded


def target_location(url: str | Location, storage_options: Mapping[str, Any] | None = None) -> Location:
    """Return the data dir URL ``url`` as a `Location` glyphforge may write to; raise a ValueError otherwise.

    Raises
    ------
    ValueError
        ``url`` is no URL (a plain path: give ``file:///abs/path``), an ``http(s)://`` one (read-only), or a
        ``file://`` one of a path this system cannot take (too long).
    UnsupportedURLError
        fsspec cannot open its scheme here (the message names the extra to install).
    """
    if isinstance(url, Location):
        location = url if storage_options is None else Location(url.url, storage_options)
    elif not is_url(url):
        raise ValueError(f"{url!r} is not a URL: publish to a data dir URL such as s3://bucket/data, gs://bucket/data "
                         f"or file:///abs/path (a local directory as file://{Path(url).expanduser().absolute()})")
    else:
        location = Location(url, storage_options or {})
    if location.read_only:
        raise ValueError(f"{redacted(location.url)} is an {location.scheme}:// URL, which glyphforge only reads: "
                         "publish to object storage (s3://, gs://) or a file:// directory, and serve that over "
                         "HTTP if you wish")
    location.backend.check_client()  # raises UnsupportedURLError naming the extra to install; opens no connection
    local = location.backend.local_path
    too_long = path_too_long(local) if local is not None else None
    if too_long:
        raise ValueError(f"{shown_path(redacted(location.url))} cannot be written: {too_long} (ENAMETOOLONG); give a "
                         "shorter path")
    return location


def publish_entry(entry: Entry, url: str | Location, *, storage_options: Mapping[str, Any] | None = None,
                  progress: bool = True) -> Published:
    """Publish ``entry`` to the data dir ``url`` (see the module docstring); return what was done.

    Parameters
    ----------
    entry
        A complete cache entry (built or prepared) on this machine.
    url
        The data dir URL (``s3://bucket/data``, ``gs://...``, ``file:///abs/path``) or a `Location`;
        the entry lands at ``<url>/cache/<kind>/<key>``.
    storage_options
        fsspec's options for ``url`` (e.g. ``{"endpoint_url": ...}``); None: the Location's, or none.
    progress
        Show a progress bar of the bytes uploaded.

    Raises
    ------
    ValueError, UnsupportedURLError
        A bad target (see `target_location`), before anything is read or sent.
    PublishConflictError
        Another entry's manifest, or an object of another size or other bytes than a data file's, is at the
        entry's place (left untouched; nothing is uploaded).
    MissingEntryFileError, DamagedEntryFileError
        A local data file is missing or not the size its manifest records (nothing of it is uploaded).
    RemoteStorageError
        The store refused or failed (wrong credentials, no permission, no such bucket, network): the
        message names the URL and what to do; files uploaded before are kept and not uploaded again.
        A `glyphforge.StorageError` (`glyphforge.storage.store_errors`).
    """
    place = entry_location(target_location(url, storage_options), entry.kind, entry.key)
    with entry.read_lock():
        local_manifest = (entry.path / MANIFEST).read_bytes()
        with translated(place, "removing what killed publishes left", PUBLISHING):
            place.backend.remove_abandoned([*entry.files, MANIFEST])
        _refuse_links(place, [*entry.files, MANIFEST])
        published = published_manifest(place)
        if published is not None:
            if identity(published) == identity(entry.manifest):
                return Published(place.url, (), tuple(entry.files), manifest_uploaded=False)
            raise PublishConflictError(
                f"{redacted(place.url)} already holds another version of the {entry.kind} entry {entry.key[:12]} (its "
                "files table or metadata differ from the local entry's: made by another glyphforge version, or "
                "edited). "
                "glyphforge replaces nothing at a URL: remove that entry there yourself if it is not needed, or "
                "publish to another data dir URL")
        sources = {name: entry.file(name) for name in entry.files}  # checks each is whole before sending any
        present = _present_files(place, entry.manifest["files"], sources)
        missing = [name for name in entry.files if name not in present]
        with _progress_bar(sum(entry.manifest["files"][name]["size"] for name in missing), place, progress) as bar:
            _upload_all(place, {name: sources[name] for name in missing}, bar)
        put_bytes(place.child(MANIFEST), local_manifest, "uploading manifest.json")
    return Published(place.url, tuple(missing), tuple(sorted(present)), manifest_uploaded=True)


def publish(target: str, url: str, *, data_dir: PathLike | None = None,
            storage_options: Mapping[str, Any] | None = None, progress: bool = True) -> str:
    """Publish a cache entry of the local data dir to the data dir URL ``url``; return the entry's URL.

    Parameters
    ----------
    target
        A cache key (or a prefix of 6+ characters), or a kind with one entry (of a kind with built
        and other entries, the built one), or ``"KIND:newest"`` (`glyphforge.cache.lookup`).
    url
        The data dir URL (``s3://bucket/data``...); the entry lands at ``<url>/cache/<kind>/<key>``.
    data_dir
        The local data dir holding the entry (default: ``$GLYPHFORGE_DATA_DIR`` or the user data dir),
        or a `glyphforge.DataContext`: its data dir (for a URL data dir, its local data dir under the
        local cache, where ``prepare-data --data-dir URL`` prepares).
    storage_options, progress
        As for `publish_entry`.

    Returns
    -------
    str
        The entry's URL, what `glyphforge.open_built` takes.

    Raises
    ------
    LocalSourceError
        The data dir is a URL other than ``file://`` (see `source_store`), before anything is read or sent.
    LookupError
        ``target`` matches no entry (the message lists what the cache holds).
    """
    location = target_location(url, storage_options)
    entry = find_entry(source_store(data_dir), target)
    return publish_entry(entry, location, progress=progress).url


def source_store(data_dir: PathLike | None) -> CacheStore:
    """The cache store of the local data dir publish copies from (``data_dir``, else ``$GLYPHFORGE_DATA_DIR``,
    else the user data dir); a ``file://`` URL is the directory it names.

    Raises
    ------
    LocalSourceError
        The data dir is a URL of object storage or HTTP: the message says what works instead.
    """
    chosen = config.data_dir_setting(data_dir)
    if not is_url(chosen):
        return CacheStore.for_data_dir(chosen)
    assert isinstance(chosen, str)
    local = Location(chosen).backend.local_path
    if local is not None:
        return CacheStore.for_data_dir(local)
    raise LocalSourceError(
        f"publish copies an entry from a local data dir, and the data dir {redacted(chosen)} is a URL: give the local "
        "data dir that holds the entry (a path, or file:///abs/path). To have an entry of one URL at another, make "
        "it there (`glyphforge build ... --data-dir TARGET` builds into it; `glyphforge prepare-data NAME --data-dir "
        "TARGET` prepares and publishes there), or copy its folder DATA_DIR/cache/KIND/KEY with the store's own tool "
        "(`aws s3 cp --recursive`, `gcloud storage cp -r`), its manifest.json last, so that no reader sees part of it")


def find_entry(store: CacheStore, target: str) -> Entry:
    """Return the entry of ``store`` that ``target`` names (see `publish`); LookupError listing the store if none."""
    entries = store.ls()
    chosen = of_kind(target, [entry for entry in entries if is_built(entry)], store.root)  # built ones first
    if chosen is None:
        chosen = of_kind(target, entries, store.root)
    if chosen is not None:
        return chosen
    try:
        return store.find(target)
    except KeyError as error:
        kinds = sorted({entry.kind for entry in entries})
        held = f"kinds {', '.join(kinds)}" if kinds else "nothing yet"
        raise LookupError(f"nothing to publish matches {target!r}: {error.args[0]}. The cache at {store.root} holds "
                          f"{held}: give a kind or a cache key (prefix)") from None


def identity(manifest: Mapping[str, Any]) -> str:
    """Return what an entry holds, as its ``entry_sha256`` (computed from the manifest's fields)."""
    return entry_sha256(manifest["kind"], manifest["key"], manifest["params"], manifest["meta"], manifest["files"])


def published_manifest(place: Location) -> dict[str, Any] | None:
    """Return the manifest at the entry URL ``place``, or None when it has none.

    Raises
    ------
    PublishConflictError
        What is there is not a glyphforge manifest of the entry ``place`` names.
    RemoteStorageError
        The store refused or failed (see `publish_entry`).
    """
    where = place.child(MANIFEST)
    text = read_object(where, "reading manifest.json")
    if text is None:
        return None
    kind, key = place.url.rsplit("/", 2)[-2:]
    try:
        return parse_manifest(text, kind, key)
    except DamagedManifestError as error:
        raise _not_ours(where, f"the manifest of the {kind} entry {key[:12]} (what is there is {error})") from None


def read_object(where: Location, doing: str) -> bytes | None:
    """Return the bytes of the object (or ``file://`` file) ``where``, None when there is none.

    Raises
    ------
    PublishConflictError
        ``where`` is a directory (not glyphforge's: left as it is).
    RemoteStorageError
        The store refused or failed, or the bucket does not exist (see `publish_entry`).
    """
    with translated(where, doing, PUBLISHING):
        try:
            data = where.backend.read_whole()
        except IsADirectoryError:
            raise _not_ours(where, "a file") from None
        except FileNotFoundError as error:
            if where.backend.is_missing_bucket(error):
                raise
            return None
    return data


def put_bytes(where: Location, data: bytes, doing: str) -> None:
    """Write ``data`` as the object ``where`` (a ``file://`` one under a temporary name first, then renamed)."""
    with translated(where, doing, PUBLISHING):
        write_bytes(where, data)


def _refuse_links(place: Location, names: list[str]) -> None:
    """Raise `PublishConflictError` naming the first of the files ``names`` at ``place`` that glyphforge would not
    replace (a ``file://`` target's symbolic link: a user's), before anything is written."""
    for name in names:
        where = place.child(name)
        found = where.backend.not_replaceable()
        if found is not None:
            raise PublishConflictError(
                f"{where.url} is {found}: glyphforge did not write it, and leaves it as it is (nothing was "
                "published). Remove it if it is not needed, then run the same command again, or publish to another "
                "data dir URL")


def _not_ours(where: Location, expected: str) -> PublishConflictError:
    """The error for something at ``where`` that is not ``expected``: named, and left as it is."""
    return PublishConflictError(
        f"{redacted(where.url)} is not {expected}: glyphforge did not write it and leaves it as it is. Remove it if "
        "it is not needed, or publish to another data dir URL")


def _present_files(place: Location, files: Mapping[str, Mapping[str, Any]], sources: Mapping[str, Path]) -> set[str]:
    """The entry's data files already at ``place`` whole: the bytes its manifest records (one listing, then each
    checked by `object_mismatch`, :data:`FILES_AT_ONCE` at a time).

    Raises
    ------
    PublishConflictError
        An object of another size or other bytes is at a data file's place (named; left untouched).
    """
    with translated(place, "listing the entry", PUBLISHING):
        listed = {name: info for name, info in listed_files(place).items() if name in files}
    if not listed:
        return set()

    def mismatch(name: str) -> str | None:
        size = files[name]["size"]
        return object_mismatch(place.child(name), listed[name], sources[name], files[name], _part_bytes(size))

    with translated(place, "checking the data files already there", PUBLISHING), \
            ThreadPoolExecutor(max_workers=FILES_AT_ONCE, thread_name_prefix="glyphforge-publish-check") as pool:
        mismatches = dict(zip(listed, pool.map(mismatch, listed), strict=True))
    wrong = sorted(name for name, what in mismatches.items() if what is not None)
    if wrong:
        described = "; ".join(f"{place.child(name)} is {mismatches[name]}" for name in wrong)
        raise PublishConflictError(
            f"{described}: that is not this entry's file (an object store never holds part of one), so glyphforge "
            "did not write it. It leaves it as it is and wrote nothing there (no manifest beside it). Delete it if "
            "it is yours and not needed, then run the same command again, or publish to another data dir URL")
    return set(listed)


def _upload_all(place: Location, sources: Mapping[str, Path], bar: tqdm) -> None:
    """Upload ``sources`` (``{name: local file}``) to ``place``, :data:`FILES_AT_ONCE` at a time.

    The first failure cancels the uploads not yet started and is raised once the running ones end.
    """
    if not sources:
        return
    with ThreadPoolExecutor(max_workers=FILES_AT_ONCE, thread_name_prefix="glyphforge-publish") as pool:
        futures = [pool.submit(translated_call, place, f"uploading {name}", PUBLISHING,
                               _uploader(place, name, source, bar))
                   for name, source in sorted(sources.items(), key=lambda item: -item[1].stat().st_size)]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((future for future in done if future.exception() is not None), None)
        if failed is not None:
            for future in futures:
                future.cancel()
            failed.result()


def _uploader(place: Location, name: str, source: Path, bar: tqdm) -> Callable[[], None]:
    """A function uploading ``source`` as ``<place>/<name>``, so that no partial file is ever at that name."""
    options = _part_options(place, source.stat().st_size)
    return lambda: upload_file(source, place.child(name), sent=bar.update, **options)


def _part_options(place: Location, size: int) -> dict[str, int]:
    """The multipart settings of an upload of ``size`` bytes to ``place`` (none for a store whose backend takes none:
    its defaults)."""
    if not place.backend.takes_part_options:
        return {}
    return {"chunksize": _part_bytes(size), "max_concurrency": PARTS_AT_ONCE}


def _part_bytes(size: int) -> int:
    """The part size of an ``s3://`` multipart upload of ``size`` bytes (:data:`PART_BYTES`, more past 10,000 parts)."""
    return max(PART_BYTES, math.ceil(size / MAX_PARTS))


def _progress_bar(total: int, place: Location, progress: bool) -> tqdm:
    from tqdm import tqdm

    kind, key = place.url.rsplit("/", 2)[-2:]
    return tqdm(total=total, unit="B", unit_scale=True, desc=f"publishing {kind} {key[:12]}",
                disable=not progress)
