"""The ``prepare-data`` command: datasets prepared into the cache (and published to a URL data dir).

With ``--list`` or ``--download-only`` it prepares nothing: see `glyphforge.cli.prepare_files`.
A run that lacks upstream files names them all at once (`still_missing`).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from glyphforge.cache import Entry
from glyphforge.cli import prepare_files
from glyphforge.cli.args import UsageError, add_option, parse_shape
from glyphforge.cli.common import Formatter, add_common, add_fetch_arguments, data_context, name_width, new_parser
from glyphforge.cli.dataset_options import Option, prepare_options
from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.datasets.preparing import Prepared, prepare
from glyphforge.datasets.upstream import in_the_way, still_missing
from glyphforge.pipelines.fetch_all import missing_files
from glyphforge.pipelines.resource import DownloadError
from glyphforge.storage.location import Location
from glyphforge.textfmt import count, human_size, table
from glyphforge.urls import redacted


def _description() -> str:
    return ("Download, verify and convert datasets into the cache, and make resized variants. "
            "Running it again does nothing (cache hit).\n\ndatasets:\n"
            + "\n".join(f"  {name:{name_width()}s} {registry.get(name).summary}" for name in registry.registered()))


def _example(command: str) -> str:
    return (f"{command} emnist omniglot --shape 14x14 --mirror file:///shared/mirror\n"
            f"  {command} all --download-only --to ./mirror     # with network; then, without:\n"
            f"  {command} all --mirror ./mirror --offline")


def prepare_parser() -> argparse.ArgumentParser:
    """The parser of ``prepare-data`` (the alias of ``glyphforge prepare``): every registered dataset, its options."""
    parser = new_parser("prepare-data", _description(), _example("prepare-data"))
    add_prepare_arguments(parser)
    return parser


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add ``prepare`` (``prepare-data``'s arguments and action) to ``glyphforge``'s sub-commands ``commands``."""
    parser = commands.add_parser("prepare", help="download, verify and convert datasets into the cache (also the "
                                 "command prepare-data)", description=_description(),
                                 epilog=f"example:\n  {_example('glyphforge prepare')}", formatter_class=Formatter)
    add_prepare_arguments(parser)
    parser.set_defaults(action=prepare_data)


def add_prepare_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``prepare-data`` and ``glyphforge prepare`` to ``parser``."""
    names = registry.registered()
    # default "all", a string: argparse (3.11) checks a list default against the choices as one value, and fails
    parser.add_argument("datasets", nargs="*", choices=[*names, "all"], default="all", metavar="DATASET",
                        help=f"what to prepare: {', '.join(names)} or all (default all)")
    parser.add_argument("--shape", action="append", dest="shapes", type=parse_shape, default=[], metavar="HxW",
                        help="also make a resized variant (repeatable), e.g. 14x14")
    add_fetch_arguments(parser)
    prepare_files.add_file_arguments(parser)
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="do not compile the numba kernels at the end (by default it does, like glyphforge "
                             "warmup: a few seconds once per machine, well under one when already done)")
    for name in names:
        options = prepare_options(name)
        if options:
            group = parser.add_argument_group(f"{name} options")
            for option in options:
                add_option(group, option, _option_dest(name, option))
    add_common(parser)


def _option_dest(dataset: str, option: Option) -> str:
    return f"{dataset}:{option.param}"


def prepare_jobs(
    args: argparse.Namespace, context: DataContext | None = None
) -> list[tuple[str, Callable[[], Prepared]]]:
    """One job per dataset to prepare: `glyphforge.prepare` of it with ``context`` (None: the arguments')
    and the options given on the command line."""
    context = context or data_context(args)
    return [(name, functools.partial(prepare, name, shapes=tuple(args.shapes), context=context, **options))
            for name, options in wanted_options(args).items()]


def wanted_options(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The datasets named (``all``: every registered one), each with its options given on the command line."""
    wanted = registry.registered() if "all" in args.datasets else list(dict.fromkeys(args.datasets))
    return {name: _given_options(args, name) for name in wanted}


def _given_options(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """The options of dataset ``name`` given on the command line, by keyword (those not given are left out)."""
    given = {option.param: getattr(args, _option_dest(name, option)) for option in prepare_options(name)}
    return {param: value for param, value in given.items() if value is not None}


def _entry_images(entry: Entry) -> int | str:
    return entry.meta.get("n_images", "?")


def _entry_label(entry: Entry) -> str:
    """``'small1 28x28 3fa2c81b9d'``: the dataset's label of the entry (`registry.entry_label`), the key's start."""
    return f"{registry.entry_label(entry)} {entry.key[:10]}"


def prepare_data(args: argparse.Namespace) -> int:
    """``prepare-data``: each dataset prepared into the data dir (`glyphforge.prepare`), then a table of what is new."""
    context = data_context(args, remote=True)
    prepare_files.check_file_arguments(args, context)
    wanted = wanted_options(args)
    files = prepare_files.wanted_files(wanted, context)  # every dataset's options checked before any work
    if args.list or args.download_only:
        if args.list:
            prepare_files.list_files(files, list(wanted), args.json)
        else:
            prepare_files.download_files(files, args.to, context, prepare_files.command_line(wanted), args.quiet)
        return 0
    if context.remote is not None:
        _check_publish_target(context.remote)
    rows: list[list[object]] = []
    missing: list[DownloadError] = []
    # after a missing file, the other datasets without the network: what else is missing is named at once
    offline_jobs = dict(prepare_jobs(args, dataclasses.replace(context, offline=True)))
    for name, job in prepare_jobs(args, context):
        try:
            done = offline_jobs[name]() if missing else job()
        except DownloadError as error:
            if in_the_way(error) and not missing:
                raise  # the user's own file in place: its message says what to do with it
            missing += still_missing(name, wanted[name], context, error)
            continue
        if not args.quiet:
            _say_published(done, context.remote)
        if done.found:
            continue
        if not done.made:
            if not args.quiet and context.remote is None:  # published: `_say_published` said what it did
                print(f"{name}: already prepared (cache hit), nothing to do")
            continue
        for entry in done.entries:
            rows.append([name, _entry_label(entry), _entry_images(entry), human_size(entry.size_bytes),
                         f"{done.seconds:.1f}"])
    if rows and not args.quiet:
        print(table(["dataset", "entry", "images", "size", "seconds"], rows))
    if len(missing) == 1:
        raise missing[0]  # its own message says it all
    if missing:
        raise missing_files(missing, prepare_files.offline_advice(wanted), first_in_full=not context.offline)
    if args.warmup:  # the first build need not compile (fast when warm)
        from glyphforge.warmup import warmup

        started = time.perf_counter()
        warmup()
        logging.getLogger(__name__).info("numba kernels ready in %.1f s (glyphforge warmup)",
                                         time.perf_counter() - started)
    return 0


def _check_publish_target(location: Location) -> None:
    """Refuse, before any work, a URL data dir prepare-data cannot publish to (``https://``: read-only)."""
    from glyphforge.cache.remote.publish import target_location

    try:
        target_location(location)
    except ValueError as error:
        raise UsageError(f"prepare-data publishes what it prepares to the URL data dir, and {error}") from None


def _say_published(done: Prepared, remote: Location | None) -> None:
    """Say what was found or published at the URL data dir ``remote`` for one dataset (nothing for a local one)."""
    if done.found:
        print(f"{done.dataset}: already at {remote} ({count(len(done.urls), 'entry', 'entries')}), nothing to do")
    for published in done.published:
        print(f"{done.dataset}: {'already at' if published.already else 'published to'} {redacted(published.url)}")
