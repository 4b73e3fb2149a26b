"""A decoded copy is part of its entry's integrity model (#30, rows 1 and 12).

No byte of a damaged copy reaches a caller: every read path (``ds[i]``, ``take``, ``ds.arrays``,
a DataLoader) returns the exact rows, the copy is dropped with a WARNING naming its file, and
``glyphforge cache verify`` (its entry point, in this process) reports it. A ``<key>.decoded`` that is not
glyphforge's (a symbolic link) is never read or touched. Real builds, real files damaged on
disk, the entry read from a path and from file://, HTTP, S3 (moto) and GCS (emulator) URLs.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from glyphforge.builds import BuiltDataset
from glyphforge.builds.decoded_copy import life
from glyphforge.builds.decoded_copy.life import ForeignCopyError, decoded_bytes, decoded_dir, sums_file
from glyphforge.builds.decoded_copy.rows import row_sums
from glyphforge.cache.companion_record import verify_record
from glyphforge.errors import StorageError

from support.cli import run_here
from support.copy_backends import built_rows, fresh_build, opener, source  # noqa: F401 (fixtures)
from support.gcs_server import gcs_server  # noqa: F401 (fixture)
from support.optional import NO_TORCH
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import RowSpec

ROWS = 1030
IMAGE_ROW, LABEL_ROW = 700, 123  # where the attack lands: 50 bytes of images from row 700 on, the label of row 123


def data_offset(path: Path) -> int:
    with open(path, "rb") as stream:
        np.lib.format.read_magic(stream)
        np.lib.format.read_array_header_1_0(stream)
        return stream.tell()


def attack(copy: Path) -> None:
    """The issue's attack: 50 bytes of ``images.npy`` overwritten, one row of the labels (``row.npy``) changed."""
    images = copy / "images.npy"
    with open(images, "r+b") as stream:
        stream.seek(data_offset(images) + IMAGE_ROW * 12)  # RowSpec's images: 3x4 bytes a row
        stream.write(b"\xfe" * 50)
    labels = copy / "row.npy"
    with open(labels, "r+b") as stream:
        stream.seek(data_offset(labels) + LABEL_ROW * 8)
        stream.write(np.int64(5).tobytes())


def expected() -> dict[str, np.ndarray]:
    """RowSpec's arrays, as its spec makes them."""
    spec = RowSpec()
    shards = [spec.make_shard(index, np.random.default_rng(), min(100, ROWS - index * 100)) for index in range(11)]
    return {name: np.concatenate([shard[name] for shard in shards]) for name in shards[0]}


def dropped(caplog, copy: Path) -> bool:
    """Whether the copy is gone and a WARNING said which of its files was damaged."""
    said = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    named = any("decoded copy is damaged" in text and (f"{copy}/images.npy" in text or f"{copy}/row.npy" in text)
                and "removed it" in text for text in said)
    return named and not copy.exists()


def read_getitem(reader: BuiltDataset, arrays: dict[str, np.ndarray]) -> None:
    for i in [IMAGE_ROW - 1, *range(IMAGE_ROW, IMAGE_ROW + 6), LABEL_ROW, 5, ROWS - 1]:
        image, targets = reader[i]
        assert np.array_equal(image, arrays["images"][i]) and targets["row"] == i and targets["name"] == f"r{i}"


def read_take(reader: BuiltDataset, arrays: dict[str, np.ndarray]) -> None:
    order = np.random.default_rng(1).permutation(ROWS)
    for start in range(0, ROWS, 256):
        taken = reader.take(order[start:start + 256])
        assert all(np.array_equal(taken[name], arrays[name][order[start:start + 256]]) for name in arrays)


def read_arrays(reader: BuiltDataset, arrays: dict[str, np.ndarray]) -> None:
    read = reader.arrays
    assert all(np.array_equal(read[name], arrays[name]) for name in arrays)


def read_dataloader(reader: BuiltDataset, arrays: dict[str, np.ndarray], workers: int = 0) -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip(NO_TORCH)
    from torch.utils.data import DataLoader

    seen = []
    loader = DataLoader(reader, shuffle=True, batch_size=64, num_workers=workers,
                        multiprocessing_context="fork" if workers else None)
    for images, targets in loader:
        rows = targets["row"].numpy()
        assert np.array_equal(images.numpy(), arrays["images"][rows])
        seen.extend(rows.tolist())
    assert sorted(seen) == list(range(ROWS))


def read_stream(reader: BuiltDataset, arrays: dict[str, np.ndarray]) -> None:
    seen = []
    for images, targets in reader.stream(64, seed=3):
        assert np.array_equal(images, arrays["images"][targets["row"]])
        seen.extend(targets["row"].tolist())
    assert sorted(seen) == list(range(ROWS))


READS = {"getitem": read_getitem, "take": read_take, "arrays": read_arrays, "dataloader": read_dataloader,
         "stream": read_stream}


@pytest.mark.parametrize("read", list(READS))
@pytest.mark.parametrize("load_limit", [64 << 20, 0])  # the arrays loaded whole when opened, or read row by row
def test_a_damaged_copy_is_never_served_and_is_dropped(opener, read, load_limit, monkeypatch, caplog):
    monkeypatch.setattr(life, "LOAD_LIMIT", load_limit)
    caplog.set_level(logging.WARNING)
    arrays = expected()
    copy = opener().materialize()
    attack(copy)
    READS[read](opener(), arrays)  # a reader opened after the damage
    assert dropped(caplog, copy)
    again = opener()
    assert again.materialize() == copy  # a new copy, whole
    READS[read](again, arrays)


def swap_pair(copy: Path) -> None:
    """#42 row 1: ``images.npy`` and ``images.crc32.npy`` replaced together by another entry's of the same shape (other
    images, with their own row checksums): each file's size is the recorded one, each row matches its checksum."""
    theirs = (np.load(copy / "images.npy").astype(np.int64) + 7) % 251
    np.save(copy / "images.npy", theirs.astype(np.uint8))
    np.save(copy / sums_file("images"), row_sums(theirs.astype(np.uint8).reshape(ROWS, -1)))


@pytest.mark.parametrize("read", list(READS))
def test_an_array_swapped_with_its_checksums_is_refused_naming_them(opener, read, monkeypatch, caplog):
    monkeypatch.setattr(life, "LOAD_LIMIT", 0)  # the images read row by row, against their checksum file
    caplog.set_level(logging.WARNING)
    arrays = expected()
    copy = opener().materialize()
    swap_pair(copy)
    assert (copy / "images.npy").stat().st_size == verify_size(copy, "images.npy")  # what opening checks holds
    READS[read](opener(), arrays)  # no row of the other entry's served under this one's labels
    said = [record.getMessage() for record in caplog.records if "decoded copy is damaged" in record.getMessage()]
    assert said and f"{copy / sums_file('images')} is not the row checksum file the copy's record holds" in said[0]
    assert "removed it" in said[0] and not copy.exists()


def verify_size(copy: Path, name: str) -> int:
    return int(json.loads((copy / "checks.json").read_text())["files"][name]["size"])


@pytest.mark.parametrize("read", ["getitem", "take", "arrays"])
def test_a_copy_damaged_while_it_is_read_is_dropped_before_a_damaged_row_is_served(built_rows, tmp_path, read,
                                                                                  monkeypatch, caplog):
    monkeypatch.setattr(life, "LOAD_LIMIT", 0)  # the images of a large copy: read row by row
    caplog.set_level(logging.WARNING)
    arrays = expected()
    reader = fresh_build(built_rows, tmp_path).reopened(random_access="materialize")
    assert reader[0][1]["row"] == 0 and reader.materialized is not None  # reading from the copy
    copy = reader.materialized
    attack(copy)
    READS[read](reader, arrays)
    assert dropped(caplog, copy) and reader.materialized is None
    READS[read](reader, arrays)  # from the shards, without a copy made again by itself


def test_a_copy_loaded_whole_serves_what_was_checked_when_it_was_opened(built_rows, tmp_path):
    arrays = expected()
    reader = fresh_build(built_rows, tmp_path).reopened(random_access="materialize")
    copy = Path(reader.materialize())
    attack(copy)  # after its small arrays were read and checked: this reader serves those
    read_getitem(reader, arrays)
    read_take(reader, arrays)


def test_dataloader_workers_never_serve_a_damaged_copy(built_rows, tmp_path, monkeypatch):
    monkeypatch.setattr(life, "LOAD_LIMIT", 0)  # forked workers inherit it
    dataset = fresh_build(built_rows, tmp_path)
    copy = dataset.reopened().materialize()
    attack(copy)
    read_dataloader(dataset.reopened(), expected(), workers=2)
    assert not copy.exists() or verify_record(copy, dataset.key) == []  # dropped (and maybe made again by a worker)


@pytest.mark.parametrize("name", ["images.npy", "row.npy", "images.crc32.npy", "checks.json"])
def test_a_truncated_copy_file_is_found_when_the_copy_is_opened(built_rows, tmp_path, name, monkeypatch, caplog):
    monkeypatch.setattr(life, "LOAD_LIMIT", 0)
    caplog.set_level(logging.WARNING)
    arrays = expected()
    dataset = fresh_build(built_rows, tmp_path)
    copy = dataset.reopened().materialize()
    os.truncate(copy / name, (copy / name).stat().st_size - 7)
    read_take(dataset.reopened(), arrays)
    said = [record.getMessage() for record in caplog.records if "decoded copy is damaged" in record.getMessage()]
    assert len(said) == 1 and f"{copy}/" in said[0] and "removed it" in said[0] and not copy.exists()


def test_a_copy_file_truncated_while_it_is_read_is_dropped(built_rows, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(life, "LOAD_LIMIT", 0)
    caplog.set_level(logging.WARNING)
    arrays = expected()
    reader = fresh_build(built_rows, tmp_path).reopened(random_access="materialize")
    copy = reader.materialize()
    os.truncate(copy / "images.npy", data_offset(copy / "images.npy") + 500 * 12)  # rows from 500 on are gone
    read_take(reader, arrays)
    said = [record.getMessage() for record in caplog.records if "decoded copy is damaged" in record.getMessage()]
    assert len(said) == 1 and f"{copy}/images.npy ends before row" in said[0] and not copy.exists()


#: #42 row 11: every path that could remove a ``<key>.decoded`` without its record (not glyphforge's), as users take it.
def _read_with(read: str) -> Callable[[BuiltDataset], None]:
    return lambda dataset: READS[read](dataset.reopened(), expected())


def _materialize(dataset: BuiltDataset) -> None:
    with pytest.raises(ForeignCopyError, match=r"is a folder without checks.json .*not glyphforge's decoded copy"):
        dataset.reopened().materialize()


def _random_access_materialize(dataset: BuiltDataset) -> None:
    with pytest.raises(ForeignCopyError, match="a folder without checks.json"):
        dataset.reopened(random_access="materialize")[3]


def _command(*words: str) -> Callable[[BuiltDataset], None]:
    def run(dataset: BuiltDataset) -> None:
        key = [dataset.key[:12]] if words == ("rm",) else []
        done = run_here("glyphforge", "cache", *words, *key, "--data-dir", dataset.path.parents[2])
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return run


UNRECORDED_PATHS = {**{read: _read_with(read) for read in READS}, "materialize()": _materialize,
                    "random_access=materialize": _random_access_materialize, "cache gc": _command("gc"),
                    "cache verify": _command("verify"), "cache rm": _command("rm")}


@pytest.mark.parametrize("path", list(UNRECORDED_PATHS))
def test_a_decoded_folder_without_its_record_is_not_glyphforges_and_no_path_removes_it(built_rows, tmp_path, path,
                                                                                         caplog):
    caplog.set_level(logging.WARNING)
    dataset = fresh_build(built_rows, tmp_path)
    folder = decoded_dir(dataset.path)
    folder.mkdir()
    (folder / "notes.txt").write_text("not glyphforge's")
    UNRECORDED_PATHS[path](dataset)
    assert sorted(item.name for item in folder.iterdir()) == ["notes.txt"]
    assert (folder / "notes.txt").read_text() == "not glyphforge's"
    said = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert all(f"{folder} is a folder without checks.json" in text for text in said), said


def test_cache_verify_reports_a_damaged_copy_and_what_to_do(built_rows, tmp_path):
    data = tmp_path / "data"
    copy = fresh_build(built_rows, tmp_path).reopened().materialize()
    whole = run_here("glyphforge", "cache", "verify", "--data-dir", data)
    assert whole.returncode == 0 and "all 1 entry" in whole.stdout, whole.stderr
    attack(copy)
    damaged = run_here("glyphforge", "cache", "verify", "--data-dir", data)
    assert damaged.returncode == 1 and "Traceback" not in damaged.stderr
    for name in ("images.npy", "row.npy"):
        assert f"CORRUPT {copy / name}: sha256 differs from the decoded copy's record" in damaged.stdout
    assert "the entry itself is intact" in damaged.stdout and f"rm -r '{copy}'" in damaged.stdout
    assert "2 problem(s) found" in damaged.stderr and "a damaged decoded copy" in damaged.stderr


def test_cache_verify_reports_a_truncated_copy(built_rows, tmp_path):
    data = tmp_path / "data"
    copy = fresh_build(built_rows, tmp_path).reopened().materialize()
    os.truncate(copy / "name.npy", 100)
    damaged = run_here("glyphforge", "cache", "verify", "--data-dir", data)
    assert damaged.returncode == 1 and "Traceback" not in damaged.stderr
    assert f"CORRUPT {copy / 'name.npy'}: is 100 bytes where the copy's record says" in damaged.stdout


# -- row 12: <key>.decoded that is not glyphforge's ----------------------------------------------------------
@pytest.fixture
def linked(built_rows, tmp_path) -> tuple[BuiltDataset, Path, Path]:
    """A build whose ``<key>.decoded`` is a symbolic link to a directory of someone else's: (dataset, link, target)."""
    dataset = fresh_build(built_rows, tmp_path)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("not glyphforge's")
    link = decoded_dir(dataset.path)
    link.symlink_to(theirs, target_is_directory=True)
    return dataset, link, theirs


def untouched(theirs: Path) -> bool:
    return sorted(path.name for path in theirs.iterdir()) == ["notes.txt"] and \
        (theirs / "notes.txt").read_text() == "not glyphforge's"


def test_materialize_over_a_symlink_says_it_is_not_glyphforges_and_touches_nothing(linked):
    dataset, link, theirs = linked
    with pytest.raises(ForeignCopyError) as raised:
        dataset.reopened().materialize()
    message = str(raised.value)
    assert isinstance(raised.value, StorageError) and "\n" not in message
    assert f"{link} is a symbolic link to {theirs}, not glyphforge's decoded copy of test-rows" in message
    assert "Move it away or remove it" in message and "ds.materialize()" in message
    assert link.is_symlink() and untouched(theirs)
    with pytest.raises(ForeignCopyError):
        dataset.reopened(random_access="materialize")[3]
    assert decoded_bytes(dataset.entry.path) == 0  # what it points to is not counted as the entry's copy (cache ls, gc)


def test_a_symlink_to_a_whole_copy_is_not_read_either(built_rows, tmp_path):
    dataset = fresh_build(built_rows, tmp_path)
    made = dataset.reopened().materialize()
    elsewhere = made.rename(tmp_path / "elsewhere.decoded")  # a whole copy, of this very entry, but not in place
    made.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ForeignCopyError):
        dataset.reopened().materialize()
    assert dataset.reopened()[3][1]["row"] == 3 and made.is_symlink() and (elsewhere / "checks.json").is_file()


def test_auto_over_a_symlink_warns_once_and_keeps_decoding(linked, caplog):
    dataset, link, theirs = linked
    caplog.set_level(logging.WARNING)
    reader = dataset.reopened()
    read_take(reader, expected())  # thrashes the LRU: "auto" wants a copy
    read_getitem(reader, expected())
    said = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(said) == 1 and f"{link} is a symbolic link to {theirs}" in said[0]
    assert reader.materialized is None and link.is_symlink() and untouched(theirs)


def test_cache_verify_names_a_symlinked_copy(linked):
    dataset, link, theirs = linked
    done = run_here("glyphforge", "cache", "verify", "--data-dir", dataset.path.parents[2])
    assert done.returncode == 0 and "Traceback" not in done.stderr  # glyphforge's own files are whole
    assert f"FOREIGN {link}: is a symbolic link to {theirs}, not glyphforge's decoded copy" in done.stdout
    assert untouched(theirs)
