"""Lying manifests and damaged entries: every case is a broken entry that is reported, removed and made again.

Tests per observed failure: a manifest of the wrong shape (5), an entry moved under
another key (6), a file name reaching outside the entry (7), edited metadata (8, and
manifests older than the metadata hash), a deleted data file of Omniglot, EMNIST or a
build (9), and another process holding an entry's lock (15): the wait is logged and
gives up naming the holder.
"""
from __future__ import annotations

import json
import logging
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from glyphforge import cli
from glyphforge.builds import ARRAYS_FILE, build
from glyphforge.cache import CacheStore, LockTimeoutError, MissingEntryFileError
from glyphforge.datasets.emnist import load_emnist, prepare_emnist
from glyphforge.datasets.omniglot.dataset import load_omniglot, prepare_omniglot

from support.specs import RowSpec
from support.synthetic_emnist import write_synthetic_emnist
from support.waits import wait_until

PARAMS = {"shape": [2, 3]}


def _fill(writer):
    writer.write("A.pklz", np.zeros((2, 3), np.uint8))


def _manifest(entry_dir: Path) -> dict:
    return json.loads((entry_dir / "manifest.json").read_text())


def _write_manifest(entry_dir: Path, manifest) -> None:
    (entry_dir / "manifest.json").write_text(json.dumps(manifest))


def _problems(store: CacheStore) -> dict[Path, str]:
    return {problem.path: problem.message for problem in store.verify()}


# -- 5: valid JSON of the wrong shape ---------------------------------------------------------
@pytest.mark.parametrize("lie, complaint", [
    (lambda manifest: {}, "not a manifest of the right shape: no 'kind'; no 'key'; no 'params'"),
    (lambda manifest: None, "holds null, not a JSON object of the manifest's fields"),
    (lambda manifest: [], "holds an array, not a JSON object of the manifest's fields"),
    (lambda manifest: {**manifest, "files": None}, "'files' should be an object, not null"),
    (lambda manifest: {**manifest, "files": {"A.pklz": {"size": "12"}}}, "records the file 'A.pklz' as"),
], ids=["empty", "null", "list", "files-null", "file-record"])
def test_a_manifest_of_the_wrong_shape_is_a_broken_entry_every_command_survives(tmp_path, capsys, lie, complaint):
    data_dir = tmp_path / "data"
    store = CacheStore.for_data_dir(data_dir)
    good = store.get_or_create("k", {"other": 1}, _fill)
    entry_dir = store.get_or_create("k", PARAMS, _fill).path
    _write_manifest(entry_dir, lie(_manifest(entry_dir)))
    assert store.get("k", PARAMS) is None and [entry.key for entry in store.ls()] == [good.key]
    assert complaint in _problems(store)[entry_dir / "manifest.json"]
    capsys.readouterr()
    assert cli.main(["cache", "verify", "--data-dir", str(data_dir)]) == 1
    out = capsys.readouterr().out
    assert f"CORRUPT {entry_dir / 'manifest.json'}: " in out and complaint in out
    assert cli.main(["cache", "ls", "--data-dir", str(data_dir)]) == 0
    assert cli.main(["info", "--data-dir", str(data_dir)]) == 0
    assert cli.main(["cache", "gc", "--data-dir", str(data_dir)]) == 0  # the documented fix
    assert f"removed {entry_dir}" in capsys.readouterr().out and not entry_dir.exists()
    assert store.verify() == [] and store.get_or_create("k", PARAMS, _fill).files == ["A.pklz"]  # made again


# -- 6: an entry directory moved under another key -------------------------------------------
def test_an_entry_moved_under_another_key_is_reported_and_made_again(tmp_path):
    store = CacheStore(tmp_path)
    small = store.get_or_create("k", {"shape": [2, 3]}, lambda w: w.write("A.pklz", np.zeros((2, 3))))
    large = store.get_or_create("k", {"shape": [5, 5]}, lambda w: w.write("A.pklz", np.zeros((5, 5))))
    shutil.rmtree(large.path)
    small.path.rename(large.path)  # the (2, 3) entry now sits where the (5, 5) one belongs
    message = _problems(store)[large.path / "manifest.json"]
    assert f"belongs to the 'k' entry '{small.key[:12]}', not to the directory k/{large.key}" in message
    assert "moved or copied under another key" in message
    assert store.get("k", {"shape": [5, 5]}) is None and store.ls() == []
    remade = store.get_or_create("k", {"shape": [5, 5]}, lambda w: w.write("A.pklz", np.zeros((5, 5))))
    assert remade.load("A.pklz").shape == (5, 5) and store.verify() == []


# -- 7: a manifest naming a file outside the entry ---------------------------------------------
def test_a_file_name_reaching_outside_the_entry_is_never_read(tmp_path):
    store = CacheStore(tmp_path / "cache")
    entry = store.get_or_create("k", PARAMS, _fill)
    outside = tmp_path / "outside.pklz"
    shutil.copy(entry.path / "A.pklz", outside)
    manifest = _manifest(entry.path)
    manifest["files"] = {"../../../outside.pklz": manifest["files"]["A.pklz"]}
    _write_manifest(entry.path, manifest)
    assert (entry.path / "../../../outside.pklz").resolve() == outside.resolve()
    assert store.get("k", PARAMS) is None  # so nothing can load it
    assert ("lists the file '../../../outside.pklz', which is not a plain file name inside the entry"
            in _problems(store)[entry.path / "manifest.json"])
    assert store.gc() == [entry.path] and outside.exists()  # the entry goes; the file outside is left alone


# -- 8: edited metadata -----------------------------------------------------------------------
def test_edited_metadata_is_caught_by_its_hash_and_the_entry_made_again(tmp_path):
    archive = write_synthetic_emnist(tmp_path / "gzip.zip").path
    data_dir = tmp_path / "data"
    [entry] = prepare_emnist(split="digits", archives={"gzip.zip": archive}, verify=False, progress=False,
                             data_dir=data_dir)
    manifest = _manifest(entry.path)
    assert manifest["meta_sha256"] and len(manifest["meta_sha256"]) == 64
    [zero] = [record for record in manifest["meta"]["classes"] if record["name"] == "0"]
    zero["file"] = "digit_1.pklz"  # class '0' now points at the ones
    _write_manifest(entry.path, manifest)
    store = CacheStore.for_data_dir(data_dir)
    assert (_problems(store)[entry.path / "manifest.json"]
            == "its params or meta differ from its meta_sha256 (the manifest was edited or damaged)")
    with pytest.raises(FileNotFoundError, match="EMNIST digits is not prepared"):  # never the wrong class
        load_emnist("0", split="digits", data_dir=data_dir, download=False)
    prepare_emnist(split="digits", archives={"gzip.zip": archive}, verify=False, progress=False, data_dir=data_dir)
    x, _, _ = load_emnist("0", split="digits", subset="all", data_dir=data_dir, download=False)
    assert store.verify() == [] and np.array_equal(np.sort(x, axis=0), np.sort(entry.load("digit_0.pklz"), axis=0))


def test_a_manifest_without_a_metadata_hash_is_broken(tmp_path):
    """glyphforge < 0.2 wrote no meta_sha256: such a manifest is refused."""
    store = CacheStore(tmp_path)
    entry = store.get_or_create("k", PARAMS, _fill)
    manifest = _manifest(entry.path)
    del manifest["meta_sha256"]
    _write_manifest(entry.path, manifest)
    assert store.get("k", PARAMS) is None
    assert _problems(store)[entry.path / "manifest.json"] == "not a manifest of the right shape: no 'meta_sha256'"


# -- 9: a deleted data file, for every dataset and for builds ------------------------------------
def _assert_missing(error: pytest.ExceptionInfo, path: Path, kind: str) -> None:
    assert isinstance(error.value, FileNotFoundError) and error.value.filename == str(path)
    assert str(error.value) == (
        f"{path} is missing from the {kind} entry {path.parent.name[:12]} (it was deleted or the disk lost it): run "
        f"`glyphforge cache gc` to remove the broken entry, then make it again: `prepare-data {kind}`, or for a "
        "built dataset the build that made it")


def test_a_deleted_omniglot_file_says_what_to_do(tmp_path, shared_data):
    data_dir = tmp_path / "data"
    [entry] = prepare_omniglot(sets="small1", data_dir=data_dir, mirrors=[shared_data.as_uri()], progress=False)
    alphabet = entry.meta["alphabets"][0]
    (entry.path / alphabet["file"]).unlink()
    with pytest.raises(MissingEntryFileError) as error:
        load_omniglot(f"{alphabet['name']},1", sets="small1", data_dir=data_dir, download=False)
    _assert_missing(error, entry.path / alphabet["file"], "omniglot")
    store = CacheStore.for_data_dir(data_dir)
    assert store.gc() == [entry.path] and store.verify() == []


def test_a_deleted_emnist_or_built_file_says_the_same(tmp_path):
    data_dir = tmp_path / "data"
    [emnist] = prepare_emnist(split="digits", archives={"gzip.zip": write_synthetic_emnist(tmp_path / "e.zip").path},
                              verify=False, progress=False, data_dir=data_dir)
    (emnist.path / "digit_3.pklz").unlink()
    with pytest.raises(MissingEntryFileError) as error:
        load_emnist("3", split="digits", data_dir=data_dir, download=False)
    _assert_missing(error, emnist.path / "digit_3.pklz", "emnist")

    dataset = build(RowSpec(n_examples=30, shard_size=10), data_dir=data_dir, progress=False)
    (dataset.path / ARRAYS_FILE).unlink()
    with pytest.raises(MissingEntryFileError) as error:
        dataset.take([0])
    _assert_missing(error, dataset.path / ARRAYS_FILE, "test-rows")
    with pytest.raises(MissingEntryFileError):
        dataset.entry.iter(ARRAYS_FILE)
    store = CacheStore.for_data_dir(data_dir)
    assert {emnist.path, dataset.path} <= set(store.gc())  # (and the build's work dir, if still being deleted)
    assert store.verify() == [] and store.ls() == []


# -- 15: another process holds an entry's lock -----------------------------------------------------
def _start_holder(root: Path, ready: Path, then: str) -> subprocess.Popen:
    """A process that makes the entry (k, PARAMS) and, holding its lock, runs ``then`` (Python lines)."""
    code = textwrap.dedent(f"""
        import os, sys, time
        from glyphforge.cache import CacheStore
        with CacheStore(sys.argv[1]).create("k", {PARAMS!r}) as writer:
            open(sys.argv[2], "w").close()
        """) + textwrap.indent(textwrap.dedent(then), " " * 4)
    child = subprocess.Popen([sys.executable, "-c", code, str(root), str(ready)])
    wait_until(ready.exists, "the holder to hold the entry's lock", process=child)
    return child


def test_a_stopped_holder_is_named_while_waiting_and_when_giving_up(tmp_path, caplog):
    root = tmp_path / "cache"
    holder = _start_holder(root, tmp_path / "ready", "time.sleep(120)")
    try:
        holder.send_signal(signal.SIGSTOP)  # stopped while preparing: it never finishes
        store = CacheStore(root, lock_timeout=1)
        key12 = store.key("k", PARAMS)[:12]
        started = time.monotonic()
        with caplog.at_level(logging.INFO, logger="glyphforge"), pytest.raises(LockTimeoutError) as error:
            store.get_or_create("k", PARAMS, _fill)
        assert 1 <= time.monotonic() - started < 60  # the stopped holder would keep the lock for ever
        host = socket.gethostname()
        waiting = [record.getMessage() for record in caplog.records
                   if record.getMessage().startswith("waiting for another process")]
        assert waiting and waiting[0].startswith(f"waiting for another process preparing k {key12} "
                                                 f"(pid {holder.pid} on {host}, since ")
        lock = root / "k" / f".{store.key('k', PARAMS)}.lock"
        message = str(error.value)
        assert re.match(rf"gave up waiting for another process preparing k {key12} after [1-9]\d*\.\d s: "
                        rf"{re.escape(str(lock))} is held by pid {holder.pid} on {re.escape(host)}, since ", message)
        assert f"end it (`kill {holder.pid}` on {host})" in message
        assert error.value.lock_path == lock and error.value.holder is not None
        assert error.value.holder.pid == holder.pid
        assert "$GLYPHFORGE_LOCK_TIMEOUT" in message
    finally:
        holder.kill()
        holder.wait()
    entry = CacheStore(root, lock_timeout=10).get_or_create("k", PARAMS, _fill)  # the kernel released its lock
    assert entry.files == ["A.pklz"] and not (root / "k" / f".{entry.key}.lock.holder").exists()


def test_a_holder_record_naming_a_process_that_is_gone_says_so(tmp_path):
    """The lock is held, but its record names a pid no longer running here (the lock outlived its taker)."""
    root = tmp_path / "cache"
    holder = _start_holder(root, tmp_path / "ready", "time.sleep(120)")
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    try:
        store = CacheStore(root, lock_timeout=0.2)
        lock = root / "k" / f".{store.key('k', PARAMS)}.lock"
        record = lock.with_name(lock.name + ".holder")
        assert json.loads(record.read_text())["pid"] == holder.pid
        record.write_text(json.dumps({"pid": finished.pid, "host": socket.gethostname(), "since": "then"}))
        with pytest.raises(LockTimeoutError) as error:
            store.get_or_create("k", PARAMS, _fill)
        message = str(error.value)
        assert f"{lock} is held, but its holder record names pid {finished.pid} on {socket.gethostname()}, since " \
               "then, which is no longer running on this host" in message
        assert f"remove {lock} and {record}, and run again" in message
    finally:
        holder.kill()
        holder.wait()
