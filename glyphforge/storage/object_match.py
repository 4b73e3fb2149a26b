"""Whether an object already at a URL holds the bytes of an entry's data file, read back only when needed.

Publishing keeps a data file already at the target (an interrupted publish resumes) only when
its bytes are the entry's: its sha256 is the one the entry's manifest records. Hashing an
object means downloading it, which for a multi-GB part costs what uploading it again would,
so the store's own MD5 of it is used where it is reliable, compared with the MD5 of the local
file (whose sha256 is checked against the manifest in the same read, so a matching MD5 stands
for the manifest's hash):

* ``s3://``: the ETag. It is the object's MD5 (32 hex digits) for a single put, and
  ``<MD5 of the parts' MD5s>-<parts>`` for a multipart upload, which is computed locally for the
  part size glyphforge uploads with. Other ETags (SSE-KMS or SSE-C objects, another tool's part
  size) are no MD5 of the bytes, so they decide nothing;
* ``gs://``: ``md5Hash`` (composed objects have none);
* ``file://``: the file is on this machine: its sha256 is computed.

A CRC (S3's CRC32 checksums, GCS's ``crc32c``) is never taken for a match: other bytes with
the same CRC are easy to make. When the store gives no usable MD5, or one that differs, the
object is read back in ranges of :data:`READ_BYTES` (bounded memory) and its sha256 decides:
an ETag that differs proves nothing (an SSE-KMS object's is no MD5), a sha256 does.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from glyphforge._files import CHUNK_BYTES, sha256_file
from glyphforge.storage.location import Location
from glyphforge.storage.reads import read_bytes

__all__ = ["READ_BYTES", "object_mismatch", "recorded_mismatch"]

#: The range read at once when an object is read back to hash it.
READ_BYTES = 4 * CHUNK_BYTES
#: An S3 ETag that is an MD5: of the object, or (``-<parts>``) of a multipart upload's parts' MD5s.
_MD5_ETAG = re.compile(r'^"?([0-9a-f]{32})(?:-([1-9][0-9]*))?"?$')


def object_mismatch(where: Location, info: Mapping[str, Any], source: Path, recorded: Mapping[str, Any],
                    part_bytes: int) -> str | None:
    """Say how the object ``where`` differs from an entry's data file; None when it holds that file's bytes.

    Parameters
    ----------
    where
        The object's URL.
    info
        What the store's listing says of it (fsspec's ``ls(detail=True)``: ``size``, ``ETag``, ``md5Hash``...).
    source
        The local data file (the entry's, of the size its manifest records).
    recorded
        The manifest's record of the file: ``{"size": ..., "sha256": ...}``.
    part_bytes
        The part size of glyphforge's multipart uploads of a file of that size (``s3://``).

    Returns
    -------
    str or None
        What differs, to follow "<url> is" in a message ("16 bytes, the entry's is 1,024"); None
        when the object's bytes are the entry's.

    Raises
    ------
    RemoteFileMissingError, RemoteAccessError, RemoteReadError
        Reading the object back failed (see `glyphforge.storage.reads.read_bytes`).
    """
    return _mismatch(where, info, recorded, _store_md5(info, part_bytes),
                     lambda md5, parts: _local_md5(source, recorded["sha256"], parts) == md5)


def recorded_mismatch(where: Location, info: Mapping[str, Any], recorded: Mapping[str, Any]) -> str | None:
    """Say how the object ``where`` differs from the file a record describes, with no local copy of that file.

    As `object_mismatch`, but the MD5 to compare with the store's is the record's ``md5`` (of the
    whole file, hashed with its sha256 in one read by whoever uploaded it), if it has one; a
    multipart ETag decides nothing. Without a matching MD5 the object is read back and hashed.
    ``recorded``: ``{"size": ..., "sha256": ..., "md5": ... (optional)}``.
    """
    expected = recorded.get("md5")
    return _mismatch(where, info, recorded, _store_md5(info, None),
                     lambda md5, parts: parts is None and expected is not None and md5 == expected)


def _mismatch(where: Location, info: Mapping[str, Any], recorded: Mapping[str, Any],
              claimed: tuple[str, int | None] | None, md5_matches: Callable[[str, int | None], bool]) -> str | None:
    """What `object_mismatch` and `recorded_mismatch` say; ``claimed``: the store's MD5 of the object (`_store_md5`),
    ``md5_matches(md5, part size)``: whether it is the MD5 of the recorded bytes."""
    size, expected = int(info["size"]), recorded["size"]
    if size != expected:
        return f"{size:,} bytes, the entry's is {expected:,}"
    local = where.backend.local_path
    if local is not None:
        found = sha256_file(local)
    else:
        if claimed is not None and md5_matches(*claimed):
            return None
        found = _object_sha256(where, size)
    if found == recorded["sha256"]:
        return None
    return (f"of the right size but holds other bytes (their sha256 is {found[:16]}..., the entry's file's is "
            f"{recorded['sha256'][:16]}...)")


def _store_md5(info: Mapping[str, Any], part_bytes: int | None) -> tuple[str, int | None] | None:
    """The MD5 (hex) the store gives of a listed object, and the part size it is of (None: of the whole object);
    None when the store gives none that glyphforge can compute locally (a multipart ETag, with ``part_bytes`` None)."""
    md5_hash = info.get("md5Hash")  # gs://: base64 of the object's MD5
    if isinstance(md5_hash, str):
        try:
            return base64.b64decode(md5_hash, validate=True).hex(), None
        except binascii.Error:
            return None
    match = _MD5_ETAG.match(str(info.get("ETag", "")))  # s3://
    if match is None:
        return None
    if match[2] is None:
        return match[1], None
    if part_bytes is None or math.ceil(int(info["size"]) / part_bytes) != int(match[2]):
        return None  # uploaded in parts of another size: not computable here
    return match[1], part_bytes


def _local_md5(source: Path, sha256: str, part_bytes: int | None) -> str | None:
    """The MD5 of ``source`` as the store gives it (of the whole file, or of its parts' MD5s for ``part_bytes``
    parts), read once; None when the file's sha256 is not ``sha256`` (its MD5 would stand for no manifest's hash)."""
    whole, parts, in_part = hashlib.sha256(), [hashlib.md5(usedforsecurity=False)], 0
    with open(source, "rb") as stream:
        while chunk := stream.read(CHUNK_BYTES if part_bytes is None else min(CHUNK_BYTES, part_bytes - in_part)):
            whole.update(chunk)
            parts[-1].update(chunk)
            in_part += len(chunk)
            if in_part == part_bytes:
                parts.append(hashlib.md5(usedforsecurity=False))
                in_part = 0
    if whole.hexdigest() != sha256:
        return None
    if part_bytes is None:
        return parts[0].hexdigest()
    if in_part == 0:
        parts.pop()  # the file ended with a whole part
    return hashlib.md5(b"".join(part.digest() for part in parts), usedforsecurity=False).hexdigest()


def _object_sha256(where: Location, size: int) -> str:
    """The sha256 of the object ``where`` of ``size`` bytes, read back in ranges of :data:`READ_BYTES`."""
    digest = hashlib.sha256()
    for start in range(0, size, READ_BYTES):
        digest.update(read_bytes(where, start, min(start + READ_BYTES, size), what="checking what is there"))
    return digest.hexdigest()
