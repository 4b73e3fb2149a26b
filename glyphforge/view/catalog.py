"""The datasets of a data dir the viewer shows (`Catalog`): built entries and prepared datasets, by cache key."""
from __future__ import annotations

import threading
from typing import Any

from glyphforge.cache import Entry
from glyphforge.cache.manifest import is_built
from glyphforge.context import DataContext
from glyphforge.view.prepared import is_prepared_shown, prepared_source, prepared_title
from glyphforge.view.sources import BuiltSource, Source, ViewRequestError


class Catalog:
    """Every dataset of a data dir the viewer shows, by cache key, each opened on first use.

    ``only``: show just these entries, without listing the data dir (one at an HTTP URL cannot be listed).
    """

    def __init__(self, context: DataContext, only: list[Entry] | None = None) -> None:
        self.context = context
        self.only = only
        self._sources: dict[str, Source] = {}
        self._lock = threading.Lock()

    def entries(self) -> list[Entry]:
        """The entries shown: built entries, and prepared entries of per-class datasets, Omniglot and the backgrounds
        (on a local data dir)."""
        listed = self.context.entry_store.ls() if self.only is None else self.only
        local = self.context.remote is None
        return [entry for entry in listed if is_built(entry) or (local and is_prepared_shown(entry))]

    def listing(self) -> list[dict[str, Any]]:
        """One line per entry for the page's menu."""
        return [{"key": entry.key, "kind": entry.kind, "built": is_built(entry),
                 "title": f"{entry.kind} {entry.key[:12]}" if is_built(entry) else prepared_title(entry)}
                for entry in self.entries()]

    def source(self, key: str) -> Source:
        """The source of the entry whose key is ``key``; a `ViewRequestError` (404) when there is none."""
        with self._lock:
            if key in self._sources:
                return self._sources[key]
        entry = next((entry for entry in self.entries() if entry.key == key), None)
        if entry is None:
            raise ViewRequestError(f"no dataset with key {key[:80]!r} in {self.context.entry_store.where}", 404)
        source = BuiltSource(entry, self.context) if is_built(entry) else prepared_source(entry)
        with self._lock:
            return self._sources.setdefault(key, source)
