"""A command's target that names nothing is a bad argument: exit status 2, like argparse's own errors.

The commands that take a kind, a dataset name, a cache key or a built target (``export``,
``preview``, ``publish``, ``cache rm``) look it up inside `target_lookup`: a `LookupError`
raised by the lookup (nothing matches, or more than one entry matches and a key must be
given) becomes a `UsageError` with the lookup's message, which lists what there is.
Only the lookup is wrapped, so a `LookupError` from the work that follows stays a failure.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from glyphforge.cache.store_protocol import Store
from glyphforge.cli.args import UsageError

#: How many entries `holdings` names before it counts the rest.
SHOWN = 10


@contextmanager
def target_lookup(holds: Callable[[], str] | None = None) -> Iterator[None]:
    """Turn a `LookupError` raised inside into a `UsageError` with its message (exit status 2, nothing done).

    ``holds``: called on failure, what there is (`holdings`), added to a message that does not list it.
    """
    try:
        yield
    except LookupError as error:
        message = str(error.args[0]) if error.args else str(error)  # a KeyError's, without repr quotes
        raise UsageError(f"{message}. {holds()}" if holds else message) from None


def holdings(store: Store) -> Callable[[], str]:
    """What the cache of ``store`` holds, for `target_lookup`: ``"The cache at ... holds mnist 3fa2c81b9d12, ..."``."""
    def text() -> str:
        entries = store.ls()
        if not entries:
            return f"The cache at {store.where} holds nothing yet"
        names = ", ".join(f"{entry.kind} {entry.key[:12]}" for entry in entries[:SHOWN])
        more = f" and {len(entries) - SHOWN} more (`glyphforge cache ls` lists them)" if len(entries) > SHOWN else ""
        return f"The cache at {store.where} holds {names}{more}"
    return text
