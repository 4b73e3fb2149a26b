"""A stock torch ``DataLoader`` over a map-style dataset, checked example by example against ``ds[i]``.

`loaded_examples` runs ``DataLoader(ds, batch_size, shuffle=True, num_workers=2)`` with torch's
default collate for one epoch, cuts every batch back into its examples and checks them against
``[ds[i] for i in range(len(ds))]`` as a multiset (each example once, with its own targets, in a
shuffled order), each array with its dtype and per-example shape. Tests skip it without torch
(`NEEDS_TORCH`, saying why).
"""
from __future__ import annotations

import importlib.util
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from support.optional import NO_TORCH

NEEDS_TORCH = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason=NO_TORCH)


def loaded_examples(dataset: Any, batch_size: int) -> list[Any]:
    """Return the first batch of one shuffled epoch of a stock DataLoader over ``dataset``, after checking the epoch.

    Every batch, cut into examples, must give exactly the examples ``dataset[i]`` gives (arrays with their
    dtypes and shapes, strings as strings), each once, in another order than ``range(len(dataset))``.
    """
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=2)
    batches = list(loader)
    seen = [_key(example) for batch in batches for example in _examples(batch)]
    expected = [_key(dataset[i]) for i in range(len(dataset))]
    assert Counter(seen) == Counter(expected), "the loader's examples are not the dataset's, each once"
    assert seen != expected, "the loader did not shuffle"
    return batches[0]


def _examples(batch: Any, size: int | None = None) -> list[Any]:
    """A default-collated batch cut back into its ``size`` examples (tensors to numpy arrays; None: the first's)."""
    import torch

    if isinstance(batch, torch.Tensor):
        return list(batch.numpy())
    if size is None:
        size = len(_examples(batch[0]))  # a batch is a list, its first part a tensor (the images)
    if isinstance(batch, Mapping):
        columns = {name: _examples(value, size) for name, value in batch.items()}
        return [{name: column[row] for name, column in columns.items()} for row in range(size)]
    if all(isinstance(item, str) for item in batch):  # strings are collated as a list of them
        return list(batch)
    return [tuple(row) for row in zip(*(_examples(part, size) for part in batch), strict=True)]


def _key(example: Any) -> Any:
    """What identifies an example: its arrays' dtypes, shapes and bytes, its strings, nested alike."""
    if isinstance(example, Mapping):
        return tuple((name, _key(example[name])) for name in sorted(example))
    if isinstance(example, (tuple, list)):
        return tuple(_key(item) for item in example)
    if isinstance(example, str):
        return str(example)
    array = np.asarray(example)
    return array.dtype.str, array.shape, array.tobytes()
