"""glyphforge's errors: one root, `GlyphforgeError`, and the families under it.

``except glyphforge.GlyphforgeError`` catches every error glyphforge raises of its own.
Each error also keeps the builtin base it always had, as its second parent (the pattern of
HF datasets' ``exceptions.py``), so ``except PermissionError`` / ``except ValueError`` code
keeps working: `glyphforge.DataDirAccessError` is a `AccessError` and a ``PermissionError``.

The families (an error may belong to two: a wrong hash is a `DownloadError` and an
`IntegrityError`):

=================  ==============================================================================
`ArgumentError`    what the caller asked for cannot be done as given (a value, a URL, a target, a
                   spec, a destination in the way); found before the work it concerns
`IntegrityError`   data is damaged or is not what it claims: a hash, a manifest, an index, a
                   decoded copy, a pickle, an upstream file of the wrong format
`StorageError`     writing to a disk or a store failed (full, read-only, forbidden): an ``OSError``
`AccessError`      data to read is missing, this user may not read it, or it cannot be reached
                   (a store failing, a lock held too long)
`DownloadError`    a file could not be obtained (`glyphforge.pipelines.resource`, with the
                   resource and every attempt)
`BuildError`       a build could not be made: a spec, a shard, or the session that runs them
=================  ==============================================================================

Families carry no builtin base (but `StorageError`, an ``OSError`` as it always was): each
error names its own. This module imports nothing from glyphforge, so every layer may use it.
"""
from __future__ import annotations


class GlyphforgeError(Exception):
    """The root of every error glyphforge raises of its own; ``except GlyphforgeError`` catches them all.

    Every one pickles whole (to and from worker processes): its class, ``args``, attributes and,
    for an ``OSError``, ``errno``, ``strerror`` and ``filename``, without calling its ``__init__``
    (whose parameters need not be its ``args``).
    """

    def __reduce__(self) -> tuple[object, ...]:
        state = dict(vars(self))
        if isinstance(self, OSError):  # those set (set to None, a file name would show as "None")
            state |= {name: getattr(self, name) for name in ("errno", "strerror", "filename", "filename2")
                      if getattr(self, name) is not None}
        return _rebuilt, (type(self), self.args, state)


def _rebuilt(cls: type[GlyphforgeError], args: tuple[object, ...], state: dict[str, object]) -> GlyphforgeError:
    """The error `GlyphforgeError.__reduce__` pickled: made from its ``args``, attributes set, no ``__init__`` run."""
    # the builtin ``__new__`` that lays it out: OSError's, else Exception's (``MemoryError.__new__`` refuses a subclass)
    error = (OSError if issubclass(cls, OSError) else Exception).__new__(cls, *args)
    error.args = args
    for name, value in state.items():
        setattr(error, name, value)
    return error


def os_error_text(error: OSError) -> str:
    """The message of an ``OSError`` made as ``(errno, message, filename)``, or from its message alone.

    torch's ``DataLoader`` re-raises a worker's error as its class called with its text alone.
    """
    return str(error.strerror if error.strerror is not None else error.args[0] if error.args else "")


class ArgumentError(GlyphforgeError):
    """What the caller asked for cannot be done as given; found before the work it concerns, which was not done.

    A bad value, URL, target, spec or stream state, a limit too small, or something in the way where
    a result would go: the message names it and what to give instead.
    """


class IntegrityError(GlyphforgeError):
    """Data is damaged or is not what it claims (a hash, a manifest, an index, a decoded copy, a pickle, a file format).

    The message names the data and what to do (usually: make it again, or fetch it again).
    """


class StorageError(GlyphforgeError, OSError):
    """Writing failed for a reason of the storage (full, read-only, forbidden); the message says what to do.

    ``errno`` and ``filename`` are those of the original error.
    """

    def __str__(self) -> str:
        return str(self.args[0])


class AccessError(GlyphforgeError):
    """Data to read is missing, this user may not read it, or it cannot be reached (a store failing, a lock held).

    Each of these is also an ``OSError`` (``FileNotFoundError``, ``PermissionError``, ``TimeoutError``).
    """


class BuildError(GlyphforgeError):
    """A build could not be made: its spec is unusable, a shard failed, or the session running the shards did."""
