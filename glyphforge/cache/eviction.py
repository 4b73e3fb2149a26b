"""Least-recently-used eviction: which entries :meth:`CacheStore.evict <glyphforge.cache.store.CacheStore.evict>`
removes, and what it did (`Eviction`).

An entry's size is its data files' and its counted companions' (`Entry.size_bytes` and
`glyphforge.cache.companions.companion_bytes`: its derived companions'). Entries are removed
least recently used first (`Entry.last_used`) until the store fits the limit, never one in
use: the store's ``remove(entry)`` says whether it could take the entry (no writer holds its
key, no reader its read lock).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from glyphforge.cache.cleanup import CleanupError, failure
from glyphforge.cache.companions import companion_bytes
from glyphforge.cache.entry import Entry


@dataclass(frozen=True)
class Eviction:
    """What :meth:`CacheStore.evict` did.

    Attributes
    ----------
    limit
        The size asked for, in bytes.
    size_before, size_after
        The store's data files before and after, in bytes (`Entry.size_bytes` and `companion_bytes` summed).
    evicted
        The entries removed, least recently used first.
    in_use
        Entries it would have removed but left: a process was reading them.
    """

    limit: int
    size_before: int
    size_after: int
    evicted: tuple[Entry, ...]
    in_use: tuple[Entry, ...]

    @property
    def fits(self) -> bool:
        """Whether the store fits the limit now."""
        return self.size_after <= self.limit


def evict_entries(entries: list[Entry], limit: int, remove: Callable[[Entry], bool]) -> Eviction:
    """Remove the least recently used of ``entries`` with ``remove(entry)`` until they fit ``limit`` bytes.

    ``remove(entry)`` returns whether it removed the entry (False: in use); see `CacheStore.evict` for the errors.
    """
    entries = sorted(entries, key=lambda entry: entry.last_used)
    sizes = {entry.path: entry.size_bytes + companion_bytes(entry.path) for entry in entries}
    size = before = sum(sizes.values())
    evicted, in_use, failed = [], [], []
    for entry in entries:
        if size <= limit:
            break
        try:
            taken = remove(entry)
        except OSError as error:  # another user's entry this one may not delete
            failed.append(failure(entry.path, error))
            continue
        if taken:
            evicted.append(entry)
            size -= sizes[entry.path]
        else:
            in_use.append(entry)
    if failed:
        raise CleanupError(
            f"`glyphforge cache gc --max-size` evicted {len(evicted)} entries but could not remove "
            f"{len(failed)}: " + "; ".join(failed) + ". Where they are another user's, ask their owner to "
            "remove them (`glyphforge cache rm KEY`), or to let the group write their files (`chmod -R g+rwX` "
            "on them, and `umask 002` from then on).", [entry.path for entry in evicted])
    return Eviction(limit, before, size, tuple(evicted), tuple(in_use))
