"""`ClassNames`: what every ``load_*`` returns as its third value, the labels' names.

``y`` indexes it: image ``i`` is of class ``classes[y[i]]``. It is a plain list of
strings; ``classes.index(name)`` is a class's label.
"""
from __future__ import annotations

#: The class of the blank images ``include_blank`` adds (last in the class list).
BLANK = " "


class ClassNames(list[str]):
    """The class names that the labels index (a list; see the module docstring)."""

    def mapping(self) -> dict[str, int]:
        """Return ``{name: label}``."""
        return {name: label for label, name in enumerate(self)}
