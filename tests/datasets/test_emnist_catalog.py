"""glyphforge.datasets.emnist's catalog (splits, class names and files) and the selection of _class_files on EMNIST."""
import os

import numpy as np
import pytest

from glyphforge.cache import DamagedEntryFileError, MissingEntryFileError
from glyphforge.datasets.classes import args as _class_args
from glyphforge.datasets.classes.args import check_subset
from glyphforge.datasets.classes.selection import Block, select
from glyphforge.datasets.emnist import DATASET, class_file_name, first_label, load_emnist, prepare_emnist

BYCLASS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


@pytest.fixture(scope="module")
def digits(synthetic_emnist, tmp_path_factory):
    """The digits 28x28 entry in a module-wide data dir (only read). Its classes hold (n_test, n_train):
    1: (3, 5), 3: (4, 10), 0: (2, 3)."""
    [entry] = prepare_emnist(split="digits", archives={"gzip.zip": synthetic_emnist.path}, verify=False, progress=False,
                             data_dir=tmp_path_factory.mktemp("data"))
    return entry


# -- names and arguments ----------------------------------------------------------------
def test_class_file_names_are_distinct_on_case_insensitive_filesystems():
    names = [class_file_name(char) for char in BYCLASS]
    assert len({name.lower() for name in names}) == 62
    assert [class_file_name(c) for c in "0Aa9Zz"] == [
        "digit_0.pklz", "upper_A.pklz", "lower_a.pklz", "digit_9.pklz", "upper_Z.pklz", "lower_z.pklz"
    ]
    for bad in ("?", "AB", "", "é"):
        with pytest.raises(ValueError, match="is not an EMNIST class"):
            class_file_name(bad)


def check_splits(split):
    return _class_args.check_configs(DATASET, split)


def check_classes(classes, split):
    return _class_args.check_classes(DATASET, split, classes)


def test_check_splits_takes_one_name_several_or_none():
    assert check_splits(None) == ("byclass",)
    assert check_splits("letters") == ("letters",)
    assert check_splits(["digits", "letters", "digits"]) == ("digits", "letters")
    assert check_splits(split for split in ("mnist", "balanced")) == ("mnist", "balanced")
    with pytest.raises(ValueError, match=r"^split is empty: give one or more of byclass, bymerge, balanced, letters, "
                                         r"digits, mnist, or None for byclass$"):
        check_splits([])
    with pytest.raises(ValueError, match=r"^unknown EMNIST split 'byclas': use one of byclass, bymerge, balanced, "
                                         r"letters, digits, mnist$"):
        check_splits(["digits", "byclas"])
    assert (first_label("letters"), first_label("byclass"), first_label("mnist")) == (1, 0, 0)


def test_check_classes_and_subset():
    assert check_classes("zA3aA", "byclass") == ["3", "A", "a", "z"]
    assert check_classes(range(3), "digits") == ["0", "1", "2"]
    assert check_classes(None, "letters") == list("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    assert check_classes(None, "bymerge") == sorted("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabdefghnqrt")
    with pytest.raises(ValueError, match=r"unknown EMNIST byclass classes \['!', 'AB'\]: this split has the classes"):
        check_classes(["A", "AB", "!"], "byclass")
    with pytest.raises(ValueError, match=r"unknown EMNIST digits classes \['A'\]"):
        check_classes("0A", "digits")
    with pytest.raises(ValueError, match=r"classes is empty: give at least one class"):
        check_classes("", "byclass")
    assert [check_subset(subset) for subset in ("all", "train", "test")] == ["all", "train", "test"]
    with pytest.raises(ValueError, match=r"^subset 'val' is invalid: use one of all, train, test$"):
        check_subset("val")


# -- selection -------------------------------------------------------------------------------
def test_select_blocks_follow_the_subset_and_example_range(digits):
    def blocks(subset, example_range=None, **flags):
        return list(select(digits, ["1", "3"], subset, example_range, flags.get("balance", False),
                           flags.get("include_blank", False)).blocks)

    assert blocks("all") == [Block("digit_1.pklz", 0, 8), Block("digit_3.pklz", 0, 14)]
    assert blocks("test") == [Block("digit_1.pklz", 0, 3), Block("digit_3.pklz", 0, 4)]
    assert blocks("train") == [Block("digit_1.pklz", 3, 8), Block("digit_3.pklz", 4, 14)]
    # train images [int(a * n), int(b * n)): digit_1 has 5 -> [1, 4), digit_3 has 10 -> [2, 8)
    assert blocks("train", (0.25, 0.8)) == [Block("digit_1.pklz", 4, 7), Block("digit_3.pklz", 6, 12)]
    assert blocks("all", (0, 0.5)) + blocks("all", (0.5, 1)) == [  # adjacent ranges partition each class
        Block("digit_1.pklz", 0, 4), Block("digit_3.pklz", 0, 7),
        Block("digit_1.pklz", 4, 8), Block("digit_3.pklz", 7, 14),
    ]
    assert blocks("train", balance=True) == [Block("digit_1.pklz", 3, 8), Block("digit_3.pklz", 4, 9)]
    assert blocks("test", include_blank=True) == [
        Block("digit_1.pklz", 0, 3), Block("digit_3.pklz", 0, 4), Block(None, 0, 3)
    ]
    assert blocks("all", balance=True, include_blank=True)[-1].size == 8


def test_selection_reads_the_blocks_in_order_and_shuffled(digits, synthetic_emnist):
    ones, threes = digits.load("digit_1.pklz"), digits.load("digit_3.pklz")
    selection = select(digits, ["1", "3"], "train", None, balance=False, include_blank=True)
    expected_x = np.concatenate([ones[3:8], threes[4:14], np.zeros((5, 28, 28), np.uint8)])  # block by block
    expected_y = np.repeat([0, 1, 2], [5, 10, 5])
    assert selection.total == 20 and selection.sizes.tolist() == [5, 10, 5]
    x, y = selection.in_order()  # upstream's order: each image at its place among the train examples, blanks last
    train = synthetic_emnist.splits["digits"].train_labels
    places = np.concatenate([np.flatnonzero(train == 1), np.flatnonzero(train == 3), len(train) + np.arange(5)])
    upstream = np.argsort(places, kind="stable")
    assert x.dtype == np.uint8 and y.dtype == np.int64
    assert np.array_equal(x, expected_x[upstream]) and np.array_equal(y, expected_y[upstream])
    assert not np.array_equal(upstream, np.arange(20))  # the classes interleave upstream: the check can tell
    order = np.random.default_rng(4).permutation(20)
    x, y = selection.shuffled(None, 4)
    assert np.array_equal(x, expected_x[order]) and np.array_equal(y, expected_y[order])
    x, y = selection.shuffled(6, 4)
    assert np.array_equal(x, expected_x[order[:6]]) and np.array_equal(y, expected_y[order[:6]])
    assert selection.shuffled(0, 4)[0].shape == (0, 28, 28)


def test_class_files_are_checked_against_the_manifest(synthetic_emnist):
    [entry] = prepare_emnist(split="digits", archives={"gzip.zip": synthetic_emnist.path}, verify=False, progress=False)
    path = entry.path / "digit_7.pklz"
    size = path.stat().st_size
    os.truncate(path, size - 10)
    with pytest.raises(DamagedEntryFileError, match=rf"^{path} is damaged: {size - 10:,} bytes where the emnist entry "
                                                    rf"{entry.key[:12]}'s manifest records {size:,} \(truncated or "
                                                    r"replaced\): run `glyphforge cache gc` to remove the broken "
                                                    r"entry, then make it again: `prepare-data emnist`"):
        load_emnist("7", split="digits", download=False)  # a load reads the class file through its manifest
    path.unlink()
    with pytest.raises(MissingEntryFileError, match=rf"^{path} is missing from the emnist entry {entry.key[:12]}"):
        load_emnist("57", split="digits", download=False)
    x, _ = select(entry, ["6"], "all", None, balance=False, include_blank=False).in_order()  # digit_7 is never opened
    sixes, n_test = entry.load("digit_6.pklz"), int((synthetic_emnist.splits["digits"].test_labels == 6).sum())
    assert np.array_equal(x, np.concatenate([sixes[n_test:], sixes[:n_test]]))  # the file: test, then train
