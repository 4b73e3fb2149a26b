"""glyphforge.datasets.emnist's archive: NIST's layout, its validation, and the entries written from it."""
import gzip
import hashlib

import dill
import numpy as np
import pytest
from PIL import Image

from glyphforge.datasets.emnist import (
    EMNIST_ZIP,
    MAX_MAPPING_BYTES,
    N_IMAGES,
    EMNISTFormatError,
    class_file_name,
    count_cap,
    member_name,
    parse_mapping,
    prepare_emnist,
    read_split,
)
from glyphforge.pipelines.archive import ArchiveError
from glyphforge.pipelines.idx import CountCap, IDXError
from glyphforge.pipelines.resize import resize

from support.synthetic_emnist import (
    ASYMMETRIC_GLYPH,
    CLASSES,
    gunzip,
    gzip_bytes,
    idx_header,
    idx_labels,
    mapping_text,
    member_names,
    read_member,
    replace_members,
    write_synthetic_emnist,
)

SPLITS = ["byclass", "bymerge", "balanced", "letters", "digits", "mnist"]


@pytest.fixture(scope="module")
def byclass(synthetic_emnist, tmp_path_factory):
    """byclass at 28x28, 14x14 and 9x12, in a module-wide data dir (only read)."""
    data_dir = tmp_path_factory.mktemp("data")
    return prepare_emnist(
        archives={"gzip.zip": synthetic_emnist.path}, shapes=[(14, 14), (9, 12)], verify=False, progress=False,
        data_dir=data_dir,
    )


def reference_classes(synthetic_emnist, split="byclass"):
    """{char: upright images of the class, test first then train}, built with plain numpy."""
    data = synthetic_emnist.splits[split]
    result = {}
    for offset, char in enumerate(data.classes):
        label = data.first_label + offset
        result[char] = np.concatenate(
            [data.test_images[data.test_labels == label], data.train_images[data.train_labels == label]]
        )
    return result


def class_counts(synthetic_emnist, split="byclass"):
    """{char: (n_test, n_train)} as written."""
    data = synthetic_emnist.splits[split]
    return {
        char: (int((data.test_labels == data.first_label + i).sum()),
               int((data.train_labels == data.first_label + i).sum()))
        for i, char in enumerate(data.classes)
    }


def broken(synthetic_emnist, tmp_path, member, data):
    """A copy of the archive with one member replaced (None: left out)."""
    return replace_members(synthetic_emnist.path, tmp_path / "broken.zip", {member: data})


# -- names and the mapping ------------------------------------------------------------
def test_member_names_are_nists():
    for split in SPLITS:
        assert {part: member_name(split, part) for part in member_names(split)} == member_names(split)
    assert member_name("letters", "test-labels") == "gzip/emnist-letters-test-labels-idx1-ubyte.gz"
    assert EMNIST_ZIP.url == "https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip"
    assert (EMNIST_ZIP.hash, EMNIST_ZIP.size) == ("md5:58c8d27c78d21e728a6bc7b3cc06412e", 561_753_746)


def test_parse_mapping_takes_the_first_code_and_ignores_extra_columns():
    assert parse_mapping("0 48\n1 49 50 51\n\n2 65\r\n", "m") == {0: "0", 1: "1", 2: "A"}
    with pytest.raises(EMNISTFormatError, match=r"^m line 2 is '7': expected 'label ascii_code \[more codes\]'"):
        parse_mapping("0 48\n7\n", "m")
    with pytest.raises(EMNISTFormatError, match=r"^m line 3 repeats label 0"):
        parse_mapping("0 48\n1 49\n0 50\n", "m")


def test_parse_mapping_quotes_long_lines_cut_short():
    with pytest.raises(EMNISTFormatError) as caught:
        parse_mapping("0 48\n" + "9" * 50_000 + "\n", "m")
    assert str(caught.value) == (
        f"m line 2 is '{'9' * 199}... (50,000 characters in all): expected 'label ascii_code [more codes]' "
        "(integers separated by spaces); the file is corrupt"
    )


def test_caps_follow_nists_counts():
    assert {split: sum(counts) for split, counts in N_IMAGES.items()} == {
        "byclass": 814_255, "bymerge": 814_255, "balanced": 131_600, "letters": 145_600, "digits": 280_000,
        "mnist": 70_000,
    }
    assert count_cap("byclass", "train").limit == 872_415 and count_cap("digits", "test").limit == 50_000
    assert count_cap("mnist", "test") == CountCap(12_500, (
        "NIST's EMNIST mnist has 10,000 test images, and a custom archive (verify=False, --no-verify) may hold at "
        "most 1.25x that. The header is corrupt or this is not an EMNIST archive: use NIST's gzip.zip (prepare-data "
        "emnist without --emnist-archive downloads it)"
    ))
    assert MAX_MAPPING_BYTES == 64 << 10 and len(mapping_text("byclass", extra_columns=True)) < 1024


def test_members_beyond_their_caps(synthetic_emnist, tmp_path):
    names = member_names("mnist")
    mapping = mapping_text("mnist") + "#" * (MAX_MAPPING_BYTES + 1 - len(mapping_text("mnist")))
    with pytest.raises(ArchiveError, match=rf"member '{names['mapping']}' declares 65,537 uncompressed bytes, more "
                                           r"than the 65,536 bytes such a member may hold"):
        read_split(broken(synthetic_emnist, tmp_path, names["mapping"], mapping.encode()), "mnist", progress=False)
    labels = gzip_bytes(idx_labels(np.zeros(12_501, np.uint8)))
    with pytest.raises(IDXError, match=rf"^{names['test-labels']} in .* declares 12,501 labels \(12,501 bytes\), more "
                                       r"than the 12,500 it may hold: NIST's EMNIST mnist has 10,000 test images"):
        read_split(broken(synthetic_emnist, tmp_path, names["test-labels"], labels), "mnist", progress=False)
    images = gzip_bytes(idx_header(2051, 12_501, 28, 28))  # refused from the header: no data needed
    with pytest.raises(IDXError, match=rf"^{names['test-images']} in .* declares 12,501 images of 28x28"):
        read_split(broken(synthetic_emnist, tmp_path, names["test-images"], images), "mnist", progress=False)


def test_mapping_files_with_extra_columns(tmp_path):
    archive = write_synthetic_emnist(tmp_path / "gzip.zip", extra_mapping_columns=True)
    assert read_member(archive.path, "gzip/emnist-letters-mapping.txt").startswith(b"1 65 97 97\n")
    parsed = read_split(archive.path, "letters", progress=False)  # the mapping is checked against CLASSES
    assert np.unique(parsed.test.labels).tolist() == list(range(len(CLASSES["letters"])))


# -- reading ---------------------------------------------------------------------------
@pytest.mark.parametrize("split", SPLITS)
def test_read_split_returns_the_archive_as_stored(synthetic_emnist, split):
    parsed, data = read_split(synthetic_emnist.path, split, progress=False), synthetic_emnist.splits[split]
    assert parsed.transposed
    for subset in ("test", "train"):
        got, labels = getattr(parsed, subset), getattr(data, f"{subset}_labels")
        assert np.array_equal(got.labels, labels.astype(np.intp) - data.first_label)  # class indices from 0
        assert np.array_equal(got.images, getattr(data, f"{subset}_images").transpose(0, 2, 1))  # still transposed


def test_truncated_idx_member(synthetic_emnist, tmp_path):
    member = member_names("byclass")["train-images"]
    short = gzip_bytes(gunzip(read_member(synthetic_emnist.path, member))[:-1000])
    path = broken(synthetic_emnist, tmp_path, member, short)
    with pytest.raises(IDXError) as caught:
        read_split(path, "byclass", progress=False)
    assert str(caught.value) == (
        f"{member} in {path} is truncated: its header declares 250 images of 28x28 (196,000 bytes of data) "
        "but only 195,000 bytes follow. The file is incomplete: get a complete copy"
    )


def test_cut_gzip_stream_and_corrupt_members(synthetic_emnist, tmp_path):
    member, labels = member_names("byclass")["train-images"], member_names("byclass")["train-labels"]
    stored = read_member(synthetic_emnist.path, member)
    cases = [
        (stored[: len(stored) // 2], rf"^{member} in .* is truncated: its gzip stream ends early"),
        (read_member(synthetic_emnist.path, labels),
         rf"^{member} in .* has magic number 2049 \(that of a label file\), expected 2051"),
        (b"<html>moved</html>", rf"^{member} in .* is not a valid gzip stream"),
    ]
    for data, message in cases:
        with pytest.raises(IDXError, match=message):
            read_split(broken(synthetic_emnist, tmp_path, member, data), "byclass", progress=False)


def test_inconsistent_labels_and_mapping(synthetic_emnist, tmp_path):
    names = member_names("byclass")
    short = gzip_bytes(idx_labels(np.zeros(249, np.uint8)))
    with pytest.raises(EMNISTFormatError, match=rf"{names['train-images']} holds 250 images but "
                                                rf"{names['train-labels']} holds 249 labels; the archive is corrupt"):
        read_split(broken(synthetic_emnist, tmp_path, names["train-labels"], short), "byclass", progress=False)
    labels = np.zeros(250, np.uint8)
    labels[[3, 9]] = [62, 200]
    with pytest.raises(EMNISTFormatError, match=rf"{names['train-labels']} holds labels \[62, 200\] that "
                                                r".*mapping.txt does not define \(labels 0-61\)"):
        read_split(broken(synthetic_emnist, tmp_path, names["train-labels"], gzip_bytes(idx_labels(labels))), "byclass",
                   progress=False)
    swapped = "\n".join(f"{i} {ord(c)}" for i, c in enumerate("1023456789")) + "\n"
    with pytest.raises(EMNISTFormatError, match=r"emnist-digits-mapping.txt in .* maps labels 0-9 to '1023456789', "
                                                r"but EMNIST digits has labels 0-9 for '0123456789'"):
        read_split(broken(synthetic_emnist, tmp_path, member_names("digits")["mapping"], swapped.encode()), "digits",
                   progress=False)
    with pytest.raises(ArchiveError, match=r"has no member 'gzip/emnist-byclass-test-labels-idx1-ubyte.gz'"):
        read_split(broken(synthetic_emnist, tmp_path, names["test-labels"], None), "byclass", progress=False)


def test_truncated_archive_and_wrong_image_size(synthetic_emnist, tmp_path):
    partial = tmp_path / "partial.zip"
    partial.write_bytes(synthetic_emnist.path.read_bytes()[:-5000])
    with pytest.raises(ArchiveError, match=r"partial.zip is not a complete zip archive"):
        read_split(partial, "byclass", progress=False)
    member = member_names("digits")["test-images"]
    big = gzip_bytes(idx_header(2051, 30, 32, 32) + bytes(30 * 32 * 32))
    with pytest.raises(IDXError, match=rf"{member} in .* holds 32x32 images, expected 28x28"):
        read_split(broken(synthetic_emnist, tmp_path, member, big), "digits", progress=False)


# -- the 28x28 entry ---------------------------------------------------------------------
def test_conversion_equals_numpy_reference(synthetic_emnist, byclass):
    entry = byclass[0]
    reference, counts = reference_classes(synthetic_emnist), class_counts(synthetic_emnist)
    own = f"sha256:{hashlib.sha256(synthetic_emnist.path.read_bytes()).hexdigest()}"  # an own copy's key
    assert entry.kind == "emnist" and entry.params == {"split": "byclass", "shape": [28, 28], "source": own,
                                                       "layout": 2}
    assert entry.files == sorted([*(class_file_name(char) for char in CLASSES["byclass"]), "upstream_labels.pklz"])
    data = synthetic_emnist.splits["byclass"]
    assert np.array_equal(entry.load("upstream_labels.pklz"), np.concatenate([data.test_labels, data.train_labels]))
    assert [record["name"] for record in entry.meta["classes"]] == list(CLASSES["byclass"])
    assert (entry.meta["n_images"], entry.meta["n_test"], entry.meta["n_train"]) == (380, 130, 250)
    assert entry.meta["verified"] is False
    for label, record in enumerate(entry.meta["classes"]):
        char = record["name"]
        assert record == {"name": char, "label": label, "file": class_file_name(char),
                          "n_test": counts[char][0], "n_train": counts[char][1]}
        images = entry.load(record["file"])
        assert images.dtype == np.uint8 and images.shape == (sum(counts[char]), 28, 28)
        assert np.array_equal(images, reference[char])
    assert len({record["n_test"] + record["n_train"] for record in entry.meta["classes"]}) > 1  # uneven classes


def test_images_come_out_upright(synthetic_emnist, byclass):
    data = synthetic_emnist.splits["byclass"]
    char = CLASSES["byclass"][data.test_labels[0]]  # the first test image is the glyph
    first = byclass[0].load(class_file_name(char))[0]
    assert np.array_equal(first, ASYMMETRIC_GLYPH)
    assert (first[3:6, 5:22] == 255).all()  # the bar along the top
    assert (first[3:25, 5:8] == 255).all()  # the bar down the left side
    assert first[4, 20] == 255 and first[20, 4] == 0  # transposed, these two would swap
    assert first.sum() == 255 * (3 * 17 + 19 * 3)


def test_class_files_read_with_plain_gzip_and_dill(synthetic_emnist, byclass):
    """The old tool's format: a standard gzip of a dill pickle of one uint8 array."""
    with gzip.open(byclass[0].path / "lower_a.pklz", "rb") as stream:
        images = dill.load(stream)
    assert np.array_equal(images, reference_classes(synthetic_emnist)["a"])


@pytest.mark.parametrize("split", ["bymerge", "balanced", "letters", "digits", "mnist"])
def test_every_split_converts_with_its_mapping(synthetic_emnist, split):
    [entry] = prepare_emnist(split=split, archives={"gzip.zip": synthetic_emnist.path}, verify=False, progress=False)
    first_label = 1 if split == "letters" else 0
    records = entry.meta["classes"]
    assert [(r["name"], r["label"]) for r in records] == [(c, first_label + i) for i, c in enumerate(CLASSES[split])]
    reference = reference_classes(synthetic_emnist, split)
    for record in records:
        assert np.array_equal(entry.load(record["file"]), reference[record["name"]])
    n_train, n_test = len(synthetic_emnist.splits[split].train_labels), len(synthetic_emnist.splits[split].test_labels)
    assert (entry.meta["n_train"], entry.meta["n_test"], entry.meta["n_images"]) == (n_train, n_test, n_train + n_test)


# -- resized entries -----------------------------------------------------------------------
def test_resized_entries_equal_the_kernel_and_pillow(byclass):
    base, small, odd = byclass
    assert small.params == {**base.params, "shape": [14, 14], "resize": "box"}
    assert small.meta == {**base.meta, "shape": [14, 14], "resized_from": base.key, "resize": "box"}
    for entry, (height, width) in ((small, (14, 14)), (odd, (9, 12))):
        assert entry.files == base.files
        for record in base.meta["classes"]:
            native, resized = base.load(record["file"]), entry.load(record["file"])
            assert resized.shape == (len(native), height, width)
            assert np.array_equal(resized, resize(native, (height, width), method="box", batch=True))
        native = base.load("upper_Q.pklz")
        pillow = np.stack([np.asarray(Image.fromarray(image).resize((width, height), Image.BOX)) for image in native])
        assert np.array_equal(entry.load("upper_Q.pklz"), pillow)  # every image, not just the first 10


def test_progress_bars(synthetic_emnist, capsys):
    prepare_emnist(split="digits", archives={"gzip.zip": synthetic_emnist.path}, verify=False, shapes=[(7, 7)])
    err = capsys.readouterr().err
    assert "EMNIST digits: reading gzip.zip" in err and "4/4" in err
    assert "EMNIST digits: writing 28x28" in err and "EMNIST digits: writing 7x7" in err and "90/90" in err
