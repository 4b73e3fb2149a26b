"""``glyphforge cache ls | verify | rm | gc``: the store of the data dir (`glyphforge.DataContext.entry_store`), on disk
or at a URL."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from glyphforge.builds.reading.entry_files import lost_shards
from glyphforge.builds.reading.protocols import ARRAYS_FILE
from glyphforge.cache import CacheProblem, CleanupError, raw
from glyphforge.cache.entry import Entry, read_entry
from glyphforge.cache.eviction import Eviction
from glyphforge.cache.manifest import is_built
from glyphforge.cache.problems import CORRUPT
from glyphforge.cache.store_protocol import Store
from glyphforge.cli.common import Formatter, add_command, data_context, store_refusals
from glyphforge.cli.errors import holdings, target_lookup
from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.datasets.own_copies import note as own_copy_note
from glyphforge.textfmt import count, describe_params, human_size, parse_size, table


def _cache_ls(args: argparse.Namespace) -> int:
    context = data_context(args, remote=True)
    store = context.entry_store
    with store_refusals():
        scan = store.scan()
    unreadable = any(problem.unreadable for problem in scan.problems)
    print(_entry_table(store, scan.entries) if scan.entries
          else f"the cache at {store.where} has no entry you may read" if unreadable
          else f"the cache at {store.where} is empty")
    for problem in scan.problems:
        verify = f" (glyphforge cache verify --data-dir {_named(context)})" if problem.state == CORRUPT else ""
        print(f"not listed: {problem}{verify}", file=sys.stderr)
    files = _raw_files(context, rehash=False)
    if files:
        print(f"\nupstream files in {_raw_root(context)}:")
        print(table(["dataset", "file", "size", "origin", "hash"],
                    [[file.dataset, file.path.name, human_size(file.size), file.origin, raw.STATES[file.state]]
                     for file in files]))
    return 0


def _named(context: DataContext) -> str:
    """The data dir as given: its URL, or its path."""
    return str(context.remote or context.data_dir)


def _entry_table(store: Store, entries: Sequence[Entry]) -> str:
    """The table of ``cache ls``: one row per entry, its companions' sizes beside its own (``+ 2.0 MB decoded``)."""
    return table(["key", "kind", "params", "files", "size", "created"],
                 [[e.key[:12], e.kind + own_copy_note(e.meta), describe_params(e.params), len(e.files),
                   _entry_size(e, store.companions(e)), e.manifest["created"]] for e in entries])


def _entry_size(entry: Entry, companions: dict[str, int]) -> str:
    """An entry's size, and each of its companions' beside it (a local built dataset read at random has a decoded
    copy)."""
    return human_size(entry.size_bytes) + "".join(f" + {human_size(size)} {label}"
                                                  for label, size in companions.items())


def _raw_root(context: DataContext) -> Path | None:
    """``<data dir>/raw``, where upstream files are downloaded; None for a data dir at a URL (none are read there)."""
    return None if context.remote is not None else context.data_dir / "raw"


def _raw_files(context: DataContext, rehash: bool) -> list[raw.RawFile]:
    """The files of ``<data dir>/raw/``, checked against the hashes their datasets pin (see `glyphforge.cache.raw`)."""
    root = _raw_root(context)
    return [] if root is None else raw.raw_files(root, registry.resources, rehash=rehash)


def _cache_verify(args: argparse.Namespace) -> int:
    context = data_context(args, remote=True)
    store = context.entry_store
    with store_refusals():
        problems = store.verify() + _raw_problems(_raw_files(context, rehash=True))
    for problem in problems:
        print(f"{problem.state} {problem}{_lost_shards_note(problem)}")
    broken = sum(problem.state == CORRUPT for problem in problems)
    if broken:
        copies = "".join(f" (a damaged {label} copy: see its line)"
                         for label in sorted({problem.companion for problem in problems if problem.companion}))
        print(f"{broken} problem(s) found {store.place}; {store.repair}{copies}", file=sys.stderr)
    unreadable = sum(problem.unreadable for problem in problems)
    if unreadable:
        print(f"{unreadable} item(s) you may not read, so not verified (UNREADABLE above says whose and what to do)",
              file=sys.stderr)
    if any(problem.failing for problem in problems):
        return 1
    print(f"all {count(len(store.ls()), 'entry', 'entries')} {store.place} verified")
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
    """For a truncated ``arrays.pklz`` of a build on disk: ". Lost: shards ...; intact: ..." (see `lost_shards`),
    else ""."""
    path = problem.path
    if not isinstance(path, Path) or path.name != ARRAYS_FILE or problem.unreadable:
        return ""
    entry = read_entry(path.parent)
    if entry is None or not is_built(entry) or not path.is_file():
        return ""
    lost = lost_shards(entry, path.stat().st_size)
    return f". {lost}" if lost else ""


def _cache_rm(args: argparse.Namespace) -> int:
    store = data_context(args, remote=True).entry_store
    with store_refusals(), target_lookup(holdings(store)):
        entry = store.rm(args.key)
    print(f"removed {entry.kind} {entry.key} ({human_size(entry.size_bytes)})")
    return 0


def _cache_gc(args: argparse.Namespace) -> int:
    context = data_context(args, remote=True)
    store = context.entry_store
    try:
        with store_refusals():
            removed = store.gc()
    except CleanupError as error:
        _print_removed(error.removed)
        raise
    _print_removed([*removed, *(file.path for file in raw.remove_damaged(_raw_files(context, rehash=True)))])
    for problem in store.unreadable():
        print(f"left alone: {problem}", file=sys.stderr)
    if args.raw:
        _collect_raw(context)
    if args.max_size is not None:
        try:
            eviction = store.evict(args.max_size)
        except CleanupError as error:
            for path in error.removed:
                print(f"evicted {path}")
            raise
        _print_eviction(eviction)
    return 0


def _collect_raw(context: DataContext) -> None:
    """Remove the downloads every prepared entry is made from (`glyphforge.cache.raw.remove_downloads`), and say so."""
    files = _raw_files(context, rehash=False)
    removed = raw.remove_downloads(files, context.store.ls())
    for file in removed:
        print(f"removed {file.path} ({human_size(file.size)}, downloaded and converted)")
    placed = sum(not file.downloaded and file.state != "partial" for file in files)
    print(f"{count(len(removed), 'upstream file')} removed ({human_size(sum(file.size for file in removed))})"
          + (f"; {placed} placed by hand left as they are" if placed else ""))


def _print_eviction(eviction: Eviction) -> None:
    """Say what `Store.evict` removed and left, and the size now."""
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
    gc = add_command(cache_commands, "gc", "remove abandoned temporaries and what `cache verify` reports damaged "
                     "(glyphforge's own files only: entries, decoded copies, downloads); with --max-size, evict the "
                     "least recently used entries", "glyphforge cache gc --max-size 20GB", _cache_gc)
    gc.add_argument("--raw", action="store_true",
                    help="also remove upstream files in <data dir>/raw that glyphforge downloaded and has converted "
                         "into the cache since (never a file placed by hand); making something new from one "
                         "downloads it again")
    gc.add_argument("--max-size", type=_byte_size, metavar="SIZE",
                    help="then remove the least recently used entries until the cache fits SIZE (20GB, 500MB, "
                         "1.5TiB or bytes); entries a process is reading are never removed")
