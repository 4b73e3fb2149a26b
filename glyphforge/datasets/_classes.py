"""`ClassNames`: what every ``load_*`` returns as its third value, the labels' names.

``y`` indexes it: image ``i`` is of class ``classes[y[i]]``. It is a plain list of
strings. Omniglot's loader returned a dict ``{name: label}`` before 0.2; that use
(``classes["Latin,3"]``, ``.items()``, ``.keys()``, ``.values()``, ``.get()``) keeps
working for one release with a DeprecationWarning.
"""
from __future__ import annotations

from collections.abc import ItemsView, Iterator
from typing import Any, SupportsIndex, overload

from glyphforge._deprecation import warn_deprecated

#: The class of the blank images ``include_blank`` adds (last in the class list).
BLANK = " "

_USE_INSTEAD = "classes.index(name) (the list of class names that y indexes)"


class ClassNames(list[str]):
    """The sorted class names that the labels index (a list; see the module docstring)."""

    @overload
    def __getitem__(self, index: SupportsIndex) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    @overload
    def __getitem__(self, index: str) -> int: ...

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, str):
            warn_deprecated("class_map[name]", _USE_INSTEAD)
            try:
                return self.index(index)
            except ValueError:
                raise KeyError(index) from None
        return super().__getitem__(index)

    def mapping(self) -> dict[str, int]:
        """Return ``{name: label}``, what ``load_omniglot`` returned before 0.2."""
        return {name: label for label, name in enumerate(self)}

    def items(self) -> ItemsView[str, int]:
        """Deprecated: the pairs ``(name, label)`` of :meth:`mapping`."""
        warn_deprecated("class_map.items()", "enumerate(classes) or classes.mapping().items()")
        return self.mapping().items()

    def keys(self) -> Iterator[str]:
        """Deprecated: the names (iterate the list itself)."""
        warn_deprecated("class_map.keys()", "the list itself")
        return iter(list(self))

    def values(self) -> Iterator[int]:
        """Deprecated: the labels ``0 .. len - 1``."""
        warn_deprecated("class_map.values()", "range(len(classes))")
        return iter(range(len(self)))

    def get(self, name: str, default: Any = None) -> Any:
        """Deprecated: the label of ``name``, or ``default``."""
        warn_deprecated("class_map.get(name)", _USE_INSTEAD)
        return self.mapping().get(name, default)
