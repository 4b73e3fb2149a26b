"""Cache keys: sha256 of a canonical JSON of ``(kind, params, format_version)``; the manifest's hashes."""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import numpy as np

FORMAT_VERSION = 4
"""Bumped when the on-disk layout of entries, or the bytes written for the same data, change; part of every key, so
an entry of another format is not found (`glyphforge.cache.manifest.parse_manifest` refuses it: ``glyphforge cache
gc`` removes it).
2: glyphforge 0.3 (a manifest carries ``entry_sha256``; a build's index is its ``index.npy`` and its shards hold
``.npy`` arrays).
3: a ``.pklz`` is deflated by isal in one call, not by zlib (`glyphforge.cache.pklz`).
4: a per-class dataset's class file is numpy's own protocol-5 pickle of its array, not dill's
(`glyphforge.cache.pklz.write_array_pklz`)."""

_KIND_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_kind(kind: str) -> str:
    """Return ``kind`` if it is a safe directory name, else raise ValueError."""
    if not isinstance(kind, str) or not _KIND_PATTERN.match(kind):
        raise ValueError(
            f"cache kind must be letters, digits, '.', '_' or '-' (not starting with a "
            f"punctuation mark), got {kind!r}"
        )
    return kind


def normalise(value: Any, where: str = "params") -> Any:
    """Turn ``value`` into plain JSON data so equal parameters give equal keys.

    Tuples and lists become lists, sets sorted lists, numpy scalars and arrays
    Python numbers and lists, whole floats ints (``1.0 == 1``, so they share a key),
    paths POSIX strings; mapping keys must be strings.

    Raises
    ------
    TypeError
        For a value with no canonical form (the message names where it is).
    ValueError
        For NaN or infinite floats.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):
        return normalise(value.item(), where)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}: cache parameters must be finite numbers")
        return int(value) if value.is_integer() else float(value)
    if isinstance(value, (PurePath, os.PathLike)):
        return PurePath(os.fspath(value)).as_posix()
    if isinstance(value, np.ndarray):
        return normalise(value.tolist(), where)
    if isinstance(value, Mapping):
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has the key {key!r}: parameter names must be strings")
            result[key] = normalise(item, f"{where}[{key!r}]")
        return result
    if isinstance(value, (set, frozenset)):
        items = [normalise(item, f"{where} item") for item in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, (list, tuple)):
        return [normalise(item, f"{where}[{index}]") for index, item in enumerate(value)]
    raise TypeError(
        f"{where} is a {type(value).__name__} ({value!r}), which has no canonical form for a "
        "cache key: use numbers, strings, booleans, None, paths, lists/tuples, sets or dicts"
    )


def _canonical_text(document: Any) -> str:
    """Return ``document`` (plain JSON data) as compact, sorted, ASCII JSON: the text every hash here is of."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def canonical_json(kind: str, params: Mapping[str, Any], format_version: int = FORMAT_VERSION) -> str:
    """Return the canonical JSON text that a cache key hashes."""
    return _canonical_text([check_kind(kind), normalise(dict(params)), format_version])


def cache_key(kind: str, params: Mapping[str, Any], format_version: int = FORMAT_VERSION) -> str:
    """Return the hex sha256 key of ``(kind, params, format_version)`` (by default the current ``FORMAT_VERSION``)."""
    return hashlib.sha256(canonical_json(kind, params, format_version).encode("ascii")).hexdigest()


def metadata_sha256(kind: str, key: str, params: Any, meta: Any) -> str:
    """Return the hex sha256 of an entry's metadata: the canonical JSON of its kind, key, params and meta.

    A manifest records it as ``meta_sha256``, so an edited ``params`` or ``meta`` is found
    when the entry is read. ``params`` and ``meta`` are plain JSON data, as :func:`normalise`
    returns them and as a manifest holds them (so reading needs no normalising).

    Raises
    ------
    ValueError
        When they hold a NaN or infinite float (no canonical JSON).
    """
    return _document_sha256({"kind": kind, "key": key, "params": params, "meta": meta})


def entry_sha256(kind: str, key: str, params: Any, meta: Any, files: Any) -> str:
    """Return the hex sha256 of what an entry holds: the canonical JSON of its kind, key, params, meta and files.

    A manifest records it as ``entry_sha256``. Unlike :func:`metadata_sha256` it covers the
    files table too (each data file's name, size and sha256), so data files swapped or
    renamed together with their records are found when the entry is read. Arguments are
    plain JSON data, as a manifest holds them.

    Raises
    ------
    ValueError
        When they hold a NaN or infinite float (no canonical JSON).
    """
    return _document_sha256({"kind": kind, "key": key, "params": params, "meta": meta, "files": files})


def _document_sha256(document: dict[str, Any]) -> str:
    """Return the hex sha256 of ``document``'s canonical JSON text."""
    return hashlib.sha256(_canonical_text(document).encode("ascii")).hexdigest()
