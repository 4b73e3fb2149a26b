"""Built datasets made from own copies (unverified) of upstream files: said once per run when one is opened.

`glyphforge.build` marks such an entry (``meta["verified"]`` False, its params naming the own
files, see `glyphforge.builds.making.builder.OWN_SOURCES`); `announced` is how every reader of a built
dataset (`BuiltDataset`, so `find_built`, `open_built` and `build` too) logs the WARNING loads log
(:func:`glyphforge.datasets.own_copies.announce`), once per process per entry. A reader unpickled
in another process (a DataLoader worker's) was opened, so said, in the process it came from:
`unpickled` keeps the worker quiet.
"""
from __future__ import annotations

from typing import TypeVar

from glyphforge.cache import Entry
from glyphforge.datasets import own_copies as _own_copy

E = TypeVar("E", bound=Entry)

#: What to do instead, said with the warning.
FIX = ("To build it from upstream's files, move your own files out of raw/ in the data dir it was built from and "
       "build again (a build from upstream's files has its own entry)")


def announced(entry: E) -> E:
    """``entry``, with a WARNING logged the first time this process opens it when it is an own copy."""
    _own_copy.announce(entry, f"the built {entry.kind} dataset", None, FIX)
    return entry


def unpickled(entry: E) -> E:
    """``entry``, of a reader unpickled from a process that opened it (and said it is an own copy): not said again."""
    _own_copy.said(entry.key)
    return entry
