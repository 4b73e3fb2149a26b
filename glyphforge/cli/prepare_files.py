"""``prepare-data --list`` and ``--download-only --to DIR``: the upstream files, for machines without network.

``--list`` prints every upstream file the datasets named (with the options given) need: dataset,
file name, size, hash, every URL, where to place it by hand and its path inside a mirror folder,
then a total (``--json``: the same as one JSON document). It reads the registry only: no
network, no file. ``--download-only --to DIR`` fetches exactly those files, verified, into
``DIR`` laid out as a mirror, from which ``prepare-data NAMES --mirror DIR --offline`` then
prepares everything with no network.
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from glyphforge._files import unwritable
from glyphforge.cli.args import UsageError, checked_data_dir
from glyphforge.cli.dataset_options import prepare_options
from glyphforge.context import DataContext
from glyphforge.datasets.upstream import UpstreamFile, fetch_into, upstream_files
from glyphforge.pipelines.sources import local_mirror
from glyphforge.textfmt import count, human_size

#: The version of ``--list --json``'s document: its keys are stable within one.
JSON_VERSION = 1


def add_file_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--list``, ``--json``, ``--download-only`` and ``--to``."""
    files = parser.add_argument_group("upstream files (for machines without network)")
    files.add_argument("--list", action="store_true",
                       help="print every upstream file these datasets need (size, hash, URLs, where to place it, "
                            "its path in a mirror folder) and a total; no network, nothing written")
    files.add_argument("--json", action="store_true", help="with --list: print it as one JSON document")
    files.add_argument("--download-only", action="store_true",
                       help="fetch those files (verified) into the folder --to DIR, laid out as a mirror, and "
                            "prepare nothing; then, offline: prepare-data NAMES --mirror DIR --offline")
    files.add_argument("--to", type=to_directory, default=None, metavar="DIR",
                       help="with --download-only: the mirror folder the files go to (made if missing; files "
                            "already there and verified are kept)")


def to_directory(text: str) -> Path:
    """Parse ``--to`` (argparse type): a directory on this machine that exists or can be made."""
    fix = "give a directory on this machine for --to (it is made if missing)"
    try:
        place = checked_data_dir(text, fix)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if isinstance(place, str):
        raise argparse.ArgumentTypeError(f"--to {text} is a URL: {fix}; to serve it from object storage or HTTP, "
                                         "copy the folder there after, and give that URL to --mirror")
    return place


def check_file_arguments(args: argparse.Namespace, context: DataContext) -> None:
    """Refuse, before any work, file arguments that contradict each other (a `UsageError`: exit status 2)."""
    if args.json and not args.list:
        raise UsageError("--json is the format of --list: add --list (prepare-data NAMES --list --json)")
    if args.list and args.download_only:
        raise UsageError("--list prints the files and --download-only fetches them: give one of them")
    if args.to is not None and not args.download_only:
        raise UsageError(f"--to {args.to} is the folder --download-only fetches the files into: add --download-only, "
                         f"or drop --to (to prepare from such a folder, give it as --mirror {args.to} --offline)")
    if args.download_only and args.to is None:
        raise UsageError("--download-only needs the folder to fetch the files into: add --to DIR (then, on the "
                         "machine without network: prepare-data NAMES --mirror DIR --offline)")
    if args.download_only:
        why = unwritable(args.to) if args.to.is_dir() else None  # a folder to be made: --to's own check
        if why:
            raise UsageError(f"--to {args.to}: the files cannot be written there: {why}. Give a folder you can write "
                             "to (it is made if missing)")
        target = args.to.resolve()
        same = [mirror for mirror in context.mirrors if _local(mirror) == target]
        if same:
            raise UsageError(f"--to {args.to} is also a mirror ({same[0]}, from --mirror or $GLYPHFORGE_MIRROR): "
                             "the files would be fetched from the folder into itself; give another folder to --to, "
                             "or drop that mirror")


def _local(mirror: str) -> Path | None:
    """The resolved directory of a local mirror (a path or ``file://``), else None."""
    try:
        path = local_mirror(mirror)
    except ValueError:
        return None
    return None if path is None else path.resolve()


def wanted_files(wanted: Mapping[str, Mapping[str, Any]], context: DataContext) -> list[UpstreamFile]:
    """The upstream files of ``wanted`` (``{name: options}``); an option value a dataset refuses is a `UsageError`."""
    try:
        return upstream_files(wanted, context)
    except ValueError as error:
        raise UsageError(str(error)) from None


def list_files(files: Sequence[UpstreamFile], datasets: Sequence[str], as_json: bool) -> None:
    """Print ``files`` (``--list``): one block per file and a total, or one JSON document."""
    known = [file.resource.size for file in files if file.resource.size is not None]
    unknown = len(files) - len(known)
    if as_json:
        print(json.dumps({
            "version": JSON_VERSION,
            "datasets": list(datasets),
            "files": [_as_dict(file) for file in files],
            "total": {"files": len(files), "bytes": sum(known), "files_of_unknown_size": unknown},
        }, indent=2))
        return
    for file in files:
        resource = file.resource
        size = "size not registered" if resource.size is None else f"{resource.size:,} bytes"
        print(f"{file.mirror_path}  {size}  {resource.hash}")
        for url in file.urls:
            print(f"  url     {url}")
        print(f"  place   {file.place}")
        print(f"  mirror  <mirror folder>/{file.mirror_path}")
    more = f", and {count(unknown, 'file')} of a size not registered" if unknown else ""
    print(f"total: {count(len(files), 'file')}, {sum(known):,} bytes ({human_size(sum(known))}){more}")


def _as_dict(file: UpstreamFile) -> dict[str, Any]:
    resource = file.resource
    return {"dataset": resource.dataset, "file": resource.filename, "size": resource.size, "hash": resource.hash,
            "urls": list(file.urls), "place": str(file.place), "mirror_path": file.mirror_path}


def download_files(files: Sequence[UpstreamFile], to: Path, context: DataContext, command: str, quiet: bool) -> None:
    """Fetch ``files`` into the mirror folder ``to`` (``--download-only``); say what is there and what to run next.

    ``command`` is the ``prepare-data`` command line of the datasets and their options.
    """
    advice = (f"What to do: check the network (or the mirrors) and run the same command again: the files already in "
              f"{to} are kept, not fetched again; or download each file from its URL yourself and place it at the "
              "path shown.")
    fetch_into(files, to, context, advice)
    if not quiet:
        total = sum(file.resource.size or 0 for file in files)
        print(f"{count(len(files), 'file')} ({human_size(total)}) verified in {to}, laid out as a mirror. On the "
              f"machine without network, with {to} copied or mounted there:\n  {command} --mirror {to} --offline")


def command_line(wanted: Mapping[str, Mapping[str, Any]]) -> str:
    """``prepare-data NAMES OPTIONS``: the datasets of ``wanted`` (``{name: options given}``) and the options given
    that choose files (not those with a converter: paths, counts)."""
    words = ["prepare-data", *wanted]
    for name, given in wanted.items():
        for option in prepare_options(name):
            value = given.get(option.param)
            if value is None or option.convert is not None:
                continue
            if option.repeatable:
                words += [word for item in value for word in (option.flag, str(item))]
            else:
                words += [option.flag, *map(str, value if option.many else [value])]
    return " ".join(words)


def offline_advice(wanted: Mapping[str, Mapping[str, Any]]) -> str:
    """What to do when files are missing in a ``prepare-data`` run: the two commands, or placing them by hand."""
    command = command_line(wanted)
    return (f"What to do: on a machine with network, run `{command} --download-only --to DIR`, copy DIR here (or "
            f"mount it) and run `{command} --mirror DIR --offline`; or place each file at the path shown "
            f"(`{command} --list` lists them all, with sizes and hashes).")
