"""glyphforge.datasets.classes.files: a new per-class IDX dataset is one declaration and one registry line.

The toy dataset below is declared in a module the test writes (``toy_dataset.py``): real
IDX files (``support.synthetic_mnist``) pinned by md5, fetched offline from a ``file://``
mirror, prepared by the real command line in a subprocess, then loaded, previewed and
drawn by scenes.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

from glyphforge.builds.reading.lookup import find_built
from glyphforge.cache import CacheStore
from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.datasets.classes.declaration import DECLARATIONS
from glyphforge.datasets.classes.load import ClassFilesDataset
from glyphforge.datasets.emnist import EMNIST, emnist_classes, load_emnist, prepare_emnist
from glyphforge.pipelines.resize import resize
from glyphforge.scenes.glyph_datasets import glyph_dataset

from support.synthetic_mnist import ALL_FILES, write_synthetic_mnist

CLASSES = "ABCDEFGHIJ"
#: The toy dataset's module: one declaration, one registry line.
TOY_MODULE = '''
"""A toy per-class IDX dataset."""
from glyphforge.datasets import registry
from glyphforge.datasets.classes.declaration import Config, Declaration, declare
from glyphforge.datasets.classes.files import record
from glyphforge.datasets.classes.mnist_form import read_files
from glyphforge.pipelines.resource import Resource

TOY = declare(Declaration(
    name="toy", title="Toy", configs={{"default": Config(tuple("{classes}"), (300, 60))}}, reader=read_files,
    resources={{name: Resource("toy", name, "{origin}/" + name, "md5:" + md5, size)
               for name, (md5, size) in {pins}.items()}},
))
registry.register(record(TOY, "ten classes of bars (a test dataset)"))
'''
DRIVER = '''
import sys

import toy_dataset  # noqa: F401 (declares and registers the toy dataset)
from glyphforge import cli

command, *argv = sys.argv[1:]
sys.exit({"prepare-data": cli.prepare_data_main, "glyphforge": cli.main}[command](argv))
'''


class Toy(ClassFilesDataset):
    """The toy dataset as a map-style dataset."""

    name = "toy"


@pytest.fixture(scope="module")
def toy_files(tmp_path_factory):
    """The toy's module and driver in a folder, and its four files on a mirror (``<mirror>/toy/<file>``)."""
    root = tmp_path_factory.mktemp("toy")
    files = write_synthetic_mnist(root / "mirror" / "toy", (300, 60), seed=7)
    pins = {name: (files.md5[name], files.size[name]) for name in ALL_FILES}
    origin = (root / "no-origin").as_uri()
    (root / "toy_dataset.py").write_text(TOY_MODULE.format(classes=CLASSES, origin=origin, pins=pins))
    (root / "run_toy.py").write_text(textwrap.dedent(DRIVER))
    return root, files


@pytest.fixture
def toy(toy_files):
    """The toy module imported in this process too (declared and registered), removed after the test."""
    root, files = toy_files
    spec = importlib.util.spec_from_file_location("toy_dataset", root / "toy_dataset.py")
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    yield files
    registry.unregister("toy")
    DECLARATIONS.pop("toy")


def run_toy(root, command: str, *argv, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``prepare-data`` or ``glyphforge`` in a fresh Python that imported the toy module first."""
    return subprocess.run([sys.executable, str(root / "run_toy.py"), command, *map(str, argv)], capture_output=True,
                          text=True, timeout=300, cwd=root,
                          env={**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))})


def _ink(image: np.ndarray) -> bytes:
    rows, cols = np.flatnonzero(image.any(1)), np.flatnonzero(image.any(0))
    return image[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1].tobytes()


def test_prepare_data_preview_and_scenes_of_a_declared_toy_dataset(toy_files, tmp_path):
    root, files = toy_files
    data_dir = tmp_path / "data"
    env = {**os.environ, "GLYPHFORGE_DATA_DIR": str(data_dir)}
    mirror = (root / "mirror").as_uri()
    done = run_toy(root, "prepare-data", "toy", "--offline", "--mirror", mirror, env=env)
    assert done.returncode == 0, done.stderr
    assert re.search(r"\ntoy +28x28 [0-9a-f]{10} +360 ", done.stdout), done.stdout
    assert all((data_dir / "raw" / "toy" / name).read_bytes() == files.data(name) for name in ALL_FILES)
    [entry] = CacheStore.for_data_dir(data_dir).ls()
    assert entry.kind == "toy" and entry.params == {
        "shape": [28, 28], "source": {name: f"md5:{files.md5[name]}" for name in sorted(ALL_FILES)}, "layout": 2}
    assert entry.meta["verified"] is True and (entry.meta["n_train"], entry.meta["n_test"]) == (300, 60)
    assert [(r["name"], r["label"], r["file"]) for r in entry.meta["classes"]] == [
        (name, label, f"class_{label:02d}.pklz") for label, name in enumerate(CLASSES)]
    for label in range(10):
        assert np.array_equal(entry.load(f"class_{label:02d}.pklz"), files.class_images(label))

    out = tmp_path / "toy.png"
    shown = run_toy(root, "glyphforge", "preview", "toy", "--out", out, "-n", "4", env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"wrote {out}\n"
    with Image.open(out) as image:
        assert image.width >= 2 * 28 and image.height >= 2 * 28  # four 28x28 examples

    built = run_toy(root, "glyphforge", "build", "scenes", "--glyphs", "toy", "--characters", "CA", "--glyph-shape",
                    "28x28", "--image-shape", "64x64", "--max-glyphs", "2", "--max-overlap", "0", "--n-examples", "20",
                    "-q", env=env)
    assert built.returncode == 0, built.stderr
    scenes = find_built("scenes", data_dir=data_dir)
    assert scenes.metadata == {"class_names": ["A", "C"]}
    inks = {name: {_ink(image) for image in files.class_images(CLASSES.index(name))} for name in "AC"}
    drawn = set()
    glyph_names = np.array([*scenes.classes, ""])[scenes["labels"]]  # -1 pads: ""
    for image, boxes, names in zip(scenes["images"], scenes["boxes"], glyph_names, strict=True):
        for (top, left, bottom, right), name in zip(boxes.astype(int), names, strict=True):
            if name:
                assert image[top:bottom, left:right, 0].tobytes() in inks[name]  # 28x28 glyphs keep their pixels
                drawn.add(name)
    assert drawn == {"A", "C"}


def test_load_the_map_style_class_and_glyphs_of_the_toy_dataset(toy, tmp_path):
    files, record = toy, registry.get("toy")
    load = registry.resolve(record.load)
    context = DataContext.resolve(data_dir=tmp_path, offline=True, mirrors=[files.directory.parent.as_uri()])
    x, y, classes = load("CA", subset="test", seed=3, context=context)
    tests = [files.class_images(CLASSES.index(name), "test") for name in "AC"]
    order = np.random.default_rng(3).permutation(sum(map(len, tests)))
    assert classes == ["A", "C"]
    assert np.array_equal(x, np.concatenate(tests)[order])
    assert np.array_equal(y, np.repeat([0, 1], [len(t) for t in tests])[order])

    ds = Toy(subset="all", classes=["J"], include_blank=True, context=context)
    images, labels = files.upstream("all")
    j = images[labels == 9]  # upstream order: the train examples, then the test ones
    assert ds.classes == ["J", " "] and np.array_equal(ds.images, np.concatenate([j, np.zeros_like(j)]))
    assert repr(ds) == f"Toy(subset='all', shape=(28, 28), {2 * len(j)} images, 2 classes)"
    small = Toy(subset="train", shape=(14, 14), classes="B", context=context)  # the resized entry, made from the cache
    assert np.array_equal(small.images, resize(files.class_images(1, "train"), (14, 14), method="box", batch=True))

    glyphs = registry.resolve(glyph_dataset("toy").glyphs)  # the scenes' part, read from the declaration
    gx, gy, names = glyphs(None, example_range=None, shape=(14, 14), context=context)
    assert names == list(CLASSES) and len(gx) == 360 and np.bincount(gy).tolist() == [
        len(files.class_images(label)) for label in range(10)]
    with pytest.raises(FileNotFoundError, match=r"^Toy at 7x7 is not prepared in .*: run `prepare-data toy --shape "
                                                r"7x7` first \(glyph images are read from the cache only"):
        glyphs("A", example_range=None, shape=(7, 7), context=context)
    assert registry.resolve(glyph_dataset("toy").classes)() == list(CLASSES)
    with pytest.raises(FileNotFoundError, match=r"^Toy is not prepared in .*: run prepare_toy\(\) or `prepare-data "
                                                r"toy`, or pass download=True"):
        load("A", data_dir=tmp_path / "empty", download=False)


# -- EMNIST: classes=None, a context, and entries written by 0.2 -------------------------------------
def test_load_emnist_and_emnist_take_every_class_when_classes_is_none(synthetic_emnist, tmp_path):
    context = DataContext.resolve(data_dir=tmp_path, verify=False)
    prepare_emnist(split="letters", archives={"gzip.zip": synthetic_emnist.path}, context=context, progress=False)
    x, y, classes = load_emnist(split="letters", subset="all", seed=0, context=context, download=False)
    assert classes == emnist_classes("letters") == list("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    data = synthetic_emnist.splits["letters"]
    assert len(x) == len(data.test_labels) + len(data.train_labels) and sorted(np.unique(y)) == list(range(26))
    ds = EMNIST(subset="test", split="letters", context=context, download=False)
    assert ds.classes == classes and len(ds) == len(data.test_labels) and ds.split == "letters"
    assert repr(ds) == f"EMNIST(split='letters', subset='test', shape=(28, 28), {len(ds)} images, 26 classes)"
    parameters = inspect.signature(load_emnist).parameters
    assert list(parameters)[:3] == ["classes", "split", "subset"] and parameters["classes"].default is None
    assert {"context", "data_dir", "mirrors", "offline", "download"} <= set(parameters)
