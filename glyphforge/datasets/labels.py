"""Entry labels: how ``prepare-data``'s table names a prepared entry, e.g. ``"byclass 28x28"``.

A label is ``(entry) -> str``, a record's ``entry_label`` part (see
`glyphforge.datasets.registry`): which configuration the entry holds (EMNIST's split,
Omniglot's set), then its image size. Records without one get `shape_label`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from glyphforge.cache.entry import Entry


def shape_label(entry: Entry) -> str:
    """``"28x28"``, or ``"native sizes"`` for an entry without a ``shape`` parameter."""
    shape = entry.params.get("shape")
    return "x".join(map(str, shape)) if shape else "native sizes"


def emnist_label(entry: Entry) -> str:
    """``"byclass 28x28"``: the EMNIST split, then the image size."""
    return f"{entry.params.get('split')} {shape_label(entry)}"


def omniglot_label(entry: Entry) -> str:
    """``"small1 105x105"``: the Omniglot set, then the image size."""
    return f"{entry.params.get('set')} {shape_label(entry)}"
