"""A stream reads the entry's decoded copy once there is one: the same batches and states, never a damaged row.

Issue 32 ("past the bound when a decoded copy exists"): the stream gathers its batches from the
copy instead of inflating shards, byte for byte the batches it reads from the shards (seeds,
ranks, workers, windows, resume points), with states that resume on either; a copy damaged
before or while it is streamed is detected, dropped with a WARNING, and the stream goes on
from the shards with the same batches. Real builds and real files, the entry read from a path
and from file://, HTTP, S3 (moto) and GCS (emulator) URLs.
"""
from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.builds.decoded_copy import life

from support.copy_backends import built_rows, fresh_build, opener, source  # noqa: F401 (fixtures)
from support.gcs_server import gcs_server  # noqa: F401 (fixture)
from support.optional import NO_TORCH
from support.s3_server import s3_server  # noqa: F401 (fixture)

#: Streams of the 1,030 rows of `RowSpec` (11 shards): short last batches, ranks, workers, windows, epochs.
SETTINGS = [
    {"batch_size": 64, "seed": 0},
    {"batch_size": 50, "seed": 7, "world_size": 3, "rank": 2},
    {"batch_size": 32, "seed": 1, "world_size": 2, "rank": 1, "even_ranks": "drop"},
    {"batch_size": 64, "seed": 2, "shuffle": False, "drop_last": True},
    {"batch_size": 48, "seed": 3, "num_workers": 2, "worker": 1, "epochs": 2},
    {"batch_size": 128, "seed": 4, "window": 2, "epochs": 2},
]


def batches(stream) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """Every batch of one iteration, copied (a stream reuses the arrays of batches no one holds)."""
    return [(images.copy(), {name: array.copy() for name, array in targets.items()}) for images, targets in stream]


def assert_same(found, expected) -> None:
    assert len(found) == len(expected)
    for (images, targets), (want_images, want_targets) in zip(found, expected, strict=True):
        assert images.dtype == want_images.dtype and np.array_equal(images, want_images)
        assert targets.keys() == want_targets.keys()
        assert all(np.array_equal(targets[name], want_targets[name]) for name in targets)


def data_offset(path: Path) -> int:
    with open(path, "rb") as stream:
        np.lib.format.read_magic(stream)
        np.lib.format.read_array_header_1_0(stream)
        return stream.tell()


def flip(copy: Path, row: int, name: str = "images") -> None:
    """Flip the bits of one byte of row ``row`` of the copy's array ``name`` (RowSpec: 12 bytes an image, 8 a row)."""
    path = copy / f"{name}.npy"
    with open(path, "r+b") as stream:
        stream.seek(data_offset(path) + row * (12 if name == "images" else 8) + 1)
        byte = stream.read(1)
        stream.seek(-1, os.SEEK_CUR)
        stream.write(bytes([byte[0] ^ 0xFF]))


def dropped(caplog, copy: Path, name: str) -> bool:
    """Whether the copy is gone and a WARNING named its damaged file ``name``."""
    said = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    return not copy.exists() and any("decoded copy is damaged" in text and f"{copy}/{name}" in text for text in said)


@pytest.mark.parametrize("load_limit", [64 << 20, 0])  # the copy's arrays loaded whole when opened, or mapped
def test_the_stream_of_a_copy_yields_the_batches_of_the_shards(opener, load_limit, monkeypatch, caplog):
    monkeypatch.setattr(life, "LOAD_LIMIT", load_limit)
    caplog.set_level(logging.WARNING)
    shards, reader = opener(random_access="decode"), opener()
    reader.materialize()
    for settings in SETTINGS:
        options = dict(settings)
        size = options.pop("batch_size")
        whole = shards.stream(size, **options)
        for resumed in (0, 3, len(whole) - 1):
            state = whole.state_after(resumed)
            assert_same(batches(reader.stream(size, resume=state, **options)),
                        batches(shards.stream(size, resume=state, **options)))
    assert reader.materialized is not None and not caplog.records  # read from the copy, which was never dropped


@pytest.mark.parametrize("backend", ["path", "file"])
def test_the_stream_of_a_copy_reads_no_shard(built_rows, tmp_path, backend, monkeypatch):  # noqa: F811
    monkeypatch.setattr(life, "LOAD_LIMIT", 0)
    local = fresh_build(built_rows, tmp_path)
    expected = batches(local.stream(64, seed=5, epochs=2))
    local.materialize()
    data = local.path / "arrays.pklz"
    data.write_bytes(bytes(data.stat().st_size))  # every shard unreadable: only the copy can serve the stream
    reader = local.reopened() if backend == "path" else gf.open_built(local.path.as_uri())
    assert_same(batches(reader.stream(64, seed=5, epochs=2)), expected)


@pytest.mark.parametrize("random_access", ["decode", "auto"])  # told not to read one, or none made
def test_a_stream_without_a_copy_to_read_works_out_no_window_for_one(built_rows, tmp_path, random_access,
                                                                      monkeypatch):  # noqa: F811
    from glyphforge.builds.stream.stream import ShardStream

    local = fresh_build(built_rows, tmp_path).reopened(random_access=random_access)
    worked_out = []
    original = ShardStream._window_rows
    monkeypatch.setattr(ShardStream, "_window_rows", lambda *args: worked_out.append(args[2]) or original(*args))
    assert sum(len(images) for images, _ in local.stream(64, seed=5)) == len(local)
    assert worked_out == []  # (the copy's rows of each window its first batch read were worked out, then dropped)


def test_states_taken_on_the_copy_resume_on_the_shards_and_back(opener):
    shards, reader = opener(random_access="decode"), opener()
    reader.materialize()
    expected = batches(shards.stream(40, seed=9, world_size=2, rank=1, epochs=2))
    for first, second in ((reader, shards), (shards, reader)):
        stream = first.stream(40, seed=9, world_size=2, rank=1, epochs=2)
        taken = []
        for batch in stream:
            taken.append((batch[0].copy(), {name: array.copy() for name, array in batch[1].items()}))
            if len(taken) == 17:  # in the epoch's second window; the rest goes on into epoch 2
                break
        state = stream.state_dict()
        other = second.stream(40, seed=9, world_size=2, rank=1, epochs=2)
        going = iter(other)
        for _ in range(17):
            next(going)
        assert other.state_dict() == state == stream.state_after(17) == other.state_after(17)  # counted alike
        rest = batches(second.stream(40, seed=9, world_size=2, rank=1, epochs=2, resume=state))
        assert_same(taken + rest, expected)


@pytest.mark.parametrize(("load_limit", "name"), [(0, "images"), (0, "row"), (64 << 20, "images")])
def test_a_copy_damaged_before_it_is_streamed_is_dropped_and_the_batches_stay_exact(opener, load_limit, name,
                                                                                   monkeypatch, caplog):
    monkeypatch.setattr(life, "LOAD_LIMIT", load_limit)
    caplog.set_level(logging.WARNING)
    expected = batches(opener(random_access="decode").stream(64, seed=0))
    reader = opener()
    copy = reader.materialize()
    flip(copy, int(expected[5][1]["row"][10]), name)  # a row of the sixth batch
    assert_same(batches(opener().stream(64, seed=0)), expected)
    assert dropped(caplog, copy, f"{name}.npy")


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_copy_damaged_while_it_is_streamed_is_dropped_before_a_damaged_row_is_served(opener, damage, monkeypatch,
                                                                                      caplog):
    monkeypatch.setattr(life, "LOAD_LIMIT", 0)  # the copy's arrays mapped, read as the batches need them
    caplog.set_level(logging.WARNING)
    expected = batches(opener(random_access="decode").stream(64, seed=1, world_size=2, rank=1, epochs=2))
    reader = opener()
    copy = reader.materialize()
    stream = reader.stream(64, seed=1, world_size=2, rank=1, epochs=2)
    found = []
    for images, targets in stream:
        found.append((images.copy(), {name: array.copy() for name, array in targets.items()}))
        if len(found) == 3:  # served from the copy so far: now it is damaged under the stream
            if damage == "flip":
                flip(copy, int(expected[6][1]["row"][0]))
            else:
                os.truncate(copy / "images.npy", data_offset(copy / "images.npy") + 600 * 12)
    assert_same(found, expected)
    assert dropped(caplog, copy, "images.npy")
    stream.set_epoch(0)
    assert_same(batches(stream), expected)  # again: from the shards, the copy being gone


def test_a_dataloader_with_workers_streams_the_copy(built_rows, tmp_path):  # noqa: F811
    if importlib.util.find_spec("torch") is None:
        pytest.skip(NO_TORCH)
    from torch.utils.data import DataLoader

    local = fresh_build(built_rows, tmp_path)
    expected = batches(local.stream(64, seed=2))
    local.materialize()
    data = local.path / "arrays.pklz"
    data.write_bytes(bytes(data.stat().st_size))  # only the copy can serve the workers
    loader = DataLoader(local.stream(64, seed=2), batch_size=None, num_workers=2, multiprocessing_context="fork")
    found = [(images.numpy(), {name: np.asarray(array) for name, array in targets.items()})
             for images, targets in loader]
    assert_same(found, expected)
