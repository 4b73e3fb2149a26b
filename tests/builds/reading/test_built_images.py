"""Which array a built dataset gives as its images: the spec's first array, or the one its metadata() names."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from PIL import Image

from glyphforge.builds import ShardError, build
from glyphforge.builds.making.shards import images_array
from glyphforge.cache import CacheStore
from glyphforge.previews import preview_target


@dataclass
class TwoArrays:
    """``x`` (each row's index times 10, shaped 2x2) then ``shard`` (the shard number), in that order."""

    images: str | None = None
    n_examples: int = 10
    shard_size: int = 4
    seed: int = 0
    kind: str = "test-two-arrays"

    def params(self) -> dict[str, Any]:
        return {"images": self.images}

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        rows = index * self.shard_size + np.arange(n, dtype=np.int64)
        return {"x": np.repeat(rows * 10, 4).reshape(n, 2, 2).astype(np.uint8), "shard": np.full(n, index, np.int16)}

    def metadata(self) -> dict[str, Any]:
        return {} if self.images is None else {"images": self.images}


X = np.repeat(np.arange(10) * 10, 4).reshape(10, 2, 2).astype(np.uint8)
SHARD = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2], np.int16)


def test_the_first_array_make_shard_returns_is_the_images(tmp_path):
    dataset = build(TwoArrays(), data_dir=tmp_path, progress=False)
    assert dataset.image_name == "x" and dataset.entry.meta["images"] == "x"
    image, targets = dataset[7]
    assert np.array_equal(image, X[7]) and targets == {"shard": 1}
    assert np.array_equal(dataset.images, X) and np.array_equal(dataset.labels["shard"], SHARD)
    streamed = list(dataset.stream(4, shuffle=False))
    assert [images[:, 0, 0].tolist() for images, _ in streamed] == [[0, 10, 20, 30], [40, 50, 60, 70], [80, 90]]
    assert [targets["shard"].tolist() for _, targets in streamed] == [[0] * 4, [1] * 4, [2] * 2]
    first, rest = next(dataset.batches(batch_size=3))
    assert np.array_equal(first, X[:3]) and rest["shard"].tolist() == [0, 0, 0]
    sheet = preview_target(dataset.key, out=tmp_path / "x.png", n=10, data_dir=tmp_path)
    pixels = np.asarray(Image.open(sheet))
    assert set(range(0, 100, 10)) <= set(np.unique(pixels).tolist())  # every row of x drawn (not shard: 0 to 2)


def test_metadata_images_names_the_images_array(tmp_path):
    dataset = build(TwoArrays(images="shard"), data_dir=tmp_path, progress=False)
    assert dataset.image_name == "shard" and dataset.metadata == {"images": "shard"}
    image, targets = dataset[5]
    assert image == 1 and np.array_equal(targets["x"], X[5])
    images, targets = next(iter(dataset.stream(10, shuffle=False)))
    assert np.array_equal(images, SHARD) and np.array_equal(targets["x"], X)


def test_metadata_naming_no_array_fails_the_first_shard(tmp_path):
    with pytest.raises(ShardError) as caught:
        build(TwoArrays(images="pixels"), data_dir=tmp_path, progress=False)
    assert caught.value.shard == 0
    assert ("test-two-arrays: metadata() names images='pixels', but make_shard returned the arrays 'x', 'shard'; "
            "name one of these") in str(caught.value)
    assert CacheStore.for_data_dir(tmp_path).ls() == []


def test_images_array_rule():
    layout = {"b": {}, "images": {}, "a": {}}
    assert images_array(layout, {}, "k") == "images"
    assert images_array({"b": {}, "a": {}}, {}, "k") == "b"
    assert images_array(layout, {"images": "a"}, "k") == "a"
    with pytest.raises(ValueError, match=r"^k: metadata\(\) names images=3, but make_shard returned the arrays "
                                         r"'b', 'images', 'a'; name one of these"):
        images_array(layout, {"images": 3}, "k")
