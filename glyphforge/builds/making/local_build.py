"""Build into the data dir's cache store on this machine: shard files in a shared work dir, joined into one entry.

Workers write each shard's file into the entry's work dir (on a cluster, the data dir must be on
a shared filesystem); the driver joins them without recompression into the entry's one file,
``arrays.pklz`` (see `glyphforge.builds.reading.dataset`), and writes its index and block table. A build that was
interrupted resumes from the shard files finished there, each checked against its recorded
sha256 while it is joined.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge.builds.making.fan_out import entry_meta, make_shards, report
from glyphforge.builds.making.shards import (
    ShardTask,
    completed_shards,
    count_shards,
    forget_shard,
    remove_partial_files,
    shard_path,
)
from glyphforge.builds.making.spec import OWN_SOURCES, Spec, cache_params, run_prepare
from glyphforge.builds.reading.blocks import BLOCKS_FILE, joined_table
from glyphforge.builds.reading.index import INDEX_FILE, ShardIndex
from glyphforge.builds.reading.protocols import ARRAYS_FILE
from glyphforge.cache import Entry, Writer, concat_pklz
from glyphforge.cache.pklz import MemberMismatchError
from glyphforge.context import DataContext
from glyphforge.session import Session

log = logging.getLogger(__name__)


def build_local(
    spec: Spec, context: DataContext, session: Session | str | None, *, progress: bool,
    session_options: Mapping[str, Any] | None,
) -> Entry:
    """Build ``spec`` into the cache store of ``context`` (a local data dir); return its entry.

    The arguments are as `glyphforge.build` takes them, checked already. On a cache hit nothing
    is done; otherwise the spec's ``prepare`` runs, then the missing shards are made.
    """
    store = context.store
    params = cache_params(spec, context)
    entry = store.get(spec.kind, params)
    if entry is not None:
        return entry
    with store.making(spec.kind, params) as writer:  # None: another process made it meanwhile
        if writer is not None:
            run_prepare(spec, context, params)
            if OWN_SOURCES in params:
                writer.meta["verified"] = False
            work_dir = store.work_dir(spec.kind, params)
            _build_shards(spec, work_dir, context, writer, session, dict(session_options or {}), progress)
    if writer is not None:  # its shards are in the entry now: delete them without waiting
        store.discard_in_background(work_dir)
    entry = store.get(spec.kind, params)
    assert entry is not None, "a committed entry must be readable"
    return entry


def _build_shards(
    spec: Spec, work_dir: Path, context: DataContext, writer: Writer, session: Session | str | None,
    session_options: dict[str, Any], progress: bool,
) -> None:
    """Make the missing shards, then concatenate all of them into ``writer``'s entry.

    Reused shards (finished by an earlier, interrupted build) are checked against their
    recorded sha256 while they are joined; one that changed on disk is made again.
    """
    started = time.perf_counter()
    n_shards = count_shards(spec.n_examples, spec.shard_size)
    remove_partial_files(work_dir)
    records = completed_shards(work_dir, n_shards)
    reused = set(records)
    examples_reused = sum(record["n"] for record in records.values())
    task = ShardTask(spec, str(work_dir), str(context.data_dir))  # the spec protocol's data_dir: str
    workers = 0
    while True:
        missing = [index for index in range(n_shards) if index not in records]
        if missing:
            workers = make_shards(task, missing, records, session, session_options, progress)
        try:
            joined = concat_pklz(
                [shard_path(work_dir, index) for index in range(n_shards)], writer.path / ARRAYS_FILE,
                expected_sha256=[records[index]["sha256"] if index in reused else None for index in range(n_shards)],
            )
            break
        except MemberMismatchError as changed:  # bit rot under an unchanged size and mtime: make it again
            log.warning("shard %d of %s changed on disk since it was made; making it again", changed.index, spec.kind)
            forget_shard(work_dir, changed.index)
            reused.discard(changed.index)
            examples_reused -= records.pop(changed.index)["n"]
    writer.known_sha256[ARRAYS_FILE] = joined.sha256
    ShardIndex.from_lengths(joined.lengths, [records[shard]["n"] for shard in range(n_shards)]).write(
        writer.path / INDEX_FILE)
    np.save(writer.path / BLOCKS_FILE, joined_table([records[shard]["blocks"] for shard in range(n_shards)]),
            allow_pickle=False)
    writer.meta.update(entry_meta(spec, records))
    seconds = time.perf_counter() - started
    key = work_dir.name[:12]  # the work dir is <key>.work
    report(f"built {spec.kind} {key}: {n_shards} shards ({n_shards - len(reused)} made, {len(reused)} reused), "
           f"{spec.n_examples} examples in {seconds:.1f} s on {workers} workers "
           f"({(spec.n_examples - examples_reused) / seconds:,.0f} examples/s made)", progress)
