import dataclasses
import gzip
import os

import dill
import numpy as np
import pytest
from PIL import Image

import glyphforge
from glyphforge import config
from glyphforge.cache import CacheStore
from glyphforge.datasets import emnist
from glyphforge.datasets.emnist import (
    EMNIST,
    EMNISTFormatError,
    class_file_name,
    emnist_classes,
    load_emnist,
    parse_mapping,
    prepare_emnist,
)
from glyphforge.pipelines.archive import ArchiveError
from glyphforge.pipelines.download import DownloadError, HashMismatchError
from glyphforge.pipelines.idx import IDXError
from glyphforge.pipelines.resize import resize
from support.http_server import http_server  # noqa: F401 (fixture)
from support.synthetic_emnist import (
    ASYMMETRIC_GLYPH,
    DEFAULT_COUNTS,
    gunzip,
    gzip_bytes,
    idx_header,
    idx_labels,
    member_names,
    read_member,
    replace_members,
    write_synthetic_emnist,
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
def synthetic(tmp_path_factory):
    """A small synthetic gzip.zip with every split (module-wide: it is only read)."""
    return write_synthetic_emnist(tmp_path_factory.mktemp("emnist") / "gzip.zip")


@pytest.fixture
def store():
    return CacheStore.for_data_dir()


def reference_classes(synthetic, split="byclass"):
    """{char: upright images of the class, test first then train}, built with plain numpy."""
    data = synthetic.splits[split]
    result = {}
    for offset, char in enumerate(data.classes):
        label = data.first_label + offset
        result[char] = np.concatenate(
            [data.test_images[data.test_labels == label], data.train_images[data.train_labels == label]]
        )
    return result


def class_counts(synthetic, split="byclass"):
    data = synthetic.splits[split]
    return {
        char: (int((data.test_labels == data.first_label + i).sum()), int((data.train_labels == data.first_label + i).sum()))
        for i, char in enumerate(data.classes)
    }


def assert_cache_empty(store):
    """Nothing was written: no entry, no file of any kind under the cache root."""
    assert store.ls() == []
    leftovers = [path for path in store.root.rglob("*") if path.is_file() and not path.name.endswith(".lock")]
    assert leftovers == []


def use_synthetic_resource(monkeypatch, synthetic):
    """Pin the synthetic archive's md5 and size instead of NIST's (the download stays real)."""
    resource = dataclasses.replace(emnist.EMNIST_ZIP, hash=f"md5:{synthetic.md5}", size=synthetic.size)
    monkeypatch.setattr(emnist, "EMNIST_ZIP", resource)


# -- names ---------------------------------------------------------------------
def test_classes_of_every_split():
    for split, chars in EXPECTED_CLASSES.items():
        assert emnist_classes(split) == list(chars)
    assert emnist_classes() == list(EXPECTED_CLASSES["byclass"])
    with pytest.raises(ValueError, match=r"unknown EMNIST split 'byclas': use one of byclass, bymerge, balanced, letters, digits, mnist"):
        emnist_classes("byclas")


def test_class_file_names_are_distinct_on_case_insensitive_filesystems():
    names = [class_file_name(char) for char in EXPECTED_CLASSES["byclass"]]
    assert len({name.lower() for name in names}) == 62
    assert [class_file_name(c) for c in "0Aa9Zz"] == [
        "digit_0.pklz", "upper_A.pklz", "lower_a.pklz", "digit_9.pklz", "upper_Z.pklz", "lower_z.pklz"
    ]
    for bad in ("?", "AB", "", "é"):
        with pytest.raises(ValueError, match="is not an EMNIST class"):
            class_file_name(bad)


def test_parse_mapping_takes_the_first_code_and_ignores_extra_columns():
    assert parse_mapping("0 48\n1 49 50 51\n\n2 65\r\n", "m") == {0: "0", 1: "1", 2: "A"}
    with pytest.raises(EMNISTFormatError, match=r"^m line 2 is '7': expected 'label ascii_code \[more codes\]'"):
        parse_mapping("0 48\n7\n", "m")
    with pytest.raises(EMNISTFormatError, match=r"^m line 3 repeats label 0"):
        parse_mapping("0 48\n1 49\n0 50\n", "m")


# -- conversion ----------------------------------------------------------------
def test_conversion_equals_numpy_reference(synthetic, store):
    [entry] = prepare_emnist(archive=synthetic.path, verify=False, progress=False)
    reference, counts = reference_classes(synthetic), class_counts(synthetic)
    assert entry.kind == "emnist" and entry.params == {"split": "byclass", "shape": [28, 28], "source": emnist.EMNIST_ZIP.hash}
    assert entry.files == sorted(class_file_name(char) for char in EXPECTED_CLASSES["byclass"])
    assert [record["char"] for record in entry.meta["classes"]] == list(EXPECTED_CLASSES["byclass"])
    assert (entry.meta["n_images"], entry.meta["n_test"], entry.meta["n_train"]) == (380, 130, 250)
    assert entry.meta["verified_archive"] is False
    for label, record in enumerate(entry.meta["classes"]):
        char = record["char"]
        assert record == {"char": char, "label": label, "file": class_file_name(char), "n_test": counts[char][0], "n_train": counts[char][1]}
        images = entry.load(record["file"])
        assert images.dtype == np.uint8 and images.shape == (sum(counts[char]), 28, 28)
        assert np.array_equal(images, reference[char])
    assert len({record["n_test"] + record["n_train"] for record in entry.meta["classes"]}) > 1  # uneven classes


def test_images_come_out_upright(synthetic):
    [entry] = prepare_emnist(archive=synthetic.path, verify=False, progress=False)
    data = synthetic.splits["byclass"]
    char = EXPECTED_CLASSES["byclass"][data.test_labels[0]]  # the first test image is the glyph
    first = entry.load(class_file_name(char))[0]
    assert np.array_equal(first, ASYMMETRIC_GLYPH)
    assert (first[3:6, 5:22] == 255).all()  # the bar along the top
    assert (first[3:25, 5:8] == 255).all()  # the bar down the left side
    assert first[4, 20] == 255 and first[20, 4] == 0  # transposed, these two would swap
    assert first.sum() == 255 * (3 * 17 + 19 * 3)


def test_class_files_read_with_plain_gzip_and_dill(synthetic):
    """The old tool's format: a standard gzip of a dill pickle of one uint8 array."""
    [entry] = prepare_emnist(archive=synthetic.path, verify=False, progress=False)
    with gzip.open(entry.path / "lower_a.pklz", "rb") as stream:
        images = dill.load(stream)
    assert np.array_equal(images, reference_classes(synthetic)["a"])


@pytest.mark.parametrize("split", ["bymerge", "balanced", "letters", "digits", "mnist"])
def test_every_split_converts_with_its_mapping(synthetic, split):
    [entry] = prepare_emnist(split=split, archive=synthetic.path, verify=False, progress=False)
    first_label = 1 if split == "letters" else 0
    records = entry.meta["classes"]
    assert [(r["char"], r["label"]) for r in records] == [(c, first_label + i) for i, c in enumerate(EXPECTED_CLASSES[split])]
    reference = reference_classes(synthetic, split)
    for record in records:
        assert np.array_equal(entry.load(record["file"]), reference[record["char"]])
    n_train, n_test = (len(synthetic.splits[split].train_labels), len(synthetic.splits[split].test_labels))
    assert (entry.meta["n_train"], entry.meta["n_test"], entry.meta["n_images"]) == (n_train, n_test, n_train + n_test)


def test_mapping_files_with_extra_columns(tmp_path):
    archive = write_synthetic_emnist(tmp_path / "gzip.zip", extra_mapping_columns=True)
    assert read_member(archive.path, "gzip/emnist-letters-mapping.txt").startswith(b"1 65 97 97\n")
    [entry] = prepare_emnist(split="letters", archive=archive.path, verify=False, progress=False)
    assert [r["char"] for r in entry.meta["classes"]] == list(EXPECTED_CLASSES["letters"])


def test_second_prepare_is_a_cache_hit_that_touches_nothing(synthetic, tmp_path, store):
    archive = tmp_path / "gzip.zip"
    archive.write_bytes(synthetic.path.read_bytes())
    first = prepare_emnist(archive=archive, verify=False, shapes=[(14, 14)], progress=False)
    stamps = {path: path.stat().st_mtime_ns for path in store.root.rglob("*")}
    archive.unlink()  # neither the archive nor the network is needed any more
    second = prepare_emnist(archive=archive, verify=False, shapes=[(14, 14), (28, 28)], progress=False)
    assert [e.key for e in second] == [e.key for e in first] and len(second) == 2
    assert {path: path.stat().st_mtime_ns for path in store.root.rglob("*")} == stamps


def test_progress_bars(synthetic, capsys):
    prepare_emnist(split="digits", archive=synthetic.path, verify=False, shapes=[(7, 7)])
    err = capsys.readouterr().err
    assert "EMNIST digits: reading gzip.zip" in err and "4/4" in err
    assert "EMNIST digits: writing 28x28" in err and "EMNIST digits: writing 7x7" in err and "90/90" in err


# -- resized variants ------------------------------------------------------------
def test_resized_entries_equal_the_kernel_and_pillow(synthetic):
    base, small, odd = prepare_emnist(archive=synthetic.path, verify=False, shapes=[(14, 14), (9, 12)], progress=False)
    assert small.params == {**base.params, "shape": [14, 14], "resize": "box"}
    assert small.meta["classes"] == base.meta["classes"] and small.meta["resized_from"] == base.key
    for entry, (height, width) in ((small, (14, 14)), (odd, (9, 12))):
        assert entry.files == base.files
        for record in base.meta["classes"]:
            native, resized = base.load(record["file"]), entry.load(record["file"])
            assert resized.shape == (len(native), height, width)
            assert np.array_equal(resized, resize(native, (height, width), method="box", batch=True))
        native = base.load("upper_Q.pklz")
        pillow = np.stack([np.asarray(Image.fromarray(image).resize((width, height), Image.BOX)) for image in native])
        assert np.array_equal(entry.load("upper_Q.pklz"), pillow)  # every image, not just the first 10


def test_load_makes_a_missing_variant_from_the_28x28_entry(synthetic, store):
    prepare_emnist(archive=synthetic.path, verify=False, progress=False)
    x, y, classes = load_emnist("Q", shape=(7, 7), seed=1, download=False)
    assert x.shape == (sum(class_counts(synthetic)["Q"]), 7, 7)
    assert len(store.ls()) == 2


# -- loading ---------------------------------------------------------------------
def _expected_load(blocks, seed, n_examples=None):
    """The documented algorithm, in plain numpy: concatenate blocks in class order, then
    ``default_rng(seed).permutation``, then cut."""
    x = np.concatenate(blocks)
    y = np.repeat(np.arange(len(blocks)), [len(block) for block in blocks])
    order = np.random.default_rng(seed).permutation(len(x))[:n_examples]
    return x[order], y[order]


def test_load_sorts_classes_and_labels_index_them(synthetic):
    prepare_emnist(archive=synthetic.path, verify=False, progress=False)
    reference = reference_classes(synthetic)
    x, y, classes = load_emnist("zA3a", seed=7)
    assert classes == ["3", "A", "a", "z"]
    expected_x, expected_y = _expected_load([reference[c] for c in classes], 7)
    assert x.dtype == np.uint8 and y.dtype == np.int64
    assert np.array_equal(x, expected_x) and np.array_equal(y, expected_y)
    x_digits, y_digits, digits = load_emnist(range(3), seed=7)
    assert digits == ["0", "1", "2"]
    assert np.array_equal(x_digits, load_emnist("201", seed=7)[0])
    x_all, _, every = load_emnist(None, seed=0)
    assert every == list(EXPECTED_CLASSES["byclass"]) and len(x_all) == 380


def test_subsets_example_range_balance_blank_and_n_examples(synthetic):
    prepare_emnist(archive=synthetic.path, verify=False, progress=False)
    reference, counts = reference_classes(synthetic), class_counts(synthetic)
    chars = ["B", "C", "D"]  # 2, 3 and 4 parts by the fixture's uneven weights
    test = {c: reference[c][: counts[c][0]] for c in chars}
    train = {c: reference[c][counts[c][0]:] for c in chars}

    x, y, _ = load_emnist(chars, subset="test", seed=3)
    assert np.array_equal(x, _expected_load([test[c] for c in chars], 3)[0])
    x, y, _ = load_emnist(chars, subset="train", seed=3)
    assert np.array_equal(x, _expected_load([train[c] for c in chars], 3)[0])

    def cut(images, a, b):
        return images[int(a * len(images)):int(b * len(images))]

    x, y, _ = load_emnist(chars, subset="train", example_range=(0.25, 0.8), seed=3)
    expected = _expected_load([cut(train[c], 0.25, 0.8) for c in chars], 3)
    assert np.array_equal(x, expected[0]) and np.array_equal(y, expected[1])
    low = load_emnist(chars, example_range=(0, 0.6), seed=0)[0]
    high = load_emnist(chars, example_range=(0.6, 1), seed=0)[0]
    assert len(low) + len(high) == sum(sum(counts[c]) for c in chars)  # adjacent ranges partition

    smallest = min(sum(counts[c]) for c in chars)
    x, y, classes = load_emnist(chars, balance=True, include_blank=True, seed=5)
    assert classes == ["B", "C", "D", " "]
    assert np.bincount(y).tolist() == [smallest] * 4
    blank = np.zeros((smallest, 28, 28), np.uint8)
    expected = _expected_load([reference[c][:smallest] for c in chars] + [blank], 5)
    assert np.array_equal(x, expected[0]) and np.array_equal(y, expected[1])
    assert not x[y == 3].any()

    x, y, classes = load_emnist(chars, include_blank=True, n_examples=10, seed=9)
    expected = _expected_load([reference[c] for c in chars] + [blank], 9, n_examples=10)
    assert len(x) == 10 and np.array_equal(x, expected[0]) and np.array_equal(y, expected[1])


def test_seed_fixes_the_order(synthetic):
    prepare_emnist(archive=synthetic.path, verify=False, progress=False)
    first, again, other = (load_emnist("0123", seed=s)[0] for s in (11, 11, 12))
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    fresh = [load_emnist("0123", seed=None)[1] for _ in range(3)]
    assert not all(np.array_equal(fresh[0], labels) for labels in fresh[1:])


def test_load_prepares_through_a_file_mirror(synthetic, tmp_path, monkeypatch, store):
    use_synthetic_resource(monkeypatch, synthetic)
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")  # local mirrors only: the origin is never tried
    (tmp_path / "mirror" / "emnist").mkdir(parents=True)
    (tmp_path / "mirror" / "emnist" / "gzip.zip").write_bytes(synthetic.path.read_bytes())
    x, y, classes = load_emnist("x", seed=0, mirrors=[(tmp_path / "mirror").as_uri()])
    assert np.array_equal(x, _expected_load([reference_classes(synthetic)["x"]], 0)[0])
    fetched = config.raw_dir("emnist") / "gzip.zip"
    assert fetched.read_bytes() == synthetic.path.read_bytes()
    assert store.ls()[0].meta["verified_archive"] is True


def test_prepare_downloads_from_an_http_mirror(synthetic, monkeypatch, http_server, store):  # noqa: F811
    use_synthetic_resource(monkeypatch, synthetic)
    http_server.add("emnist/gzip.zip", synthetic.path.read_bytes())
    [entry] = prepare_emnist(split="digits", mirrors=[http_server.base_url], progress=False)
    assert http_server.requests("emnist/gzip.zip") == 1
    assert entry.meta["n_images"] == 90
    assert prepare_emnist(split="digits", mirrors=[http_server.base_url], progress=False) == [entry]
    assert http_server.requests() == 1  # cache hit: no request at all


def test_a_wrong_hash_download_fails_and_caches_nothing(synthetic, monkeypatch, http_server, store):  # noqa: F811
    """The origin serves a zip of the pinned size whose md5 is not NIST's (damaged in transit)."""
    http_server.add("origin/gzip.zip", synthetic.path.read_bytes())
    resource = dataclasses.replace(emnist.EMNIST_ZIP, url=http_server.url("origin/gzip.zip"), size=synthetic.size)
    monkeypatch.setattr(emnist, "EMNIST_ZIP", resource)
    with pytest.raises(HashMismatchError) as caught:
        prepare_emnist(progress=False)
    assert caught.value.expected == "md5:58c8d27c78d21e728a6bc7b3cc06412e"
    assert caught.value.actual == f"md5:{synthetic.md5}"
    assert f"expected md5:58c8d27c78d21e728a6bc7b3cc06412e, got md5:{synthetic.md5}" in str(caught.value)
    assert_cache_empty(store)
    assert not any(config.raw_dir("emnist").glob("gzip.zip*"))


def test_a_partial_download_is_refused(synthetic, monkeypatch, http_server, store):  # noqa: F811
    """NIST's real size and md5 pinned: a short file is never accepted (the old tool accepted it)."""
    http_server.add("origin/gzip.zip", synthetic.path.read_bytes())
    monkeypatch.setattr(emnist, "EMNIST_ZIP", dataclasses.replace(emnist.EMNIST_ZIP, url=http_server.url("origin/gzip.zip")))
    with pytest.raises(DownloadError, match=rf"announces {synthetic.size} bytes, expected 561753746"):
        load_emnist("0")
    assert_cache_empty(store)


def test_a_wrong_hash_archive_or_mirror_file_fails_and_caches_nothing(synthetic, tmp_path, monkeypatch, store):
    with pytest.raises(HashMismatchError, match=rf"gzip.zip is not https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip: "
                       rf"its hash is md5:{synthetic.md5} \({synthetic.size:,} bytes\), expected "
                       r"md5:58c8d27c78d21e728a6bc7b3cc06412e \(561,753,746 bytes\)\. .*pass verify=False"):
        prepare_emnist(archive=synthetic.path, progress=False)
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    (tmp_path / "emnist").mkdir()
    (tmp_path / "emnist" / "gzip.zip").write_bytes(synthetic.path.read_bytes())
    with pytest.raises(DownloadError, match=rf"{tmp_path}/emnist/gzip.zip: has {synthetic.size} bytes, expected 561753746"):
        load_emnist("0", mirrors=[str(tmp_path)])
    assert_cache_empty(store)


def test_verify_false_uses_a_hand_placed_archive(synthetic, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    placed = config.raw_dir("emnist") / "gzip.zip"
    placed.parent.mkdir(parents=True)
    placed.write_bytes(synthetic.path.read_bytes())
    [entry] = prepare_emnist(split="mnist", verify=False, progress=False)
    assert entry.meta["n_images"] == 70


def test_load_without_download_names_the_fix(store):
    with pytest.raises(FileNotFoundError, match=r"EMNIST letters is not prepared in .*: run prepare_emnist\(split='letters'\) "
                       r"or `prepare-data emnist --split letters`, or pass download=True"):
        load_emnist("A", split="letters", download=False)
    assert_cache_empty(store)


def test_emnist_class_object(synthetic):
    prepare_emnist(archive=synthetic.path, verify=False, progress=False)
    reference, counts = reference_classes(synthetic), class_counts(synthetic)
    ds = EMNIST("byclass", "test", classes="ba", transform=lambda image: image.T)
    assert ds.classes == ["a", "b"]
    expected = np.concatenate([reference[c][: counts[c][0]] for c in "ab"])
    assert len(ds) == len(expected) and np.array_equal(ds.images, expected)
    assert ds.labels.tolist() == [0] * counts["a"][0] + [1] * counts["b"][0]
    image, label = ds[len(ds) - 1]
    assert np.array_equal(image, expected[-1].T) and label == 1
    batches = list(ds.batches(batch_size=4))
    assert sum(len(xb) for xb, _ in batches) == len(ds) and np.array_equal(batches[0][0], expected[:4])
    assert repr(ds) == f"EMNIST(split='byclass', subset='test', shape=(28, 28), {len(ds)} images, 2 classes)"
    assert glyphforge.EMNIST is EMNIST and glyphforge.load_emnist is load_emnist


# -- bad input: clear errors, nothing cached ----------------------------------------
@pytest.mark.parametrize("shape", [(0, 14), (14, -1), (14,), (14.5, 14), (14.0, 14), (True, 3), "14x14"])
def test_bad_shapes(synthetic, shape, store):
    with pytest.raises(ValueError, match=r"shape .* is invalid: give \(height, width\) as two positive integers"):
        prepare_emnist(archive=synthetic.path, verify=False, shapes=[shape], progress=False)
    with pytest.raises(ValueError, match=r"shape .* is invalid"):
        load_emnist("0", shape=shape)
    assert_cache_empty(store)


def test_bad_load_arguments(synthetic, store):
    with pytest.raises(ValueError, match=r"unknown EMNIST byclass classes \['!', 'AB'\]: this split has the classes '0123"):
        load_emnist(["A", "AB", "!"])
    with pytest.raises(ValueError, match=r"unknown EMNIST digits classes \['A'\]"):
        load_emnist("0A", split="digits")
    with pytest.raises(ValueError, match=r"subset 'val' is invalid: use one of all, train, test"):
        load_emnist("0", subset="val")
    with pytest.raises(ValueError, match=r"example_range \(0.5, 0.5\) is invalid: give \(a, b\) with 0 <= a < b <= 1"):
        load_emnist("0", example_range=(0.5, 0.5))
    with pytest.raises(ValueError, match=r"n_examples -1 is invalid"):
        load_emnist("0", n_examples=-1)
    with pytest.raises(ValueError, match=r"classes is empty"):
        load_emnist("")
    assert_cache_empty(store)
    prepare_emnist(split="digits", archive=synthetic.path, verify=False, progress=False)
    with pytest.raises(ValueError, match=r"n_examples=91 is more than the 90 images selected"):
        load_emnist("0123456789", split="digits", n_examples=91)


def _broken(synthetic, tmp_path, member, data):
    return replace_members(synthetic.path, tmp_path / "broken.zip", {member: data})


def _train_images_member(split="byclass"):
    return member_names(split)["train-images"]


def test_truncated_idx_member(synthetic, tmp_path, store):
    member = _train_images_member()
    idx_bytes = gunzip(read_member(synthetic.path, member))
    broken = _broken(synthetic, tmp_path, member, gzip_bytes(idx_bytes[:-1000]))
    with pytest.raises(IDXError) as caught:
        prepare_emnist(archive=broken, verify=False, progress=False)
    assert str(caught.value) == (
        f"{member} in {broken} is truncated: its header declares 250 images of 28x28 (196,000 bytes of data) "
        "but only 195,000 bytes follow. The file is incomplete: get a complete copy"
    )
    assert_cache_empty(store)


def test_cut_gzip_stream_and_corrupt_members(synthetic, tmp_path, store):
    member = _train_images_member()
    stored = read_member(synthetic.path, member)
    with pytest.raises(IDXError, match=rf"^{member} in .* is truncated: its gzip stream ends early"):
        prepare_emnist(archive=_broken(synthetic, tmp_path, member, stored[: len(stored) // 2]), verify=False, progress=False)
    labels = member_names("byclass")["train-labels"]
    with pytest.raises(IDXError, match=rf"^{member} in .* has magic number 2049 \(that of a label file\), expected 2051"):
        prepare_emnist(archive=_broken(synthetic, tmp_path, member, read_member(synthetic.path, labels)), verify=False, progress=False)
    with pytest.raises(IDXError, match=rf"^{member} in .* is not a valid gzip stream"):
        prepare_emnist(archive=_broken(synthetic, tmp_path, member, b"<html>moved</html>"), verify=False, progress=False)
    assert_cache_empty(store)


def test_inconsistent_labels_and_mapping(synthetic, tmp_path, store):
    names = member_names("byclass")
    with pytest.raises(EMNISTFormatError, match=rf"{names['train-images']} holds 250 images but {names['train-labels']} holds 249 labels"):
        prepare_emnist(archive=_broken(synthetic, tmp_path, names["train-labels"], gzip_bytes(idx_labels(np.zeros(249, np.uint8)))),
                       verify=False, progress=False)
    labels = np.zeros(250, np.uint8)
    labels[[3, 9]] = [62, 200]
    with pytest.raises(EMNISTFormatError, match=rf"{names['train-labels']} holds labels \[62, 200\] that .*mapping.txt does not define \(labels 0-61\)"):
        prepare_emnist(archive=_broken(synthetic, tmp_path, names["train-labels"], gzip_bytes(idx_labels(labels))), verify=False, progress=False)
    swapped = "\n".join(f"{i} {ord(c)}" for i, c in enumerate("1023456789")) + "\n"
    with pytest.raises(EMNISTFormatError, match=r"emnist-digits-mapping.txt in .* maps labels 0-9 to '1023456789', but EMNIST digits has labels 0-9 for '0123456789'"):
        prepare_emnist(split="digits", archive=_broken(synthetic, tmp_path, member_names("digits")["mapping"], swapped.encode()),
                       verify=False, progress=False)
    with pytest.raises(ArchiveError, match=r"has no member 'gzip/emnist-byclass-test-labels-idx1-ubyte.gz'"):
        prepare_emnist(archive=_broken(synthetic, tmp_path, names["test-labels"], None), verify=False, progress=False)
    assert_cache_empty(store)


def test_truncated_archive_wrong_image_size_and_missing_archive(synthetic, tmp_path, store):
    partial = tmp_path / "partial.zip"
    partial.write_bytes(synthetic.path.read_bytes()[:-5000])
    with pytest.raises(ArchiveError, match=r"partial.zip is not a complete zip archive"):
        prepare_emnist(archive=partial, verify=False, progress=False)
    member = member_names("digits")["test-images"]
    big = gzip_bytes(idx_header(2051, 30, 32, 32) + bytes(30 * 32 * 32))
    with pytest.raises(IDXError, match=rf"{member} in .* holds 32x32 images, expected 28x28"):
        prepare_emnist(split="digits", archive=_broken(synthetic, tmp_path, member, big), verify=False, progress=False)
    with pytest.raises(FileNotFoundError, match=r"missing.zip does not exist: give the path of a copy of https://"):
        prepare_emnist(archive=tmp_path / "missing.zip", verify=False, progress=False)
    assert_cache_empty(store)


def test_load_reads_only_the_requested_class_files_and_reports_damage(synthetic, store):
    [entry] = prepare_emnist(split="digits", archive=synthetic.path, verify=False, progress=False)
    path = entry.path / "digit_7.pklz"
    size = path.stat().st_size
    os.truncate(path, size - 10)
    with pytest.raises(EMNISTFormatError, match=rf"digit_7.pklz is damaged \({size - 10:,} bytes, its entry's manifest says {size:,} bytes\): "
                       rf"remove the entry with `glyphforge cache rm {entry.key[:12]}`"):
        load_emnist("7", split="digits")
    x, _, _ = load_emnist("6", split="digits", seed=0)  # digit_7.pklz is never opened
    sixes = entry.load("digit_6.pklz")
    assert np.array_equal(x, sixes[np.random.default_rng(0).permutation(len(sixes))])


def test_a_local_archive_path_may_start_with_the_home_folder(synthetic, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "gzip.zip").write_bytes(synthetic.path.read_bytes())
    monkeypatch.setenv("HOME", str(home))
    entry, = prepare_emnist(split="digits", archive="~/gzip.zip", verify=False, progress=False)
    assert entry.meta["verified_archive"] is False and entry.meta["n_images"] == sum(DEFAULT_COUNTS["digits"])
