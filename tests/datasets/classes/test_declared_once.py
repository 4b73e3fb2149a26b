"""A dataset is declared once: a per-class dataset's record, glyphs and options are read from its declaration."""
from __future__ import annotations

import dataclasses

from glyphforge.cli.dataset_options import prepare_options, scene_options
from glyphforge.datasets import registry
from glyphforge.scenes.glyph_datasets import glyph_dataset

PER_CLASS = ("emnist", "mnist", "fashion-mnist", "kmnist")
MNIST_FAMILY = ("mnist", "fashion-mnist", "kmnist")


def test_the_record_holds_the_datasets_data_parts_only():
    fields = {field.name for field in dataclasses.fields(registry.DatasetRecord)}
    assert not fields & {"options", "scene_options", "glyphs", "glyph_prepare", "glyph_classes"}


def test_a_per_class_record_is_derived_from_its_declaration():
    for name in PER_CLASS:
        record, declaration = registry.get(name), registry.declaration(name)
        assert declaration is not None and declaration.name == name, name
        assert registry.resources(name) == list(declaration.resources.values()), name
        ident = declaration.ident
        assert record.exports[:3] == (f"prepare_{ident}", f"load_{ident}", f"{ident}_classes"), name
        assert record.default_resize == declaration.default_resize, name
    assert registry.declaration("omniglot") is None and registry.declaration("backgrounds") is None


def test_the_mnist_family_differs_only_in_data():
    def form(name: str) -> dict[str, object]:
        record, ident = registry.get(name), name.replace("-", "_")
        shown = {field.name: getattr(record, field.name) for field in dataclasses.fields(record)}
        del shown["name"], shown["summary"], shown["resources"]
        shown["exports"] = shown["exports"][:-1]  # the map-style class: MNIST, FashionMNIST, KMNIST

        def general(text: str) -> str:  # the dataset's name in its module's and an attribute's: fashion_mnist
            module, colon, attribute = text.rpartition(":")
            return module.replace(ident, "X") + colon + attribute.replace(ident, "X") if colon else text.replace(
                f"datasets.{ident}", "datasets.X")

        shown["exports"] = tuple(export.replace(ident, "X") for export in shown["exports"])
        return {key: general(value) if isinstance(value, str) else value for key, value in shown.items()}

    assert form("mnist") == form("fashion-mnist") == form("kmnist")
    for name in MNIST_FAMILY:
        declaration = registry.declaration(name)
        assert declaration is not None
        assert sorted(declaration.resources) == sorted(registry.declaration("mnist").resources)  # same files
        assert prepare_options(name) == scene_options(name) == ()
        glyphs = glyph_dataset(name)
        assert glyphs is not None and registry.resolve(glyphs.classes)() == list(declaration.configs["default"].classes)


def test_a_config_option_is_read_from_the_declaration():
    declaration = registry.declaration("emnist")
    assert declaration is not None and declaration.config_option == "split"
    [split, _archive] = prepare_options("emnist")
    assert (split.flag, split.param, split.repeatable, split.default) == ("--split", "split", True, declaration.config)
    [scene_split] = scene_options("emnist")
    assert (scene_split.flag, scene_split.help) == ("--emnist-split", "EMNIST split the glyphs come from")
