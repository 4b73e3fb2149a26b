"""`Store`: what every store of entries is, wherever its data dir lies (``glyphforge cache`` runs on it).

A data dir on disk has a `glyphforge.cache.store.CacheStore`, one at a URL a
`glyphforge.cache.remote.entries.RemoteCache` (read where it lies, deleting nothing);
`glyphforge.DataContext.entry_store` hands out the one of a data dir. Both list, verify and
report in one shape: entries (`glyphforge.cache.entry.Entry`, ``entry.where`` their folder or URL) and
`CacheProblem` s.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from glyphforge.cache.entry import Entry
from glyphforge.cache.eviction import Eviction
from glyphforge.cache.problems import CacheProblem, Scan


class Store(Protocol):
    """The store of a data dir's entries: listed, verified and cleaned the same way on disk and at a URL."""

    @property
    def where(self) -> str:
        """The store's folder or URL (``<data dir>/cache``), for messages."""

    @property
    def place(self) -> str:
        """Where the store is, as a phrase for messages: ``in <data dir>/cache``, ``at <data dir URL>``."""

    @property
    def repair(self) -> str:
        """What to do about the damage `verify` finds there."""

    def scan(self) -> Scan:
        """List the store once: its complete entries, and what was left out and why."""

    def ls(self, kind: str | None = None) -> Sequence[Entry]:
        """Every complete entry (of ``kind`` only, when given: only its folder is listed), by kind then creation time
        (see `scan` for what is left out)."""

    def unreadable(self) -> list[CacheProblem]:
        """Every folder and entry of the store this user may not read (each problem `UNREADABLE`)."""

    def refuse_unreadable(self, target: str) -> None:
        """Raise `UnreadableEntryError` when ``target`` (a kind, ``KIND:newest`` or a key prefix) names what this user
        may not read: for a lookup that found nothing this user may read."""

    def verify(self) -> list[CacheProblem]:
        """Check every manifest and re-hash every data file (and companion) against it: what is wrong, empty if nothing.

        What the listing found incomplete or unreadable is in it too, with that state.
        """

    def companions(self, entry: Entry) -> dict[str, int]:
        """The bytes of the entry's derived companions by label (``{"decoded": n}``), those that have any."""

    def rm(self, key: str) -> Entry:
        """Remove the entry ``key`` (or unique key prefix, 6+ characters) and its companions."""

    def gc(self, max_size: int | str | None = None) -> list[Path]:
        """Remove what the store no longer needs (see `glyphforge.cache.cleanup`); with ``max_size``, then `evict`."""

    def evict(self, max_size: int | str) -> Eviction:
        """Remove the least recently used entries until the store fits ``max_size``; never one in use."""
