"""What the write side's errors (`glyphforge.storage.store_errors`) say, for publishing and builds into a URL alike.

``store_failure("publish to", url, NO_BUCKET)`` is a regex for ``pytest.raises(match=...)``
(searched, so it may match a CLI's stderr too): the task and its URL, why, then what to do.
"""
from __future__ import annotations

import re

#: Why, and the key words of what to do.
NO_BUCKET = ("the bucket does not exist", r"Create the bucket \(glyphforge never creates one\), or check the URL")
REFUSED = ("the store refused the credentials or the permission",
           "Check the credentials this process reads \\(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
#: How each task resumes.
AGAIN = {"publish to": "run the same command again: files uploaded whole are kept",
         "build into": "run the build again: the shards finished are kept"}


def store_failure(verb: str, url: str, failure: tuple[str, str], doing: str = ".*") -> str:
    """The regex of the error of task ``verb`` at ``url`` failing with ``failure`` (above) while ``doing``."""
    why, fix = failure
    return f"(?s)cannot {verb} {re.escape(url)}: {why} while {doing}.*{fix}.*, then {AGAIN[verb]}"
