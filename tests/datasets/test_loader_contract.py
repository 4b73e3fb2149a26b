"""The one loader contract, checked over every registered dataset (issue 23).

Written once, in `glyphforge.datasets.registry` and docs/guide/loading.md ("The loader contract"): a
dataset's ``load`` part (``glyphforge.load_<name>`` and ``glyphforge.load(name)``) takes
``classes`` first, where None means every class; takes the data context (``context=``)
and the loose fetch keywords beside it; and returns ``(x, y, classes)``: the images (an
array, or a list of arrays where sizes differ), ``y`` int64 indices into ``classes``, and
``classes`` a `ClassNames` of the class names in the dataset's own order: a per-class
dataset's label order (upstream's), else (Omniglot, backgrounds) sorted naturally. Each
dataset is prepared once, offline, from synthetic files in the upstream layout (the MNIST
family, EMNIST) or the real files in ``../shared/data`` (Omniglot small1, backgrounds).
"""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.datasets.class_names import ClassNames
from glyphforge.datasets.classes.args import class_names
from glyphforge.datasets.omniglot.catalog import natural_key

from support.collate import NEEDS_TORCH, loaded_examples
from support.synthetic_mnist import ALL_FILES, write_synthetic_mnist

#: The options each dataset is prepared and loaded with here (its smallest configuration).
OPTIONS: dict[str, dict[str, Any]] = {"emnist": {"split": "digits"}, "omniglot": {"sets": "small1"}}
FETCH_KEYWORDS = ("context", "data_dir", "mirrors", "offline", "download")
#: Backgrounds are fetched one by one, and ``classes=None`` is every one of them: ``../shared/data`` lacks
#: ``space.jpg``, so three prepared ones are named here (and None is shown to ask for all of them).
PREPARED_BACKGROUNDS = ["water", "red_x", "ice"]


@pytest.fixture(scope="module")
def context(tmp_path_factory, synthetic_emnist, shared_data) -> DataContext:
    """Every registered dataset prepared in one data dir, offline; the context loads read it with."""
    data_dir = tmp_path_factory.mktemp("data")
    preparing = DataContext.resolve(data_dir=data_dir, mirrors=[shared_data.as_uri()], offline=True, verify=False,
                                    progress=False)
    synthetic = write_synthetic_mnist(tmp_path_factory.mktemp("mnist"), (300, 50), seed=5)
    mnist_files = {name: synthetic.path(name) for name in ALL_FILES}
    for name in ("mnist", "fashion-mnist", "kmnist"):
        registry.resolve(registry.get(name).prepare)(archives=mnist_files, context=preparing)
    gf.prepare_emnist(archives={"gzip.zip": synthetic_emnist.path}, context=preparing, **OPTIONS["emnist"])
    gf.prepare_omniglot(context=preparing, **OPTIONS["omniglot"])
    gf.prepare_backgrounds(names=PREPARED_BACKGROUNDS, context=preparing)
    assert sorted(registry.registered()) == ["backgrounds", "emnist", "fashion-mnist", "kmnist", "mnist", "omniglot"], (
        "a new dataset: prepare it above so that it is held to the contract too")
    return DataContext.resolve(preparing, download=False)


@pytest.mark.parametrize("name", registry.registered())
def test_a_loader_takes_classes_first_and_the_fetch_keywords(name):
    parameters = inspect.signature(registry.resolve(registry.get(name).load)).parameters
    first = next(iter(parameters.values()))
    assert (first.name, first.default) == ("classes", None), f"{name}: classes must come first, None meaning all"
    missing = [keyword for keyword in (*FETCH_KEYWORDS, "shape") if keyword not in parameters]
    assert not missing, f"{name}'s loader lacks {missing}"


def own_order(name: str, classes: list[str]) -> list[str]:
    """``classes`` in dataset ``name``'s own order: a per-class dataset's label order, else natural sorting."""
    declaration = registry.declaration(name)
    if declaration is None:
        return sorted(classes, key=natural_key)
    return [c for c in class_names(declaration, OPTIONS.get(name, {}).get("split")) if c in classes]


@pytest.mark.parametrize("name", registry.registered())
def test_a_load_returns_images_indices_and_the_classes_in_their_own_order_none_meaning_all(name, context):
    seeded = {"seed": 0} if "seed" in inspect.signature(registry.resolve(registry.get(name).load)).parameters else {}
    if name == "backgrounds":
        with pytest.raises(FileNotFoundError, match=r"backgrounds \[.*'space'.*\] are not prepared"):
            gf.load(name, context=context)  # None: every background, also those not prepared
    asked = PREPARED_BACKGROUNDS if name == "backgrounds" else None
    x, y, classes = gf.load(name, asked, context=context, **OPTIONS.get(name, {}), **seeded)
    assert isinstance(classes, ClassNames) and list(classes) == own_order(name, classes) and len(classes) >= 2
    assert isinstance(y, np.ndarray) and y.dtype == np.int64 and y.shape == (len(x),)
    assert sorted(set(y.tolist())) == list(range(len(classes))), "every class asked (None: all) is loaded, only those"
    images = list(x) if isinstance(x, list) else [x]
    assert all(isinstance(image, np.ndarray) and image.dtype == np.uint8 for image in images)
    again = gf.load(name, asked or list(classes), context=context, **OPTIONS.get(name, {}), **seeded)
    assert again[2] == classes and np.array_equal(again[1], y)
    assert all(np.array_equal(a, b) for a, b in zip(again[0], x, strict=True))


@pytest.mark.parametrize("name", registry.registered())
def test_the_loose_keywords_are_the_context(name, context):
    seeded = {"seed": 0} if "seed" in inspect.signature(registry.resolve(registry.get(name).load)).parameters else {}
    asked = PREPARED_BACKGROUNDS if name == "backgrounds" else None
    by_context = gf.load(name, asked, context=context, **OPTIONS.get(name, {}), **seeded)
    by_keywords = gf.load(name, asked, data_dir=Path(context.data_dir), offline=True, download=False,
                          **OPTIONS.get(name, {}), **seeded)
    assert by_context[2] == by_keywords[2] and np.array_equal(by_context[1], by_keywords[1])
    assert all(np.array_equal(a, b) for a, b in zip(by_context[0], by_keywords[0], strict=True))


#: Each registered dataset's map-style class, and the keyword naming its configuration (after ``subset``), if any.
#: Each map-style class, its own positional argument after ``root`` (EMNIST's split) and its torchvision subset flag.
MAP_STYLE = {"mnist": (gf.MNIST, None, "train"), "fashion-mnist": (gf.FashionMNIST, None, "train"),
             "kmnist": (gf.KMNIST, None, "train"), "emnist": (gf.EMNIST, "split", "train"),
             "omniglot": (gf.Omniglot, None, "background")}
#: The convention: torchvision's arguments first, in torchvision's order, ``Kind(root=None, [split=None,]
#: train=None, transform=None, target_transform=None, download=None, *, subset=None, shape=None, context=None,
#: ...)`` (Omniglot: ``background`` for ``train``), then glyphforge's keywords.
KEYWORDS = ["subset", "shape", "context"]


def test_the_map_style_classes_share_one_constructor_convention():
    exported = {name for name in registry.registered() for export in registry.get(name).exports
                if isinstance(getattr(gf, export.rpartition(":")[2]), type)}
    assert exported == set(MAP_STYLE), "a new map-style class: hold it to the convention here"
    rests = {}
    for name, (kind, own, flag) in MAP_STYLE.items():
        parameters = inspect.signature(kind).parameters
        positional = [key for key, parameter in parameters.items()
                      if parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        assert positional == ["root", *([own] if own else []), flag, "transform", "target_transform", "download"], name
        keywords = [key for key, parameter in parameters.items() if parameter.kind is inspect.Parameter.KEYWORD_ONLY]
        assert len(positional) + len(keywords) == len(parameters) and keywords[:1] == ["subset"], name
        assert all(parameters[key].default is None for key in [*positional, *KEYWORDS]), name
        rests[name] = [key for key in keywords if key not in KEYWORDS]
    assert rests["mnist"] == rests["fashion-mnist"] == rests["kmnist"] == rests["emnist"]  # the per-class datasets


@pytest.mark.parametrize("name", list(MAP_STYLE))
def test_target_transform_applies_to_each_label(name, context):
    kind, _, _ = MAP_STYLE[name]
    plain = kind(context=context, **OPTIONS.get(name, {}))
    named = kind(context=context, target_transform=lambda label: f"class {plain.classes[label]}",
                 **OPTIONS.get(name, {}))
    assert len(named) == len(plain) >= 2
    for i in (0, len(plain) - 1):
        image, label = named[i]
        assert label == f"class {plain.classes[plain.labels[i]]}" and np.array_equal(image, plain[i][0])
    assert plain[0][1] == plain.labels[0]  # without one, the label itself


@NEEDS_TORCH
@pytest.mark.parametrize("name", list(MAP_STYLE))
def test_the_map_style_class_batches_in_a_stock_dataloader(name, context):
    kind, _, _ = MAP_STYLE[name]
    dataset = kind(context=context, **OPTIONS.get(name, {}))
    images, labels = loaded_examples(dataset, batch_size=16)  # every batch checked against dataset[i]
    assert images.numpy().dtype == np.uint8 and images.shape == (16, *dataset[0][0].shape)
    assert labels.numpy().dtype == np.int64 and labels.shape == (16,)
    assert ((labels >= 0) & (labels < len(dataset.classes))).all()  # codes into the table of names


def _takes_a_shape() -> dict[str, tuple[str, Any]]:
    """Every public callable of glyphforge taking a shape (``shape``, ``shapes``, ``image_shape``, ``glyph_shape``):
    ``{name: (the keyword, the callable)}``, found from their signatures, so a new one is held to the bound too."""
    found = {}
    for name in sorted(gf.__all__):
        thing = getattr(gf, name)
        try:
            parameters = inspect.signature(thing).parameters if callable(thing) else {}
        except (TypeError, ValueError):
            continue
        for keyword in ("shape", "shapes", "image_shape", "glyph_shape"):
            if keyword in parameters:
                found[f"{name}({keyword}=)"] = (keyword, thing)
    return found


TAKES_A_SHAPE = _takes_a_shape()
#: What each one needs besides the shape (nothing is prepared: the shape is refused before any lookup).
NEEDS = {"ImageList": {"images": ["a.png"]}, "resize": {"images": np.zeros((2, 8, 8), np.uint8)},
         "OmniglotTasks": {"n_way": 2, "k_shot": 1, "n_query": 1}, "omniglot_episodes": {"n_way": 2, "k_shot": 1,
                                                                                         "n_query": 1},
         "prepare": {"name": "mnist"}, "ScatteredGlyphs": {"n_examples": 10}}


@pytest.mark.parametrize("name", TAKES_A_SHAPE)
def test_a_huge_shape_is_refused_naming_it_and_its_bound_before_any_allocation(name, tmp_path):
    """Issue 42, row 22: ``MNIST("train", shape=(10**6, 10**6))`` was numpy's MemoryError (63.7 TiB)."""
    keyword, call = TAKES_A_SHAPE[name]
    huge = (10**6, 10**6)
    options = {**NEEDS.get(name.split("(")[0], {}), keyword: [huge] if keyword == "shapes" else huge}
    if "data_dir" in inspect.signature(call).parameters:
        options["data_dir"] = tmp_path
    with pytest.raises(ValueError, match=rf"{keyword.removesuffix('s')} 1000000x1000000 is too large: each side "
                                         r"may be at most 4,096 pixels"):
        call(**options)
    assert list(tmp_path.iterdir()) == []
