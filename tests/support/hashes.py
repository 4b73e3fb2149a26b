"""Hash strings of bytes in memory, computed here with hashlib (independently of glyphforge's `file_hash`)."""
from __future__ import annotations

import hashlib


def bytes_hash(data: bytes, algorithm: str) -> str:
    """Return ``"<algorithm>:<hex>"`` of ``data``: sha256, md5, or git-blob-sha1 (sha1 of git's header + data)."""
    if algorithm == "git-blob-sha1":
        return "git-blob-sha1:" + hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}"
