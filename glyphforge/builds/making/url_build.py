"""Build into object storage (a URL data dir), with no filesystem shared by the driver and its workers.

``build(spec, data_dir="s3://bucket/x", session=...)`` (its URL destination,
`glyphforge.builds.making.destinations`) and ``glyphforge build ... --data-dir s3://...`` call `build_into`.
The entry ``kind/key`` is made at ``<url>/cache/<kind>/<key>/`` as a *multi-part* entry
(see `glyphforge.builds.reading.index`)::

    <url>/cache/<kind>/<key>/part-000000.pklz ...   # one part per shard, written by the worker that made it
    <url>/cache/<kind>/<key>/index.npy              # 5 rows: offset, length, start, stop, part
    <url>/cache/<kind>/<key>/blocks.npy             # where each shard's blocks are in its part
    <url>/cache/<kind>/<key>/manifest.json          # written last, by the driver: the entry exists from then on
    <url>/cache/<kind>/<key>.work/shard-000000.json # each finished shard's record (sha256, size, n, layout...)
    <url>/cache/<kind>/<key>.work/build.json        # the driver's note; also its first write (checks the URL)

Each part holds exactly the bytes of the shard file a local build makes (`dump_shard` is
deterministic), and the driver does not download one to build: the records carry each
part's size and sha256 (and MD5) into the manifest, and where its blocks are into
``blocks.npy``. A build whose driver was lost resumes from the shards whose record and part
are there, the part holding the bytes its record names (its size, and the store's MD5 of it
compared with the record's; where the store gives no usable MD5, the part is read back and
its sha256 compared): any other part is made again.
At the end the driver deletes the records and the note it wrote (those exact names). A
second build of the same spec finds the manifest and does nothing.

**What workers read.** The spec's ``prepare(context)`` runs on the driver, into
``context.data_dir`` (a data dir under the local cache, `glyphforge.context`), as for a
local build. The cache entries it reads or makes there (the glyph dataset, the background
textures) are published to the URL data dir (files first, manifest last; an entry whose
manifest is there already is left as it is), and each worker fetches them from there into
its own local cache (``cache_dir`` of the build's context, else its environment's
``$GLYPHFORGE_CACHE_DIR`` or user cache dir), checked against their manifest's sha256s,
before its first shard. Workers on the driver's machine find them there and fetch nothing.
Which entries those are, the spec says: its ``prepare`` returns them (`glyphforge.builds.making.spec`).

Writes go through fsspec, so ``file://`` URLs work the same (there each file is written to a
temporary name and renamed, as an object store's put makes a whole object at once).
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge._files import CHUNK_BYTES, make_temp_dir, remove_tree, writing
from glyphforge.builds.making.fan_out import entry_meta, make_shards, report
from glyphforge.builds.making.shards import ShardRecord, count_shards, make_shard_arrays
from glyphforge.builds.making.spec import (
    OWN_SOURCES,
    Spec,
    cache_params,
    run_prepare,
)
from glyphforge.builds.reading.blocks import BLOCKS_FILE, joined_table
from glyphforge.builds.reading.index import INDEX_FILE, ShardIndex
from glyphforge.builds.reading.remote_shards import RemoteShards, open_read
from glyphforge.cache import Entry
from glyphforge.cache.keys import cache_key
from glyphforge.cache.manifest import MANIFEST, make_manifest
from glyphforge.cache.npy_members import dump_shard
from glyphforge.cache.remote.files import UrlFiles, entry_location
from glyphforge.cache.remote.publish import publish_entry
from glyphforge.context import DataContext
from glyphforge.errors import ArgumentError
from glyphforge.session import Session
from glyphforge.storage.backend import ReadOnlyStoreError
from glyphforge.storage.location import Location
from glyphforge.storage.object_match import recorded_mismatch
from glyphforge.storage.shard_cache import ShardCache
from glyphforge.storage.store_errors import RemoteStorageError, StoreTask, translated

log = logging.getLogger(__name__)

#: The driver's note in an entry's ``.work`` prefix (see the module docstring).
BUILD_NOTE = "build.json"
#: What the store's errors during a build into a URL say (`glyphforge.storage.store_errors`).
BUILDING = StoreTask("build into", "run the build again: the shards finished are kept and not made again")


class OwnCopyRemoteError(ArgumentError, ValueError):
    """A build into a URL would read own copies (unverified) of upstream files, which its workers cannot see."""


def part_name(index: int) -> str:
    """The data file of a multi-part entry holding shard ``index``: ``part-000042.pklz``."""
    return f"part-{index:06d}.pklz"


def record_name(index: int) -> str:
    """The record of shard ``index`` in the entry's ``.work`` prefix: ``shard-000042.json``."""
    return f"shard-{index:06d}.json"


def work_location(entry: Location) -> Location:
    """Where a remote build keeps the records of an unfinished ``entry``: ``<entry url>.work``."""
    return entry.suffixed(".work")


def check_writable(location: Location) -> Location:
    """Return ``location``, a data dir's URL, if glyphforge may build into it.

    Raises
    ------
    ReadOnlyStoreError
        It is an HTTP URL.
    UnsupportedURLError
        fsspec cannot open its scheme here (the message names the extra to install).
    """
    if location.read_only:
        raise ReadOnlyStoreError(
            f"cannot build into {location}: glyphforge only reads {location.scheme}:// URLs. Build into an "
            "s3://, gs:// or file:// data dir (or a local path) and serve that over HTTP")
    location.backend.check_client()  # an unknown scheme or a missing extra fails here, naming the URL
    return location


def build_into(
    spec: Spec, context: DataContext, session: Session | str | None = None, *, progress: bool = True,
    session_options: Mapping[str, Any] | None = None,
) -> Location:
    """Build ``spec`` into the URL data dir of ``context`` (see the module docstring); return the entry's location.

    Parameters
    ----------
    spec, session, progress, session_options
        As `glyphforge.build` takes them, checked already (`check_build_arguments`), as for a local build.
    context
        A context whose data dir is a URL (``context.remote``); the spec's ``prepare`` fetches
        into its local ``data_dir`` with its mirrors, ``offline`` and ``verify``.

    Returns
    -------
    Location
        ``<url>/cache/<kind>/<key>``, what `glyphforge.builds.reading.lookup.open_built` takes.

    Raises
    ------
    ReadOnlyStoreError
        The URL is read-only (HTTP).
    OwnCopyRemoteError
        The spec would read own copies (unverified) of upstream files (`cache_params`), before any work.
    UnsupportedURLError
        fsspec cannot open its scheme here (the message names the extra to install).
    RemoteStorageError
        Reading or writing the URL failed (a missing bucket, wrong credentials...): the
        first write is the driver's note, before the prepare and any shard. A
        `glyphforge.StorageError` (`glyphforge.storage.store_errors`), as publishing raises.
    ShardError
        A shard failed; the finished ones are kept: run again to resume.
    """
    files = _build(spec, context, session, progress, session_options).data_files
    assert isinstance(files, UrlFiles), "an entry built into a URL has its files there"
    return files.location


def build_and_open(
    spec: Spec, context: DataContext, session: Session | str | None = None, *, progress: bool = True,
    session_options: Mapping[str, Any] | None = None,
) -> RemoteShards:
    """Build ``spec`` as `build_into` does; return the shard source of its entry where it lies, from the manifest the
    build wrote or found (not read again), its shards cached in the context's local cache dir."""
    return open_read(_build(spec, context, session, progress, session_options))


def _build(spec: Spec, context: DataContext, session: Session | str | None, progress: bool,
           session_options: Mapping[str, Any] | None) -> Entry:
    """`build_into`: the entry built (or found) at the URL, its files there (`UrlFiles`) fetched into the context's
    local cache dir."""
    if context.remote is None:
        raise ValueError(f"build_into builds into a data dir that is a URL; {context.data_dir} is a path (a file:// "
                         "URL is the path it names): use build")
    data_dir = check_writable(context.remote)
    params = cache_params(spec, context)
    if OWN_SOURCES in params:
        raise OwnCopyRemoteError(
            f"cannot build {spec.kind} into {data_dir} from your own copies (unverified) of upstream files "
            f"({', '.join(sorted(params[OWN_SOURCES]))} in {context.data_dir / 'raw'}): its workers read the copy "
            "in use of their own data dirs, not this one. Build into a local data dir (and publish it), or move "
            "your files out of raw/ to build from upstream's")
    key = cache_key(spec.kind, params)
    entry = entry_location(data_dir, spec.kind, key)
    files = UrlFiles(entry, ShardCache(context.cache_dir))  # fetched into the context's local cache dir
    # there already: done (a manifest failing the checks raises DamagedRemoteEntryError, and is left alone)
    with translated(entry, f"reading {MANIFEST}", BUILDING):
        found = files.open()
    if found is not None:
        return files.entry(found.manifest)
    n_shards = count_shards(spec.n_examples, spec.shard_size)
    work = work_location(entry)
    _write(entry, work.child(BUILD_NOTE), json.dumps({"kind": spec.kind, "key": key, "n_shards": n_shards}).encode())
    started = time.perf_counter()
    inputs = _prepare(spec, context, params)
    for made in inputs:  # for the workers: they fetch them into their own local cache
        publish_entry(made, data_dir, progress=False)
    records = finished_shards(entry, n_shards)
    reused = len(records)
    task = RemoteShardTask(spec, entry, data_dir, tuple((item.kind, item.params) for item in inputs),
                           None if context.cache_dir is None else str(context.cache_dir))
    missing = [index for index in range(n_shards) if index not in records]
    workers = make_shards(task, missing, records, session, dict(session_options or {}), progress) if missing else 0
    manifest = _commit(spec, key, params, entry, records)
    _remove(entry, work, [record_name(index) for index in sorted(records)] + [BUILD_NOTE])
    seconds = time.perf_counter() - started
    report(f"built {spec.kind} {key[:12]} into {entry}: {n_shards} shards ({n_shards - reused} made, "
           f"{reused} reused) in {seconds:.1f} s on {workers} workers", progress)
    return files.entry(manifest)


# -- the driver's steps ----------------------------------------------------------------------------
def _prepare(spec: Spec, context: DataContext, params: dict[str, Any]) -> list[Entry]:
    """Run the spec's ``prepare`` on the driver, its sources checked as a local build's are (`run_prepare`); return
    the entries of the local cache it says its shards read, each once, by kind and key."""
    entries = {(entry.kind, entry.key): entry for entry in run_prepare(spec, context, params)}
    return [entries[found] for found in sorted(entries)]


def finished_shards(entry: Location, n_shards: int) -> dict[int, ShardRecord]:
    """The records of shards below ``n_shards`` whose record and part are both at the URL, the part holding the bytes
    its record names: its size, and its sha256 (the store's MD5 compared with the record's, else the part read back
    and hashed: `glyphforge.storage.object_match.recorded_mismatch`). Any other part is made again."""
    work = work_location(entry)
    names = {record_name(index): index for index in range(n_shards)}
    listed = [name for name in sorted(_listed(entry, work)) if name in names]
    if not listed:
        return {}
    parts = _listed(entry, entry)
    with translated(entry, f"reading the shard records in {_named(entry, work)}", BUILDING):
        texts = work.backend.read_objects(listed)
    done = {}
    for name, text in sorted(texts.items()):
        if isinstance(text, Exception):
            continue  # unreadable, or gone since it was listed: make the shard again
        index = names[name]
        try:
            record = json.loads(text)
            found = (record["shard"] == index and isinstance(record["size"], int) and isinstance(record["sha256"], str)
                     and isinstance(record["blocks"], list))
        except (ValueError, KeyError, TypeError):
            continue  # half-written or foreign: make the shard again
        if found and part_name(index) in parts and _holds(entry, index, parts[part_name(index)], record):
            done[index] = record
    return done


def _holds(entry: Location, index: int, info: Mapping[str, Any], record: ShardRecord) -> bool:
    """Whether the part of shard ``index`` (listed as ``info``) holds the bytes its ``record`` names; warn if not."""
    part = entry.child(part_name(index))
    with translated(entry, f"checking {_named(entry, part)}", BUILDING):
        differs = recorded_mismatch(part, info, record)
    if differs is not None:
        log.warning("%s is %s: making shard %d again", part, differs, index)
    return differs is None


def _commit(spec: Spec, key: str, params: dict[str, Any], entry: Location, records: dict[int, ShardRecord],
            ) -> dict[str, Any]:
    """Write the multi-part entry's ``index.npy`` and ``blocks.npy``, then its manifest (last: the entry exists from
    then on); return the manifest."""
    n_shards = len(records)
    ordered = [records[index] for index in range(n_shards)]
    index = ShardIndex.from_parts([record["size"] for record in ordered], [record["n"] for record in ordered])
    files = {part_name(number): {"size": record["size"], "sha256": record["sha256"]} for number, record in
             enumerate(ordered)}
    for name, table in ((INDEX_FILE, index.table()), (BLOCKS_FILE, joined_table([r["blocks"] for r in ordered]))):
        buffer = io.BytesIO()
        np.save(buffer, table, allow_pickle=False)
        _write(entry, entry.child(name), buffer.getvalue())
        files[name] = {"size": len(buffer.getvalue()), "sha256": _sha256(buffer.getvalue())}
    meta = {**entry_meta(spec, records), "parts": [part_name(number) for number in range(n_shards)]}
    manifest = make_manifest(spec.kind, key, params, files, meta)
    _write(entry, entry.child(MANIFEST), json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8"))
    return manifest


# -- on the workers ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RemoteShardTask:
    """Make one shard of ``spec`` and write it to ``entry`` (its part) and its record to the ``.work`` prefix.

    Called with a shard index on a worker, returns the shard's record. Before making it,
    the ``inputs`` (``(kind, params)`` of the entries the spec's prepare read) are fetched
    from the URL data dir ``data_dir`` into the worker's local cache (``cache_dir``, else its
    environment's; `glyphforge.cache.remote.pull_through.PullThrough`), whose data dir
    ``make_shard`` and ``metadata`` are given.
    """

    spec: Any
    entry: Location
    data_dir: Location
    inputs: tuple[tuple[str, dict[str, Any]], ...] = ()
    cache_dir: str | None = None

    @cached_property
    def context(self) -> DataContext:
        """The worker's context: the URL data dir and the local cache dir, resolved at its first shard (in the
        worker's environment: never pickled)."""
        return DataContext.resolve(data_dir=self.data_dir.url, storage_options=self.data_dir.storage_options,
                                   cache_dir=self.cache_dir)

    def __getstate__(self) -> dict[str, Any]:
        """The task's fields, without the context a process resolved (a worker resolves its own)."""
        return {name: value for name, value in self.__dict__.items() if name != "context"}

    def __call__(self, index: int) -> ShardRecord:
        context = self.context
        fetch_entries(self.inputs, context)
        arrays, record = make_shard_arrays(self.spec, index, str(context.data_dir))
        scratch = make_temp_dir(".shard-", _scratch_root(context))
        try:
            path = scratch / part_name(index)
            blocks = dump_shard(arrays, path)
            sha256, md5 = _digests(path)
            record.update(size=path.stat().st_size, sha256=sha256, md5=md5, blocks=blocks.tolist())
            _upload(self.entry, path, self.entry.child(part_name(index)))
        finally:
            remove_tree(scratch)
        _write(self.entry, work_location(self.entry).child(record_name(index)), json.dumps(record).encode("utf-8"))
        return record


def fetch_entries(inputs: tuple[tuple[str, dict[str, Any]], ...], context: DataContext) -> None:
    """Fetch each ``(kind, params)`` entry from the URL data dir of ``context`` into its local store, unless there.

    Each file is checked against the size and sha256 its (checked) manifest records; the
    entry appears in the local store whole, as any entry does (`~glyphforge.cache.remote.pull_through.PullThrough`).

    Raises
    ------
    RemoteStorageError
        An entry is not at the URL.
    DamagedRemoteEntryError
        A file there differs from its manifest (nothing is kept locally).
    """
    if not inputs:
        return  # the spec reads no entry
    store, remote = context.store, context.remote
    assert remote is not None, "a remote build's workers resolve the build's URL data dir"
    for kind, params in inputs:
        if store.get(kind, params) is None:
            raise RemoteStorageError(
                f"{entry_location(remote, kind, store.key(kind, params))} has no manifest: the build's driver "
                "publishes the entries its prepare read there before any shard runs. "
                "Was it removed meanwhile? Run the build again")


# -- helpers ---------------------------------------------------------------------------------------
def _write(entry: Location, location: Location, data: bytes) -> None:
    """Write ``data`` as the object at ``location`` (`glyphforge.storage.backend.Backend.write`: whole or not at all)
    for the build of ``entry``, errors named (`glyphforge.storage.store_errors`)."""
    with translated(entry, f"writing {_named(entry, location)}", BUILDING):
        location.backend.write(data)


def _upload(entry: Location, source: Path, location: Location) -> None:
    """Copy the local file ``source`` to the object at ``location`` (`glyphforge.storage.backend.Backend.upload`),
    errors named."""
    with translated(entry, f"uploading {_named(entry, location)}", BUILDING):
        location.backend.upload(source)


def _listed(entry: Location, folder: Location) -> dict[str, dict[str, Any]]:
    """What the store says of each object directly under ``folder`` (size, checksums), by name, fresh
    (`glyphforge.storage.backend.Backend.files`), errors named."""
    with translated(entry, f"listing {_named(entry, folder)}", BUILDING):
        return folder.backend.files()


def _remove(entry: Location, folder: Location, names: list[str]) -> None:
    """Delete the objects ``names`` under ``folder`` (exact names, never a prefix), then ``folder`` if left empty."""
    present = _listed(entry, folder)
    with translated(entry, f"cleaning up {_named(entry, folder)}", BUILDING):
        folder.backend.remove([name for name in names if name in present])


def _named(entry: Location, location: Location) -> str:
    """``location`` as messages about the build of ``entry`` name it: ``index.npy``, ``<key>.work/build.json``."""
    if location.url == entry.url:
        return "the entry"
    folder, name = entry.url.rsplit("/", 1)
    return location.url.removeprefix(folder + "/").removeprefix(f"{name}/")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _digests(path: Path) -> tuple[str, str]:
    """The sha256 and the MD5 (hex) of the file ``path``, read once: a part's record, the MD5 to compare with the
    store's when a build resumes (`finished_shards`)."""
    sha256, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as stream:
        while chunk := stream.read(CHUNK_BYTES):
            sha256.update(chunk)
            md5.update(chunk)
    return sha256.hexdigest(), md5.hexdigest()


def _scratch_root(context: DataContext) -> Path:
    """The local cache dir of ``context`` (made if missing), where a shard's file waits for its upload."""
    root = context.local_cache
    with writing(root):
        root.mkdir(parents=True, exist_ok=True)
    return root

