"""Random access at stream speed (#24): the decoded copy, made once per machine, read by every reader.

Real built datasets on a real file system, real processes (a second reader, two makers at
once, a maker killed with SIGKILL, DataLoader workers) and a real full tmpfs (root only:
skipped with the reason elsewhere).
"""
from __future__ import annotations

import gc
import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from glyphforge.builds import BuiltDataset, build
from glyphforge.builds.decoded_copy.life import (
    NotEnoughSpaceError,
    copy_nbytes,
    decoded_bytes,
    decoded_dir,
    decoded_staging_prefix,
)
from glyphforge.cache import CacheStore
from glyphforge.cache.pklz import DamagedPklzError
from glyphforge.textfmt import human_size

from support.cli import run_here
from support.mounts import tmpfs
from support.optional import NO_TORCH
from support.specs import RowSpec, WideRowSpec
from support.waits import wait_until

ROWS = 1030  # RowSpec: 11 shards of 100 (the last of 30), more than the LRU of 4 holds


@pytest.fixture
def rows(tmp_path) -> BuiltDataset:
    """A fresh build of `RowSpec` (no decoded copy yet) in this test's own data dir."""
    return build(RowSpec(), data_dir=tmp_path / "data", progress=False)


def expected(dataset: BuiltDataset) -> dict[str, np.ndarray]:
    """Every array, decoded from the shards (never from a copy)."""
    return dataset.reopened(random_access="decode").arrays


def copies(dataset: BuiltDataset) -> list[str]:
    """The decoded copies and their staging directories beside the entry."""
    return sorted(path.name for path in dataset.path.parent.iterdir() if ".decoded" in path.name and
                  not path.name.endswith((".lock", ".holder")))


def python(code: str, *args: str) -> subprocess.Popen[str]:
    """Start ``code`` in a new interpreter (with ``tests`` importable), output piped."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])


def finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return out


@pytest.mark.parametrize("mode", ["auto", "decode", "materialize"])
def test_random_order_reads_equal_the_arrays_and_the_stream(rows, mode):
    arrays = expected(rows)
    reader = rows.reopened(random_access=mode)
    order = np.random.default_rng(7).permutation(ROWS)
    for i in order[:300].tolist():
        image, targets = reader[i]
        assert np.array_equal(image, arrays["images"][i]) and targets["row"] == i and targets["name"] == f"r{i}"
    for start in range(0, ROWS, 256):
        batch = order[start:start + 256]
        taken = reader.take(batch)
        assert all(np.array_equal(taken[name], array[batch]) for name, array in arrays.items())
    for images, targets in rows.stream(64, shuffle=True, seed=1):
        taken = reader.take(targets["row"])
        assert np.array_equal(taken["images"], images) and np.array_equal(taken["name"], targets["name"])
    image, targets = reader[-1]
    assert targets["row"] == ROWS - 1 and np.array_equal(image, arrays["images"][-1])
    with pytest.raises(IndexError, match=r"example indices must be in -1030\.\.1029"):
        reader[ROWS]
    made = decoded_dir(rows.path)
    assert reader.materialized == (None if mode == "decode" else made)
    assert copies(rows) == ([] if mode == "decode" else [made.name])


def test_auto_makes_the_copy_once_the_lru_thrashes_and_says_so_once(rows, caplog):
    reader = rows.reopened()
    caplog.set_level(logging.INFO, logger="glyphforge.builds")
    for i in (5, 105, 205, 305, 405):  # five shards: the LRU of 4 dropped shard 0, nothing decoded twice
        reader[i]
    assert reader.materialized is None and copies(rows) == []
    reader[6]  # shard 0 again: thrashing; decoded once more, then the next read makes the copy
    assert reader.materialized is None
    assert reader[999][1]["row"] == 999 and reader.materialized == decoded_dir(rows.path)
    reader.take(np.arange(ROWS)[::-1])
    said = [record for record in caplog.records if "decoded copy" in record.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING  # announced (#30): its size and where
    assert "test-rows" in said[0].getMessage() and "LRU of 4 decoded shards of 11" in said[0].getMessage()
    assert f"{human_size(copy_nbytes(rows))} at {decoded_dir(rows.path)}" in said[0].getMessage()


def test_a_sequential_pass_makes_no_copy(rows):
    reader = rows.reopened()
    assert [reader[i][1]["row"] for i in range(ROWS)] == list(range(ROWS))
    assert reader.take(np.arange(ROWS))["row"].tolist() == list(range(ROWS))  # one take: each shard once
    assert reader.materialized is None and copies(rows) == []


def test_a_second_process_reads_the_copy_the_first_made(rows):
    reader = rows.reopened()
    made = reader.materialize()
    images = made / "images.npy"
    before = (images.stat().st_ino, images.stat().st_mtime_ns, made.stat().st_ino)
    second = python("""
        import sys
        import numpy as np
        from glyphforge.builds.reading.lookup import find_built
        ds = find_built(sys.argv[1], sys.argv[2])
        first = ds[3][1]["row"]
        print(ds.materialized)
        print(first, ds.take(np.arange(1029, -1, -1))["row"].sum())
    """, rows.key, str(rows.path.parents[2]))
    where, numbers = finish(second).splitlines()
    assert where == str(made) and numbers == f"3 {sum(range(ROWS))}"  # used from its first read
    assert (images.stat().st_ino, images.stat().st_mtime_ns, made.stat().st_ino) == before


@pytest.mark.parametrize("load_limit", [64 << 20, 1000])  # arrays loaded whole, or read with preadv
def test_ds_arrays_reads_a_copy_made_earlier_and_decodes_no_shard(rows, monkeypatch, load_limit):
    from glyphforge.builds.decoded_copy import life

    arrays = expected(rows)
    rows.reopened().materialize()
    monkeypatch.setattr(life, "LOAD_LIMIT", load_limit)
    data = rows.path / "arrays.pklz"
    data.write_bytes(bytes(data.stat().st_size))  # every shard unreadable: only the copy can serve them
    read = rows.reopened().arrays
    assert read.keys() == arrays.keys()
    assert all(np.array_equal(read[name], array) and read[name].dtype == array.dtype for name, array in arrays.items())
    with pytest.raises(DamagedPklzError):
        rows.reopened(random_access="decode").arrays  # noqa: B018 - the property reads


def test_two_processes_making_it_at_once_make_it_once(rows, tmp_path):
    go = tmp_path / "go"
    code = """
        import os, sys, time
        from glyphforge.builds.reading.lookup import find_built
        ds = find_built(sys.argv[1], sys.argv[2])
        while not os.path.exists(sys.argv[3]):
            time.sleep(0.005)
        path = ds.materialize()
        print(os.stat(path / "images.npy").st_ino, ds.take([7, 1000])["row"].tolist())
    """
    makers = [python(code, rows.key, str(rows.path.parents[2]), str(go)) for _ in range(2)]
    go.touch()
    outputs = {finish(maker).strip() for maker in makers}
    inode = (decoded_dir(rows.path) / "images.npy").stat().st_ino
    assert outputs == {f"{inode} [7, 1000]"}
    assert copies(rows) == [decoded_dir(rows.path).name]


@pytest.mark.slow
def test_a_maker_killed_half_way_leaves_no_copy_and_the_next_one_completes(tmp_path):
    dataset = build(WideRowSpec(n_examples=8000), data_dir=tmp_path / "data", progress=False)
    made, prefix = decoded_dir(dataset.path), decoded_staging_prefix(dataset.path)

    def writing_images() -> bool:
        return any((staging / "images.npy").is_file() and (staging / "images.npy").stat().st_size > 0
                   for staging in made.parent.glob(f"{prefix}*"))

    for _attempt in range(5):  # a maker that finishes before it is caught is tried again
        maker = python("""
            import sys
            from glyphforge.builds.reading.lookup import find_built
            find_built(sys.argv[1], sys.argv[2]).materialize()
        """, dataset.key, str(tmp_path / "data"))
        wait_until(lambda maker=maker: writing_images() or maker.poll() is not None, "the maker writes images.npy")
        maker.send_signal(signal.SIGKILL)
        maker.communicate(timeout=60)
        if maker.returncode == -signal.SIGKILL:
            break
        shutil.rmtree(made)
    else:
        pytest.fail("five makers all finished before they could be killed half-way")
    assert not made.exists() and len(list(made.parent.glob(f"{prefix}*"))) == 1  # only its staging
    reader = dataset.reopened()
    assert reader.materialize() == made
    assert copies(dataset) == [made.name]  # the staging of the killed maker is gone
    order = np.random.default_rng(3).permutation(8000)[:500]
    taken = reader.take(order)
    arrays = expected(dataset)
    assert np.array_equal(taken["images"], arrays["images"][order]) and taken["row"].tolist() == order.tolist()


@pytest.mark.parametrize("umask", [0o002, 0o022, 0o077])
def test_the_copy_follows_the_umask(rows, umask):
    previous = os.umask(umask)
    try:
        made = rows.reopened().materialize()
    finally:
        os.umask(previous)
    assert made.stat().st_mode & 0o7777 == 0o777 & ~umask
    files = sorted(made.iterdir())
    assert [path.name for path in files] == ["checks.json", "images.crc32.npy", "images.npy", "metadata.json",
                                             "name.crc32.npy", "name.npy", "row.crc32.npy", "row.npy"]
    assert {path.stat().st_mode & 0o7777 for path in files} == {0o666 & ~umask}


def test_cache_ls_shows_the_copy_beside_its_entry(rows):
    def entry_row() -> str:
        listed = run_here("glyphforge", "cache", "ls", "--data-dir", rows.path.parents[2])
        assert listed.returncode == 0, listed.stderr
        row, = (line for line in listed.stdout.splitlines() if line.startswith(rows.key[:12]))
        return row

    entry_size = human_size(rows.entry.size_bytes)
    assert f" {entry_size} " in entry_row() and "decoded" not in entry_row()
    made = rows.reopened().materialize()
    copy_size = human_size(sum(path.stat().st_size for path in made.iterdir()))
    assert f" {entry_size} + {copy_size} decoded " in entry_row()


def test_cache_rm_removes_the_copy_with_its_entry(rows):
    made = rows.reopened().materialize()
    done = run_here("glyphforge", "cache", "rm", rows.key[:12], "--data-dir", rows.path.parents[2])
    assert done.returncode == 0, done.stderr
    assert not made.exists() and not rows.path.exists()


def test_eviction_counts_the_copy_and_removes_it_with_its_entry(rows):
    reader = rows.reopened()
    made = reader.materialize()
    copy_bytes = sum(path.stat().st_size for path in made.iterdir())
    store = CacheStore(rows.path.parents[1])
    entry = store.find(rows.key)
    assert decoded_bytes(entry.path) == copy_bytes > rows.nbytes
    kept = store.evict(0)
    assert kept.size_before == entry.size_bytes + copy_bytes and kept.in_use == (entry,)  # open readers hold it
    reader.close()
    rows.close()
    evicted = store.evict(0)
    assert evicted.evicted == (entry,) and evicted.size_after == 0
    assert not made.exists() and not rows.path.exists()


def test_gc_keeps_a_copy_with_its_entry_and_removes_orphans_and_abandoned_staging(rows):
    made = rows.reopened().materialize()
    store = CacheStore(rows.path.parents[1])
    store.gc()  # the build's scratch, which a background thread may still be deleting (.trash-<key>.work-*)
    abandoned = made.parent / f"{decoded_staging_prefix(rows.path)}x1y2"
    abandoned.mkdir()
    (abandoned / "images.npy").write_bytes(b"half")
    assert store.gc() == [abandoned] and made.is_dir()  # the copy is no broken entry
    shutil.rmtree(rows.path)  # the entry gone by hand: its copy is an orphan
    assert store.gc() == [made] and not made.exists()


def test_a_rebuilt_entry_drops_the_copy_of_the_one_it_replaced(rows):
    made = rows.reopened().materialize()
    store = CacheStore(rows.path.parents[1])
    with store.create(rows.entry.kind, rows.entry.params) as writer:
        shutil.copy(rows.path / "arrays.pklz", writer.path / "arrays.pklz")
        shutil.copy(rows.path / "index.npy", writer.path / "index.npy")
        shutil.copy(rows.path / "blocks.npy", writer.path / "blocks.npy")
        writer.meta.update(rows.entry.meta)
    assert not made.exists()


def test_without_room_on_the_disk_auto_keeps_decoding_and_says_why_once(tmp_path, caplog):
    with tmpfs(tmp_path / "small", "size=8m") as small:  # the entry fits; its 24 MB decoded copy does not
        dataset = build(WideRowSpec(), data_dir=small, progress=False)
        arrays = expected(dataset)
        reader = dataset.reopened()
        caplog.set_level(logging.INFO, logger="glyphforge.builds")
        order = np.random.default_rng(5).permutation(2000)
        for i in order[:200].tolist():
            image, targets = reader[i]
            assert targets["row"] == i and np.array_equal(image, arrays["images"][i])
        assert reader.take(order)["row"].tolist() == order.tolist()
        warned = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
        assert len(warned) == 1 and "goes on decoding a shard per row" in warned[0]
        assert "no room for a decoded copy of test-wide-rows" in warned[0] and "only" in warned[0]
        assert reader.materialized is None and copies(dataset) == []
        explicit = dataset.reopened()
        with pytest.raises(NotEnoughSpaceError, match=r"it needs 24\.\d MB and only .* is free"):
            explicit.materialize()
        assert copies(dataset) == []
        for opened in (dataset, reader, explicit):  # their read locks' files are on the tmpfs
            opened.close()


def test_a_disk_filled_while_the_copy_is_written_leaves_nothing_and_reads_go_on(tmp_path, caplog, monkeypatch):
    from glyphforge.builds.decoded_copy import life

    write_copy = life.write_npy_files
    with tmpfs(tmp_path / "small", "size=40m") as small:
        filler = small / "filler"  # not glyphforge's: left as it is

        def another_writer_fills_the_disk(dataset, staging):  # after the room check passed: a real ENOSPC mid-copy
            filler.write_bytes(b"\0" * (shutil.disk_usage(small).free - 6_000_000))  # 6 MB of the 24 MB copy fit
            write_copy(dataset, staging)

        dataset = build(WideRowSpec(), data_dir=small, progress=False)
        arrays = expected(dataset)
        monkeypatch.setattr(life, "write_npy_files", another_writer_fills_the_disk)
        explicit = dataset.reopened()
        with pytest.raises(life.StorageError, match=r"cannot write .*\.decoded.*: the disk is full"):
            explicit.materialize()
        assert copies(dataset) == [] and explicit.materialized is None  # no half copy, no staging
        assert filler.stat().st_size > 20_000_000  # the test's own file, left as it was by glyphforge

        filler.unlink()  # the test frees the room, and fills it again below
        reader = dataset.reopened(decoded_budget="1GB")  # "auto": the disk fills again while it makes its copy
        caplog.set_level(logging.INFO, logger="glyphforge.builds")
        order = np.random.default_rng(3).permutation(2000)
        assert np.array_equal(reader.take(order)["images"], arrays["images"][order])
        for i in order[:100].tolist():
            image, targets = reader[i]
            assert targets["row"] == i and np.array_equal(image, arrays["images"][i])
        warned = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
        assert len(warned) == 2 and "Writing a decoded copy to read rows from: 24." in warned[0]  # said first
        assert "goes on decoding a shard per row" in warned[1] and "disk is full" in warned[1]
        assert copies(dataset) == [] and reader.materialized is None
        assert filler.stat().st_size > 20_000_000  # the test's own file, left as it was by glyphforge

        filler.unlink()  # room again: the next reader makes the copy
        monkeypatch.setattr(life, "write_npy_files", write_copy)
        again = dataset.reopened()
        assert again.materialize() == decoded_dir(dataset.path)
        assert np.array_equal(again.take(order)["images"], arrays["images"][order])
        del dataset, explicit, reader, again  # their read locks' files and the copy's are on the tmpfs
        gc.collect()


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason=NO_TORCH)
@pytest.mark.parametrize("start", ["fork", "spawn"])  # spawn: the workers unpickle handles
def test_a_shuffled_dataloader_with_workers_sees_every_example_once_per_epoch(tmp_path, start):
    from torch.utils.data import DataLoader

    dataset = build(RowSpec(n_examples=3000), data_dir=tmp_path / "data", progress=False)
    arrays = expected(dataset)
    # spawned workers persist (started once, each start imports torch and glyphforge afresh), forked ones restart
    loader = DataLoader(dataset, shuffle=True, num_workers=2, batch_size=64, multiprocessing_context=start,
                        persistent_workers=start == "spawn")
    for _epoch in range(2):
        seen = []
        for images, targets in loader:
            rows = targets["row"].numpy()
            assert np.array_equal(images.numpy(), arrays["images"][rows])
            assert list(targets["name"]) == [f"r{row}" for row in rows]
            seen.extend(rows.tolist())
        assert sorted(seen) == list(range(3000)) and seen != sorted(seen)
    assert dataset.materialized is None  # this process read nothing: its workers made the one copy
    assert copies(dataset) == [decoded_dir(dataset.path).name]
