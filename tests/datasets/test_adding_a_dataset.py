"""docs/adding-a-dataset.md, step by step: a toy per-class dataset is one declaration and one registration.

The page's two code blocks of a per-class dataset run as they are written: the first (what upstream
publishes) with this test's values instead (the files are served by a real HTTP server on 127.0.0.1), the
second (the declaration and the registration) unchanged. The dataset is then prepared and loaded through the
public API and ``prepare-data``, drawn by scenes, and unregistered. A step of the page that stops working fails
here.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import glyphforge as gf
from glyphforge import cli
from glyphforge.datasets import registered, unregister
from glyphforge.datasets.classes.declaration import DECLARATIONS
from glyphforge.scenes.glyph_datasets import glyph_datasets

from support.http_server import LocalHTTPServer, http_server  # noqa: F401 (fixture)
from support.synthetic_mnist import ALL_FILES, write_synthetic_mnist

PAGE = Path(__file__).resolve().parents[2] / "docs" / "adding-a-dataset.md"
NAME = "toy-digits"


def page_blocks() -> list[str]:
    """The page's Python code blocks, in order."""
    return re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)


def test_the_page_declares_and_registers_the_toy_dataset_in_two_blocks():
    upstream, declaration = page_blocks()[:2]
    assert set(re.findall(r"^(\w+) = ", upstream, flags=re.MULTILINE)) == {"BASE_URL", "PINS"}
    assert declaration.count("declare(Declaration(") == 1 and declaration.count("register(") == 1
    assert f'name="{NAME}"' in declaration


@pytest.fixture
def toy_digits(http_server: LocalHTTPServer, tmp_path):  # noqa: F811 (the fixture imported above)
    """The page's declaration and registration run, with upstream's files served over HTTP; undone after."""
    files = write_synthetic_mnist(tmp_path / "upstream", (600, 100), seed=11)
    for filename in ALL_FILES:
        http_server.add(f"toy-digits/{filename}", files.data(filename))
    namespace = {"BASE_URL": http_server.url("toy-digits/"),
                 "PINS": {filename: (files.md5[filename], files.size[filename]) for filename in ALL_FILES}}
    assert NAME not in registered()
    try:
        exec(page_blocks()[1], namespace)  # noqa: S102 (the page's step, run as written)
        yield files, http_server
    finally:
        unregister(NAME)
        DECLARATIONS.pop(NAME, None)
    assert NAME not in registered() and NAME not in glyph_datasets()


def test_the_toy_dataset_is_prepared_and_loaded_through_the_public_api(toy_digits, tmp_path):
    files, server = toy_digits
    assert NAME in registered() and NAME in glyph_datasets()
    data_dir = tmp_path / "data"
    prepared = gf.prepare(NAME, shapes=[(14, 14)], data_dir=data_dir, progress=False)
    assert prepared is not None
    assert all(server.requests(f"toy-digits/{filename}") == 1 for filename in ALL_FILES)  # fetched once, checked
    x, y, classes = gf.load(NAME, ["3", "7"], subset="test", data_dir=data_dir, download=False)
    expected = np.concatenate([files.class_images(3, "test"), files.class_images(7, "test")])
    assert list(classes) == ["3", "7"] and len(x) == len(expected) == len(y)
    assert sorted(map(bytes, x)) == sorted(map(bytes, expected))  # shuffled: the same images
    small, _, _ = gf.load(NAME, subset="train", shape=(14, 14), data_dir=data_dir, download=False)
    assert small.shape == (600, 14, 14)


def test_the_toy_dataset_is_prepared_by_prepare_data_and_drawn_by_scenes(toy_digits, tmp_path, capsys):
    _, server = toy_digits
    data_dir = tmp_path / "data"
    assert cli.prepare_data_main([NAME, "--data-dir", str(data_dir), "--shape", "14x14", "-q"]) == 0
    assert cli.prepare_data_main([NAME, "--list", "--data-dir", str(data_dir)]) == 0
    assert "t10k-labels-idx1-ubyte.gz" in capsys.readouterr().out
    x, _, classes = gf.load(NAME, ["0"], shape=(14, 14), data_dir=data_dir, download=False)
    assert x.shape[1:] == (14, 14) and list(classes) == ["0"]
    spec = gf.ScatteredGlyphs(2, glyphs=NAME, characters="012", image_shape=(32, 32), glyph_shape=(14, 14),
                              min_glyphs=1, max_glyphs=2, shard_size=2, seed=0)
    spec.prepare(data_dir)  # the glyphs already prepared: read from the cache
    shard = spec.make_shard(0, np.random.default_rng(0), 2, data_dir=data_dir)
    assert len(shard["images"]) == 2 and spec.class_names(data_dir) == ("0", "1", "2")
    assert server.requests("toy-digits/train-images-idx3-ubyte.gz") == 1
