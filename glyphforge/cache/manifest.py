"""An entry's ``manifest.json``: what it holds, how it is written, and the checks a reader trusts it by.

A manifest is a JSON object::

    {"kind": str, "key": str, "params": {...}, "format_version": int,
     "glyphforge_version": str, "created": str (ISO 8601, UTC),
     "files": {name: {"size": int, "sha256": hex}, ...}, "meta": {...},
     "meta_sha256": hex,     # sha256 of the canonical JSON of kind, key, params and meta
     "entry_sha256": hex}    # the same plus the files table

The data files' hashes say a file is intact, not that it is the right file: the
parameters and the metadata say what each file means (EMNIST's and MNIST's class of
each file, a build's shard index). ``entry_sha256`` covers them together with the files
table, so class files swapped along with their records are found; ``meta_sha256`` tells an
edited params or meta from swapped files.

A manifest of another ``format_version`` (glyphforge 0.1 and 0.2 wrote 1) is refused as
broken: its entry is not found (the format is part of the key) and ``glyphforge cache gc``
removes it.
"""
from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from glyphforge._version import __version__
from glyphforge.cache.declared import built_problem
from glyphforge.cache.keys import FORMAT_VERSION, cache_key, entry_sha256, metadata_sha256, normalise
from glyphforge.errors import IntegrityError

MANIFEST = "manifest.json"

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: The fields every manifest has, and their types.
_FIELDS: dict[str, type] = {"kind": str, "key": str, "params": dict, "format_version": int,
                            "glyphforge_version": str, "created": str, "files": dict, "meta": dict,
                            "meta_sha256": str, "entry_sha256": str}


def _json_type(value: object) -> str:
    """Return what ``value`` (as ``json.loads`` makes it) is in JSON's words, for messages: "an object", "null", ..."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
             float: "a number"}
    return "null" if value is None else names.get(type(value), f"a {type(value).__name__}")


def is_plain_name(name: object) -> bool:
    """The rule for an entry's file names: a plain name inside the entry directory, not the manifest."""
    return (isinstance(name, str) and bool(name) and name != MANIFEST and not name.startswith(".")
            and not any(separator in name for separator in "/\\\0"))


def check_file_name(name: str) -> str:
    """Return ``name`` if it may name a file of an entry (`is_plain_name`), else raise a ValueError saying what may."""
    if not is_plain_name(name):
        raise ValueError(
            f"entry file name {name!r} is not allowed: use a plain file name such as 'A.pklz' "
            f"(no directories, no leading dot, not {MANIFEST!r})"
        )
    return name


class ManifestFields:
    """What a complete entry's ``manifest`` says, wherever the entry lies (`glyphforge.cache.Entry`)."""

    manifest: dict[str, Any]

    @property
    def key(self) -> str:
        return self.manifest["key"]

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @property
    def params(self) -> dict[str, Any]:
        return self.manifest["params"]

    @property
    def meta(self) -> dict[str, Any]:
        return self.manifest["meta"]

    @property
    def files(self) -> list[str]:
        return sorted(self.manifest["files"])

    @property
    def size_bytes(self) -> int:
        return sum(info["size"] for info in self.manifest["files"].values())


def is_built(entry: ManifestFields) -> bool:
    """Whether ``entry`` (on disk or at a URL) is a built dataset: its manifest records a shard layout."""
    return declares_build(entry.meta)


def declares_build(meta: Mapping[str, Any]) -> bool:
    """Whether a manifest's ``meta`` records a shard layout (then `built_problem` checks what it declares)."""
    return "layout" in meta and "n_examples" in meta


class DamagedManifestError(IntegrityError, ValueError):
    """An entry directory's ``manifest.json`` is missing, unreadable or inconsistent (the message says how)."""


def make_manifest(kind: str, key: str, params: Mapping[str, Any], files: dict[str, dict[str, Any]],
                  meta: Mapping[str, Any]) -> dict[str, Any]:
    """Return the manifest of a new entry, with its ``meta_sha256`` and ``entry_sha256``.

    Parameters
    ----------
    kind, key, params
        What the entry is (``key`` is ``cache_key(kind, params)``).
    files
        ``{name: {"size": bytes, "sha256": hex}}`` of its data files.
    meta
        JSON-serialisable extra information (normalised here, as ``params`` are).
    """
    plain_params, plain_meta = normalise(dict(params)), normalise(dict(meta), "meta")
    return {
        "kind": kind,
        "key": key,
        "params": plain_params,
        "format_version": FORMAT_VERSION,
        "glyphforge_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": files,
        "meta": plain_meta,
        "meta_sha256": metadata_sha256(kind, key, plain_params, plain_meta),
        "entry_sha256": entry_sha256(kind, key, plain_params, plain_meta, files),
    }


def read_manifest(path: Path) -> dict[str, Any]:
    """Return the manifest of the entry directory ``path`` once it passes every check (`parse_manifest`).

    Raises
    ------
    DamagedManifestError
        Saying what is wrong (without the path: the caller names it).
    PermissionError
        When this user may not read it (another user's entry, owner-only): that is not broken.
    """
    try:
        text = (path / MANIFEST).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DamagedManifestError("missing (the entry was never completed, or the file was deleted)") from None
    except PermissionError:
        raise  # another user's entry this one may not read: not broken
    except OSError as error:
        raise DamagedManifestError(f"unreadable ({error.strerror or error})") from None
    except ValueError as error:  # not UTF-8
        raise DamagedManifestError(f"not valid JSON ({error})") from None
    return parse_manifest(text, path.parent.name, path.name)


def parse_manifest(text: str | bytes, kind: str, key: str) -> dict[str, Any]:
    """Return the manifest in ``text`` once it passes every check, for the entry ``kind``/``key`` it must be.

    Checked: it is a JSON object with the manifest's fields of the right types; each
    file is a plain name inside the entry with an int size and a sha256; its kind and
    key are ``kind`` and ``key`` (those of its directory, ``<root>/<kind>/<key>``, or of
    its URL); its format version is `FORMAT_VERSION` (see the module docstring); its key
    is the hash of its kind, params and format version; its ``meta_sha256`` is that of
    its kind, key, params and meta; and its ``entry_sha256`` that of these and its files
    table; and what a built entry declares (its layout,
    examples, shards and files' sizes) is within bounds and agrees with itself
    (`glyphforge.cache.declared.built_problem`).

    Raises
    ------
    DamagedManifestError
        Saying what is wrong (without the place: the caller names it).
    """
    try:
        manifest = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise DamagedManifestError(f"not valid JSON ({error})") from None
    if not isinstance(manifest, dict):
        raise DamagedManifestError(f"holds {_json_type(manifest)}, not a JSON object of the manifest's fields")
    version = manifest.get("format_version")
    if type(version) is int and version != FORMAT_VERSION:
        raise DamagedManifestError(f"it is of cache format {version} (written by glyphforge "
                                   f"{reprlib.repr(manifest.get('glyphforge_version'))}), which this glyphforge "
                                   f"(format {FORMAT_VERSION}) does not read: `glyphforge cache gc` removes it")
    wrong = []
    for name, expected in _FIELDS.items():
        value = manifest.get(name)
        if name not in manifest:
            wrong.append(f"no {name!r}")
        elif not isinstance(value, expected) or isinstance(value, bool):
            wrong.append(f"{name!r} should be {_json_type(expected())}, not {_json_type(value)}")
    if wrong:
        raise DamagedManifestError(f"not a manifest of the right shape: {'; '.join(wrong)}")
    for name, info in manifest["files"].items():
        if not is_plain_name(name):
            raise DamagedManifestError(f"lists the file {name!r}, which is not a plain file name inside the entry")
        size, digest = (info.get("size"), info.get("sha256")) if isinstance(info, dict) else (None, None)
        if not (type(size) is int and size >= 0 and isinstance(digest, str) and _SHA256.match(digest)):
            raise DamagedManifestError(f"records the file {name!r} as {reprlib.repr(info)}, not as {{'size': "
                                       "bytes, 'sha256': hex digest}")
    if (manifest["kind"], manifest["key"]) != (kind, key):
        raise DamagedManifestError(f"belongs to the {manifest['kind']!r} entry {manifest['key'][:12]!r}, not to "
                                   f"the directory {kind}/{key} it is in (moved or copied under another key?)")
    kind, key, params = manifest["kind"], manifest["key"], manifest["params"]
    try:
        expected_key = cache_key(kind, params, manifest["format_version"])
        expected_meta = metadata_sha256(kind, key, params, manifest["meta"])
        expected_entry = entry_sha256(kind, key, params, manifest["meta"], manifest["files"])
    except (TypeError, ValueError, RecursionError) as error:
        raise DamagedManifestError(f"its kind, params or meta cannot be hashed ({error})") from None
    if key != expected_key:
        raise DamagedManifestError("its key is not the hash of its kind, params and format version (edited params?)")
    if manifest["meta_sha256"] != expected_meta:
        raise DamagedManifestError("its params or meta differ from its meta_sha256 (the manifest was edited or "
                                   "damaged)")
    if manifest["entry_sha256"] != expected_entry:
        raise DamagedManifestError("its files table differs from its entry_sha256 (data files swapped, renamed or "
                                   "replaced together with their records, or the manifest was edited or damaged)")
    problem = built_problem(manifest) if declares_build(manifest["meta"]) else None
    if problem is not None:
        raise DamagedManifestError(f"it declares what no built dataset holds: {problem}")
    return manifest
