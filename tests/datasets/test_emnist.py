"""glyphforge.datasets.emnist: prepare, load, the map-style dataset, and the registry's preview and glyph parts."""
import dataclasses
import inspect
import os
import pickle

import numpy as np
import pytest

import glyphforge
from glyphforge import config
from glyphforge.cache import CacheStore, DamagedEntryFileError
from glyphforge.cache.pklz import DEFAULT_LEVEL, gzip_member
from glyphforge.datasets import emnist, registry
from glyphforge.datasets.class_names import ClassNames
from glyphforge.datasets.classes.declaration import DECLARATIONS
from glyphforge.datasets.emnist import (
    EMNIST,
    class_file_name,
    emnist_classes,
    glyph_images,
    load_emnist,
    prepare_emnist,
    preview_examples,
)
from glyphforge.pipelines.idx import IDXError
from glyphforge.pipelines.resource import DownloadError, HashMismatchError
from glyphforge.scenes.glyph_datasets import glyph_dataset

from support.http_server import http_server  # noqa: F401 (fixture)
from support.synthetic_emnist import (
    DEFAULT_COUNTS,
    gunzip,
    gzip_bytes,
    member_names,
    read_member,
    replace_members,
)

EXPECTED_CLASSES = {
    "byclass": "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "bymerge": "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabdefghnqrt",
    "balanced": "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabdefghnqrt",
    "letters": "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "digits": "0123456789",
    "mnist": "0123456789",
}


@pytest.fixture(scope="module")
def prepared(synthetic_emnist, tmp_path_factory):
    """A module-wide data dir holding byclass at 28x28 and 14x14 (tests only read it)."""
    data_dir = tmp_path_factory.mktemp("prepared")
    prepare_emnist(archives={"gzip.zip": synthetic_emnist.path}, shapes=[(14, 14)], verify=False, progress=False,
                   data_dir=data_dir)
    return data_dir


@pytest.fixture
def store():
    return CacheStore.for_data_dir()


def prepare(synthetic_emnist, **options):
    """prepare_emnist from the synthetic_emnist archive, unverified, quiet."""
    return prepare_emnist(archives={"gzip.zip": synthetic_emnist.path}, verify=False, progress=False, **options)


def assert_cache_empty(store):
    """Nothing was written: no entry, no file of any kind under the cache root."""
    assert store.ls() == []
    leftovers = [path for path in store.root.rglob("*") if path.is_file() and not path.name.endswith(".lock")]
    assert leftovers == []


def use_synthetic_resource(monkeypatch, synthetic_emnist):
    """Pin the synthetic_emnist archive's md5 and size instead of NIST's (the download stays real)."""
    pin_resource(monkeypatch, dataclasses.replace(emnist.EMNIST_ZIP, hash=f"md5:{synthetic_emnist.md5}",
                                                  size=synthetic_emnist.size))


def pin_resource(monkeypatch, resource):
    """Declare EMNIST with ``resource`` as its archive (for this test)."""
    monkeypatch.setitem(DECLARATIONS, "emnist", dataclasses.replace(emnist.DATASET, resources={"gzip.zip": resource}))


def prepared_entry(data_dir, shape=(28, 28)):
    """The prepared byclass entry of ``shape`` (a cache hit of the own copy the data dir's record names)."""
    return prepare_emnist(shapes=[shape], data_dir=data_dir, verify=False, progress=False)[-1]


def class_images(data_dir, char, subset="all", shape=(28, 28)):
    """The images of one class of the prepared byclass entry: its test images, train images or both."""
    entry = prepared_entry(data_dir, shape)
    record = next(record for record in entry.meta["classes"] if record["name"] == char)
    images = entry.load(record["file"])
    return {"all": images, "test": images[:record["n_test"]], "train": images[record["n_test"]:]}[subset]


def expected_load(blocks, seed, n_examples=None):
    """The documented algorithm, in plain numpy: concatenate blocks in class order, then
    ``default_rng(seed).permutation``, then cut."""
    x = np.concatenate(blocks)
    y = np.repeat(np.arange(len(blocks)), [len(block) for block in blocks])
    order = np.random.default_rng(seed).permutation(len(x))[:n_examples]
    return x[order], y[order]


# -- names -------------------------------------------------------------------------
def test_classes_of_every_split():
    for split, chars in EXPECTED_CLASSES.items():
        assert emnist_classes(split) == list(chars)
    assert emnist_classes() == list(EXPECTED_CLASSES["byclass"])
    with pytest.raises(ValueError, match=r"unknown EMNIST split 'byclas': use one of byclass, bymerge, balanced, "
                                         r"letters, digits, mnist"):
        emnist_classes("byclas")


def test_public_names():
    assert glyphforge.EMNIST is EMNIST and glyphforge.load_emnist is load_emnist
    assert glyphforge.prepare_emnist is prepare_emnist and glyphforge.emnist_classes is emnist_classes
    assert all(getattr(emnist, name) is not None for name in emnist.__all__)
    assert (emnist.DEFAULT_METHOD, emnist.NATIVE_SHAPE, emnist.KIND) == ("box", (28, 28), "emnist")
    assert emnist.SPLITS == tuple(EXPECTED_CLASSES) and emnist.SUBSETS == ("all", "train", "test")
    assert not hasattr(emnist, "RESIZE_METHOD")  # DEFAULT_METHOD's name before 0.2


def test_the_registry_resolves_every_part():
    record = registry.get("emnist")
    parts = [registry.resolve(ref) for ref in (record.prepare, record.load, record.preview)]
    assert parts == [prepare_emnist, load_emnist, preview_examples]
    glyphs = glyph_dataset("emnist")  # the scenes' part, read from the declaration
    assert glyphs is not None and inspect.signature(glyphs.glyphs) == inspect.signature(glyph_images)


# -- prepare: arguments ----------------------------------------------------------------
def test_archives_finds_the_entry_and_converts_another_split(synthetic_emnist, store):
    [entry] = prepare(synthetic_emnist, split="digits")
    assert entry.meta["verified"] is False and entry.meta["n_images"] == 90
    archives = {"gzip.zip": synthetic_emnist.path}
    assert prepare_emnist(split="digits", archives=archives, verify=False, progress=False) == [entry]
    [letters] = prepare_emnist(split="letters", archives=archives, verify=False, progress=False)
    assert letters.meta["n_images"] == sum(DEFAULT_COUNTS["letters"])


def test_archives_refuses_unknown_keys(synthetic_emnist, store):
    with pytest.raises(ValueError, match=r"^archives has 'gzip', which is not a file of EMNIST: use one of gzip\.zip$"):
        prepare_emnist(archives={"gzip": synthetic_emnist.path}, verify=False, progress=False)
    assert_cache_empty(store)


def test_several_splits_in_order_each_with_its_variants(synthetic_emnist, tmp_path, store):
    archive = tmp_path / "gzip.zip"
    archive.write_bytes(synthetic_emnist.path.read_bytes())
    entries = prepare_emnist(split=["digits", "letters", "digits"], shapes=[(14, 14), (28, 28)],
                             archives={"gzip.zip": archive}, verify=False, progress=False)
    assert [(e.params["split"], e.params["shape"]) for e in entries] == [
        ("digits", [28, 28]), ("digits", [14, 14]), ("letters", [28, 28]), ("letters", [14, 14])
    ]
    assert entries[1].meta["resized_from"] == entries[0].key and entries[3].meta["resized_from"] == entries[2].key
    assert [e.meta["n_images"] for e in entries] == [90, 90, 170, 170]
    stamps = {path: path.stat().st_mtime_ns for path in store.root.rglob("*")}
    archive.unlink()  # a cache hit needs neither the archive nor the network
    again = prepare_emnist(split=(s for s in ("letters", "digits")), shapes=[(14, 14)],
                           archives={"gzip.zip": archive}, verify=False, progress=False)
    assert [e.key for e in again] == [e.key for e in entries[2:] + entries[:2]]
    assert {path: path.stat().st_mtime_ns for path in store.root.rglob("*")} == stamps
    with pytest.raises(ValueError, match=r"^split is empty"):
        prepare_emnist(split=[], progress=False)
    with pytest.raises(ValueError, match=r"^unknown EMNIST split 'byclas'"):
        prepare_emnist(split=["digits", "byclas"], progress=False)


def test_split_none_is_byclass(synthetic_emnist):
    assert prepare(synthetic_emnist, split=None) == prepare(synthetic_emnist)
    assert [e.params["split"] for e in prepare(synthetic_emnist, split=None)] == ["byclass"]


@pytest.mark.parametrize("shape", [(0, 14), (14, -1), (14,), (14.5, 14), (14.0, 14), (True, 3), "14x14"])
def test_bad_shapes(synthetic_emnist, shape, store):
    with pytest.raises(ValueError, match=r"shape .* is invalid: give \(height, width\) as two positive integers"):
        prepare(synthetic_emnist, shapes=[shape])
    with pytest.raises(ValueError, match=r"shape .* is invalid"):
        load_emnist("0", shape=shape)
    assert_cache_empty(store)


# -- prepare: fetching -------------------------------------------------------------------------
def test_offline_with_nothing_placed_fails_at_once_naming_the_place(synthetic_emnist, monkeypatch, http_server, store):  # noqa: F811
    use_synthetic_resource(monkeypatch, synthetic_emnist)
    http_server.add("emnist/gzip.zip", synthetic_emnist.path.read_bytes())  # a network mirror that must not be used
    placed = config.raw_dir("emnist") / "gzip.zip"
    attempts = [
        lambda: prepare_emnist(offline=True, mirrors=[http_server.base_url], progress=False),
        lambda: load_emnist("0", offline=True, mirrors=[http_server.base_url]),
        lambda: EMNIST(offline=True, mirrors=[http_server.base_url]),
    ]
    for attempt in attempts:
        with pytest.raises(DownloadError) as caught:
            attempt()
        message = str(caught.value)
        assert "Offline mode (GLYPHFORGE_OFFLINE=1 or offline=True) forbids network access" in message
        assert f"place the file at:\n  {placed}\n" in message
    assert http_server.requests() == 0
    assert_cache_empty(store)


def test_offline_false_overrides_the_environment(synthetic_emnist, monkeypatch, http_server, store):  # noqa: F811
    use_synthetic_resource(monkeypatch, synthetic_emnist)
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    http_server.add("emnist/gzip.zip", synthetic_emnist.path.read_bytes())
    [entry] = prepare_emnist(split="mnist", offline=False, mirrors=[http_server.base_url], progress=False)
    assert http_server.requests("emnist/gzip.zip") == 1 and entry.meta["n_images"] == 70


def test_prepare_downloads_from_an_http_mirror_once_for_several_splits(  # noqa: F811
    synthetic_emnist, monkeypatch, http_server, store
):
    use_synthetic_resource(monkeypatch, synthetic_emnist)
    http_server.add("emnist/gzip.zip", synthetic_emnist.path.read_bytes())
    entries = prepare_emnist(split=["digits", "mnist"], mirrors=[http_server.base_url], progress=False)
    assert http_server.requests("emnist/gzip.zip") == 1
    assert [entry.meta["n_images"] for entry in entries] == [90, 70]
    assert all(entry.meta["verified"] is True for entry in entries)
    assert prepare_emnist(split="digits", mirrors=[http_server.base_url], progress=False) == entries[:1]
    assert http_server.requests() == 1  # cache hit: no request at all


def test_load_prepares_through_a_file_mirror(synthetic_emnist, tmp_path, monkeypatch, store):
    use_synthetic_resource(monkeypatch, synthetic_emnist)
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")  # local mirrors only: the origin is never tried
    (tmp_path / "mirror" / "emnist").mkdir(parents=True)
    (tmp_path / "mirror" / "emnist" / "gzip.zip").write_bytes(synthetic_emnist.path.read_bytes())
    x, y, classes = load_emnist("x", subset="all", seed=0, mirrors=[(tmp_path / "mirror").as_uri()])
    assert np.array_equal(x, expected_load([class_images(None, "x")], 0)[0])
    assert (config.raw_dir("emnist") / "gzip.zip").read_bytes() == synthetic_emnist.path.read_bytes()
    assert store.ls()[0].meta["verified"] is True


def test_a_wrong_hash_download_fails_and_caches_nothing(synthetic_emnist, monkeypatch, http_server, store):  # noqa: F811
    """The origin serves a zip of the pinned size whose md5 is not NIST's (damaged in transit)."""
    http_server.add("origin/gzip.zip", synthetic_emnist.path.read_bytes())
    resource = dataclasses.replace(emnist.EMNIST_ZIP, url=http_server.url("origin/gzip.zip"),
                                   size=synthetic_emnist.size)
    pin_resource(monkeypatch, resource)
    with pytest.raises(HashMismatchError) as caught:
        prepare_emnist(progress=False)
    assert caught.value.expected == "md5:58c8d27c78d21e728a6bc7b3cc06412e"
    assert caught.value.actual == f"md5:{synthetic_emnist.md5}"
    assert f"expected md5:58c8d27c78d21e728a6bc7b3cc06412e, got md5:{synthetic_emnist.md5}" in str(caught.value)
    assert_cache_empty(store)
    assert not any(config.raw_dir("emnist").glob("gzip.zip*"))


def test_a_partial_download_is_refused(synthetic_emnist, monkeypatch, http_server, store):  # noqa: F811
    """NIST's real size and md5 pinned: a short file is never accepted (the old tool accepted it)."""
    http_server.add("origin/gzip.zip", synthetic_emnist.path.read_bytes())
    pin_resource(monkeypatch, dataclasses.replace(emnist.EMNIST_ZIP, url=http_server.url("origin/gzip.zip")))
    with pytest.raises(DownloadError, match=rf"announces {synthetic_emnist.size} bytes, expected 561753746"):
        load_emnist("0")
    assert_cache_empty(store)


def test_a_wrong_hash_archive_or_mirror_file_fails_and_caches_nothing(synthetic_emnist, tmp_path, monkeypatch, store):
    with pytest.raises(HashMismatchError,
                       match=r"gzip.zip is not https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip: "
                       rf"its hash is md5:{synthetic_emnist.md5} \({synthetic_emnist.size:,} bytes\), expected "
                       r"md5:58c8d27c78d21e728a6bc7b3cc06412e \(561,753,746 bytes\)\. .*pass verify=False"):
        prepare_emnist(archives={"gzip.zip": synthetic_emnist.path}, progress=False)
    (tmp_path / "emnist").mkdir()
    (tmp_path / "emnist" / "gzip.zip").write_bytes(synthetic_emnist.path.read_bytes())
    with pytest.raises(DownloadError,
                       match=rf"{tmp_path}/emnist/gzip.zip: has {synthetic_emnist.size} bytes, expected 561753746"):
        load_emnist("0", mirrors=[str(tmp_path)], offline=True)
    assert_cache_empty(store)


def test_a_given_archive_is_reported_as_not_upstream_before_what_reading_it_found(synthetic_emnist, tmp_path, store):
    """The archive is hashed while it is read: when it is neither upstream's nor readable, the hash is what is said."""
    member = member_names("byclass")["train-images"]
    short = gzip_bytes(gunzip(read_member(synthetic_emnist.path, member))[:-1000])
    broken = replace_members(synthetic_emnist.path, tmp_path / "broken.zip", {member: short})
    with pytest.raises(HashMismatchError, match=rf"^{broken} is not https://biometrics.nist.gov/.*pass verify=False"):
        prepare_emnist(archives={"gzip.zip": broken}, progress=False)
    assert_cache_empty(store)


def test_a_corrupt_or_missing_archive_caches_nothing(synthetic_emnist, tmp_path, store):
    member = member_names("byclass")["train-images"]
    short = gzip_bytes(gunzip(read_member(synthetic_emnist.path, member))[:-1000])
    broken = replace_members(synthetic_emnist.path, tmp_path / "broken.zip", {member: short})
    with pytest.raises(IDXError, match=rf"^{member} in {broken} is truncated"):
        prepare_emnist(archives={"gzip.zip": broken}, shapes=[(14, 14)], verify=False, progress=False)
    with pytest.raises(FileNotFoundError, match=r"missing.zip does not exist: give the path of a copy of https://"):
        prepare_emnist(archives={"gzip.zip": tmp_path / "missing.zip"}, verify=False, progress=False)
    assert_cache_empty(store)


def test_verify_false_uses_a_hand_placed_archive(synthetic_emnist, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    placed = config.raw_dir("emnist") / "gzip.zip"
    placed.parent.mkdir(parents=True)
    placed.write_bytes(synthetic_emnist.path.read_bytes())
    [entry] = prepare_emnist(split="mnist", verify=False, progress=False)
    assert entry.meta["n_images"] == 70


def test_a_local_archive_path_may_start_with_the_home_folder(synthetic_emnist, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "gzip.zip").write_bytes(synthetic_emnist.path.read_bytes())
    monkeypatch.setenv("HOME", str(home))
    entry, = prepare_emnist(split="digits", archives={"gzip.zip": "~/gzip.zip"}, verify=False, progress=False)
    assert entry.meta["verified"] is False and entry.meta["n_images"] == sum(DEFAULT_COUNTS["digits"])


# -- loading -------------------------------------------------------------------------------
def test_load_sorts_classes_and_labels_index_them(prepared):
    x, y, classes = load_emnist("zA3a", subset="all", seed=7, data_dir=prepared)
    assert type(classes) is ClassNames and classes == ["3", "A", "a", "z"]
    assert classes.index("a") == 2 and classes + [" "] == ["3", "A", "a", "z", " "]  # a plain list
    expected_x, expected_y = expected_load([class_images(prepared, c) for c in classes], 7)
    assert x.dtype == np.uint8 and y.dtype == np.int64
    assert np.array_equal(x, expected_x) and np.array_equal(y, expected_y)
    x_digits, _, digits = load_emnist(range(3), seed=7, data_dir=prepared)
    assert digits == ["0", "1", "2"]
    assert np.array_equal(x_digits, load_emnist("201", seed=7, data_dir=prepared)[0])
    x_all, _, every = load_emnist(None, subset="all", seed=0, data_dir=prepared)
    assert every == list(EXPECTED_CLASSES["byclass"]) and len(x_all) == 380


def upstream(synthetic_emnist, subset, chars, split="byclass"):
    """The upright images of ``subset`` whose class is one of ``chars``, in upstream order (``"all"``: train, then
    test), and their labels as indices into ``chars`` (in label order)."""
    data = synthetic_emnist.splits[split]
    subsets = [(data.train_images, data.train_labels), (data.test_images, data.test_labels)]
    images, labels = (np.concatenate(arrays) for arrays in zip(*{"train": subsets[:1], "test": subsets[1:]}.get(
        subset, subsets), strict=True))
    wanted = [EXPECTED_CLASSES[split].index(c) + data.first_label for c in chars]
    kept = np.isin(labels, wanted)
    return images[kept], np.searchsorted(wanted, labels[kept])


def test_the_default_subset_is_train(prepared, synthetic_emnist):
    x, y, classes = load_emnist("BCD", seed=3, data_dir=prepared)
    expected_x, expected_y = expected_load([class_images(prepared, c, "train") for c in "BCD"], 3)
    assert np.array_equal(x, expected_x) and np.array_equal(y, expected_y)
    assert len(load_emnist(None, seed=0, data_dir=prepared)[0]) == 250  # every train image
    ds = EMNIST(classes="BCD", data_dir=prepared)
    assert ds.subset == "train"
    images, labels = upstream(synthetic_emnist, "train", "BCD")
    assert np.array_equal(ds.images, images) and np.array_equal(ds.labels, labels)


def test_subsets_example_range_balance_blank_and_n_examples(prepared):
    chars = ["B", "C", "D"]  # 2, 3 and 4 parts by the fixture's uneven weights
    test = {c: class_images(prepared, c, "test") for c in chars}
    train = {c: class_images(prepared, c, "train") for c in chars}
    every = {c: class_images(prepared, c) for c in chars}

    x, _, _ = load_emnist(chars, subset="test", seed=3, data_dir=prepared)
    assert np.array_equal(x, expected_load([test[c] for c in chars], 3)[0])

    def cut(images, a, b):
        return images[int(a * len(images)):int(b * len(images))]

    x, y, _ = load_emnist(chars, subset="train", example_range=(0.25, 0.8), seed=3, data_dir=prepared)
    expected = expected_load([cut(train[c], 0.25, 0.8) for c in chars], 3)
    assert np.array_equal(x, expected[0]) and np.array_equal(y, expected[1])
    low = load_emnist(chars, subset="all", example_range=(0, 0.6), seed=0, data_dir=prepared)[0]
    high = load_emnist(chars, subset="all", example_range=(0.6, 1), seed=0, data_dir=prepared)[0]
    assert len(low) + len(high) == sum(len(every[c]) for c in chars)  # adjacent ranges partition

    smallest = min(len(every[c]) for c in chars)
    x, y, classes = load_emnist(chars, subset="all", balance=True, include_blank=True, seed=5, data_dir=prepared)
    assert classes == ["B", "C", "D", " "]
    assert np.bincount(y).tolist() == [smallest] * 4
    blank = np.zeros((smallest, 28, 28), np.uint8)
    expected = expected_load([every[c][:smallest] for c in chars] + [blank], 5)
    assert np.array_equal(x, expected[0]) and np.array_equal(y, expected[1])
    assert not x[y == 3].any()

    x, y, classes = load_emnist(chars, subset="all", include_blank=True, n_examples=10, seed=9, data_dir=prepared)
    expected = expected_load([every[c] for c in chars] + [blank], 9, n_examples=10)
    assert len(x) == 10 and np.array_equal(x, expected[0]) and np.array_equal(y, expected[1])


def test_seed_fixes_the_order(prepared):
    first, again, other = (load_emnist("0123", seed=s, data_dir=prepared)[0] for s in (11, 11, 12))
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    fresh = [load_emnist("0123", seed=None, data_dir=prepared)[1] for _ in range(3)]
    assert not all(np.array_equal(fresh[0], labels) for labels in fresh[1:])


def test_load_makes_a_missing_variant_from_the_28x28_entry(synthetic_emnist, store):
    prepare(synthetic_emnist)
    x, _, _ = load_emnist("Q", shape=(7, 7), subset="all", seed=1, download=False)
    assert x.shape == (len(class_images(None, "Q")), 7, 7)
    assert len(store.ls()) == 2


def test_load_without_download_names_the_fix(store):
    with pytest.raises(FileNotFoundError, match=r"EMNIST letters is not prepared in .*: run "
                       r"prepare_emnist\(split='letters'\) or `prepare-data emnist --split letters`, "
                       r"or pass download=True"):
        load_emnist("A", split="letters", download=False)
    assert_cache_empty(store)


def test_bad_load_arguments(synthetic_emnist, store):
    with pytest.raises(ValueError, match=r"unknown EMNIST byclass classes \['!', 'AB'\]: this split has the classes"):
        load_emnist(["A", "AB", "!"])
    with pytest.raises(ValueError, match=r"unknown EMNIST digits classes \['A'\]"):
        load_emnist("0A", split="digits")
    with pytest.raises(ValueError, match=r"subset 'val' is invalid: use one of all, train, test"):
        load_emnist("0", subset="val")
    with pytest.raises(ValueError, match=r"example_range \(0.5, 0.5\) is invalid: give \(a, b\) with 0 <= a < b <= 1"):
        load_emnist("0", example_range=(0.5, 0.5))
    for bad in (-1, 2.0, True):
        with pytest.raises(ValueError, match=rf"^n_examples must be an integer >= 0, got {bad!r}$"):
            load_emnist("0", n_examples=bad)
    with pytest.raises(ValueError, match=r"classes is empty"):
        load_emnist("")
    assert_cache_empty(store)
    prepare(synthetic_emnist, split="digits")
    with pytest.raises(ValueError, match=r"^n_examples=91 is more than the 90 images selected \(10 classes, subset "
                                         r"'all', example_range None\); ask for at most 90$"):
        load_emnist("0123456789", split="digits", subset="all", n_examples=91)
    with pytest.raises(ValueError, match=r"n_examples=61 is more than the 60 images selected \(10 classes, subset "
                                         r"'train', example_range \(0.0, 1.0\)\)"):
        load_emnist("0123456789", split="digits", n_examples=61, example_range=(0, 1))


def test_load_reads_only_the_requested_class_files_and_reports_damage(synthetic_emnist, store):
    [entry] = prepare(synthetic_emnist, split="digits")
    path = entry.path / "digit_7.pklz"
    size = path.stat().st_size
    os.truncate(path, size - 10)
    with pytest.raises(DamagedEntryFileError, match=rf"digit_7.pklz is damaged: {size - 10:,} bytes where the emnist "
                       rf"entry {entry.key[:12]}'s manifest records {size:,} \(truncated or replaced\): run "
                       r"`glyphforge cache gc` to remove the broken entry, then make it again: `prepare-data emnist`"):
        load_emnist("7", split="digits")
    x, _, _ = load_emnist("6", split="digits", subset="all", seed=0)  # digit_7.pklz is never opened
    sixes = entry.load("digit_6.pklz")
    assert np.array_equal(x, sixes[np.random.default_rng(0).permutation(len(sixes))])


def test_emnist_class_object(prepared, synthetic_emnist):
    ds = EMNIST(subset="test", split="byclass", classes="ba", transform=lambda image: image.T, data_dir=prepared)
    assert type(ds.classes) is ClassNames and ds.classes == ["a", "b"]
    expected, labels = upstream(synthetic_emnist, "test", "ab")
    assert len(ds) == len(expected) and np.array_equal(ds.images, expected)  # upstream order
    assert ds.labels.tolist() == labels.tolist()
    image, label = ds[len(ds) - 1]
    assert np.array_equal(image, expected[-1].T) and label == labels[-1]
    batches = list(ds.batches(batch_size=4))
    assert sum(len(xb) for xb, _ in batches) == len(ds) and np.array_equal(batches[0][0], expected[:4])
    assert repr(ds) == f"EMNIST(split='byclass', subset='test', shape=(28, 28), {len(ds)} images, 2 classes)"
    spelled = EMNIST(prepared, "byclass", train=False, classes="ba", download=False)  # torchvision's spelling
    assert repr(spelled) == repr(ds) and np.array_equal(spelled.images, expected)
    small = EMNIST(shape=(14, 14), classes="Q", subset="all", include_blank=True, balance=True, data_dir=prepared)
    test_q, train_q = (class_images(prepared, "Q", subset, shape=(14, 14)) for subset in ("test", "train"))
    q = np.concatenate([train_q, test_q])  # subset "all": the train examples, then the test ones
    assert np.array_equal(small.images, np.concatenate([q, np.zeros_like(q)])) and small.classes == ["Q", " "]


# -- the registry's parts ------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(28, 28), (14, 14)])
def test_preview_examples_picks_classes_then_images_with_rng(prepared, shape):
    entry = prepared_entry(prepared, shape)
    rng = np.random.default_rng(3)
    chosen = sorted(rng.choice(list(EXPECTED_CLASSES["byclass"]), size=16, replace=False).tolist())
    expected_x, expected_y = expected_load([class_images(prepared, c, shape=shape) for c in chosen],
                                           int(rng.integers(2**32)), n_examples=16)
    images, labels = preview_examples(entry, 16, np.random.default_rng(3), prepared)
    assert images.shape == (16, *shape) and np.array_equal(images, expected_x)
    assert labels == [chosen[i] for i in expected_y] and all(isinstance(label, str) for label in labels)


def test_preview_examples_of_a_small_entry_gives_what_there_is(synthetic_emnist):
    [entry] = prepare(synthetic_emnist, split="digits")
    images, labels = preview_examples(entry, 100, np.random.default_rng(0), None)
    assert len(images) == len(labels) == 90 and sorted(set(labels)) == list("0123456789")
    assert [labels.count(c) for c in "0123456789"] == [
        len(entry.load(class_file_name(c))) for c in "0123456789"
    ]


@pytest.mark.parametrize(("classes", "example_range", "shape"), [
    ("z0A", (0, 0.5), (28, 28)), ("z0A", (0.5, 1), (28, 28)), (None, None, (14, 14)), (["Q"], (0.2, 0.9), None),
])
def test_glyph_images_are_load_emnist_of_all_images_seed_0(prepared, classes, example_range, shape):
    images, labels, names = glyph_images(classes, example_range=example_range, shape=shape, data_dir=prepared)
    x, y, expected_names = load_emnist(classes, split="byclass", subset="all", shape=shape,
                                       example_range=example_range, seed=0, data_dir=prepared, download=False)
    assert images.tobytes() == x.tobytes() and images.shape == x.shape and images.dtype == np.uint8
    assert labels.tobytes() == y.tobytes() and labels.dtype == np.int64
    assert type(names) is ClassNames and names == expected_names


def test_glyph_images_of_the_class_test_and_train_images(prepared):
    images, labels, names = glyph_images("A0", example_range=(0, 0.5), shape=(28, 28), data_dir=prepared)
    blocks = [class_images(prepared, c)[:len(class_images(prepared, c)) // 2] for c in "0A"]
    assert names == ["0", "A"]
    expected_x, expected_y = expected_load(blocks, 0)
    assert np.array_equal(images, expected_x) and np.array_equal(labels, expected_y)


def test_glyph_images_read_the_cache_only_and_name_the_command(synthetic_emnist, store):
    with pytest.raises(FileNotFoundError, match=r"^EMNIST byclass at 28x28 is not prepared in .*: run `prepare-data "
                                                r"emnist --split byclass --shape 28x28` first"):
        glyph_images("A", example_range=None, shape=None, data_dir=None)
    prepare(synthetic_emnist, split="digits")
    listed = store.ls()
    with pytest.raises(FileNotFoundError, match=r"^EMNIST digits at 14x14 is not prepared in .*: run `prepare-data "
                                                r"emnist --split digits --shape 14x14` first"):
        glyph_images("0", example_range=None, shape=(14, 14), data_dir=None, split="digits")
    assert store.ls() == listed  # the 14x14 entry was not made from the 28x28 one
    _, labels, names = glyph_images(None, example_range=None, shape=(28, 28), data_dir=None, split="digits")
    assert names == list("0123456789") and len(labels) == 90


def test_class_files_are_numpys_pickles_of_the_upright_images_the_same_on_every_worker_count(
        synthetic_emnist, tmp_path, monkeypatch):
    """Each class file is the one-call isal gzip member of ``pickle.dumps(upright images, protocol=5)``, test then
    train images in archive order (written in place inside the pickle), whatever the threads writing them."""
    data = synthetic_emnist.splits["digits"]
    written = {}
    for cpus in (1, 3):
        monkeypatch.setattr(os, "cpu_count", lambda cpus=cpus: cpus)
        [entry] = prepare(synthetic_emnist, split="digits", data_dir=tmp_path / f"cpus-{cpus}")
        written[cpus] = {record["file"]: entry.file(record["file"]).read_bytes() for record in entry.meta["classes"]}
    assert written[1] == written[3]
    for index, char in enumerate(data.classes):
        label = data.first_label + index
        upright = np.concatenate([data.test_images[data.test_labels == label],
                                  data.train_images[data.train_labels == label]])
        assert written[1][class_file_name(char)] == gzip_member(pickle.dumps(upright, protocol=5), DEFAULT_LEVEL)
