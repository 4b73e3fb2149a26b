"""Built datasets of any kind in a stock torch DataLoader: default collate, two workers, shuffled (issue 34).

``ds[i]`` is ``(image, targets dict)``, the dict empty when the build has no other array; a string array
holds one string per example (collated as a list); arrays the default collate cannot batch are refused
at build time (tests/builds/test_builder.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import glyphforge

from support.collate import NEEDS_TORCH, loaded_examples
from support.specs import RowSpec


@dataclass
class ImagesOnly(RowSpec):
    """`RowSpec`'s images, no other array."""

    kind: str = "test-images-only"

    def make_shard(self, index, rng, n):
        return {"images": super().make_shard(index, rng, n)["images"]}


@NEEDS_TORCH
@pytest.mark.parametrize("spec", [RowSpec(n_examples=150, shard_size=40), ImagesOnly(n_examples=150, shard_size=40)],
                         ids=["rows-and-names", "images-only"])
def test_a_built_dataset_batches_in_a_stock_dataloader(tmp_path, spec):
    dataset = glyphforge.build(spec, data_dir=tmp_path, progress=False)
    images, targets = loaded_examples(dataset, batch_size=16)  # every batch checked against dataset[i]
    assert images.numpy().dtype == np.uint8 and images.shape == (16, 3, 4)
    if isinstance(spec, ImagesOnly):
        assert targets == {} and dataset[3][1] == {}
        return
    rows = targets["row"].numpy()
    assert rows.dtype == np.int64 and rows.shape == (16,)
    assert targets["name"] == [f"r{row}" for row in rows]  # one string per example: a list of them
