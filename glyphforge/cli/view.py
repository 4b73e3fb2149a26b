"""``glyphforge view``: a local web viewer of every prepared and built dataset of the data dir (`glyphforge.view`)."""
from __future__ import annotations

import argparse
import sys

from glyphforge.cli.args import UsageError
from glyphforge.cli.common import add_command, data_context, find_built_target, store_refusals
from glyphforge.cli.errors import target_lookup
from glyphforge.context import DataContext
from glyphforge.datasets import registry


def _view(args: argparse.Namespace) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise UsageError(f"glyphforge view needs the view extra ({error}): pip install \"glyphforge[view]\"") from None
    from glyphforge.errors import ArgumentError
    from glyphforge.previews import find_target
    from glyphforge.view.catalog import Catalog
    from glyphforge.view.server import LOOPBACK, is_loopback, listen, serve

    context = data_context(args, remote=True)
    catalog = Catalog(context)
    fragment = ""
    if args.target is not None:
        if context.remote is not None:
            entry = find_built_target(args.target, context).entry
            if not is_listable(context):  # HTTP: the one entry named (as KIND/KEY), the data dir not listed
                catalog = Catalog(context, only=[entry])
        else:
            with target_lookup():
                entry = find_target(context.store, args.target)
        if entry.key not in {shown.key for shown in catalog.entries()}:
            raise UsageError(f"{args.target} names an entry the viewer does not show (it shows built datasets and "
                             "prepared per-class datasets such as mnist or emnist): leave TARGET out to see them all")
        fragment = f"#{entry.key}"
    with store_refusals():  # a data dir that cannot be listed (HTTP) without a TARGET is refused before serving
        catalog.entries()
    host = args.host or LOOPBACK
    try:
        sock = listen(host, args.port)
    except ArgumentError as error:
        raise UsageError(str(error)) from None
    if not is_loopback(host):
        print(f"warning: listening on {host}, not on the loopback: whoever can reach this machine can read every "
              "dataset of the data dir through the viewer", file=sys.stderr)
    serve(catalog, sock, fragment=fragment, open_browser=not args.no_browser)
    return 0


def is_listable(context: DataContext) -> bool:
    """Whether the data dir's entries can be listed (not over HTTP, which has no listing)."""
    from glyphforge.cache.remote.entries import UnlistableDataDirError

    try:
        context.entry_store.ls()
    except UnlistableDataDirError:
        return False
    return True


def _port(text: str) -> int:
    """A TCP port, 0 (a free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port is a whole number from 0 to 65535, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a whole number from 0 to 65535, got {value}")
    return value


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add view to ``glyphforge``'s sub-commands ``commands``."""
    view = add_command(commands, "view", "serve a local web viewer of the data dir's prepared and built datasets: a "
                       "paged grid with filters and overlays, one example in full, statistics (read only)",
                       "glyphforge view scenes --no-browser", _view)
    view.add_argument("target", nargs="?", default=None,
                      help=f"the dataset the page opens on: a dataset ({', '.join(registry.registered())}), the kind "
                           "of a built dataset, or a cache key (prefix); default: the list of them all. For a data "
                           "dir at an HTTP URL (which cannot be listed): KIND/KEY, the one entry shown")
    view.add_argument("--port", type=_port, default=0, help="TCP port to listen on (default: a free one)")
    view.add_argument("--host", default=None,
                      help="address to listen on (default 127.0.0.1, this machine only; another is warned about)")
    view.add_argument("--no-browser", action="store_true", help="do not open the page in the browser")
