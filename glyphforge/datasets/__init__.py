"""Dataset modules, one per upstream dataset, and the registry that declares them.

``registered()`` lists the datasets (``["backgrounds", "emnist", "fashion-mnist", "kmnist", "mnist",
"omniglot"]``);
`glyphforge.datasets.registry` says what a dataset module provides and how to add one
(``docs/adding-a-dataset.md``). The layers above use a dataset through these names only:

* the registry: `register`, `unregister`, `registered`, `get` (a `DatasetRecord`), `declared`
  (the record of a per-class dataset); `resolve` (a part named by a `Ref`) and `dataset_part`
  (a part with the data context bound), `needed` (the upstream files a prepare fetches, its options checked);
* `class_glyphs` (a per-class dataset's glyphs and class names) and `own_files` (the own copies
  a read uses), from `glyphforge.datasets.parts` (imported on first use: reading the registry imports no
  dataset module).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from glyphforge.datasets.registry import (
    DatasetRecord,
    Ref,
    dataset_part,
    declared,
    get,
    needed,
    register,
    registered,
    resolve,
    unregister,
)

if TYPE_CHECKING:
    from glyphforge.datasets.parts import class_glyphs, own_files

#: The names of `glyphforge.datasets.parts`, imported on first use.
_PARTS = ("class_glyphs", "own_files")

__all__ = [
    "DatasetRecord", "Ref", "class_glyphs", "dataset_part", "declared", "get", "needed", "own_files", "register",
    "registered", "resolve", "unregister",
]


def __getattr__(name: str) -> Any:
    if name in _PARTS:
        return getattr(importlib.import_module("glyphforge.datasets.parts"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
