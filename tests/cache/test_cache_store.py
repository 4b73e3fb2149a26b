import errno
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta
from pathlib import Path

import filelock
import numpy as np
import pytest

from glyphforge.cache import FORMAT_VERSION, CacheStore, MissingEntryFileError, dump_pklz
from glyphforge.cache.keys import metadata_sha256
from glyphforge.cache.locks import LockTimeoutError, hold, holder_path, read_holder
from glyphforge.errors import StorageError

from support.waits import wait_until

PARAMS = {"split": "digits", "shape": (14, 14)}


def _fill(writer):
    writer.write("A.pklz", np.arange(12, dtype=np.uint8).reshape(3, 4))
    writer.write("B.pklz", {"x": np.ones(2)})
    writer.meta["classes"] = ["A", "B"]


def test_create_commits_a_complete_entry_with_manifest(tmp_path):
    store = CacheStore(tmp_path)
    assert store.get("k", PARAMS) is None
    with store.create("k", PARAMS) as writer:
        _fill(writer)
        assert store.get("k", PARAMS) is None  # staged, not visible
    entry = store.get("k", PARAMS)
    assert entry.path == tmp_path / "k" / store.key("k", PARAMS)
    assert entry.files == ["A.pklz", "B.pklz"]
    assert entry.meta == {"classes": ["A", "B"]}
    assert entry.params == {"split": "digits", "shape": [14, 14]}
    manifest = json.loads((entry.path / "manifest.json").read_text())
    assert manifest["kind"] == "k" and manifest["format_version"] == FORMAT_VERSION
    assert manifest["meta_sha256"] == metadata_sha256("k", entry.key, manifest["params"], manifest["meta"])
    assert manifest["glyphforge_version"] and manifest["created"].endswith("+00:00")
    size = (entry.path / "A.pklz").stat().st_size
    assert manifest["files"]["A.pklz"]["size"] == size == entry.size_bytes - (entry.path / "B.pklz").stat().st_size
    assert np.array_equal(entry.load("A.pklz"), np.arange(12, dtype=np.uint8).reshape(3, 4))
    # the key's lock, and the readers' lock that loading took (its time is the entry's last use)
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == [f".{entry.key}.lock", f".{entry.key}.readers",
                                                                  entry.key]


def test_exception_discards_the_staging_directory(tmp_path):
    store = CacheStore(tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        with store.create("k", PARAMS) as writer:
            writer.write("A.pklz", 1)
            raise RuntimeError("boom")
    assert store.get("k", PARAMS) is None
    assert [p.name for p in (tmp_path / "k").iterdir() if not p.name.endswith(".lock")] == []


def test_recreating_replaces_the_entry(tmp_path):
    store = CacheStore(tmp_path)
    with store.create("k", PARAMS) as writer:
        writer.write("A.pklz", 1)
    with store.create("k", PARAMS) as writer:
        writer.write("B.pklz", 2)
    assert store.get("k", PARAMS).files == ["B.pklz"]
    assert len(store.ls()) == 1


def test_get_or_create_fills_only_once(tmp_path):
    store = CacheStore(tmp_path)
    calls = []
    for _ in range(2):
        entry = store.get_or_create("k", PARAMS, lambda w: (calls.append(1), _fill(w)))
    assert len(calls) == 1 and entry.files == ["A.pklz", "B.pklz"]


def test_making_gives_a_writer_only_while_the_entry_is_missing_and_commits_on_a_clean_exit(tmp_path):
    store = CacheStore(tmp_path)
    with pytest.raises(RuntimeError), store.making("k", PARAMS) as writer:
        writer.write("A.pklz", 1)
        raise RuntimeError("the maker failed")
    assert store.get("k", PARAMS) is None and store.ls() == []  # nothing half-made
    with store.making("k", PARAMS) as writer:
        _fill(writer)
    made = store.get("k", PARAMS)
    assert made.files == ["A.pklz", "B.pklz"]
    with store.making("k", PARAMS) as again:  # made meanwhile: nothing to write
        assert again is None
    assert store.get("k", PARAMS).manifest == made.manifest


def test_add_file_moves_a_finished_file_in(tmp_path):
    store = CacheStore(tmp_path)
    shard = dump_pklz([1, 2], tmp_path / "shard.pklz")
    with store.create("k", PARAMS) as writer:
        writer.add_file("all.pklz", shard)
    assert not shard.exists()
    assert store.get("k", PARAMS).load("all.pklz") == [1, 2]


@pytest.mark.parametrize("name", ["manifest.json", "../x.pklz", "a/b.pklz", ".hidden", ""])
def test_bad_file_names_are_refused(tmp_path, name):
    with pytest.raises(ValueError, match="is not allowed"):
        with CacheStore(tmp_path).create("k", PARAMS) as writer:
            writer.write(name, 1)


def test_unknown_file_lists_the_files(tmp_path):
    store = CacheStore(tmp_path)
    entry = store.get_or_create("k", PARAMS, _fill)
    with pytest.raises(KeyError, match=r"no file 'C.pklz'; files: \['A.pklz', 'B.pklz'\]"):
        entry.load("C.pklz")


def test_a_deleted_file_is_a_missing_entry_file_for_every_way_of_reading_it(tmp_path):
    entry = CacheStore(tmp_path).get_or_create("k", PARAMS, _fill)
    (entry.path / "B.pklz").unlink()
    for read in (entry.file, entry.load, entry.iter):
        with pytest.raises(MissingEntryFileError, match=rf"^{entry.path / 'B.pklz'} is missing from the k entry "
                                                        rf"{entry.key[:12]} .*`glyphforge cache gc`"):
            read("B.pklz")
    assert entry.load("A.pklz").shape == (3, 4)


def test_a_full_disk_while_committing_is_a_storage_error_and_leaves_no_entry(tmp_path, monkeypatch):
    store = CacheStore(tmp_path)
    write_text = Path.write_text

    def full(path, *args, **kwargs):
        if path.name == "manifest.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(StorageError, match=r"cannot write .*/manifest.json: the disk is full"):
        store.get_or_create("k", PARAMS, _fill)
    monkeypatch.undo()
    assert store.get("k", PARAMS) is None and store.ls() == []
    assert [path.name for path in (tmp_path / "k").iterdir()] == [f".{store.key('k', PARAMS)}.lock"]


def test_the_lock_timeout_comes_from_the_environment_or_the_argument(tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_LOCK_TIMEOUT", "12")
    assert CacheStore(tmp_path).lock_timeout == 12.0 and CacheStore(tmp_path, lock_timeout=3).lock_timeout == 3.0
    assert CacheStore.for_data_dir(tmp_path, lock_timeout=0).lock_timeout == 0.0
    with pytest.raises(ValueError, match="lock_timeout is -1"):
        CacheStore(tmp_path, lock_timeout=-1)


def test_a_held_lock_names_its_holder_and_the_callers_detail_while_waiting_and_when_giving_up(tmp_path, caplog):
    """glyphforge.cache.locks.hold, as downloads use it: the holder record and the ``detail`` hook."""
    path = tmp_path / ".f.bin.lock"
    with hold(filelock.FileLock(path), "fetching ds/f.bin", 1):  # another FileLock of the same file conflicts
        holder = read_holder(path)
        assert holder is not None and holder.pid == os.getpid() and holder.host == socket.gethostname()
        assert datetime.fromisoformat(holder.since).utcoffset() == timedelta(0)  # ISO 8601, UTC
        with caplog.at_level(logging.INFO, logger="glyphforge"), pytest.raises(LockTimeoutError) as caught:
            with hold(filelock.FileLock(path), "fetching ds/f.bin", 0.2, detail=lambda: "f.bin.part has 5 B"):
                pass
    assert isinstance(caught.value, TimeoutError)
    assert caught.value.lock_path == path and caught.value.holder == holder
    assert re.match(rf"gave up waiting for another process fetching ds/f\.bin after 0\.\d s: {re.escape(str(path))} "
                    rf"is held by {re.escape(str(holder))} \(f\.bin\.part has 5 B\)\. If that process is still "
                    r"fetching ds/f\.bin, wait for it, or wait longer with lock_timeout= or \$GLYPHFORGE_LOCK_TIMEOUT",
                    str(caught.value))
    assert [record.getMessage() for record in caplog.records] == [
        f"waiting for another process fetching ds/f.bin ({holder}): 0 s so far, f.bin.part has 5 B; giving up after "
        "0.2 s"]
    assert read_holder(path) is None and not holder_path(path).exists()  # the record goes with the lock


def test_verify_finds_a_flipped_byte_and_a_truncated_file(tmp_path):
    store = CacheStore(tmp_path)
    first = store.get_or_create("k", PARAMS, _fill)
    second = store.get_or_create("k", {"other": 1}, _fill)
    assert store.verify() == []
    target = first.path / "A.pklz"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    (second.path / "B.pklz").write_bytes((second.path / "B.pklz").read_bytes()[:-5])
    problems = sorted(store.verify(), key=lambda p: str(p.path))
    messages = {p.path: p.message for p in problems}
    assert messages == {
        target: "sha256 differs from the manifest (corrupted)",
        second.path / "B.pklz": messages[second.path / "B.pklz"],
    }
    assert "manifest says" in messages[second.path / "B.pklz"] and "truncated" in messages[second.path / "B.pklz"]


def test_ls_find_rm_and_gc(tmp_path):
    store = CacheStore(tmp_path)
    keep = store.get_or_create("k", PARAMS, _fill)
    broken = store.get_or_create("k", {"other": 1}, _fill)
    (broken.path / "A.pklz").unlink()
    unreadable = tmp_path / "k" / ("f" * 64)
    unreadable.mkdir()
    (unreadable / "manifest.json").write_text("{not json")
    abandoned = tmp_path / "k" / f".tmp-{'e' * 64}-xyz"
    abandoned.mkdir()
    assert {e.key for e in store.ls()} == {keep.key, broken.key}
    removed = store.gc()
    assert set(removed) == {abandoned, broken.path, unreadable}
    assert [e.key for e in store.ls()] == [keep.key]
    assert store.find(keep.key[:8]).path == keep.path
    store.rm(keep.key[:8])
    assert store.ls() == []
    with pytest.raises(KeyError, match="no entry"):
        store.rm(keep.key)
    with pytest.raises(KeyError, match="at least 6 characters"):
        store.find("abc")


def _run_child(code: str, root) -> subprocess.Popen:
    """Run ``code`` in a fresh interpreter; it finds the store root in ``sys.argv[1]``."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(root)])


def test_writer_killed_mid_write_leaves_no_entry_and_next_write_succeeds(tmp_path):
    started = tmp_path / "started"
    child = _run_child(
        f"""
        import sys, time, numpy as np
        from glyphforge.cache import CacheStore
        store = CacheStore(sys.argv[1])
        with store.create("k", {PARAMS!r}) as w:
            w.write("A.pklz", np.zeros((100, 28, 28), np.uint8))
            open({str(started)!r}, "w").close()
            time.sleep(60)
        """,
        tmp_path / "store",
    )
    wait_until(started.exists, "the child to start writing", process=child)
    child.send_signal(signal.SIGKILL)
    child.wait()
    store = CacheStore(tmp_path / "store")
    assert store.get("k", PARAMS) is None and store.ls() == []
    leftovers = [p for p in (tmp_path / "store" / "k").iterdir() if p.name.startswith(".tmp-")]
    assert len(leftovers) == 1
    entry = store.get_or_create("k", PARAMS, _fill)
    assert entry.files == ["A.pklz", "B.pklz"]
    assert not leftovers[0].exists()  # cleaned by the next writer


def test_writer_killed_inside_a_file_write_leaves_no_entry(tmp_path):
    """SIGKILL while a data file is half written (a level-3 write of 64 arrays of 1 MB of noise).

    The child stops itself (SIGSTOP, every thread at once) as soon as the temporary file has
    1 MB, between two of its writes: the kill lands mid-file however loaded the machine is.
    """
    child = _run_child(
        f"""
        import os, signal, sys, threading, time, numpy as np
        from pathlib import Path
        from glyphforge.cache import CacheStore

        def stop_mid_file():
            while not any(p.stat().st_size > 1 << 20 for p in Path(sys.argv[1]).glob("k/.tmp-*/.A.pklz.*.tmp")):
                time.sleep(0.001)
            os.kill(os.getpid(), signal.SIGSTOP)

        store = CacheStore(sys.argv[1])
        noise = list(np.random.default_rng(0).integers(0, 256, (64, 1 << 20), dtype=np.uint8))
        threading.Thread(target=stop_mid_file, daemon=True).start()
        with store.create("k", {PARAMS!r}) as w:
            w.write("A.pklz", noise, level=3)
        """,
        tmp_path / "store",
    )
    wait_until(lambda: _state(child.pid) == "T", "the child to stop itself inside A.pklz", process=child)
    child.send_signal(signal.SIGKILL)
    child.wait()
    [half_written] = (tmp_path / "store").glob("k/.tmp-*/.A.pklz.*.tmp")
    assert 1 << 20 < half_written.stat().st_size < 64 << 20  # killed mid-file
    store = CacheStore(tmp_path / "store")
    assert store.get("k", PARAMS) is None and store.ls() == [] and store.verify() == []
    entry = store.get_or_create("k", PARAMS, _fill)
    assert entry.files == ["A.pklz", "B.pklz"] and not half_written.exists()


def _state(pid: int) -> str:
    """The state letter of process ``pid`` in /proc (``T``: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_two_concurrent_processes_make_the_entry_once(tmp_path):
    log = tmp_path / "fills.log"
    code = f"""
        import sys, time, numpy as np
        from glyphforge.cache import CacheStore
        def note(word):
            with open({str(log)!r}, "a") as f:
                f.write(word + "\\n")
        def fill(w):  # holds the entry's lock until the other process has asked for the entry too
            note("fill")
            deadline = time.monotonic() + 120
            while open({str(log)!r}).read().split().count("begin") < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            w.write("A.pklz", np.arange(5))
        note("begin")
        entry = CacheStore(sys.argv[1]).get_or_create("k", {PARAMS!r}, fill)
        assert entry.load("A.pklz").tolist() == [0, 1, 2, 3, 4]
        note("done")
        """
    children = [_run_child(code, tmp_path / "store") for _ in range(2)]
    assert [child.wait(timeout=120) for child in children] == [0, 0]
    words = log.read_text().split()
    assert words.count("fill") == 1 and words.count("done") == 2
    assert words[: words.index("done")].count("begin") == 2  # both were asking while the entry was being made
    assert len(CacheStore(tmp_path / "store").ls()) == 1


def test_discard_in_background_hides_at_once_and_deletes_on_a_thread(tmp_path):
    store = CacheStore(tmp_path / "cache")
    work = store.work_dir("kind", {"a": 1})
    for index in range(50):
        (work / f"shard-{index}.pklz").write_bytes(b"x")
    thread = store.discard_in_background(work)
    assert not work.exists()  # out of sight before the call returns
    thread.join(timeout=30)
    assert not thread.is_alive() and [path.name for path in (tmp_path / "cache" / "kind").iterdir()] == []
    assert store.discard_in_background(work) is None
