"""What the commands share: parsers, the common and fetch arguments, the data context, and running one command.

Errors are reported as one paragraph (what failed, why, what to do) with exit status 1
(2 for bad arguments, before any work); ``-v`` adds the Python traceback. What a command
prints of a failure, and every log line, goes through `glyphforge.urls.redacted`: a URL's
password or token is never shown. Output into a pipe whose reader has gone
(``glyphforge cache ls | head -1``) ends the command quietly with status :data:`CLOSED_PIPE`
(`quiet_on_a_closed_pipe`).
"""
from __future__ import annotations

import argparse
import errno
import functools
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, ParamSpec

from glyphforge._files import storage_error
from glyphforge._version import __version__
from glyphforge.builds.export.files import ExportTargetError
from glyphforge.builds.making.spec import SpecError
from glyphforge.cache.lookup import AmbiguousKindError
from glyphforge.cache.remote.entries import UnlistableDataDirError
from glyphforge.cli.args import UsageError, check_env_settings, data_directory, mirror
from glyphforge.cli.errors import target_lookup
from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.storage.backend import ReadOnlyStoreError
from glyphforge.urls import redacted

if TYPE_CHECKING:
    from glyphforge.builds.reading.dataset import BuiltDataset


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the example epilog's line breaks."""


class RedactingFormatter(logging.Formatter):
    """A log line as it is shown: its message (and traceback) without the secrets of URLs (`redacted`)."""

    def format(self, record: logging.LogRecord) -> str:
        return redacted(super().format(record))


Arguments = ParamSpec("Arguments")

#: The exit status of a command whose output went into a closed pipe: 128 + SIGPIPE, what a shell reports for a
#: Unix tool that a closed pipe ended (``yes | head -1``; seen under ``set -o pipefail``).
CLOSED_PIPE = 141


def new_parser(prog: str, description: str, example: str) -> argparse.ArgumentParser:
    """A command's parser, its ``example`` shown at the end of ``--help``; ``--version`` prints the version."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, epilog=f"example:\n  {example}", formatter_class=Formatter
    )
    parser.add_argument("--version", action="version", version=f"glyphforge {__version__}")
    return parser


def quiet_on_a_closed_pipe(entry: Callable[Arguments, int]) -> Callable[Arguments, int]:
    """Return the entry point ``entry`` ending quietly with :data:`CLOSED_PIPE` when its output's reader has gone.

    Python's advice (the ``signal`` module's "Note on SIGPIPE"): the rest of the output goes
    to the null device, so that the interpreter's last flush at exit does not fail again.
    """

    @functools.wraps(entry)
    def entry_point(*args: Arguments.args, **kwargs: Arguments.kwargs) -> int:
        try:
            return entry(*args, **kwargs)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return CLOSED_PIPE

    return entry_point


def add_common(parser: argparse.ArgumentParser) -> None:
    """Add ``--data-dir``, ``-q`` and ``-v``, which every command takes."""
    parser.add_argument("--data-dir", type=data_directory, default=None,
                        help="data directory (default: $GLYPHFORGE_DATA_DIR or the user data dir)")
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument("-q", "--quiet", action="store_true", help="no progress bars or tables, errors only")
    noise.add_argument("-v", "--verbose", action="store_true", help="show Python tracebacks on errors")


def add_fetch_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--mirror``, ``--no-verify`` and ``--offline``: how missing data is fetched (see `data_context`)."""
    fetch = parser.add_argument_group("fetching (when data is missing)")
    fetch.add_argument("--mirror", action="append", dest="mirrors", default=[], metavar="URL", type=mirror,
                       help="mirror base tried before the origin: a directory, an https://, file:// or object "
                            "storage URL (s3://, gs://; not used --offline) (repeatable; also $GLYPHFORGE_MIRROR)")
    fetch.add_argument("--no-verify", action="store_true",
                       help="do not check the hash of a local archive given on the command line or of hand-placed "
                            "files (custom archives); downloads are always checked")
    fetch.add_argument("--offline", action="store_true",
                       help="never use the network: files must be in place or on local mirrors (also "
                            "$GLYPHFORGE_OFFLINE=1)")


def add_command(parent: argparse._SubParsersAction, name: str, help_text: str, example: str,
                action: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """Add the sub-command ``name`` to ``parent``, with the common arguments; it runs ``action``."""
    sub = parent.add_parser(name, help=help_text, description=help_text, epilog=f"example:\n  {example}",
                            formatter_class=Formatter)
    add_common(sub)
    sub.set_defaults(action=action)
    return sub


def data_context(args: argparse.Namespace, *, remote: bool = False) -> DataContext:
    """The one data context of a command: ``--data-dir``, the fetch arguments and ``-q``, over the environment.

    ``remote``: the command works with a data dir that is a URL; otherwise such a one is a `UsageError`.
    Commands without the fetch arguments (`add_fetch_arguments`) take the environment's.
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


def run(action: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run ``action`` (once the environment's settings pass their checks: `check_env_settings`); show glyphforge's
    log lines (retries, lock waits, slow downloads) unless -q.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("%(message)s"))
    last_resort = logging.lastResort  # what prints the warnings of the libraries glyphforge calls (no handler)
    logging.lastResort = logging.StreamHandler(sys.stderr)
    logging.lastResort.setLevel(logging.WARNING)
    logging.lastResort.setFormatter(RedactingFormatter())
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

        check_env_settings(env_data_dir=args.data_dir is None)  # its data dir checked as --data-dir is, its mirrors...
        with logging_redirect_tqdm(loggers=[logger]):  # log lines print above progress bars, not through them
            return action(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of the output has gone: not an error (quiet_on_a_closed_pipe)
        raise
    except Exception as error:  # every failure ends as one readable paragraph
        if args.verbose:
            print(redacted(traceback.format_exc()), end="", file=sys.stderr)
        if isinstance(error, OSError) and error.errno == errno.ENAMETOOLONG and error.filename:
            error = storage_error(error, error.filename)  # a path too long, wherever it was met: named, with the limit
        message = error.args[0] if isinstance(error, KeyError) and error.args else error  # no repr quotes
        print(redacted(f"error: {message}"), file=sys.stderr)
        if isinstance(error, (UsageError, SpecError, ExportTargetError, AmbiguousKindError)):  # nothing was done
            return 2
        if not args.verbose:
            print("(run again with -v for the Python traceback)", file=sys.stderr)
        return 1
    finally:
        logger.removeHandler(handler)
        logging.lastResort = last_resort
        logger.setLevel(level)
        store_client.setLevel(store_level)


def name_width() -> int:
    """The width of the name column in ``--help`` and ``info``: the longest registered name, at least 12."""
    return max(12, *map(len, registry.registered()))


@contextmanager
def store_refusals() -> Iterator[None]:
    """Turn a store's refusal into a `UsageError` (exit status 2, nothing done): a data dir at a URL that cannot be
    listed (HTTP), or deleting at a URL."""
    try:
        yield
    except (UnlistableDataDirError, ReadOnlyStoreError) as error:
        raise UsageError(str(error)) from None


def find_built_target(target: str, context: DataContext) -> BuiltDataset:
    """The built dataset ``target`` of the context's data dir; one at a URL is read where it lies.

    A target that names nothing (or a kind or key prefix for a data dir that cannot be listed, HTTP) is a `UsageError`.
    """
    from glyphforge.builds.reading.lookup import find_built

    with target_lookup():
        return find_built(target, context=context)


