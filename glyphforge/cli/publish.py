"""``glyphforge publish``: a cache entry uploaded to a data dir URL."""
from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from glyphforge.cache import Entry
from glyphforge.cli.args import UsageError
from glyphforge.cli.common import add_command
from glyphforge.cli.errors import target_lookup
from glyphforge.textfmt import count, human_size

if TYPE_CHECKING:
    from glyphforge.cache.remote.publish import Published


def _publish(args: argparse.Namespace) -> int:
    from glyphforge.cache.remote.publish import LocalSourceError, find_entry, publish_entry, source_store

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
    from glyphforge.cache.remote.publish import target_location

    try:
        return target_location(text).url
    except ValueError as error:  # also UnsupportedURLError: an unknown scheme, or its package missing
        raise argparse.ArgumentTypeError(str(error)) from None


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add publish to ``glyphforge``'s sub-commands ``commands``."""
    publish = add_command(commands, "publish", "upload a cache entry (built or prepared) to a data dir URL: data files "
                          "first, the manifest last; resumes an interrupted upload, and uploads nothing when the entry "
                          "is there; prints the entry's URL", "glyphforge publish scenes s3://my-bucket/glyphforge",
                          _publish)
    publish.add_argument("target", help="a kind with one entry (KIND:newest: its newest) or a cache key (prefix of 6+ "
                                        "characters) of the local data dir (--data-dir)")
    publish.add_argument("url", type=_publish_url,
                         help="the data dir URL: s3://bucket/prefix, gs://bucket/prefix or file:///abs/path (the entry "
                              "lands at URL/cache/KIND/KEY); credentials as the store's SDK reads them")
