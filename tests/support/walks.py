"""Walks: which glyphforge modules one call passes through, and how often it goes back or climbs.

A walk records every call that crosses from one glyphforge module into another (generators resumed
count too, as they re-enter their module; a module's own code run by its import does not), traced
with `sys.setprofile` on the calling thread. Walk a call once warm (its imports done) to count its code:

* a **stop** is one such crossing (the module entered);
* a **return** is a stop in a module the walk already entered before;
* a **climb** is a stop in a module of a higher layer than its caller's (`tests/test_layers.LAYERS`),
  such as a callback handed down and called from below.

Goals for the walks of issue #44 are in ``tests/test_walks.py``; ``walk.route()`` lists a walk.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any


def _layer(module: str) -> int:
    from tests.test_layers import LAYERS, layer_of

    number = layer_of(module, "glyphforge", LAYERS)
    return -1 if number is None else number


@dataclass
class Walk:
    """The crossings of one traced call, ``(from module or None, to module)`` in order."""

    crossings: list[tuple[str | None, str]] = field(default_factory=list)

    @property
    def stops(self) -> int:
        return len(self.crossings)

    @property
    def returns(self) -> int:
        seen: set[str] = set()
        count = 0
        for caller, callee in self.crossings:
            if caller is not None:
                seen.add(caller)
            count += callee in seen
            seen.add(callee)
        return count

    @property
    def climbs(self) -> int:
        return sum(caller is not None and _layer(callee) > _layer(caller) for caller, callee in self.crossings)

    def route(self) -> str:
        """The walk, one crossing a line, for a failing goal's message."""
        short = [f"{(caller or '(caller)').removeprefix('glyphforge.')} -> {callee.removeprefix('glyphforge.')}"
                 for caller, callee in self.crossings]
        return f"{self.stops} stops, {self.returns} returns, {self.climbs} climbs:\n  " + "\n  ".join(short)


def _module(frame: FrameType) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name == "glyphforge" or name.startswith("glyphforge.") else None


@contextmanager
def walking() -> Iterator[Walk]:
    """Trace the block's calls on this thread into a `Walk`."""
    walk = Walk()

    def caller_module(frame: FrameType | None) -> str | None:
        while frame is not None:
            module = _module(frame)
            if module is not None:
                return module
            frame = frame.f_back
        return None

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = _module(frame)
        if callee is None or frame.f_code.co_name == "<module>":  # a module imported: not the walk's code
            return
        caller = caller_module(frame.f_back)
        if caller != callee:
            walk.crossings.append((caller, callee))

    previous: Callable[..., Any] | None = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield walk
    finally:
        sys.setprofile(previous)
