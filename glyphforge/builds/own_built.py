"""Built datasets made from own copies (unverified) of upstream files: said once per process when one is opened.

`glyphforge.build` marks such an entry (``meta["verified"]`` False, its params naming the own
files, see `glyphforge.builds.builder.OWN_SOURCES`); `announced` is how every reader of a built
dataset (`BuiltDataset`, so `find_built`, `open_built` and `build` too) logs the WARNING loads log
(:func:`glyphforge.datasets._own_copy.announce`), once per process per entry.
"""
from __future__ import annotations

from typing import TypeVar

from glyphforge.cache import Entry
from glyphforge.datasets import _own_copy

E = TypeVar("E", bound=Entry)

#: What to do instead, said with the warning.
FIX = ("To build it from upstream's files, move your own files out of raw/ in the data dir it was built from and "
       "build again (a build from upstream's files has its own entry)")


def announced(entry: E) -> E:
    """``entry``, with a WARNING logged the first time this process opens it when it is an own copy."""
    _own_copy.announce(entry, f"the built {entry.kind} dataset", None, FIX)
    return entry
