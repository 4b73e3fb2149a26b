"""How hard a read of a store tries (`ReadPolicy`), and the errors it ends with when it cannot succeed.

Every backend (`glyphforge.storage.backend.Backend`) reads under a `ReadPolicy` and raises these:

* `RemoteFileMissingError` (a ``FileNotFoundError``): no such object, or no such bucket (``no_bucket``);
* `RemoteAccessError` (a ``PermissionError``): the credentials were refused (401, 403);
* `ShortObjectError` (a `RemoteReadError`): the object ends before the range asked for;
* `RemoteReadError` (an ``OSError``): anything else, transient failures included once retried.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from glyphforge._checks import check_int, check_real
from glyphforge.errors import AccessError, IntegrityError

__all__ = ["DEFAULT_POLICY", "ReadPolicy", "RemoteAccessError", "RemoteFileMissingError", "RemoteReadError",
           "ShortObjectError"]


@dataclass(frozen=True)
class ReadPolicy:
    """How hard to try one read.

    Attributes
    ----------
    attempts
        Tries before giving up on a transient failure (1: no retry).
    backoff
        Seconds to wait after the first failure, doubled after each further one (with jitter).
    max_delay
        The longest wait between two tries, a server's Retry-After included.
    timeout
        Seconds allowed to connect, and between two pieces of an answer (HTTP).
    """

    attempts: int = 5
    backoff: float = 0.5
    max_delay: float = 30.0
    timeout: float = 60.0

    def __post_init__(self) -> None:
        check_int("ReadPolicy.attempts", self.attempts, 1)
        for name in ("backoff", "max_delay", "timeout"):
            check_real(f"ReadPolicy.{name}", getattr(self, name), 0.0, float("inf"))

    def delay(self, failures: int, retry_after: float | None) -> float:
        """Seconds to wait after ``failures`` failures in a row (the server's ``retry_after`` when it gave one)."""
        if retry_after is not None:
            return min(retry_after, self.max_delay)
        return min(self.backoff * 2 ** (failures - 1) * random.uniform(0.8, 1.2), self.max_delay)


DEFAULT_POLICY = ReadPolicy()


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
