"""The dataset registry: the built-in records, and a toy dataset registered in one call everywhere it shows."""
from __future__ import annotations

import functools
import importlib
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import glyphforge
import glyphforge.datasets
from glyphforge import cli
from glyphforge.cache import CacheStore
from glyphforge.cli import args as cli_args
from glyphforge.cli import dataset_options
from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.scenes.glyph_datasets import glyph_dataset, glyph_datasets

from support.toy_dataset import register_toy


def test_the_built_in_datasets_are_registered_with_parts_that_resolve():
    assert glyphforge.datasets.registered() == ["backgrounds", "emnist", "fashion-mnist", "kmnist", "mnist",
                                                "omniglot"]
    assert glyph_datasets() == ["emnist", "fashion-mnist", "kmnist", "mnist", "omniglot"]
    for name in registry.registered():
        record = registry.get(name)
        glyphs = glyph_dataset(name)
        parts = [record.prepare, record.load, record.preview] + ([glyphs.glyphs] if glyphs else [])
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


# -- a toy dataset registered at run time (support.toy_dataset) -------------------------------------
@pytest.fixture
def toy():
    record = register_toy()
    yield record
    registry.unregister("toy")


def test_a_registered_dataset_shows_in_prepare_data_info_and_preview(toy, tmp_path, capsys):
    assert "toy" in glyphforge.datasets.registered()
    with pytest.raises(SystemExit):
        cli.prepare_data_main(["--help"])
    help_text = capsys.readouterr().out
    assert re.search(r"\n  toy +five grey squares \(a test dataset\)\n", help_text)
    assert re.search(r"toy options:\n  --toy-level LEVEL +grey level of the squares \(default: 3\)\n", help_text)

    assert cli.prepare_data_main(["toy", "--toy-level", "7", "--data-dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split() == ["dataset", "entry", "images", "size", "seconds"]
    assert re.match(r"toy +level 7 native sizes [0-9a-f]{10} +5 +", table.splitlines()[2])
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
    assert cli.main(["preview", "toy", "--out", str(tmp_path / "p.png"), "--data-dir", str(tmp_path)]) == 2
    assert (
        f"error: toy is not prepared in {tmp_path / 'cache'}: run `prepare-data toy` first" in capsys.readouterr().err
    )
    assert cli.main(["info", "--data-dir", str(tmp_path)]) == 0
    assert re.search(r"\n  toy +not prepared \(prepare-data toy\)\n", capsys.readouterr().out)


# -- the registry knows nothing of argparse; glyphforge's dataset names come from it ---------------------
def _in_a_fresh_python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_reading_the_registry_imports_neither_argparse_nor_any_dataset_module():
    loaded = _in_a_fresh_python(
        "import sys, glyphforge, glyphforge.datasets.registry as r; "
        "r.get('emnist'); r.exports(); dir(glyphforge); glyphforge.__all__; "
        "print(sorted(m for m in sys.modules if m == 'argparse' or m.startswith('glyphforge.datasets.')))"
    )
    assert loaded == "['glyphforge.datasets.registry']"


EXPORTED = {
    "emnist": ["prepare_emnist", "load_emnist", "emnist_classes", "EMNIST"],
    "omniglot": ["prepare_omniglot", "load_omniglot", "omniglot_classes", "omniglot_episodes", "Omniglot",
                 "omniglot_split", "OmniglotTasks", "TaskBatch"],
    "backgrounds": ["prepare_backgrounds", "load_backgrounds", "background_names", "hard_background_names"],
    "mnist": ["prepare_mnist", "load_mnist", "mnist_classes", "MNIST"],
    "fashion-mnist": ["prepare_fashion_mnist", "load_fashion_mnist", "fashion_mnist_classes", "FashionMNIST"],
    "kmnist": ["prepare_kmnist", "load_kmnist", "kmnist_classes", "KMNIST"],
}


def test_each_records_exports_are_glyphforge_names_from_the_module_of_its_loader():
    assert {name: list(registry.get(name).exports) for name in registry.registered()} == EXPORTED
    for name, exported in EXPORTED.items():
        module = importlib.import_module(registry.get(name).load.partition(":")[0])
        for attribute in exported:
            assert attribute in glyphforge.__all__ and attribute in dir(glyphforge)
            assert getattr(glyphforge, attribute) is getattr(module, attribute), attribute
    assert glyphforge.load is registry.load and glyphforge.DataContext is DataContext
    assert {"load", "DataContext"} <= set(glyphforge.__all__)


def test_an_export_may_name_its_module():
    record = registry.register(registry.DatasetRecord(
        "toy", "", prepare=print, load="glyphforge.datasets.labels:shape_label", preview=print,
        exports=("shape_label", "glyphforge.datasets.registry:resolve")))
    try:
        exported = registry.exports()
        assert exported["shape_label"] == "glyphforge.datasets.labels"
        assert exported["resolve"] == "glyphforge.datasets.registry"
        assert "shape_label" not in glyphforge.__all__  # registered at run time: gf.load("toy"), not gf.<name>
    finally:
        registry.unregister(record.name)


def _nested_converter():
    def convert(path):
        return {"gzip.zip": path}

    return convert


@pytest.mark.parametrize(("options", "message"), [
    ({"convert": lambda path: path}, r"option --x: convert=<function .*<lambda>.* must be a named module-level "
                                     r"function \(a record is a declaration"),
    ({"convert": _nested_converter()}, r"convert=<function _nested_converter.<locals>.convert .* must be a named "),
    ({"convert": functools.partial(int, base=8)}, r"must be a named module-level function"),
    ({"value": float}, r"option --x: value must be str, int or 'path', got <class 'float'>"),
    ({"many": True, "repeatable": True}, r"option --x: give many=True \(one flag, several values\) or "
                                         r"repeatable=True \(the flag given several times\), not both"),
    ({"choices": ("a", "b"), "value": int}, r"option --x: choices are for text values without a converter"),
    ({"choices": ("a", "b"), "convert": dataset_options.emnist_archive}, r"choices are for text values"),
], ids=["lambda", "nested", "partial", "float", "many-and-repeatable", "int-choices", "converted-choices"])
def test_an_option_is_a_typed_declaration(options, message):
    with pytest.raises(ValueError, match=message):
        dataset_options.Option("--x", "x", "help", **options)


def test_bad_flags_and_params_are_refused():
    for flag, param in (("-x", "x"), ("--X", "x"), ("x", "x"), ("--x", "not a name")):
        with pytest.raises(ValueError, match=f"option {flag!r} fills {param!r}: give a flag such as '--emnist-split' "
                                             "and the keyword it fills, a Python identifier such as 'split'"):
            dataset_options.Option(flag, param, "help")


def test_a_flag_or_export_of_another_dataset_is_refused():
    split = dataset_options.Option("--split", "split", "EMNIST's flag")
    with pytest.raises(ValueError, match=r"dataset 'toy' declares the prepare-data option --split, which dataset "
                                         r"'emnist' already declares: give 'toy' its own \(e.g. prefixed with its "
                                         r"name\)"):
        dataset_options.register_options("toy", prepare=(split,))
    with pytest.raises(ValueError, match=r"declares the build scenes option --omniglot-sets, which dataset "
                                         r"'omniglot' already declares"):
        dataset_options.register_options("toy", scenes=(dataset_options.scene_options("omniglot")[0],))
    with pytest.raises(ValueError, match=r"declares the export MNIST, which dataset 'mnist' already declares"):
        registry.register(registry.DatasetRecord("toy", "", prepare=print, load=print, preview=print,
                                                 exports=("mypackage.toy:MNIST",)))
    assert "toy" not in registry.registered()
    assert registry.register(registry.get("emnist")) is registry.get("emnist")  # replacing itself is no clash


def test_built_in_options_read_their_values_as_declared(tmp_path):
    archive = tmp_path / "gzip.zip"
    archive.write_bytes(b"zip")
    parse = cli.prepare.prepare_parser().parse_args
    args = parse(["--emnist-archive", str(archive), "--split", "letters", "--split", "digits", "--omniglot-sets",
                  "small1", "small2", "--workers", "2", "--backgrounds", "water"])
    assert vars(args)["emnist:archives"] == {"gzip.zip": archive}
    assert vars(args)["emnist:split"] == ["letters", "digits"]
    assert (vars(args)["omniglot:sets"], vars(args)["omniglot:workers"]) == (["small1", "small2"], 2)
    assert vars(args)["backgrounds:names"] == ["water"]
    assert vars(parse(["emnist"]))["emnist:split"] is None  # not given: not passed, the dataset's default applies
    assert [name for name, _ in cli.prepare.prepare_jobs(parse([]))] == registry.registered()  # no dataset named: all


def test_entry_labels_name_the_split_or_set_and_the_size(tmp_path):
    store = CacheStore.for_data_dir(tmp_path)

    def entry(kind, params):
        return store.get_or_create(kind, params, lambda writer: writer.write("a.pklz", np.zeros(1)))

    assert registry.entry_label(entry("emnist", {"split": "byclass", "shape": [28, 28]})) == "byclass 28x28"
    assert registry.entry_label(entry("omniglot", {"set": "small1", "shape": [105, 105]})) == "small1 105x105"
    assert registry.entry_label(entry("mnist", {"shape": [14, 14]})) == "14x14"
    assert registry.entry_label(entry("backgrounds", {"commit": "abc"})) == "native sizes"
    assert registry.entry_label(entry("scenes", {"n": 1})) == "native sizes"  # no record: the default


# -- the toy in a fresh process: its typed option, glyph option and entry label on the real command line ---
TESTS_DIR = Path(__file__).resolve().parents[1]


def toy_command(*argv) -> subprocess.CompletedProcess[str]:
    """``python -m support.toy_dataset ARGV``: the toy registered, then the real command in a fresh process."""
    return subprocess.run([sys.executable, "-m", "support.toy_dataset", *map(str, argv)], capture_output=True,
                          text=True, timeout=300, cwd=TESTS_DIR)


def test_a_dataset_registered_at_run_time_gets_its_options_and_label_on_the_command_line(tmp_path):
    data_dir = tmp_path / "data"
    help_text = toy_command("prepare-data", "--help")
    assert help_text.returncode == 0
    assert re.search(r"toy options:\n  --toy-level LEVEL +grey level of the squares \(default: 3\)\n", help_text.stdout)

    prepared = toy_command("prepare-data", "toy", "--toy-level", "7", "--no-warmup", "--data-dir", data_dir)
    assert prepared.returncode == 0, prepared.stderr
    entry = CacheStore.for_data_dir(data_dir).get("toy", {"level": 7})
    assert entry is not None and entry.load("squares.pklz")[:, 0, 0].tolist() == [7, 47, 87, 127, 167]
    assert re.fullmatch(rf"toy +level 7 native sizes {entry.key[:10]} +5 +\S+ +\S+ +[0-9.]+",
                        prepared.stdout.splitlines()[2])

    refused = toy_command("prepare-data", "toy", "--toy-level", "300", "--no-warmup", "--data-dir", tmp_path / "no")
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-1] == "prepare-data: error: argument --toy-level: a toy grey level is 0 to " \
                                              "215, got 300"
    assert not (tmp_path / "no").exists()

    scenes_help = toy_command("glyphforge", "build", "scenes", "--help")
    assert scenes_help.returncode == 0
    assert re.search(r"--glyphs \{[a-z,-]*toy[a-z,-]*\}", scenes_help.stdout)
    assert re.search(r" --toy-shade SHADE grey level of the toy glyphs \(short for --glyph-option level=SHADE\) ",
                     " ".join(scenes_help.stdout.split()).replace("--glyph- option", "--glyph-option"))
    assert "--toy-shade" not in toy_command("prepare-data", "--help").stdout


def test_scene_options_fill_the_glyph_options_of_their_own_dataset(toy):
    parse = cli._glyphforge_parser().parse_args
    spec = cli_args.scene_spec(parse(["build", "scenes", "--glyphs", "toy", "--toy-shade", "9", "--emnist-split",
                                      "letters", "--characters", "square 1,square 2"]))
    assert spec.glyph_options == {"level": 9}
    assert cli_args.scene_spec(parse(["build", "scenes", "--glyphs", "emnist", "--toy-shade", "9", "--emnist-split",
                                      "letters"])).glyph_options == {"split": "letters"}
    explicit = parse(["build", "scenes", "--glyphs", "toy", "--toy-shade", "9", "--glyph-option", "level=4"])
    assert cli_args.scene_spec(explicit).glyph_options == {"level": 4}  # --glyph-option wins, as before


# -- glyphforge.load --------------------------------------------------------------------------------------
def test_load_reads_a_registered_dataset_through_its_loader(toy, tmp_path):
    x, y, classes = glyphforge.load("toy", ["square 3", "square 1"], level=5, data_dir=tmp_path)
    assert classes == ["square 1", "square 3"] and y.tolist() == [0, 1]
    assert np.array_equal(x, np.stack([np.full((8, 8), 45, np.uint8), np.full((8, 8), 125, np.uint8)]))
    context = DataContext.resolve(data_dir=tmp_path, download=False)
    x, y, classes = glyphforge.load("toy", level=5, context=context)
    assert classes == [f"square {i}" for i in range(5)] and x[:, 0, 0].tolist() == [5, 45, 85, 125, 165]
    with pytest.raises(ValueError, match=r"toy level 6 is not prepared: run `prepare-data toy --toy-level 6` first"):
        glyphforge.load("toy", level=6, context=context)  # the context's download=False reached the loader
    assert "toy" not in glyphforge.__all__ and "load_toy" not in glyphforge.__all__


def test_load_refuses_an_unknown_dataset_or_option_naming_the_known_ones(toy):
    with pytest.raises(KeyError, match="no dataset 'cifar10' is registered; the registered ones are backgrounds, "
                                       "emnist, fashion-mnist, kmnist, mnist, omniglot, toy"):
        glyphforge.load("cifar10")
    with pytest.raises(TypeError, match=r"^glyphforge.load\('toy'\) got the option\(s\) 'shape', 'split', which the "
                                        r"toy loader does not take; it takes level, context, data_dir, download$"):
        glyphforge.load("toy", split="letters", shape=(14, 14))
    with pytest.raises(TypeError, match=r"^glyphforge.load\('mnist'\) got the option\(s\) 'split', which the mnist "
                                        r"loader does not take; it takes (\w+, )*subset, (\w+, )*shape, "):
        glyphforge.load("mnist", "0123", split="letters")
