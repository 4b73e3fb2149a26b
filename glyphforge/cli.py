"""The ``prepare-data`` and ``glyphforge`` commands.

Errors are reported as one paragraph (what failed, why, what to do) with exit
status 1; ``-v`` adds the Python traceback.
"""
from __future__ import annotations

import argparse
import functools
import logging
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from glyphforge import config
from glyphforge.builds.builder import SpecError
from glyphforge.builds.dataset import ARRAYS_FILE, BuiltDataset, is_built, lost_shards
from glyphforge.builds.export import ExportTargetError
from glyphforge.builds.scene_sources import dataset_part
from glyphforge.cache import CacheProblem, CacheStore, CleanupError, Entry, raw
from glyphforge.cache.decoded import decoded_bytes
from glyphforge.cache.entry import read_entry
from glyphforge.cache.eviction import Eviction
from glyphforge.cache.lookup import AmbiguousKindError
from glyphforge.cache.manifest import ManifestFields
from glyphforge.cli_args import (
    UsageError,
    add_option,
    add_scene_arguments,
    check_env_data_dir,
    data_directory,
    name_value,
    parse_shape,
    positive,
    scene_spec,
)
from glyphforge.cli_errors import holdings, target_lookup
from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.datasets._own_copy import note as own_copy_note
from glyphforge.session import check_session
from glyphforge.storage.location import Location, is_url
from glyphforge.storage.remote_cache import INCOMPLETE, RemoteCache, UnlistableURLError
from glyphforge.textfmt import count, describe_params, human_size, parse_size, table

if TYPE_CHECKING:
    from glyphforge.storage.publish import Published


# -- shared argument parsing -----------------------------------------------
class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the example epilog's line breaks."""


def _parser(prog: str, description: str, example: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog=prog, description=description, epilog=f"example:\n  {example}", formatter_class=_Formatter
    )


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=data_directory, default=None,
                        help="data directory (default: $GLYPHFORGE_DATA_DIR or the user data dir)")
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument("-q", "--quiet", action="store_true", help="no progress bars or tables, errors only")
    noise.add_argument("-v", "--verbose", action="store_true", help="show Python tracebacks on errors")


def _add_fetch_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--mirror``, ``--no-verify`` and ``--offline``: how missing data is fetched (see `_context`)."""
    fetch = parser.add_argument_group("fetching (when data is missing)")
    fetch.add_argument("--mirror", action="append", dest="mirrors", default=[], metavar="URL",
                       help="mirror base tried before the origin: a directory, an https://, file:// or object "
                            "storage URL (s3://, gs://; not used --offline) (repeatable; also $GLYPHFORGE_MIRROR)")
    fetch.add_argument("--no-verify", action="store_true",
                       help="do not check the hash of a local archive given on the command line or of hand-placed "
                            "files (custom archives); downloads are always checked")
    fetch.add_argument("--offline", action="store_true",
                       help="never use the network: files must be in place or on local mirrors (also "
                            "$GLYPHFORGE_OFFLINE=1)")


def _context(args: argparse.Namespace, *, remote: bool = False) -> DataContext:
    """The one data context of a command: ``--data-dir``, the fetch arguments and ``-q``, over the environment.

    ``remote``: the command works with a data dir that is a URL; otherwise such a one is a `UsageError`.
    Commands without the fetch arguments (`_add_fetch_arguments`) take the environment's.
    """
    context = DataContext.resolve(
        data_dir=args.data_dir, mirrors=getattr(args, "mirrors", None),
        offline=True if getattr(args, "offline", False) else None,
        verify=not getattr(args, "no_verify", False), progress=not args.quiet,
    )
    if context.remote is not None and not remote:
        raise UsageError(f"the data dir {context.remote} is a URL, and this command works on a data dir on a local or "
                         "mounted filesystem: give a path with --data-dir (or in $GLYPHFORGE_DATA_DIR)")
    return context


def _run(action: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run ``action`` (once a data dir from the environment passes --data-dir's checks); show glyphforge's log lines
    (retries, lock waits, slow downloads) unless -q.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("glyphforge")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO)
    store_client = logging.getLogger("gcsfs")  # logs a traceback for each failure glyphforge then names
    store_level = store_client.level
    if not args.verbose:
        store_client.setLevel(logging.CRITICAL)
    try:
        from tqdm.contrib.logging import logging_redirect_tqdm

        if args.data_dir is None:  # the environment's data dir, checked as --data-dir is
            check_env_data_dir()
        with logging_redirect_tqdm(loggers=[logger]):  # log lines print above progress bars, not through them
            return action(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # every failure ends as one readable paragraph
        if args.verbose:
            traceback.print_exc()
        message = error.args[0] if isinstance(error, KeyError) and error.args else error  # no repr quotes
        print(f"error: {message}", file=sys.stderr)
        if isinstance(error, (UsageError, SpecError, ExportTargetError, AmbiguousKindError)):  # nothing was done
            return 2
        if not args.verbose:
            print("(run again with -v for the Python traceback)", file=sys.stderr)
        return 1
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        store_client.setLevel(store_level)


# -- prepare-data ------------------------------------------------------------
def _prepare_parser() -> argparse.ArgumentParser:
    names = registry.registered()
    parser = _parser(
        "prepare-data",
        "Download, verify and convert datasets into the cache, and make resized variants. "
        "Running it again does nothing (cache hit).\n\ndatasets:\n"
        + "\n".join(f"  {name:{_name_width()}s} {registry.get(name).summary}" for name in names),
        "prepare-data emnist omniglot --shape 14x14 --mirror file:///shared/mirror",
    )
    # default "all", a string: argparse (3.11) checks a list default against the choices as one value, and fails
    parser.add_argument("datasets", nargs="*", choices=[*names, "all"], default="all", metavar="DATASET",
                        help=f"what to prepare: {', '.join(names)} or all (default all)")
    parser.add_argument("--shape", action="append", dest="shapes", type=parse_shape, default=[], metavar="HxW",
                        help="also make a resized variant (repeatable), e.g. 14x14")
    _add_fetch_arguments(parser)
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="do not compile the numba kernels at the end (by default it does, like glyphforge "
                             "warmup: a few seconds once per machine, well under one when already done)")
    for name in names:
        record = registry.get(name)
        if record.options:
            group = parser.add_argument_group(f"{name} options")
            for option in record.options:
                add_option(group, option, _option_dest(name, option))
    _add_common(parser)
    return parser


def _name_width() -> int:
    """The width of the name column in ``--help`` and ``info``: the longest registered name, at least 12."""
    return max(12, *map(len, registry.registered()))


def _option_dest(dataset: str, option: registry.Option) -> str:
    return f"{dataset}:{option.param}"


def _prepare_jobs(
    args: argparse.Namespace, context: DataContext | None = None
) -> list[tuple[str, Callable[[], list[Entry]]]]:
    """One job per dataset to prepare: its record's ``prepare`` with ``context`` (None: the arguments')
    and the options given on the command line."""
    wanted = registry.registered() if "all" in args.datasets else list(dict.fromkeys(args.datasets))
    context = context or _context(args)
    jobs: list[tuple[str, Callable[[], list[Entry]]]] = []
    for name in wanted:
        jobs.append((name, functools.partial(dataset_part(name, "prepare", context), shapes=tuple(args.shapes),
                                             **_given_options(args, name))))
    return jobs


def _given_options(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """The options of dataset ``name`` given on the command line, by keyword (those not given are left out)."""
    given = {option.param: getattr(args, _option_dest(name, option)) for option in registry.get(name).options}
    return {param: value for param, value in given.items() if value is not None}


def _entry_images(entry: Entry) -> int | str:
    return entry.meta.get("n_images", "?")


def _entry_label(entry: Entry) -> str:
    """``'small1 28x28 3fa2c81b9d'``: the dataset's label of the entry (`registry.entry_label`), the key's start."""
    return f"{registry.entry_label(entry)} {entry.key[:10]}"


def _prepare(args: argparse.Namespace) -> int:
    context = _context(args, remote=True)
    if context.remote is not None:
        _check_publish_target(context.remote)
    store = context.store
    rows = []
    for name, job in _prepare_jobs(args, context):
        if context.remote is not None and context.verify and _already_at_url(args, context.remote, name):
            continue
        known = {entry.key for entry in store.ls()}
        started = time.perf_counter()
        entries = job()
        seconds = time.perf_counter() - started
        if context.remote is not None:
            _publish_prepared(args, context, name, entries)
        if all(entry.key in known for entry in entries):
            if not args.quiet and context.remote is None:  # published: `_publish_prepared` said what it did
                print(f"{name}: already prepared (cache hit), nothing to do")
            continue
        for entry in entries:
            rows.append([name, _entry_label(entry), _entry_images(entry), human_size(entry.size_bytes),
                         f"{seconds:.1f}"])
    if rows and not args.quiet:
        print(table(["dataset", "entry", "images", "size", "seconds"], rows))
    if args.warmup:  # the first build need not compile (fast when warm)
        from glyphforge.warmup import warmup

        started = time.perf_counter()
        warmup()
        logging.getLogger(__name__).info("numba kernels ready in %.1f s (glyphforge warmup)",
                                         time.perf_counter() - started)
    return 0


def _request_key(args: argparse.Namespace, name: str) -> str:
    """The key of what prepare-data was asked for ``name`` (see `glyphforge.storage.prepared`)."""
    from glyphforge.storage.prepared import request_key

    return request_key(name, _given_options(args, name), args.shapes)


def _check_publish_target(location: Location) -> None:
    """Refuse, before any work, a URL data dir prepare-data cannot publish to (``https://``: read-only)."""
    from glyphforge.storage.publish import target_location

    try:
        target_location(location)
    except ValueError as error:
        raise UsageError(f"prepare-data publishes what it prepares to the URL data dir, and {error}") from None


def _already_at_url(args: argparse.Namespace, remote: Location, name: str) -> bool:
    """Whether what was asked for ``name`` is published whole at the URL data dir ``remote`` already (then say so)."""
    from glyphforge.storage.prepared import published_request

    urls = published_request(remote, name, _request_key(args, name))
    if urls is not None and not args.quiet:
        print(f"{name}: already at {remote} ({count(len(urls), 'entry', 'entries')}), nothing to do")
    return urls is not None


def _publish_prepared(args: argparse.Namespace, context: DataContext, name: str, entries: list[Entry]) -> None:
    """Publish the entries prepare-data made or used for ``name`` to the URL data dir, then record the request."""
    from glyphforge.storage.prepared import record_request
    from glyphforge.storage.publish import publish_entry

    assert context.remote is not None
    for entry in entries:
        published = publish_entry(entry, context.remote, progress=context.progress)
        if not args.quiet:
            print(f"{name}: {'already at' if published.already else 'published to'} {published.url}")
    if context.verify:  # own files (--no-verify) may change: only what upstream's files made is recorded
        record_request(context.remote, name, _request_key(args, name), entries)


def prepare_data_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``prepare-data``."""
    args = _prepare_parser().parse_args(argv)
    return _run(_prepare, args)


# -- glyphforge --------------------------------------------------------------
def _cache_ls(args: argparse.Namespace) -> int:
    context = _context(args, remote=True)
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


def _remote_cache(data_dir: Location) -> RemoteCache:
    """The store of the data dir at ``data_dir``; a `UsageError` when it cannot be listed (HTTP)."""
    cache = RemoteCache(data_dir)
    try:
        cache.check_listable()
    except UnlistableURLError as error:
        raise UsageError(str(error)) from None
    return cache


def _remote_cache_ls(data_dir: Location) -> int:
    """``cache ls`` of a data dir at a URL: its complete entries; upload in progress and broken ones named."""
    scan = _remote_cache(data_dir).scan()
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
    context = _context(args, remote=True)
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
    scan, problems = _remote_cache(data_dir).verify()
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
    context = _context(args, remote=True)
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


def _info(args: argparse.Namespace) -> int:
    context = _context(args, remote=True)
    entries: Sequence[ManifestFields]
    if context.remote is not None:
        entries, cache = _remote_cache(context.remote).ls(), f"{context.remote}/cache"
    else:
        store = context.store
        entries, cache = store.ls(), str(store.root)
    print(f"data dir:   {context.remote or context.data_dir}")
    print(f"cache:      {cache} ({count(len(entries), 'entry', 'entries')}, "
          f"{human_size(sum(e.size_bytes for e in entries))})")
    if context.remote is not None:
        print(f"local copy: {context.data_dir} (entries fetched from the URL, and what is made on this machine)")
    print(f"mirrors:    {' '.join(context.mirrors) or '(none; give --mirror or set $GLYPHFORGE_MIRROR)'}")
    print(f"offline:    {'yes' if context.offline else 'no'}")
    print(f"verify:     {'yes' if context.verify else 'no (--no-verify)'}")
    print("datasets:")
    datasets = registry.registered()
    for dataset in datasets:
        prepared = sorted({describe_params(_without_sources(e.params)) + own_copy_note(e.meta) for e in entries
                           if e.kind == dataset})
        print(f"  {dataset:{_name_width()}s} "
              f"{'; '.join(prepared) if prepared else 'not prepared (prepare-data ' + dataset + ')'}")
    built = sorted({e.kind for e in entries} - set(datasets))
    print("built:" if built else "built:      nothing yet (glyphforge build scenes --help)")
    for kind in built:
        of_kind = [e for e in entries if e.kind == kind]
        newest, own = of_kind[-1], [note for note in (own_copy_note(e.meta) for e in of_kind) if note]  # by creation
        size = human_size(sum(e.size_bytes for e in of_kind)) + "".join(f", {len(own)} of them{n}" for n in own[:1])
        print(f"  {kind:{_name_width()}s} {count(len(of_kind), 'entry', 'entries')}, {size}; "
              f"newest {newest.key[:12]} ({newest.meta.get('n_examples', '?')} examples){own_copy_note(newest.meta)}")
    return 0


def _without_sources(params: dict[str, Any]) -> dict[str, Any]:
    """A dataset entry's parameters without the upstream hash or commit (the same for every entry)."""
    return {name: value for name, value in params.items() if name not in ("source", "commit")}


def _preview(args: argparse.Namespace) -> int:
    from glyphforge.previews import find_target, preview_built, preview_entry

    if is_url(args.data_dir):  # a built dataset read where it lies
        dataset = _find_built(args.target, DataContext.resolve(data_dir=args.data_dir))
        path = preview_built(dataset, out=args.out, n=args.n, seed=args.seed)
    else:
        context = DataContext.resolve(data_dir=args.data_dir, download=False)
        with target_lookup():
            entry = find_target(context.store, args.target)
        path = preview_entry(entry, context, out=args.out, n=args.n, seed=args.seed)
    print(f"wrote {path}")
    return 0


def _find_built(target: str, context: DataContext) -> BuiltDataset:
    """The built dataset ``target`` of the context's data dir; one at a URL is read where it lies.

    A target that names nothing (or a kind or key prefix for a data dir that cannot be listed, HTTP) is a `UsageError`.
    """
    from glyphforge.builds.dataset import find_built

    with target_lookup():
        if context.remote is None:
            return find_built(target, data_dir=context.data_dir)
        return find_built(target, data_dir=context.remote, cache_dir=context.cache_dir)


def _warmup(args: argparse.Namespace) -> int:
    from glyphforge.warmup import cache_location, warmup

    started = time.perf_counter()
    timings = warmup()
    rows = [[name, f"{seconds:.2f}"] for name, seconds in timings]
    print(table(["kernel", "seconds"], rows))
    print(f"ready in {time.perf_counter() - started:.1f} s; compiled kernels are kept in {cache_location()}")
    return 0


def _export(args: argparse.Namespace) -> int:
    dataset = _find_built(args.target, _context(args, remote=True))
    started = time.perf_counter()
    path = dataset.export(args.directory, format=args.format, overwrite=args.overwrite)
    seconds = time.perf_counter() - started
    print(f"exported {dataset.entry.kind} {dataset.key[:12]} ({len(dataset)} examples, "
          f"{human_size(dataset.nbytes)}) to {path} in {seconds:.1f} s")
    return 0


def _publish(args: argparse.Namespace) -> int:
    from glyphforge.storage.publish import LocalSourceError, find_entry, publish_entry, source_store

    try:
        store = source_store(args.data_dir)
    except LocalSourceError as error:  # the arguments: nothing was done
        raise UsageError(str(error)) from None
    with target_lookup():
        entry = find_entry(store, args.target)
    started = time.perf_counter()
    published = publish_entry(entry, args.url, progress=not args.quiet)
    if not args.quiet:  # on stderr: stdout is the entry URL alone, for scripts
        print(_publish_summary(entry, published, time.perf_counter() - started), file=sys.stderr)
    print(published.url)
    return 0


def _publish_summary(entry: Entry, published: Published, seconds: float) -> str:
    """One line saying what `publish_entry` did with ``entry``."""
    name = f"{entry.kind} {entry.key[:12]}"
    if published.already:
        return f"{name}: already published, nothing uploaded"
    size = human_size(sum(entry.manifest["files"][file]["size"] for file in published.uploaded))
    present = f"; {count(len(published.present), 'file')} already there" if published.present else ""
    files = count(len(published.uploaded), "file")
    return f"{name}: published {files} ({size}) and the manifest in {seconds:.1f} s{present}"


def _publish_url(text: str) -> str:
    """Parse publish's URL (argparse type): a data dir URL glyphforge may write to (see `target_location`)."""
    from glyphforge.storage.publish import target_location

    try:
        return target_location(text).url
    except ValueError as error:  # also UnsupportedURLError: an unknown scheme, or its package missing
        raise argparse.ArgumentTypeError(str(error)) from None


def _build_scenes(args: argparse.Namespace) -> int:
    from glyphforge import build
    from glyphforge.builds.remote_build import build_into, check_writable

    context = _context(args, remote=True)
    try:
        spec = scene_spec(args)
        check_session(args.session, dict(args.session_options))
        if context.remote is not None:
            check_writable(context.remote)
    except (ValueError, TypeError) as error:  # the spec's and session's own checks: bad arguments, before any work
        raise UsageError(str(error)) from None
    if context.remote is not None:  # into object storage: say where, without opening a reader of it
        entry = build_into(spec, context, args.session, progress=not args.quiet,
                           session_options=dict(args.session_options))
        print(f"built {spec.n_examples} scenes: entry {entry.name} at {entry}")
        return 0
    dataset = build(spec, session=args.session, context=context, progress=not args.quiet,
                    session_options=dict(args.session_options))
    print(f"built {len(dataset)} scenes: entry {dataset.key} at {dataset.path}")
    return 0


def _glyphforge_parser() -> argparse.ArgumentParser:
    parser = _parser("glyphforge", "Inspect the cache, preview data and build derived datasets.",
                     "glyphforge build scenes --glyphs font --n-examples 2000")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, example: str, action: Callable[[argparse.Namespace], int], parent=commands):
        sub = parent.add_parser(name, help=help_text, description=help_text, epilog=f"example:\n  {example}",
                                formatter_class=_Formatter)
        _add_common(sub)
        sub.set_defaults(action=action)
        return sub

    info = command("info", "show the data dir, the cache, what is prepared, and the mirrors and offline mode a "
                   "command given the same arguments uses", "glyphforge info --mirror file:///shared/mirror", _info)
    _add_fetch_arguments(info)

    cache = commands.add_parser("cache", help="list, verify and clean the cache",
                                epilog="example:\n  glyphforge cache verify", formatter_class=_Formatter)
    cache_commands = cache.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    command("ls", "list cache entries with their sizes, and the upstream files in raw/ with their hash state",
            "glyphforge cache ls", _cache_ls, cache_commands)
    command("verify", "re-hash every cached file against its manifest, and every upstream file against its pinned "
            "hash", "glyphforge cache verify", _cache_verify, cache_commands)
    rm = command("rm", "remove one entry by key (or a unique prefix of 6+ characters)",
                 "glyphforge cache rm 3fa2c81b9d", _cache_rm, cache_commands)
    rm.add_argument("key")
    gc = command("gc", "remove abandoned temporaries and broken entries; with --max-size, evict the least recently "
                 "used entries", "glyphforge cache gc --max-size 20GB", _cache_gc, cache_commands)
    gc.add_argument("--raw", action="store_true",
                    help="also remove upstream files in <data dir>/raw that glyphforge downloaded and has converted "
                         "into the cache since (never a file placed by hand); making something new from one "
                         "downloads it again")
    gc.add_argument("--max-size", type=_byte_size, metavar="SIZE",
                    help="then remove the least recently used entries until the cache fits SIZE (20GB, 500MB, "
                         "1.5TiB or bytes); entries a process is reading are never removed")

    preview = command("preview", "write a PNG grid of examples of a dataset or a cache entry",
                      "glyphforge preview emnist --out emnist.png", _preview)
    preview.add_argument("target", help=f"a dataset ({', '.join(registry.registered())}), the kind of a built dataset "
                                        "with one entry (KIND:newest: its newest), or a cache key (prefix) of any "
                                        "entry")
    preview.add_argument("--out", type=Path, default=Path("preview.png"), help="PNG file to write")
    preview.add_argument("-n", type=positive, default=16, help="number of examples (1 or more)")
    preview.add_argument("--seed", type=int, default=0, help="which examples to pick")

    command("warmup", "compile every numba kernel once (cluster images, job prologues); fast when already warm",
            "glyphforge warmup", _warmup)

    export = command("export", "write a built dataset's arrays as .npy files (+ metadata.json) for memory-mapping",
                     "glyphforge export scenes ./scenes-npy", _export)
    export.add_argument("target", help="the kind of a built dataset with one entry (KIND:newest: its newest) or a "
                                       "cache key (prefix)")
    export.add_argument("directory", type=Path, help="where to write <array>.npy and metadata.json")
    export.add_argument("--format", choices=["npy"], default="npy", help="file format (default: npy)")
    export.add_argument("--overwrite", action="store_true",
                        help="replace an earlier export in the directory (nothing else is ever replaced)")
    _add_fetch_arguments(export)

    publish = command("publish", "upload a cache entry (built or prepared) to a data dir URL: data files first, the "
                      "manifest last; resumes an interrupted upload, and uploads nothing when the entry is there; "
                      "prints the entry's URL", "glyphforge publish scenes s3://my-bucket/glyphforge", _publish)
    publish.add_argument("target", help="a kind with one entry (KIND:newest: its newest) or a cache key (prefix of 6+ "
                                        "characters) of the local data dir (--data-dir)")
    publish.add_argument("url", type=_publish_url,
                         help="the data dir URL: s3://bucket/prefix, gs://bucket/prefix or file:///abs/path (the entry "
                              "lands at URL/cache/KIND/KEY); credentials as the store's SDK reads them")

    build = commands.add_parser("build", help="build a derived dataset in parallel",
                                epilog="example:\n  glyphforge build scenes --glyphs font --n-examples 2000",
                                formatter_class=_Formatter)
    build_commands = build.add_subparsers(dest="build_command", required=True, metavar="DATASET")
    scenes = command("scenes", "scattered glyphs on backgrounds, with boxes and labels",
                     "glyphforge build scenes --n-examples 100000 --glyphs emnist --characters 0123456789 "
                     "--backgrounds hard --session processes:8", _build_scenes, build_commands)
    scenes.add_argument("--session", default="local",
                        help="where to run: local, processes[:N], dask[:N] (a LocalCluster), dask://HOST:PORT, "
                             "slurm[:JOBS], pbs[:JOBS]")
    scenes.add_argument("--session-option", action="append", dest="session_options", type=name_value,
                        default=[], metavar="NAME=VALUE",
                        help="a session option (repeatable), e.g. cores=4 memory=16GB queue=normal walltime=02:00:00 "
                             "for slurm/pbs (any dask-jobqueue keyword)")
    add_scene_arguments(scenes)
    _add_fetch_arguments(scenes)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``glyphforge``."""
    args = _glyphforge_parser().parse_args(argv)
    return _run(args.action, args)
