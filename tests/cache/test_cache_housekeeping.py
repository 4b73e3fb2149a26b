"""Cache housekeeping: eviction by size (never an entry in use), raw files in ls/verify/gc (issue 23)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from glyphforge._files import file_stamp
from glyphforge.builds import build
from glyphforge.builds.decoded_copy.life import decoded_dir
from glyphforge.cache import CacheStore, Entry
from glyphforge.cache.raw import record_download
from glyphforge.cache.raw import record_path as raw_record_path
from glyphforge.datasets import backgrounds
from glyphforge.datasets.backgrounds import load_backgrounds
from glyphforge.pipelines.download import fetch
from glyphforge.textfmt import human_size, parse_size

from support.cli import run, run_here
from support.copy_backends import built_rows, fresh_build  # noqa: F401 (fixture)
from support.http_server import http_server  # noqa: F401 (fixture)
from support.specs import RowSpec

#: Opens the built dataset in a data dir and holds it (its read lock) until stdin closes; then reads it again.
_HOLDER = textwrap.dedent("""
    import sys
    from glyphforge.builds.reading.lookup import find_built
    dataset = find_built(sys.argv[2], sys.argv[1])
    print(dataset.take([0])["row"].tolist(), flush=True)
    sys.stdin.read()
    print(dataset.take([len(dataset) - 1])["row"].tolist(), flush=True)
    """)


def _blob(store: CacheStore, number: int, n_bytes: int) -> Entry:
    """An entry of ``n_bytes`` random (incompressible) bytes."""
    data = np.random.default_rng(number).integers(0, 256, n_bytes, dtype=np.uint8)
    with store.create("test-blob", {"number": number}) as writer:
        writer.write("data.pklz", data)
    entry = store.get("test-blob", {"number": number})
    assert entry is not None
    return entry


def test_gc_max_size_evicts_least_recently_used_first_and_never_an_entry_another_process_reads(tmp_path):
    built = build(RowSpec(n_examples=300, shard_size=100), data_dir=tmp_path, progress=False)
    built.close()
    store = CacheStore.for_data_dir(tmp_path)
    blobs = [_blob(store, number, 200_000) for number in range(3)]
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path), built.key], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "[0]\n"  # it holds the build open
        for blob in blobs:  # used after the build: the build is the least recently used entry
            time.sleep(0.05)  # file times advance by the kernel's clock tick (a few ms): uses a tick apart
            assert blob.load("data.pklz").nbytes == 200_000
        entries = {entry.key: entry for entry in store.ls()}
        order = sorted(entries.values(), key=lambda entry: entry.last_used)
        assert [entry.key for entry in order] == [built.key, *(blob.key for blob in blobs)]
        sizes = [entries[blob.key].size_bytes for blob in blobs]
        built_size = entries[built.key].size_bytes
        before = built_size + sum(sizes)
        limit = built_size + sizes[2]  # fits only once the two older blobs go, as the build may not

        done = run("glyphforge", "cache", "gc", "--max-size", str(limit), "--data-dir", tmp_path)

        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0] == "0 item(s) removed"
        assert [line.split(" (")[0] for line in lines[1:4]] == [
            f"evicted test-blob {blobs[0].key[:12]}", f"evicted test-blob {blobs[1].key[:12]}",
            f"kept test-rows {built.key[:12]}"]
        assert lines[1].startswith(f"evicted test-blob {blobs[0].key[:12]} ({human_size(sizes[0])}, last used 20")
        assert lines[3] == (f"kept test-rows {built.key[:12]} ({human_size(built_size)}): in use by a process "
                            "reading it")
        assert lines[4] == (f"2 entries evicted; the cache holds {human_size(limit)} (limit {human_size(limit)}, "
                            f"was {human_size(before)})")
        assert sorted(entry.key for entry in store.ls()) == sorted([built.key, blobs[2].key])
        assert not blobs[0].path.exists() and not blobs[1].path.exists()
        holder.stdin.close()  # type: ignore[union-attr]
        assert holder.stdout.readline() == "[299]\n"  # the kept build still reads
        assert holder.wait(timeout=60) == 0
    finally:
        holder.kill()
        holder.wait()

    done = run("glyphforge", "cache", "gc", "--max-size", str(sizes[2]), "--data-dir", tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"evicted test-rows {built.key[:12]}" in done.stdout  # released: now the least recently used goes
    assert [entry.key for entry in store.ls()] == [blobs[2].key]


def test_an_open_built_dataset_is_in_use_until_closed(tmp_path):
    dataset = build(RowSpec(n_examples=200, shard_size=100), data_dir=tmp_path, progress=False)
    store = CacheStore.for_data_dir(tmp_path)
    eviction = store.evict(0)
    assert [entry.key for entry in eviction.in_use] == [dataset.key] and not eviction.evicted
    assert not eviction.fits and eviction.size_after == eviction.size_before > 0
    dataset.close()
    assert [entry.key for entry in store.evict("0B").evicted] == [dataset.key]
    assert store.ls() == [] and not dataset.path.exists()


def test_gc_max_size_removes_nothing_when_the_cache_fits(tmp_path):
    store = CacheStore.for_data_dir(tmp_path)
    blob = _blob(store, 0, 1000)
    removed = store.gc(max_size="1MB")
    assert removed == [] and [entry.key for entry in store.ls()] == [blob.key]
    assert store.gc(max_size=0) == [blob.path]


@pytest.mark.parametrize("text, expected", [
    ("20GB", 20 * 10**9), ("500MB", 500 * 10**6), ("1.5TiB", 3 * 2**39), ("1000000", 10**6), ("2 kib", 2048),
    ("0", 0), ("7B", 7),
])
def test_sizes_are_parsed(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["20 gigs", "-1", "1e3GB", "", "GB", "20GBs"])
def test_a_bad_max_size_exits_2_before_any_work(tmp_path, text):
    store = CacheStore.for_data_dir(tmp_path)
    blob = _blob(store, 0, 1000)
    done = run_here("glyphforge", "cache", "gc", "--max-size", text, "--data-dir", tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert (f"argument --max-size: {text!r} is not a size: give bytes (1000000) or a number and a unit, such as "
            "500MB, 20GB or 1.5TiB (KB, MB, GB, TB: powers of 1000; KiB, MiB, GiB, TiB: powers of 1024)") in done.stderr
    assert [entry.key for entry in store.ls()] == [blob.key]


# -- raw/: listed with their hash state, verified, collected (only what glyphforge downloaded) -------------
def _raw_rows(stdout: str) -> list[list[str]]:
    """The rows of `cache ls`'s table of upstream files, each split on runs of two or more spaces."""
    lines = stdout.split("upstream files in ", 1)[1].splitlines()[3:]
    return [re.split(r"\s{2,}", line.strip()) for line in lines if line.strip()]


def test_raw_files_are_listed_verified_and_only_glyphforges_converted_downloads_collected(
        shared_data, http_server, tmp_path):
    http_server.directory = shared_data
    raw = tmp_path / "raw" / "backgrounds"
    raw.mkdir(parents=True)
    shutil.copy(shared_data / "backgrounds" / "ice.jpg", raw / "ice.jpg")  # placed by hand: upstream's bytes
    prepared = run_here("prepare-data", "backgrounds", "--backgrounds", "water", "circles", "ice", "--mirror",
                        http_server.base_url, "--data-dir", tmp_path, "-q")
    assert prepared.returncode == 0, prepared.stderr
    assert http_server.requests("backgrounds/ice.jpg") == 0  # used in place
    (raw / "floor.jpg").write_bytes(b"my own floor")  # a custom copy, never used (it would need --no-verify)
    (raw / "notes.txt").write_text("mine")
    (tmp_path / "raw" / "elsewhere").mkdir()
    (tmp_path / "raw" / "elsewhere" / "thing.bin").write_bytes(b"x" * 10)
    size = {name: (shared_data / "backgrounds" / name).stat().st_size for name in ("circles.jpg", "water.jpg")}

    listed = run_here("glyphforge", "cache", "ls", "--data-dir", tmp_path)

    assert listed.returncode == 0, listed.stderr
    assert f"upstream files in {tmp_path / 'raw'}:\ndataset      file" in listed.stdout
    assert _raw_rows(listed.stdout) == [
        ["backgrounds", "circles.jpg", human_size(size["circles.jpg"]), "downloaded", "matches the pinned hash"],
        ["backgrounds", "floor.jpg", "12 B", "placed",
         "differs from the pinned hash (a custom copy: used only with --no-verify)"],
        ["backgrounds", "ice.jpg", human_size((raw / "ice.jpg").stat().st_size), "placed", "matches the pinned hash"],
        ["backgrounds", "notes.txt", "4 B", "placed", "not a file of a registered dataset (not checked)"],
        ["backgrounds", "water.jpg", human_size(size["water.jpg"]), "downloaded", "matches the pinned hash"],
        ["elsewhere", "thing.bin", "10 B", "placed", "not a file of a registered dataset (not checked)"],
    ]

    verified = run_here("glyphforge", "cache", "verify", "--data-dir", tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.splitlines() == [
        f"CUSTOM {raw / 'floor.jpg'}: placed by hand, differs from the pinned hash (a custom copy: used only with "
        "--no-verify)",
        "4 upstream files hashed: 3 match the pinned hashes",
        f"all 1 entry in {tmp_path / 'cache'} verified"]

    water = raw / "water.jpg"  # damaged on disk under the same stamp (bit rot): ls trusts its record, verify hashes
    status, data = water.stat(), bytearray(water.read_bytes())
    data[100] ^= 0xFF
    water.write_bytes(bytes(data))
    os.utime(water, ns=(status.st_atime_ns, status.st_mtime_ns))  # a write changes the change time, which bit rot
    record = json.loads(raw_record_path(water).read_text())  # does not: the record follows it
    raw_record_path(water).write_text(json.dumps({**record, **file_stamp(water.stat())}))
    assert ["backgrounds", "water.jpg", human_size(size["water.jpg"]), "downloaded", "matches the pinned hash"] in \
        _raw_rows(run_here("glyphforge", "cache", "ls", "--data-dir", tmp_path).stdout)
    verified = run_here("glyphforge", "cache", "verify", "--data-dir", tmp_path)
    assert verified.returncode == 1
    assert (f"CORRUPT {water}: downloaded by glyphforge, but it no longer has the pinned hash (damaged on disk): "
            "remove it and run prepare-data again to download it again") in verified.stdout.splitlines()
    assert "4 upstream files hashed: 2 match the pinned hashes" in verified.stdout

    plain = run_here("glyphforge", "cache", "gc", "--data-dir", tmp_path)  # without --raw: only what verify reported
    assert plain.returncode == 0 and plain.stdout == f"removed {water}\n1 item(s) removed\n"
    assert run_here("glyphforge", "cache", "verify", "--data-dir", tmp_path).returncode == 0
    time.sleep(0.05)  # file times advance by the kernel's clock tick: the next downloads are after the entry
    for name in ("curves.jpg", "water.jpg"):
        fetch(backgrounds.RESOURCES[name], raw, mirrors=[http_server.base_url], progress=False)

    collected = run_here("glyphforge", "cache", "gc", "--raw", "--data-dir", tmp_path)

    assert collected.returncode == 0, collected.stderr
    assert collected.stdout.splitlines() == [
        "0 item(s) removed",
        f"removed {raw / 'circles.jpg'} ({human_size(size['circles.jpg'])}, downloaded and converted)",
        f"1 upstream file removed ({human_size(size['circles.jpg'])}); 4 placed by hand left as they are"]
    # curves.jpg and water.jpg were downloaded after every entry was made: not converted, kept; what the user placed
    # stays as it was
    assert sorted(path.name for path in raw.iterdir() if not path.name.endswith(".lock")) == [
        ".curves.jpg.record", ".floor.jpg.record", ".ice.jpg.record", ".water.jpg.record", "curves.jpg", "floor.jpg",
        "ice.jpg", "notes.txt", "water.jpg"]
    assert (raw / "floor.jpg").read_bytes() == b"my own floor" and (raw / "notes.txt").read_text() == "mine"
    assert (raw / "ice.jpg").read_bytes() == (shared_data / "backgrounds" / "ice.jpg").read_bytes()
    assert load_backgrounds(["water", "circles", "ice"], data_dir=tmp_path, offline=True)[0][0].shape[2] == 3


@pytest.mark.parametrize("mtime", ["new", "kept", "linked"])
def test_a_download_replaced_by_hand_is_no_longer_glyphforges_and_is_never_collected(
        shared_data, http_server, tmp_path, mtime):
    """Also when the user's copy keeps the download's size and modification time (issue #42 row 2), or is a symbolic
    link to the download moved away (the link is the user's: its target's stamp is the download's)."""
    http_server.directory = shared_data
    raw = tmp_path / "raw" / "backgrounds"
    water = fetch(backgrounds.RESOURCES["water.jpg"], raw, mirrors=[http_server.base_url], progress=False)
    assert json.loads((raw / ".water.jpg.record").read_text())["downloaded"] is True
    status = water.stat()
    mine = tmp_path / "mine.jpg"
    if mtime == "linked":
        water.replace(mine)
        water.symlink_to(mine)
    else:
        mine.write_bytes(water.read_bytes())
        mine.replace(water)  # the user's copy now
        os.utime(water, ns=(0, status.st_mtime_ns + (10**9 if mtime == "new" else 0)))
    prepared = run_here("prepare-data", "backgrounds", "--backgrounds", "water", "--data-dir", tmp_path,
                        "--offline", "-q")
    assert prepared.returncode == 0, prepared.stderr

    collected = run_here("glyphforge", "cache", "gc", "--raw", "--data-dir", tmp_path)

    assert collected.stdout.splitlines()[-1] == "0 upstream files removed (0 B); 1 placed by hand left as they are"
    assert water.is_file() and water.is_symlink() == (mtime == "linked")


def test_an_entry_being_iterated_is_in_use_until_the_iterator_ends(tmp_path):
    store = CacheStore.for_data_dir(tmp_path)
    blob = _blob(store, 0, 1000)
    made = blob.last_used
    time.sleep(0.05)  # file times advance by the kernel's clock tick
    items = blob.iter("data.pklz")
    assert next(items).nbytes == 1000
    assert blob.last_used > made  # the read lock marked the use
    assert [entry.key for entry in store.evict(0).in_use] == [blob.key]
    assert list(items) == []  # exhausted: the lock is let go
    assert [entry.key for entry in store.evict(0).evicted] == [blob.key]


# -- #42 row 4: what `cache verify` reports damaged, `cache gc` removes (only glyphforge's own) ---------------------
def _flip(path: Path, at: int = 200) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _edit_record(copy: Path) -> None:
    record = json.loads((copy / "checks.json").read_text())
    record["key"] = "0" * 64
    (copy / "checks.json").write_text(json.dumps(record))


def _damaged_download(data_dir: Path) -> None:
    water = data_dir / "raw" / "backgrounds" / "water.jpg"
    water.parent.mkdir(parents=True)
    water.write_bytes(b"downloaded, then damaged on disk")
    record_download(water, backgrounds.RESOURCES["water.jpg"].hash, "https://example.org/water.jpg")


#: Each damage `cache verify` reports as CORRUPT, done to a built entry with a decoded copy (``entry``, ``copy``).
BREAKAGES: dict[str, Callable[[Path, Path], None]] = {
    "manifest not JSON": lambda entry, copy: (entry / "manifest.json").write_text("{"),
    "data file missing": lambda entry, copy: (entry / "index.npy").unlink(),
    "data file truncated": lambda entry, copy: os.truncate(entry / "arrays.pklz", 100),
    "data file of another sha256": lambda entry, copy: _flip(entry / "arrays.pklz"),
    "copy file of another sha256": lambda entry, copy: _flip(copy / "images.npy"),
    "copy file truncated": lambda entry, copy: os.truncate(copy / "name.npy", 100),
    "copy file missing": lambda entry, copy: (copy / "row.crc32.npy").unlink(),
    "copy record of another entry": lambda entry, copy: _edit_record(copy),
    "download of another sha256": lambda entry, copy: _damaged_download(entry.parents[2]),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_cache_gc_removes_what_cache_verify_reports_damaged_so_the_cache_then_verifies(built_rows, tmp_path,
                                                                                          breakage):
    dataset = fresh_build(built_rows, tmp_path)
    copy = dataset.reopened().materialize()
    data_dir = tmp_path / "data"
    BREAKAGES[breakage](dataset.path, copy)
    verified = run_here("glyphforge", "cache", "verify", "--data-dir", data_dir)
    assert verified.returncode == 1 and "CORRUPT " in verified.stdout, verified.stdout + verified.stderr
    assert "`glyphforge cache gc` removes what is damaged" in verified.stderr

    collected = run_here("glyphforge", "cache", "gc", "--data-dir", data_dir)

    assert collected.returncode == 0 and "Traceback" not in collected.stderr, collected.stderr
    again = run_here("glyphforge", "cache", "verify", "--data-dir", data_dir)
    assert again.returncode == 0 and "CORRUPT" not in again.stdout, again.stdout + again.stderr
    assert not list((data_dir / "cache" / RowSpec.kind).glob(".trash-*"))


def test_cache_verify_names_a_link_in_a_copys_place_and_cache_gc_leaves_it(built_rows, tmp_path):
    dataset = fresh_build(built_rows, tmp_path)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    decoded_dir(dataset.path).symlink_to(theirs, target_is_directory=True)
    verified = run_here("glyphforge", "cache", "verify", "--data-dir", tmp_path / "data")
    assert verified.returncode == 0, verified.stdout + verified.stderr  # glyphforge's own files are whole
    assert f"FOREIGN {decoded_dir(dataset.path)}: is a symbolic link to {theirs}, not glyphforge's" in verified.stdout
    assert run_here("glyphforge", "cache", "gc", "--data-dir", tmp_path / "data").stdout == "0 item(s) removed\n"
    assert decoded_dir(dataset.path).is_symlink() and theirs.is_dir()
