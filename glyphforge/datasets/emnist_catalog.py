"""EMNIST's splits, their class names and the names of their class files.

Splits and classes
------------------
A class is one character. In label order: ``byclass`` 0-9, A-Z, a-z (62 classes);
``bymerge`` and ``balanced`` 0-9, A-Z and ``abdefghnqrt`` (47: the lower-case letters
whose capitals look different); ``letters`` A-Z (26; NIST labels them 1-26, every
other split from 0); ``digits`` and ``mnist`` 0-9. Loaders return the classes in this
order (NIST's), so with every class ``y`` is NIST's label (``letters``: minus 1).

Class file names
----------------
Names are safe on case-insensitive filesystems (macOS, Windows), where ``A.pklz`` and
``a.pklz`` would be the same file: digits are ``digit_0.pklz`` ... ``digit_9.pklz``,
upper-case letters ``upper_A.pklz`` ... ``upper_Z.pklz``, lower-case letters
``lower_a.pklz`` ... ``lower_z.pklz``. The character itself is kept in the manifest
(``meta["classes"][i]["name"]``); :func:`class_file_name` maps one to the other.

Which images a load takes is the rule of every per-class dataset
(:mod:`glyphforge.datasets.classes.files`).
"""
from __future__ import annotations

from glyphforge.errors import IntegrityError

DIGITS = "0123456789"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = "abcdefghijklmnopqrstuvwxyz"
#: The class characters of each split, in label order.
CLASSES: dict[str, str] = {
    "byclass": DIGITS + UPPER + LOWER,
    "bymerge": DIGITS + UPPER + "abdefghnqrt",
    "balanced": DIGITS + UPPER + "abdefghnqrt",
    "letters": UPPER,
    "digits": DIGITS,
    "mnist": DIGITS,
}
SPLITS = tuple(CLASSES)
DEFAULT_SPLIT = "byclass"


class EMNISTFormatError(IntegrityError, ValueError):
    """The archive's mapping or labels do not describe the split, or a class file is damaged."""


def first_label(split: str) -> int:
    """Return NIST's label of the first class of ``split``: 1 for ``letters``, else 0."""
    return 1 if split == "letters" else 0


# -- class files ---------------------------------------------------------------------
def class_file_name(char: str) -> str:
    """Return the entry file name of class ``char``: ``digit_0``, ``upper_A``, ``lower_a`` + ``.pklz``."""
    for prefix, alphabet in (("digit", DIGITS), ("upper", UPPER), ("lower", LOWER)):
        if len(char) == 1 and char in alphabet:
            return f"{prefix}_{char}.pklz"
    raise ValueError(f"{char!r} is not an EMNIST class: classes are single characters 0-9, A-Z or a-z")
