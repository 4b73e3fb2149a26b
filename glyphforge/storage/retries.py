"""How hard glyphforge tries a store or a download (`RetryPolicy`), the HTTP headers that steer it, and the errors a
read ends with when it cannot succeed.

Every backend (`glyphforge.storage.backend.Backend`) reads, and every download
(`glyphforge.pipelines.download.fetch`) fetches, under one `RetryPolicy` (`DEFAULT_POLICY` unless given
another). `retry_after` and `content_range` read the two headers both ask of an HTTP answer. A read
that cannot succeed raises:

* `RemoteFileMissingError` (a ``FileNotFoundError``): no such object, or no such bucket (``no_bucket``);
* `RemoteAccessError` (a ``PermissionError``): the credentials were refused (401, 403);
* `ShortObjectError` (a `RemoteReadError`): the object ends before the range asked for;
* `RemoteReadError` (an ``OSError``): anything else, transient failures included once retried.
"""
from __future__ import annotations

import email.utils
import math
import random
import re
import time
from dataclasses import dataclass
from typing import NamedTuple

from glyphforge._checks import check_int, check_real
from glyphforge.errors import AccessError, IntegrityError

__all__ = ["DEFAULT_POLICY", "ContentRange", "RemoteAccessError", "RemoteFileMissingError", "RemoteReadError",
           "RetryPolicy", "ShortObjectError", "content_range", "retry_after"]

_CONTENT_RANGE = re.compile(r"^bytes (?:(\d+)-(\d+)|\*)/(\d+|\*)$")


@dataclass(frozen=True)
class RetryPolicy:
    """How hard, and how long, to try one read of a store or one HTTP source of a download.

    Attributes
    ----------
    attempts
        Failed attempts in a row before giving up (1: no retry). A download resets the count after an
        attempt that added at least 64 KiB to its file, and gives up at once on a host name that does not
        resolve.
    backoff
        Delay in seconds after the first failure; doubled after each further one.
    max_delay
        Cap in seconds on any one delay, a server's Retry-After included.
    jitter
        How far each backoff delay is drawn at random either side of its value, as a fraction (0.2: from 80 % to
        120 %), so that many readers failing together do not retry together; 0: exact delays. A Retry-After is
        kept as the server gave it.
    connect_timeout, read_timeout
        Seconds allowed to connect, and between two bytes of an answer (HTTP).
    min_rate
        Bytes per second a download's answer must deliver, measured over ``rate_window``; a slower
        answer gives up on the source (0: no minimum). The default, 1 KB/s, is far below any
        working link and far above a server dripping bytes to keep a connection open.
    rate_window
        Seconds over which ``min_rate`` is measured; an answer is judged once it is this old.
    deadline
        Seconds allowed for one download source, retries and pauses included; None: no limit (the
        timeouts, ``attempts`` and ``min_rate`` still bound every wait).
    report_every
        Seconds between two INFO lines on a download that is not complete yet.
    """

    attempts: int = 5
    backoff: float = 0.5
    max_delay: float = 30.0
    jitter: float = 0.0
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    min_rate: float = 1000.0
    rate_window: float = 60.0
    deadline: float | None = None
    report_every: float = 15.0

    def __post_init__(self) -> None:
        check_int("RetryPolicy.attempts", self.attempts, 1)
        for name in ("backoff", "max_delay", "min_rate"):
            check_real(f"RetryPolicy.{name}", getattr(self, name), 0.0, math.inf)
        check_real("RetryPolicy.jitter", self.jitter, 0.0, 1.0)
        for name in ("connect_timeout", "read_timeout", "rate_window", "report_every"):
            check_real(f"RetryPolicy.{name}", getattr(self, name), 1e-3, math.inf)
        if self.deadline is not None:
            check_real("RetryPolicy.deadline", self.deadline, 1e-3, math.inf)

    def delay(self, failures: int, retry_after: float | None) -> float:
        """Seconds to wait after the ``failures``-th failure in a row (the server's ``retry_after`` when it gave
        one)."""
        if retry_after is None:
            wanted = self.backoff * 2 ** (failures - 1) * random.uniform(1 - self.jitter, 1 + self.jitter)
        else:
            wanted = retry_after
        return max(0.0, min(wanted, self.max_delay))


#: The policy of every read and download not given another: the defaults, with 20 % jitter.
DEFAULT_POLICY = RetryPolicy(jitter=0.2)


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None without one, or an unreadable one."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class ContentRange(NamedTuple):
    """A Content-Range header: the first and last byte sent (None: ``bytes */N``, nothing sent), and the size of
    the whole file (None: ``/*``, unknown)."""

    first: int | None
    last: int | None
    total: int | None


def content_range(value: str | None) -> ContentRange | None:
    """The Content-Range header ``value`` (``bytes 0-99/1000``, ``bytes */1000``); None when it is none of these."""
    match = _CONTENT_RANGE.match(value or "")
    if match is None:
        return None
    first, last, total = (None if group is None or group == "*" else int(group) for group in match.groups())
    return ContentRange(first, last, total)


class RemoteReadError(AccessError, OSError):
    """A remote object could not be read (the message says what failed and what to do)."""

    def __str__(self) -> str:
        return str(self.args[0])


class ShortObjectError(RemoteReadError, IntegrityError):
    """The object ends before the range asked for: it is not the object expected (damaged, or replaced)."""


class RemoteFileMissingError(AccessError, FileNotFoundError):
    """The object (or its bucket: ``no_bucket``) does not exist: retrying cannot help."""

    def __init__(self, message: str, no_bucket: bool = False) -> None:
        super().__init__(message)
        self.no_bucket = no_bucket

    def __str__(self) -> str:
        return str(self.args[0])


class RemoteAccessError(AccessError, PermissionError):
    """The store refused the credentials (or has none for this process): retrying cannot help."""

    def __str__(self) -> str:
        return str(self.args[0])
