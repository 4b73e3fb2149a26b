"""What ``prepare-data NAME --data-dir URL`` published, recorded at the URL so a later run does no local work.

A dataset's cache keys hash parameters that only its own ``prepare`` knows (the upstream
files' hashes, the split, the shapes...), and a third-party dataset's are its own business:
they cannot be computed before preparing. So after publishing the entries a request made
or used, prepare-data writes a small record of them at
``<url>/prepared/<dataset>/<request key>.json``, where the request key hashes what was
asked on the command line (the dataset, its options, the shapes) and this glyphforge's
version (a new version may make other entries). A later request finds the record (one
small GET), checks that every entry it names is still published whole (one GET of each
manifest, compared by ``entry_sha256``) and then does nothing at all: no download, no
conversion, nothing in the local cache.

A record is written after every entry it names is published, so it never names a partial
one. It is glyphforge's own: one that is not (unreadable, another request's) is an error,
never replaced.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from glyphforge._version import __version__
from glyphforge.cache.keys import cache_key
from glyphforge.cache.remote.files import entry_location
from glyphforge.cache.remote.publish import (
    PublishConflictError,
    identity,
    published_manifest,
    put_bytes,
    read_object,
)
from glyphforge.storage.location import Location
from glyphforge.urls import redacted

if TYPE_CHECKING:
    from glyphforge.cache.entry import Entry

__all__ = ["published_request", "record_request", "request_key"]

#: The folder of a data dir URL holding prepare-data's records.
RECORDS = "prepared"
#: What a record's ``format`` says, so glyphforge knows a record of its own.
RECORD_FORMAT = "glyphforge prepare-data record 1"


def request_key(dataset: str, options: Mapping[str, Any], shapes: Sequence[tuple[int, int]]) -> str:
    """Return the key of a prepare-data request: the hash of the dataset, its options, the shapes and the version."""
    return cache_key("prepare-data", {"dataset": dataset, "options": dict(options), "shapes": list(shapes),
                                      "glyphforge": __version__})


def _record_location(data_dir: Location, dataset: str, key: str) -> Location:
    return data_dir.child(RECORDS, dataset, f"{key}.json")


def published_request(data_dir: Location, dataset: str, key: str) -> list[str] | None:
    """Return the URLs of the entries the request ``key`` of ``dataset`` published to ``data_dir``, if all are there.

    None when there is no record, or when an entry it names is gone or is another one now
    (then the request is prepared and published again).

    Raises
    ------
    PublishConflictError
        Something that is not a glyphforge record of this request is at the record's place.
    StorageError
        The store refused or failed (the message names the URL and what to do).
    """
    where = _record_location(data_dir, dataset, key)
    text = read_object(where, "reading prepare-data's record")
    if text is None:
        return None
    entries = _record_entries(text, where, dataset, key)
    urls = []
    for kind, entry_key, digest in entries:
        place = entry_location(data_dir, kind, entry_key)
        manifest = published_manifest(place)
        if manifest is None or identity(manifest) != digest:
            return None
        urls.append(place.url)
    return urls


def _record_entries(text: bytes, where: Location, dataset: str, key: str) -> list[tuple[str, str, str]]:
    """The ``(kind, key, entry_sha256)`` of each entry of the record ``text``; PublishConflictError if not ours."""
    try:
        record = json.loads(text)
        if (record["format"], record["dataset"], record["request"]) != (RECORD_FORMAT, dataset, key):
            raise ValueError("another record")
        return [(str(item["kind"]), str(item["key"]), str(item["entry_sha256"])) for item in record["entries"]]
    except (ValueError, TypeError, KeyError):
        raise PublishConflictError(
            f"{redacted(where.url)} is not glyphforge's record of this prepare-data request: glyphforge did not write "
            "it and leaves it as it is. Remove it if it is not needed, or use another data dir URL") from None


def record_request(data_dir: Location, dataset: str, key: str, entries: Sequence[Entry]) -> None:
    """Record that the request ``key`` of ``dataset`` made or used ``entries``, all published to ``data_dir`` now.

    A record of the same request already there is glyphforge's own (checked) and is replaced:
    it named entries that are no longer all there.
    """
    where = _record_location(data_dir, dataset, key)
    existing = read_object(where, "reading prepare-data's record")
    if existing is not None:
        _record_entries(existing, where, dataset, key)  # ours, or PublishConflictError
    record = {"format": RECORD_FORMAT, "dataset": dataset, "request": key,
              "entries": [{"kind": entry.kind, "key": entry.key, "entry_sha256": identity(entry.manifest)}
                          for entry in entries]}
    put_bytes(where, json.dumps(record, indent=1, sort_keys=True).encode("utf-8"), "writing prepare-data's record")
