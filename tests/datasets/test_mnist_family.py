"""The MNIST family (MNIST, Fashion-MNIST, KMNIST): prepared, loaded, previewed and drawn by scenes.

Files are synthetic, in the exact upstream layout (:mod:`support.synthetic_mnist`),
served by a real HTTP mirror on 127.0.0.1, given as ``archives=`` or placed by hand.
Their md5s cannot be upstream's: the verified path is tested with each dataset's record
pinning the synthetic files' md5s, sizes and counts (:func:`pin_synthetic`), and its origin
a ``file://`` URL that does not exist, so no test can reach the network.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

import glyphforge
from glyphforge import cli, config
from glyphforge.builds.making.spec import SpecError
from glyphforge.builds.reading.lookup import find_built
from glyphforge.cache import CacheStore
from glyphforge.cli.dataset_options import prepare_options
from glyphforge.datasets import fashion_mnist, kmnist, mnist, registry
from glyphforge.datasets.class_names import ClassNames
from glyphforge.datasets.classes.declaration import DECLARATIONS
from glyphforge.datasets.classes.mnist_form import MNISTFamilyDataset, MNISTFormatError
from glyphforge.datasets.fashion_mnist import FashionMNIST, load_fashion_mnist
from glyphforge.datasets.kmnist import KMNIST, load_kmnist, prepare_kmnist
from glyphforge.datasets.mnist import MNIST, load_mnist, prepare_mnist, preview_examples
from glyphforge.pipelines.idx import IDXError
from glyphforge.pipelines.resource import DownloadError, HashMismatchError
from glyphforge.scenes.glyph_datasets import glyph_dataset, glyph_datasets
from glyphforge.scenes.spec import ScatteredGlyphs

from support.http_server import LocalHTTPServer, http_server  # noqa: F401 (fixture)
from support.synthetic_emnist import ASYMMETRIC_GLYPH, gunzip, gzip_bytes
from support.synthetic_mnist import (
    ALL_FILES,
    FILES,
    SyntheticMNIST,
    idx_file,
    mnist_family,
    pinned,
    with_counts,
    write_synthetic_mnist,
)

NAMES = ("mnist", "fashion-mnist", "kmnist")
CLASSES = {
    "mnist": list("0123456789"),
    "fashion-mnist": ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                      "Ankle boot"],
    "kmnist": ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"],
}
COUNTS = (600, 100)
#: The records as glyphforge ships them (upstream md5s and counts).
UPSTREAM = mnist_family()
#: Each dataset's module.
MODULES = {"mnist": mnist, "fashion-mnist": fashion_mnist, "kmnist": kmnist}


def prepare_dataset(name: str, **options):
    """``prepare_<name>(**options)``, through the registry."""
    return registry.resolve(registry.get(name).prepare)(**options)


def load_dataset(name: str, *args, **options):
    """``load_<name>(*args, **options)``, through the registry."""
    return registry.resolve(registry.get(name).load)(*args, **options)


def glyph_images(name: str, *args, **options):
    """``<name>_glyph_images(*args, **options)``: the glyphs scenes draw."""
    return getattr(MODULES[name], f"{name.replace('-', '_')}_glyph_images")(*args, **options)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> dict[str, SyntheticMNIST]:
    """Each dataset's four synthetic files (different pixels and labels per dataset)."""
    root = tmp_path_factory.mktemp("mnist-family")
    return {name: write_synthetic_mnist(root / name, COUNTS, seed=index) for index, name in enumerate(NAMES)}


def synthetic_record(name: str, files: SyntheticMNIST, n_images: tuple[int, int] = COUNTS):
    """``name``'s record pinning ``files``' md5s and sizes and the counts ``n_images``; no reachable origin."""
    return pinned(UPSTREAM[name], files, n_images)


def pin(monkeypatch_or_context, synthetic) -> None:
    for name in NAMES:
        monkeypatch_or_context.setitem(DECLARATIONS, name, synthetic_record(name, synthetic[name]))


@pytest.fixture
def pin_synthetic(synthetic, monkeypatch):
    """Every dataset's record pins its synthetic files (the verified path works with them)."""
    pin(monkeypatch, synthetic)


@pytest.fixture(scope="module")
def prepared(synthetic, tmp_path_factory):
    """A data dir with the three datasets at 28x28 and 14x14, fetched (verified) from an HTTP mirror.

    Returns ``(data dir, {name: entries}, the mirror, stopped)``; tests only read it (pinning the
    synthetic records again, as the entries' keys hold the files' md5s).
    """
    data_dir = tmp_path_factory.mktemp("prepared")
    with LocalHTTPServer() as server, pytest.MonkeyPatch.context() as patch:
        for name in NAMES:
            for file in ALL_FILES:
                server.add(f"{name}/{file}", synthetic[name].data(file))
        pin(patch, synthetic)
        entries = {name: prepare_dataset(name, shapes=[(14, 14)], mirrors=[server.base_url], data_dir=data_dir,
                                         progress=False) for name in NAMES}
    return data_dir, entries, server


def place(synthetic: SyntheticMNIST, name: str, data_dir=None) -> None:
    """Copy the four files to ``<data dir>/raw/<name>/`` as a user would by hand."""
    raw = config.raw_dir(name, data_dir)
    raw.mkdir(parents=True, exist_ok=True)
    for file in ALL_FILES:
        (raw / file).write_bytes(synthetic.data(file))


def assert_cache_empty(data_dir=None):
    store = CacheStore.for_data_dir(data_dir)
    assert store.ls() == []
    assert [path for path in store.root.rglob("*") if path.is_file() and not path.name.endswith(".lock")] == []


def expected_load(synthetic: SyntheticMNIST, name: str, classes, subset, seed, n_examples=None):
    """The documented result, from the synthetic arrays: the classes' blocks, then ``default_rng(seed)``."""
    blocks = [synthetic.class_images(CLASSES[name].index(c), subset) for c in classes]
    x = np.concatenate(blocks)
    y = np.repeat(np.arange(len(blocks)), [len(block) for block in blocks])
    order = np.random.default_rng(seed).permutation(len(x))[:n_examples]
    return x[order], y[order]


def box(images: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Pillow's BOX resize of every image."""
    return np.stack([np.asarray(Image.fromarray(image).resize(shape[::-1], Image.Resampling.BOX)) for image in images])


# -- the registry and the public names ---------------------------------------------------------
def test_the_three_datasets_are_registered_and_exported():
    assert {"mnist", "fashion-mnist", "kmnist"} <= set(registry.registered())
    assert {"mnist", "fashion-mnist", "kmnist"} <= set(glyph_datasets())
    for name in NAMES:
        record = registry.get(name)
        ident = name.replace("-", "_")
        assert registry.resolve(record.prepare) is getattr(MODULES[name], f"prepare_{ident}")
        assert registry.resolve(record.load) is getattr(MODULES[name], f"load_{ident}")
        assert registry.resolve(record.preview) is preview_examples
        glyphs = glyph_dataset(name)  # the scenes' part, read from the declaration
        assert glyphs is not None and glyphs.glyphs.__name__ == getattr(MODULES[name], f"{ident}_glyph_images").__name__
        assert glyphs.classes is not None and registry.resolve(glyphs.classes)() == CLASSES[name]
        assert record.default_resize == mnist.DEFAULT_METHOD == "box" and prepare_options(name) == ()
    assert (glyphforge.load_mnist, glyphforge.load_fashion_mnist, glyphforge.load_kmnist) == (
        load_mnist, load_fashion_mnist, load_kmnist)
    assert (glyphforge.MNIST, glyphforge.FashionMNIST, glyphforge.KMNIST) == (MNIST, FashionMNIST, KMNIST)
    assert all(issubclass(cls, MNISTFamilyDataset) for cls in (MNIST, FashionMNIST, KMNIST))
    assert load_fashion_mnist.__name__ == "load_fashion_mnist" and "Fashion-MNIST" in load_fashion_mnist.__doc__
    assert list(__import__("inspect").signature(load_kmnist).parameters)[:3] == ["classes", "subset", "balance"]
    for name in NAMES:
        upstream = UPSTREAM[name]
        [only] = upstream.configs.values()
        assert only.n_images == (60_000, 10_000) and list(only.classes) == CLASSES[name]
        assert sorted(upstream.resources) == sorted(ALL_FILES)
        assert all(r.dataset == name and r.hash.startswith("md5:") for r in upstream.resources.values())
    assert UPSTREAM["mnist"].resources["train-images-idx3-ubyte.gz"].url == (
        "https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz")


# -- prepare -------------------------------------------------------------------------------------
def test_an_http_mirror_serves_each_file_once_and_every_dataset_is_converted(prepared, synthetic):
    data_dir, entries, server = prepared
    for name in NAMES:
        assert all(server.requests(f"{name}/{file}") == 1 for file in ALL_FILES)
        assert all((data_dir / "raw" / name / file).read_bytes() == synthetic[name].data(file) for file in ALL_FILES)
        native, small = entries[name]
        assert (native.kind, native.params["shape"], small.params["shape"]) == (name, [28, 28], [14, 14])
        assert small.params["resize"] == "box" and small.meta["resized_from"] == native.key
        meta = native.meta
        assert (meta["n_images"], meta["n_train"], meta["n_test"], meta["verified"]) == (700, 600, 100, True)
        assert [record["name"] for record in meta["classes"]] == CLASSES[name]
        files = [f"class_{label:02d}.pklz" for label in range(10)]
        assert [record["file"] for record in meta["classes"]] == files
        assert sorted(path.name for path in native.path.iterdir()) == sorted(
            [*files, "upstream_labels.pklz", "manifest.json"])  # no folders
        upstream_labels = np.concatenate([synthetic[name].test_labels, synthetic[name].train_labels])
        assert np.array_equal(native.load("upstream_labels.pklz"), upstream_labels)
        assert np.array_equal(small.load("upstream_labels.pklz"), upstream_labels)
        for label, record in enumerate(meta["classes"]):
            images = native.load(record["file"])
            assert np.array_equal(images, synthetic[name].class_images(label))  # test first, then train; upright
            assert record["n_test"] == (synthetic[name].test_labels == label).sum()
            assert np.array_equal(small.load(record["file"]), box(images, (14, 14)))
    first_test = entries["mnist"][0].load(f"class_{synthetic['mnist'].test_labels[0]:02d}.pklz")[0]
    assert np.array_equal(first_test, ASYMMETRIC_GLYPH)  # stored upright: not transposed like EMNIST


def test_a_cache_hit_needs_neither_files_nor_network(prepared, synthetic, pin_synthetic):
    data_dir, entries, server = prepared
    before = server.requests()
    again = prepare_kmnist(shapes=[(14, 14), (28, 28)], data_dir=data_dir, offline=True, progress=False)
    assert [entry.key for entry in again] == [entry.key for entry in entries["kmnist"]]
    assert server.requests() == before


def test_local_copies_as_archives_and_their_md5(synthetic, pin_synthetic, tmp_path):
    files = synthetic["kmnist"]
    [entry] = prepare_kmnist(archives={file: files.path(file) for file in ALL_FILES}, offline=True, progress=False)
    assert entry.meta["verified"] is True and entry.meta["n_images"] == 700
    assert not config.raw_dir("kmnist").exists()  # archives are used in place
    with pytest.raises(ValueError, match=r"^archives has 'train\.gz', which is not a file of MNIST: use one of "
                                         r"t10k-images-idx3-ubyte\.gz, t10k-labels-idx1-ubyte\.gz, "
                                         r"train-images-idx3-ubyte\.gz, train-labels-idx1-ubyte\.gz$"):
        prepare_mnist(archives={"train.gz": files.path(ALL_FILES[0])}, progress=False)
    wrong = synthetic["fashion-mnist"].path("train-images-idx3-ubyte.gz")  # another dataset's file
    actual = synthetic["fashion-mnist"].md5["train-images-idx3-ubyte.gz"]
    data_dir = tmp_path / "d"
    with pytest.raises(HashMismatchError, match=rf"^{re.escape(str(wrong))} is not file://.*"
                       rf"train-images-idx3-ubyte\.gz: its hash is md5:{actual} .*pass verify=False "
                       r"\(on the command line: --no-verify\)"):
        prepare_mnist(archives={"train-images-idx3-ubyte.gz": wrong}, data_dir=data_dir, offline=True, progress=False)
    assert_cache_empty(data_dir)


def test_some_files_given_the_others_from_a_file_mirror(synthetic, pin_synthetic, tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "mnist").mkdir(parents=True)
    for file in FILES["test"]:
        (mirror / "mnist" / file).write_bytes(synthetic["mnist"].data(file))
    given = {file: synthetic["mnist"].path(file) for file in FILES["train"]}
    [entry] = prepare_mnist(archives=given, mirrors=[mirror.as_uri()], offline=True, progress=False)
    assert entry.meta["verified"] is True
    assert sorted(path.name for path in config.raw_dir("mnist").iterdir() if not path.name.startswith(".")) == sorted(
        FILES["test"])


def test_offline_with_nothing_placed_names_the_place_and_asks_no_server(synthetic, pin_synthetic, http_server):  # noqa: F811
    http_server.add("fashion-mnist/train-images-idx3-ubyte.gz", synthetic["fashion-mnist"].data(ALL_FILES[0]))
    for attempt in (lambda: prepare_dataset("fashion-mnist", mirrors=[http_server.base_url], offline=True,
                                            progress=False),
                    lambda: load_fashion_mnist(["Bag"], mirrors=[http_server.base_url], offline=True),
                    lambda: FashionMNIST(offline=True)):
        with pytest.raises(DownloadError) as caught:
            attempt()
        assert "Offline mode (GLYPHFORGE_OFFLINE=1 or offline=True) forbids network access" in str(caught.value)
        assert f"place the file at:\n  {config.raw_dir('fashion-mnist') / 'train-images-idx3-ubyte.gz'}\n" in str(
            caught.value)
    assert http_server.requests() == 0
    assert_cache_empty()


def test_hand_placed_copies_are_refused_unless_no_verify(synthetic, tmp_path, capsys):
    """The shipped records (upstream md5s, 60,000/10,000): a custom copy needs --no-verify, then any count fits."""
    data_dir = tmp_path / "data"
    place(synthetic["mnist"], "mnist", data_dir)
    assert cli.prepare_data_main(["mnist", "--offline", "--data-dir", str(data_dir)]) == 1
    error = capsys.readouterr().err
    placed = config.raw_dir("mnist", data_dir) / "train-images-idx3-ubyte.gz"
    assert error.startswith(f"error: {placed} is not https://ossci-datasets.s3.amazonaws.com/mnist/"
                            "train-images-idx3-ubyte.gz: its hash is md5:")
    assert "expected md5:f68b3c2dcbeaaa9fbdd348bbdeb94873 (9,912,422 bytes)" in error
    assert_cache_empty(data_dir)

    assert cli.prepare_data_main(["mnist", "--offline", "--no-verify", "--shape", "7x7", "--data-dir",
                                  str(data_dir), "-q"]) == 0
    native, small = sorted(CacheStore.for_data_dir(data_dir).ls(), key=lambda entry: "resize" in entry.params)
    assert native.meta["verified"] is False and native.meta["n_images"] == 700 and small.params["shape"] == [7, 7]
    x, y, classes = load_mnist("0123456789", subset="test", seed=4, data_dir=data_dir, offline=True)
    expected = expected_load(synthetic["mnist"], "mnist", classes, "test", 4)
    assert np.array_equal(x, expected[0]) and np.array_equal(y, expected[1])


# -- prepare: what is refused, naming the file ---------------------------------------------------------
def corrupt_copy(synthetic: SyntheticMNIST, directory, **replacements: bytes) -> dict:
    """``archives=`` of the four files with some replaced (keys: file names with '-' and '.' as '_')."""
    directory.mkdir()
    given = {}
    for file in ALL_FILES:
        path = directory / file
        path.write_bytes(replacements.get(re.sub(r"[-.]", "_", file), synthetic.data(file)))
        given[file] = path
    return given


@pytest.mark.parametrize(("case", "error", "message"), [
    ("truncated data", IDXError, r"{train_images} is truncated: its header declares 600 images of 28x28 "
                                 r"\(470,400 bytes of data\) but only 469,400 bytes follow"),
    ("truncated gzip", IDXError, r"{t10k_labels} is (truncated: its gzip stream ends early|not a valid gzip stream)"),
    ("fewer labels", MNISTFormatError, r"{t10k_images} holds 100 images but {t10k_labels} holds 99 labels: the "
                                       r"files do not belong together"),
    ("label 10", MNISTFormatError, r"{train_labels} holds labels \[10\], but MNIST's labels are 0-9; the file is "
                                   r"corrupt or not MNIST's"),
    ("32x32", IDXError, r"{train_images} holds 32x32 images, expected 28x28"),
    ("swapped", IDXError, r"{train_images} has magic number 2049 \(that of a label file\), expected 2051"),
])
def test_corrupt_files_are_named_and_nothing_is_cached(synthetic, tmp_path, case, error, message):
    files = synthetic["mnist"]
    train_labels, test_labels = files.train_labels, files.test_labels
    replacement = {
        "truncated data": {"train_images_idx3_ubyte_gz": gzip_bytes(gunzip(files.data(FILES["train"][0]))[:-1000])},
        "truncated gzip": {"t10k_labels_idx1_ubyte_gz": files.data(FILES["test"][1])[:-30]},
        "fewer labels": {"t10k_labels_idx1_ubyte_gz": idx_file(labels=test_labels[:-1])},
        "label 10": {"train_labels_idx1_ubyte_gz": idx_file(labels=np.where(train_labels == 3, 10, train_labels))},
        "32x32": {"train_images_idx3_ubyte_gz": idx_file(np.zeros((600, 32, 32), np.uint8))},
        "swapped": {"train_images_idx3_ubyte_gz": files.data(FILES["train"][1])},
    }[case]
    given = corrupt_copy(files, tmp_path / "copy", **replacement)
    paths = {re.sub(r"-.*", "", file) + ("_images" if "images" in file else "_labels"): re.escape(str(path))
             for file, path in given.items()}
    with pytest.raises(error, match="^" + message.format(**paths)):
        prepare_mnist(archives=given, verify=False, shapes=[(14, 14)], progress=False)
    assert_cache_empty()


def test_counts_exact_when_verified_and_capped_when_not(synthetic, monkeypatch, tmp_path):
    files = synthetic["mnist"]
    given = {file: files.path(file) for file in ALL_FILES}
    labels = re.escape(str(files.path("train-labels-idx1-ubyte.gz")))
    monkeypatch.setitem(DECLARATIONS, "mnist", synthetic_record("mnist", files, n_images=(601, 100)))
    with pytest.raises(MNISTFormatError, match=rf"^{labels} holds 600 labels, but MNIST's train set has 601: it is "
                                               r"not MNIST's file\. A custom copy needs verify=False"):
        prepare_mnist(archives=given, progress=False)
    monkeypatch.setitem(DECLARATIONS, "mnist", synthetic_record("mnist", files, n_images=(599, 100)))
    with pytest.raises(IDXError, match=rf"^{labels} declares 600 labels \(600 bytes\), more than the 599 it may hold: "
                                       r"MNIST's train files hold 599"):
        prepare_mnist(archives=given, progress=False)
    monkeypatch.setitem(DECLARATIONS, "mnist", with_counts(UPSTREAM["mnist"], (400, 80)))
    with pytest.raises(IDXError, match=rf"^{labels} declares 600 labels \(600 bytes\), more than the 500 it may hold: "
                                       r"MNIST has 400 train images, and a custom copy \(verify=False, --no-verify\) "
                                       r"may hold at most 1\.25x that"):
        prepare_mnist(archives=given, verify=False, progress=False)
    assert_cache_empty()
    monkeypatch.setitem(DECLARATIONS, "mnist", with_counts(UPSTREAM["mnist"], (480, 80)))
    [entry] = prepare_mnist(archives=given, verify=False, progress=False)  # 600 <= 1.25 x 480: a custom copy
    assert entry.meta["verified"] is False and entry.meta["n_train"] == 600


# -- load ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_load_gives_the_exact_images_of_the_classes_in_label_order(prepared, synthetic, pin_synthetic, name):
    data_dir = prepared[0]
    everything = CLASSES[name]
    x, y, classes = load_dataset(name, None, subset="all", seed=3, data_dir=data_dir)
    assert type(classes) is ClassNames and classes == everything
    expected = expected_load(synthetic[name], name, everything, "all", 3)
    assert x.dtype == np.uint8 and y.dtype == np.int64
    assert np.array_equal(x, expected[0]) and np.array_equal(y, expected[1])
    x, y, _ = load_dataset(name, None, seed=5, data_dir=data_dir)  # train is the default
    assert len(x) == 600 and np.array_equal(x, expected_load(synthetic[name], name, everything, "train", 5)[0])
    some = CLASSES[name][7:2:-2]
    x, y, classes = load_dataset(name, some, subset="test", shape=(14, 14), seed=1, data_dir=data_dir)
    assert classes == [c for c in CLASSES[name] if c in some]  # label order, not the order given
    expected = expected_load(synthetic[name], name, classes, "test", 1)
    assert np.array_equal(x, box(expected[0], (14, 14))) and np.array_equal(y, expected[1])


def test_class_names_of_each_dataset(prepared, pin_synthetic):
    data_dir = prepared[0]
    assert load_fashion_mnist("T-shirt/top", subset="test", data_dir=data_dir)[2] == ["T-shirt/top"]
    assert load_kmnist("o", data_dir=data_dir)[2] == ["o"] and load_kmnist(["wo", "ki"], data_dir=data_dir)[2] == [
        "ki", "wo"]
    x, _, classes = load_mnist("703", seed=2, data_dir=data_dir)
    assert classes == ["0", "3", "7"] and np.array_equal(x, load_mnist([7, 0, 3, 3], seed=2, data_dir=data_dir)[0])
    assert fashion_mnist.fashion_mnist_classes() == CLASSES["fashion-mnist"]  # label order
    with pytest.raises(ValueError, match=r"^unknown Fashion-MNIST classes \['0', 'shirt'\]: its classes are "
                                         r"'T-shirt/top', 'Trouser', "):
        load_fashion_mnist(["shirt", 0], data_dir=data_dir)
    with pytest.raises(ValueError, match=r"^unknown KMNIST classes \['kiwo'\]"):
        load_kmnist("kiwo", data_dir=data_dir)
    with pytest.raises(ValueError, match=r"subset 'val' is invalid: use one of all, train, test"):
        load_mnist("0", subset="val")
    with pytest.raises(ValueError, match=r"^classes is empty"):
        load_mnist("")


def test_example_range_balance_blank_and_n_examples(prepared, synthetic, pin_synthetic):
    data_dir, files = prepared[0], synthetic["kmnist"]
    names = ["ha", "ki", "o"]
    low = load_kmnist(names, subset="all", example_range=(0, 0.6), seed=0, data_dir=data_dir)[0]
    high = load_kmnist(names, subset="all", example_range=(0.6, 1), seed=0, data_dir=data_dir)[0]
    blocks = [files.class_images(CLASSES["kmnist"].index(name)) for name in names]
    assert len(low) + len(high) == sum(map(len, blocks))
    cut = [block[int(0.6 * len(block)):] for block in blocks]
    assert {image.tobytes() for image in high} == {image.tobytes() for block in cut for image in block}
    x, y, classes = load_kmnist(names, subset="all", balance=True, include_blank=True, seed=1, data_dir=data_dir)
    smallest = min(map(len, blocks))
    assert classes == ["o", "ki", "ha", " "] and np.bincount(y).tolist() == [smallest] * 4 and not x[y == 3].any()
    x, _, _ = load_kmnist(names, subset="all", n_examples=7, seed=1, data_dir=data_dir)
    assert len(x) == 7
    total = sum(map(len, blocks))
    with pytest.raises(ValueError, match=rf"^n_examples={total + 1} is more than the {total} images selected"):
        load_kmnist(names, subset="all", n_examples=total + 1, data_dir=data_dir)


def test_not_prepared_without_download_names_the_command(pin_synthetic):
    with pytest.raises(FileNotFoundError, match=r"^Fashion-MNIST is not prepared in .*: run prepare_fashion_mnist\(\) "
                                                r"or `prepare-data fashion-mnist`, or pass download=True$"):
        load_fashion_mnist(None, download=False)
    assert_cache_empty()


def test_map_style_datasets(prepared, synthetic, pin_synthetic):
    data_dir = prepared[0]
    train = MNIST(subset="train", data_dir=data_dir)
    assert len(train) == 600 and train.classes == CLASSES["mnist"]
    assert np.array_equal(train.images, synthetic["mnist"].train_images)  # upstream order
    assert np.array_equal(train.labels, synthetic["mnist"].train_labels)
    assert repr(train) == "MNIST(subset='train', shape=(28, 28), 600 images, 10 classes)"
    ds = FashionMNIST(subset="test", classes=["Trouser", "Bag"], transform=lambda image: image.T, data_dir=data_dir)
    files = synthetic["fashion-mnist"]
    kept = np.isin(files.test_labels, [1, 8])
    expected, labels = files.test_images[kept], (files.test_labels[kept] == 8).astype(np.int64)
    assert ds.classes == ["Trouser", "Bag"] and np.array_equal(ds.images, expected)  # label order, upstream order
    assert np.array_equal(ds.labels, labels)
    image, label = ds[len(ds) - 1]
    assert np.array_equal(image, expected[-1].T) and label == labels[-1]
    small = KMNIST(shape=(14, 14), subset="all", classes=["o"], include_blank=True, data_dir=data_dir)
    images, labels = synthetic["kmnist"].upstream("all")
    o = box(images[labels == 0], (14, 14))  # the train examples, then the test ones
    assert np.array_equal(small.images, np.concatenate([o, np.zeros_like(o)])) and small.classes == ["o", " "]
    assert repr(small) == f"KMNIST(subset='all', shape=(14, 14), {2 * len(o)} images, 2 classes)"
    assert sum(len(xb) for xb, _ in small.batches(batch_size=16)) == len(small)
    with pytest.raises(TypeError, match=r"^MNISTFamilyDataset is the base of MNIST, FashionMNIST and KMNIST"):
        MNISTFamilyDataset()


# -- preview, glyphs, the command line ---------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_preview_examples_and_glyph_images(prepared, pin_synthetic, name, tmp_path):
    data_dir, entries, _ = prepared
    images, labels = preview_examples(entries[name][0], 9, np.random.default_rng(0), data_dir)
    assert images.shape == (9, 28, 28) and len(labels) == 9 and set(labels) <= set(CLASSES[name])
    ident = name.replace("-", "_")
    glyphs = getattr(MODULES[name], f"{ident}_glyph_images")
    some = CLASSES[name][:3]
    for shape, example_range in [((14, 14), (0, 0.5)), (None, None)]:
        x, y, names = glyphs(some, example_range=example_range, shape=shape, data_dir=data_dir)
        expected = load_dataset(name, some, subset="all", shape=shape, example_range=example_range, seed=0,
                                data_dir=data_dir, download=False)
        assert x.tobytes() == expected[0].tobytes() and y.tobytes() == expected[1].tobytes() and names == expected[2]
    with pytest.raises(FileNotFoundError, match=rf"^{UPSTREAM[name].title} at 7x7 is not prepared in .*: run "
                                                rf"`prepare-data {name} --shape 7x7` first"):
        glyph_images(name, None, example_range=None, shape=(7, 7), data_dir=data_dir)
    out = tmp_path / f"{name}.png"
    assert cli.main(["preview", name, "--out", str(out), "-n", "9", "--data-dir", str(data_dir)]) == 0
    with Image.open(out) as picture:
        assert picture.format == "PNG" and picture.width > 3 * 28


#: The two spellings of the prepare command: ``prepare-data`` and ``glyphforge prepare``, its alias.
PREPARE_COMMANDS = {"prepare-data": cli.prepare_data_main,
                    "glyphforge prepare": lambda argv: cli.main(["prepare", *argv])}


@pytest.mark.parametrize("prepare", PREPARE_COMMANDS.values(), ids=PREPARE_COMMANDS)
def test_prepare_data_all_three_then_info(prepare, synthetic, pin_synthetic, http_server, tmp_path,  # noqa: F811
                                          capsys):
    for name in NAMES:
        for file in ALL_FILES:
            http_server.add(f"{name}/{file}", synthetic[name].data(file))
    argv = ["mnist", "fashion-mnist", "kmnist", "--shape", "14x14", "--mirror", http_server.base_url, "--data-dir",
            str(tmp_path)]
    assert prepare(argv) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(row[0], row[1], row[3]) for row in rows] == [
        (name, shape, "700") for name in NAMES for shape in ("28x28", "14x14")
    ]
    assert http_server.requests() == 12
    assert prepare(argv) == 0
    assert capsys.readouterr().out.splitlines() == [f"{name}: already prepared (cache hit), nothing to do"
                                                    for name in NAMES]
    assert cli.main(["info", "--data-dir", str(tmp_path)]) == 0
    info = capsys.readouterr().out
    for name in NAMES:
        line = next(line for line in info.splitlines() if line.split()[:1] == [name])
        assert "shape=[14,14]" in line and "shape=[28,28]" in line and "source" not in line


def unwrapped(text: str) -> str:
    """Help text on one line (argparse wraps lines, also after a hyphen)."""
    return " ".join(text.split()).replace("- ", "-")


def test_the_commands_list_the_three(capsys):
    with pytest.raises(SystemExit):
        cli.prepare_data_main(["--help"])
    help_text = capsys.readouterr().out
    assert "  mnist         MNIST handwritten digits 0-9" in help_text  # names padded to the longest, fashion-mnist
    assert "  kmnist        Kuzushiji-MNIST" in help_text and "  fashion-mnist Fashion-MNIST" in help_text
    assert "what to prepare: backgrounds, emnist, fashion-mnist, kmnist, mnist, omniglot or all" in unwrapped(help_text)
    jobs = cli.prepare.prepare_jobs(cli.prepare.prepare_parser().parse_args(["all"]))
    assert {"mnist", "fashion-mnist", "kmnist"} <= {name for name, _ in jobs}
    with pytest.raises(SystemExit):
        cli.main(["preview", "--help"])
    assert "fashion-mnist, kmnist, mnist" in unwrapped(capsys.readouterr().out)


# -- scenes ----------------------------------------------------------------------------------------
def _ink(image: np.ndarray) -> bytes:
    rows, cols = np.flatnonzero(image.any(1)), np.flatnonzero(image.any(0))
    return image[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1].tobytes()


def test_a_font_free_scenes_build_draws_mnist_digits(prepared, synthetic, pin_synthetic, monkeypatch, capsys):
    data_dir = prepared[0]
    # The data dir from the environment.
    monkeypatch.setenv("GLYPHFORGE_DATA_DIR", str(data_dir))
    argv = ["build", "scenes", "--glyphs", "mnist", "--characters", "730", "--glyph-shape", "28x28",
            "--image-shape", "64x64", "--max-glyphs", "2", "--max-overlap", "0", "--n-examples", "40", "-q"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    scenes = find_built("scenes", data_dir=data_dir)
    assert scenes.metadata == {"class_names": ["0", "3", "7"]}
    inks = {digit: {_ink(image) for image in synthetic["mnist"].class_images(int(digit))} for digit in "037"}
    drawn = set()
    glyph_names = np.array([*scenes.classes, ""])[scenes["labels"]]  # -1 pads: ""
    for image, boxes, names in zip(scenes["images"], scenes["boxes"], glyph_names, strict=True):
        for (top, left, bottom, right), name in zip(boxes.astype(int), names, strict=True):
            if name:
                crop = image[top:bottom, left:right, 0].tobytes()  # 28x28 glyphs keep the source pixels
                assert crop in inks[name]
                drawn.add(name)
    assert drawn == {"0", "3", "7"}


def test_scenes_of_every_fashion_mnist_class_resized(prepared, synthetic, pin_synthetic):
    data_dir = prepared[0]
    spec = ScatteredGlyphs(30, glyphs="fashion-mnist", glyph_shape=(14, 14), max_overlap=0.0)
    spec.prepare(data_dir)
    assert spec.class_names(data_dir) == tuple(CLASSES["fashion-mnist"])
    shard = spec.make_shard(0, np.random.default_rng(0), 30, data_dir=data_dir)
    resized = {_ink(image) for image in box(np.concatenate(
        [synthetic["fashion-mnist"].class_images(label) for label in range(10)]), (14, 14)) if image.any()}
    real = shard["labels"] >= 0
    assert set(np.array(spec.class_names(data_dir))[shard["labels"][real]].tolist()) <= set(CLASSES["fashion-mnist"])
    for i, k in np.argwhere(real):
        top, left, bottom, right = shard["boxes"][i, k].astype(int)
        assert shard["images"][i, top:bottom, left:right, 0].tobytes() in resized


def test_scenes_refuse_an_unknown_class_before_any_fetch(tmp_path, monkeypatch, capsys):
    spec = ScatteredGlyphs(5, glyphs="mnist", characters="0x")
    with pytest.raises(SpecError, match=r"unknown mnist classes \['x'\]"):
        spec.prepare(tmp_path)
    assert not (tmp_path / "raw").exists() and not (tmp_path / "cache").exists()
    monkeypatch.setenv("GLYPHFORGE_DATA_DIR", str(tmp_path))
    assert cli.main(["build", "scenes", "--glyphs", "kmnist", "--characters", "ox"]) == 2
    assert "unknown kmnist classes ['x']" in capsys.readouterr().err
    assert not (tmp_path / "raw").exists()


def test_mnist_tries_lecuns_original_address_after_the_s3_copy():

    files = UPSTREAM["mnist"].resources
    assert {name: (r.url, r.more_urls) for name, r in files.items()}["t10k-labels-idx1-ubyte.gz"] == (
        "https://ossci-datasets.s3.amazonaws.com/mnist/t10k-labels-idx1-ubyte.gz",
        ("http://yann.lecun.com/exdb/mnist/t10k-labels-idx1-ubyte.gz",),
    )
