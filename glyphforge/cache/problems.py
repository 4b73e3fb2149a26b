"""What is wrong in a store of entries, on disk or at a URL: `CacheProblem`, and what one listing finds, `Scan`."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from glyphforge.cache.entry import Entry

#: A problem's state: damaged (a manifest failing its checks, a file missing, of the wrong size or sha256).
CORRUPT = "CORRUPT"
#: This user may not read it (another user's, made owner-only): not known to be broken, and not checked.
UNREADABLE = "UNREADABLE"
#: Data files without their manifest at a URL: an upload in progress, or an interrupted one (not an entry yet).
INCOMPLETE = "INCOMPLETE"
#: Not glyphforge's: a link or a file where an entry's companion would be. Named with what to do, never changed; no
#: failure (what glyphforge keeps is intact, and `gc`, which removes only its own, leaves it).
FOREIGN = "FOREIGN"


@dataclass(frozen=True)
class CacheProblem:
    """One thing wrong in a store (see :meth:`CacheStore.verify`): where, what, and its ``state``.

    Attributes
    ----------
    path
        The folder, manifest or file: a path, or a URL for a store at a URL.
    message
        What is wrong, and what to do.
    state
        `CORRUPT`, `UNREADABLE`, `INCOMPLETE` or `FOREIGN`.
    companion
        The label of the entry's companion the problem is in (``"decoded"``), "" for the entry's own files.
    """

    path: Path | str
    message: str
    state: str = CORRUPT
    companion: str = ""

    @property
    def unreadable(self) -> bool:
        """This user may not read it: it could not be checked (and is not known to be broken)."""
        return self.state == UNREADABLE

    @property
    def failing(self) -> bool:
        """Damaged or not checked: all but an `INCOMPLETE` upload, which is no entry yet, and what is `FOREIGN`."""
        return self.state not in (INCOMPLETE, FOREIGN)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class Scan:
    """What one listing of a store found.

    Attributes
    ----------
    entries
        The complete entries (a manifest there and passing its checks), by kind then creation time.
    problems
        What the listing left out and why: folders and entries this user may not read, manifests failing
        their checks, entries at a URL without their manifest yet.
    """

    entries: Sequence[Entry]
    problems: list[CacheProblem]

    @property
    def broken(self) -> list[CacheProblem]:
        """The manifests failing their checks."""
        return [problem for problem in self.problems if problem.state == CORRUPT]

    @property
    def incomplete(self) -> list[CacheProblem]:
        """The entry folders at a URL holding data files but no manifest (an upload in progress, or interrupted)."""
        return [problem for problem in self.problems if problem.state == INCOMPLETE]
