"""``glyphforge cache ls | verify | rm | gc``: the cache of a local data dir, or of one at a URL."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from glyphforge import config
from glyphforge.builds.entry_files import lost_shards
from glyphforge.builds.reading import ARRAYS_FILE
from glyphforge.cache import CacheProblem, CacheStore, CleanupError, Entry, raw
from glyphforge.cache.decoded import decoded_bytes
from glyphforge.cache.entry import read_entry
from glyphforge.cache.eviction import Eviction
from glyphforge.cache.manifest import ManifestFields, is_built
from glyphforge.cli.args import UsageError
from glyphforge.cli.common import Formatter, add_command, data_context, remote_cache
from glyphforge.cli.errors import holdings, target_lookup
from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.datasets._own_copy import note as own_copy_note
from glyphforge.storage.location import Location
from glyphforge.storage.remote_cache import INCOMPLETE
from glyphforge.textfmt import count, describe_params, human_size, parse_size, table


def _cache_ls(args: argparse.Namespace) -> int:
    context = data_context(args, remote=True)
    if context.remote is not None:
        return _remote_cache_ls(context.remote)
    store = context.store
    entries = store.ls()
    unreadable = store.unreadable()
    print(_entry_table(entries) if entries
          else f"the cache at {store.root} has no entry you may read" if unreadable
          else f"the cache at {store.root} is empty")
    for problem in unreadable:
        print(f"not listed: {problem}", file=sys.stderr)
    files = _raw_files(args, rehash=False)
    if files:
        print(f"\nupstream files in {_raw_root(args)}:")
        print(table(["dataset", "file", "size", "origin", "hash"],
                    [[file.dataset, file.path.name, human_size(file.size), file.origin, raw.STATES[file.state]]
                     for file in files]))
    return 0


def _entry_table(entries: Sequence[ManifestFields]) -> str:
    """The table of ``cache ls``: one row per entry (local or at a URL)."""
    return table(["key", "kind", "params", "files", "size", "created"],
                 [[e.key[:12], e.kind + own_copy_note(e.meta), describe_params(e.params), len(e.files),
                   _entry_size(e), e.manifest["created"]] for e in entries])


def _entry_size(entry: ManifestFields) -> str:
    """An entry's size, and its decoded copy's beside it when it has one (a local built dataset read at random)."""
    decoded = decoded_bytes(entry.path) if isinstance(entry, Entry) else 0
    return human_size(entry.size_bytes) + (f" + {human_size(decoded)} decoded" if decoded else "")


def _remote_cache_ls(data_dir: Location) -> int:
    """``cache ls`` of a data dir at a URL: its complete entries; upload in progress and broken ones named."""
    scan = remote_cache(data_dir).scan()
    print(_entry_table(scan.entries) if scan.entries else f"the cache at {data_dir}/cache has no entry")
    for url in scan.incomplete:
        print(f"not listed: {url}: {INCOMPLETE}", file=sys.stderr)
    for problem in scan.broken:
        print(f"not listed: {problem} (glyphforge cache verify --data-dir {data_dir})", file=sys.stderr)
    return 0


def _raw_root(args: argparse.Namespace) -> Path:
    return config.data_dir(args.data_dir) / "raw"


def _raw_files(args: argparse.Namespace, rehash: bool) -> list[raw.RawFile]:
    """The files of ``<data dir>/raw/``, checked against the hashes their datasets pin (see `glyphforge.cache.raw`)."""
    return raw.raw_files(_raw_root(args), registry.resources, rehash=rehash)


def _cache_verify(args: argparse.Namespace) -> int:
    context = data_context(args, remote=True)
    if context.remote is not None:
        return _remote_cache_verify(context.remote)
    store = context.store
    problems = store.verify() + _raw_problems(_raw_files(args, rehash=True))
    for problem in problems:
        print(f"{'UNREADABLE' if problem.unreadable else 'CORRUPT'} {problem}{_lost_shards_note(problem)}")
    broken = sum(not problem.unreadable for problem in problems)
    if broken:
        print(f"{broken} problem(s) found; remove broken entries with `glyphforge cache gc` and prepare again (a "
              "damaged decoded copy: see its line)", file=sys.stderr)
    if len(problems) > broken:
        print(f"{len(problems) - broken} item(s) you may not read, so not verified (UNREADABLE above says whose "
              "and what to do)", file=sys.stderr)
    if problems:
        return 1
    print(f"all {count(len(store.ls()), 'entry', 'entries')} in {store.root} verified")
    return 0


def _remote_cache_verify(data_dir: Location) -> int:
    """``cache verify`` of a data dir at a URL: every manifest checked, every data file re-hashed where it lies."""
    scan, problems = remote_cache(data_dir).verify()
    for url in scan.incomplete:
        print(f"INCOMPLETE {url}: {INCOMPLETE}")
    for problem in problems:
        print(f"CORRUPT {problem}")
    if problems:
        print(f"{len(problems)} problem(s) found at {data_dir}; glyphforge does not delete at a URL, and publishing "
              "or building a damaged entry again finds its manifest and does nothing: delete each damaged entry's "
              "objects with the store's own tools first, then publish it again from a machine whose copy is whole, or "
              "build it there again", file=sys.stderr)
        return 1
    print(f"all {count(len(scan.entries), 'entry', 'entries')} at {data_dir} verified")
    return 0


def _raw_problems(files: list[raw.RawFile]) -> list[CacheProblem]:
    """A download that no longer has its pinned hash is a problem; a custom copy placed by hand is named, not one."""
    for file in files:
        if file.state == "differs" and not file.downloaded:
            print(f"CUSTOM {file.path}: placed by hand, {raw.STATES['differs']}")
    checked = [file for file in files if file.state in ("matches", "differs")]
    if checked:
        matching = sum(file.state == "matches" for file in checked)
        print(f"{count(len(checked), 'upstream file')} hashed: {matching} match the pinned hashes")
    return [CacheProblem(file.path, "downloaded by glyphforge, but it no longer has the pinned hash (damaged on "
                         "disk): remove it and run prepare-data again to download it again")
            for file in files if file.state == "differs" and file.downloaded]


def _lost_shards_note(problem: CacheProblem) -> str:
    """For a truncated ``arrays.pklz`` of a build: ". Lost: shards ...; intact: ..." (see `lost_shards`), else ""."""
    entry = read_entry(problem.path.parent) if problem.path.name == ARRAYS_FILE and not problem.unreadable else None
    if entry is None or not is_built(entry) or not problem.path.is_file():
        return ""
    lost = lost_shards(entry, problem.path.stat().st_size)
    return f". {lost}" if lost else ""


def _local_for_deleting(args: argparse.Namespace) -> DataContext:
    """The context of ``cache rm``/``cache gc``: a URL data dir is a `UsageError` (glyphforge never deletes there)."""
    context = data_context(args, remote=True)
    if context.remote is not None:
        raise UsageError(
            f"glyphforge cache {args.cache_command} never deletes anything at a URL ({context.remote}) in this "
            "version. Remove an entry there with the store's own tools, its manifest.json first so that no reader "
            f"trusts it any more ({context.remote}/cache/KIND/KEY/manifest.json, e.g. with `aws s3 rm` or `gcloud "
            "storage rm`, then the rest of the folder); to clean this machine's copy of it, run the command with "
            f"--data-dir {context.data_dir}")
    return context


def _cache_rm(args: argparse.Namespace) -> int:
    store = _local_for_deleting(args).store
    with target_lookup(holdings(store)):
        entry = store.rm(args.key)
    print(f"removed {entry.kind} {entry.key} ({human_size(entry.size_bytes)})")
    return 0


def _cache_gc(args: argparse.Namespace) -> int:
    store = _local_for_deleting(args).store
    try:
        removed = store.gc()
    except CleanupError as error:
        _print_removed(error.removed)
        raise
    _print_removed(removed)
    for problem in store.unreadable():
        print(f"left alone: {problem}", file=sys.stderr)
    if args.raw:
        _collect_raw(args, store)
    if args.max_size is not None:
        try:
            eviction = store.evict(args.max_size)
        except CleanupError as error:
            for path in error.removed:
                print(f"evicted {path}")
            raise
        _print_eviction(eviction)
    return 0


def _collect_raw(args: argparse.Namespace, store: CacheStore) -> None:
    """Remove the downloads every prepared entry is made from (`glyphforge.cache.raw.remove_downloads`), and say so."""
    files = _raw_files(args, rehash=False)
    removed = raw.remove_downloads(files, store.ls())
    for file in removed:
        print(f"removed {file.path} ({human_size(file.size)}, downloaded and converted)")
    placed = sum(not file.downloaded and file.state != "partial" for file in files)
    print(f"{count(len(removed), 'upstream file')} removed ({human_size(sum(file.size for file in removed))})"
          + (f"; {placed} placed by hand left as they are" if placed else ""))


def _print_eviction(eviction: Eviction) -> None:
    """Say what `CacheStore.evict` removed and left, and the size now."""
    for entry in eviction.evicted:
        print(f"evicted {entry.kind} {entry.key[:12]} ({human_size(entry.size_bytes)}, last used "
              f"{_when(entry.last_used)})")
    for entry in eviction.in_use:
        print(f"kept {entry.kind} {entry.key[:12]} ({human_size(entry.size_bytes)}): in use by a process reading it")
    now, limit, before = (human_size(size) for size in (eviction.size_after, eviction.limit, eviction.size_before))
    print(f"{count(len(eviction.evicted), 'entry', 'entries')} evicted; the cache holds {now} (limit {limit}, "
          f"was {before})")
    if not eviction.fits:
        print(f"the cache is still over {human_size(eviction.limit)}: what is left is in use (or never read since "
              "made, and newer); run `glyphforge cache gc --max-size` again once those processes are done",
              file=sys.stderr)


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _byte_size(text: str) -> int:
    """Parse a size such as 20GB (argparse type)."""
    try:
        return parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _print_removed(removed: list[Path]) -> None:
    for path in removed:
        print(f"removed {path}")
    print(f"{len(removed)} item(s) removed")


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add cache to ``glyphforge``'s sub-commands ``commands``."""
    cache = commands.add_parser("cache", help="list, verify and clean the cache",
                                epilog="example:\n  glyphforge cache verify", formatter_class=Formatter)
    cache_commands = cache.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    add_command(cache_commands, "ls", "list cache entries with their sizes, and the upstream files in raw/ with "
                "their hash state", "glyphforge cache ls", _cache_ls)
    add_command(cache_commands, "verify", "re-hash every cached file against its manifest, and every upstream file "
                "against its pinned hash", "glyphforge cache verify", _cache_verify)
    rm = add_command(cache_commands, "rm", "remove one entry by key (or a unique prefix of 6+ characters)",
                     "glyphforge cache rm 3fa2c81b9d", _cache_rm)
    rm.add_argument("key")
    gc = add_command(cache_commands, "gc", "remove abandoned temporaries and broken entries; with --max-size, evict "
                     "the least recently used entries", "glyphforge cache gc --max-size 20GB", _cache_gc)
    gc.add_argument("--raw", action="store_true",
                    help="also remove upstream files in <data dir>/raw that glyphforge downloaded and has converted "
                         "into the cache since (never a file placed by hand); making something new from one "
                         "downloads it again")
    gc.add_argument("--max-size", type=_byte_size, metavar="SIZE",
                    help="then remove the least recently used entries until the cache fits SIZE (20GB, 500MB, "
                         "1.5TiB or bytes); entries a process is reading are never removed")
