"""The dataset registry: the built-in records, and a toy dataset registered in one call everywhere it shows."""
from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

import glyphforge.datasets
from glyphforge import cli
from glyphforge.cache import CacheStore, Entry
from glyphforge.datasets import registry


def test_the_built_in_datasets_are_registered_with_parts_that_resolve():
    assert glyphforge.datasets.registered() == ["backgrounds", "emnist", "fashion-mnist", "kmnist", "mnist",
                                                "omniglot"]
    assert registry.glyph_sources() == ["emnist", "fashion-mnist", "kmnist", "mnist", "omniglot"]
    for name in registry.registered():
        record = registry.get(name)
        parts = [record.prepare, record.load, record.preview] + ([record.glyphs] if record.glyphs else [])
        assert all(callable(registry.resolve(part)) for part in parts), name
        module = __import__(registry.resolve(record.prepare).__module__, fromlist=["DEFAULT_METHOD"])
        assert module.DEFAULT_METHOD == record.default_resize, name  # one default per dataset, declared once


def test_unknown_names_and_bad_registrations_are_refused():
    with pytest.raises(KeyError, match="no dataset 'cifar10' is registered; the registered ones are backgrounds, "
                                       "emnist, fashion-mnist, kmnist, mnist, omniglot"):
        registry.get("cifar10")
    for bad in ("My-Set", "my set", "-set", "my--set", "my-", "2set", "my/set", ""):
        with pytest.raises(ValueError, match=f"dataset name {bad!r} must be a lowercase identifier such as 'emnist', "
                                             "or lowercase identifiers joined by hyphens such as 'fashion-mnist'"):
            registry.register(registry.DatasetRecord(bad, "", prepare=print, load=print, preview=print))
    assert "my-set" not in registry.registered()


# -- a toy dataset: one module's worth of parts and one registration -----------------------------
def _prepare_toy(*, shapes=(), data_dir=None, mirrors=None, verify=True, progress=True, offline=None,
                 level=3) -> list[Entry]:
    store = CacheStore.for_data_dir(data_dir)

    def write(writer) -> None:
        writer.write("squares.pklz", np.stack([np.full((8, 8), 40 * i + level, np.uint8) for i in range(5)]))
        writer.meta["n_images"] = 5

    return [store.get_or_create("toy", {"level": level}, write)]


def _preview_toy(entry: Entry, n: int, rng: np.random.Generator, data_dir) -> tuple[np.ndarray, list[str]]:
    images = entry.load("squares.pklz")[:n]
    return images, [f"square {i}" for i in range(len(images))]


@pytest.fixture
def toy():
    record = registry.register(registry.DatasetRecord(
        name="toy", summary="five grey squares (a test dataset)", prepare=_prepare_toy, load=_prepare_toy,
        preview=_preview_toy, options=(registry.Option("--toy-level", "level", "grey level", {"type": int}),),
    ))
    yield record
    registry.unregister("toy")


def test_a_registered_dataset_shows_in_prepare_data_info_and_preview(toy, tmp_path, capsys):
    assert "toy" in glyphforge.datasets.registered()
    with pytest.raises(SystemExit):
        cli.prepare_data_main(["--help"])
    help_text = capsys.readouterr().out
    assert re.search(r"\n  toy +five grey squares \(a test dataset\)\n", help_text)
    assert re.search(r"toy options:\n  --toy-level LEVEL +grey level\n", help_text)

    assert cli.prepare_data_main(["toy", "--toy-level", "7", "--data-dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split() == ["dataset", "entry", "images", "size", "seconds"]
    assert re.match(r"toy +native sizes [0-9a-f]{10} +5 +", table.splitlines()[2])
    entry = CacheStore.for_data_dir(tmp_path).get("toy", {"level": 7})
    assert entry is not None and entry.load("squares.pklz")[1, 0, 0] == 47

    assert cli.main(["info", "--data-dir", str(tmp_path)]) == 0
    info = capsys.readouterr().out
    assert re.search(r"\n  toy +level=7\n", info) and "built:      nothing yet" in info

    out = tmp_path / "toy.png"
    assert cli.main(["preview", "toy", "--out", str(out), "-n", "3", "--data-dir", str(tmp_path)]) == 0
    with Image.open(out) as image:
        assert image.width > 3 * 8 and image.height > 8
    assert capsys.readouterr().out == f"wrote {out}\n"


def test_a_registered_dataset_that_is_not_prepared_says_what_to_run(toy, tmp_path, capsys):
    assert cli.main(["preview", "toy", "--out", str(tmp_path / "p.png"), "--data-dir", str(tmp_path)]) == 1
    assert (
        f"error: toy is not prepared in {tmp_path / 'cache'}: run `prepare-data toy` first" in capsys.readouterr().err
    )
    assert cli.main(["info", "--data-dir", str(tmp_path)]) == 0
    assert re.search(r"\n  toy +not prepared \(prepare-data toy\)\n", capsys.readouterr().out)
