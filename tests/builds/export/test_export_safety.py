"""`glyphforge export` never loses a user's files (issue #22): what --overwrite replaces, symlinks, mount
points, full and read-only disks, and exports running at once. Each test runs the command: in this process
(`support.cli.run_here`), or as the installed command where the process is the point (exports running at once)
and for its exit statuses.

The mounts are real tmpfs mounts (root only: skipped with the reason elsewhere).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import filelock
import numpy as np
import pytest
from PIL import Image

import glyphforge
from glyphforge.builds import BuiltDataset, build

from support.cli import run_here
from support.mounts import tmpfs
from support.specs import RowSpec

GLYPHFORGE = Path(sys.executable).parent / "glyphforge"
#: What an export of the `built` fixture holds.
EXPORTED = ["images.npy", "metadata.json", "name.npy", "row.npy"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> BuiltDataset:
    """6,000 rows of 40 bytes (240 KB exported): more than the small tmpfs holds."""
    dataset = build(RowSpec(n_examples=6000, shard_size=1000), data_dir=tmp_path_factory.mktemp("data"),
                    progress=False)
    for thread in threading.enumerate():  # the build deletes its finished shards in the background: let it finish
        if thread.name.startswith("glyphforge-discard"):
            thread.join()
    return dataset


@pytest.fixture(scope="module")
def data_dir(built) -> Path:
    return built.path.parents[2]


def export(data_dir: Path, *argv: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
           here: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``glyphforge export test-rows ARGV`` (with ``--data-dir``, unless ``env`` gives the data dir).

    In this process, or (not ``here``) as the installed command.
    """
    data: list[str | Path] = [] if env else ["--data-dir", data_dir]
    words = ["export", "test-rows", *argv, *data]
    if here:
        return run_here("glyphforge", *words, cwd=cwd, env=env)
    return subprocess.run([str(GLYPHFORGE), *map(str, words)], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, **(env or {})})


def start_export(data_dir: Path, target: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([str(GLYPHFORGE), "export", "test-rows", str(target), "--data-dir", str(data_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def contents(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` (relative path -> sha256 of its bytes; a symlink -> where it points)."""
    found = {}
    for path in sorted(directory.rglob("*")):
        name = str(path.relative_to(directory))
        if path.is_symlink():
            found[name] = f"-> {os.readlink(path)}"
        elif path.is_file():
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def user_files(directory: Path) -> dict[str, str]:
    """Fill ``directory`` with a user's files and folders; return their `contents`."""
    (directory / "sub").mkdir(parents=True)
    (directory / "notes.txt").write_text("my notes")
    (directory / "sub" / "data.bin").write_bytes(os.urandom(1000))
    return contents(directory)


def assert_whole_export(built: BuiltDataset, directory: Path) -> None:
    """``directory`` holds exactly one export of ``built``, equal to it, and no staging."""
    assert sorted(path.name for path in directory.iterdir()) == EXPORTED
    assert json.loads((directory / "metadata.json").read_text())["key"] == built.key
    assert np.array_equal(np.load(directory / "row.npy", mmap_mode="r"), np.arange(len(built)))
    assert np.array_equal(np.load(directory / "name.npy"), built.reopened().arrays["name"])


# -- rows 1, 2, 3: --overwrite replaces only an earlier export or an empty directory -------
def test_overwrite_in_the_current_directory_refuses_and_keeps_every_file(data_dir, tmp_path):
    work = tmp_path / "work"
    before = user_files(work)
    result = export(data_dir, ".", "--overwrite", cwd=work, here=False)  # the installed command's exit 2
    assert result.returncode == 2, result.stderr
    assert f"refusing to export to {work}: it is the current directory, and holds 2 entries (notes.txt, sub)" \
        in result.stderr
    assert contents(work) == before and sorted(p.name for p in tmp_path.iterdir()) == ["work"]


def test_a_parent_through_dotdot_is_resolved_first(built, data_dir, tmp_path):
    out = tmp_path / "out"
    before = user_files(out)
    result = export(data_dir, out / "sub" / "..", "--overwrite")
    assert result.returncode == 2, result.stderr
    assert f"refusing to export to {out}: it holds 2 entries (notes.txt, sub) that no export wrote" in result.stderr
    assert contents(out) == before
    export_dir = tmp_path / "export"
    assert export(data_dir, export_dir).returncode == 0
    again = export(data_dir, export_dir / "missing" / "..", "--overwrite")  # an earlier export: replaced
    assert again.returncode == 0, again.stderr
    assert f") to {export_dir} in " in again.stdout
    assert_whole_export(built, export_dir)


def test_the_data_dir_and_its_parents_are_refused(built, data_dir):
    before = contents(data_dir)
    result = export(data_dir, data_dir, "--overwrite", env={"GLYPHFORGE_DATA_DIR": str(data_dir)})
    assert result.returncode == 2, result.stderr
    assert f"refusing to export to {data_dir}: it is the data dir, and holds 1 entry (cache)" in result.stderr
    given = export(data_dir, data_dir, "--overwrite")  # --data-dir, not the environment's
    assert given.returncode == 2, given.stderr
    assert f"refusing to export to {data_dir}: it is the dataset's data dir, and holds 1 entry" in given.stderr
    parent = export(data_dir, data_dir.parent, "--overwrite")
    assert parent.returncode == 2, parent.stderr
    assert f"refusing to export to {data_dir.parent}: it holds the dataset's cache entry, {built.path}" in parent.stderr
    cache = export(data_dir, data_dir / "cache", "--overwrite")
    assert cache.returncode == 2 and f"{data_dir / 'cache'}: it is the cache, and holds 1 entry" in cache.stderr
    inside = export(data_dir, built.path / "npy")
    assert inside.returncode == 2 and "it is inside the dataset's cache entry" in inside.stderr
    assert contents(data_dir) == before
    assert BuiltDataset(built.entry).take([0, 5999])["row"].tolist() == [0, 5999]


def test_the_data_dir_of_the_context_given_is_refused(built, tmp_path):
    """``ds.export(..., context=)``: the context's data dir is protected as the environment's is."""
    other = tmp_path / "other-data"
    other.mkdir()
    with pytest.raises(glyphforge.ExportTargetError, match=f"refusing to export to {other}: it is the data dir, and "
                                                           "is empty"):
        built.export(other, overwrite=True, context=glyphforge.DataContext.resolve(data_dir=other))
    assert list(other.iterdir()) == []


def test_a_directory_with_other_files_a_file_and_another_export_are_refused(built, data_dir, tmp_path):
    mine = tmp_path / "mine"
    before = user_files(mine)
    for overwrite in ([], ["--overwrite"]):
        result = export(data_dir, mine, *overwrite)
        assert result.returncode == 2, result.stderr
        assert "it holds 2 entries (notes.txt, sub) that no export wrote, and an export replaces only" in result.stderr
        assert "(run again with -v" not in result.stderr
    with pytest.raises(glyphforge.ExportTargetError) as refused:  # the library refuses the same
        built.export(mine, overwrite=True)
    assert isinstance(refused.value, FileExistsError) and "(notes.txt, sub) that no export wrote" in str(refused.value)
    assert contents(mine) == before
    file = tmp_path / "file.npy"
    file.write_bytes(b"mine")
    result = export(data_dir, file, "--overwrite")
    assert result.returncode == 2 and f"cannot export to {file}: it is a file, not a directory" in result.stderr
    result = export(data_dir, file / "out")
    assert result.returncode == 2 and f"{file} is a file, not a directory" in result.stderr
    assert file.read_bytes() == b"mine"
    other = tmp_path / "other"
    assert export(data_dir, other).returncode == 0
    document = json.loads((other / "metadata.json").read_text())
    (other / "metadata.json").write_text(json.dumps({**document, "key": "f" * 64}))
    result = export(data_dir, other)
    assert result.returncode == 2 and "holds an export of another dataset (ffffffffffff)" in result.stderr
    assert export(data_dir, other, "--overwrite").returncode == 0
    assert_whole_export(built, other)
    (other / "extra.npy").write_bytes(b"mine")  # an export plus a user's file is no export
    result = export(data_dir, other, "--overwrite")
    assert result.returncode == 2 and "it holds 5 entries (extra.npy, images.npy, metadata.json, name.npy, row.npy)" \
        in result.stderr


# -- row 10: symlinks and mount points -------------------------------------------------
def test_an_empty_symlinked_directory_gets_the_export_and_stays_a_link(built, data_dir, tmp_path):
    (tmp_path / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real", target_is_directory=True)
    result = export(data_dir, link)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == str(tmp_path / "real")
    assert_whole_export(built, tmp_path / "real")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".real.export.lock", "link", "real"]


def test_an_empty_mount_point_gets_the_export_staged_on_its_own_filesystem(built, data_dir, tmp_path):
    with tmpfs(tmp_path / "scratch", "size=4m") as scratch:
        result = export(data_dir, scratch)
        assert result.returncode == 0, result.stderr
        assert_whole_export(built, scratch)
        assert os.path.ismount(scratch)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".scratch.export.lock", "scratch"]


def test_a_mount_point_in_a_directory_nobody_may_write_holds_its_own_lock(built, data_dir, tmp_path):
    with tmpfs(tmp_path / "root", "size=1m") as root:  # as / holds /scratch
        (root / "scratch").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
        with tmpfs(root / "scratch", "size=4m") as scratch:
            for overwrite in ([], ["--overwrite"]):  # the second replaces the first, lock and all
                result = export(data_dir, scratch, *overwrite)
                assert result.returncode == 0, result.stderr
                assert sorted(p.name for p in scratch.iterdir()) == sorted([".glyphforge-export.lock", *EXPORTED])
                assert np.array_equal(np.load(scratch / "row.npy"), np.arange(len(built)))
            (scratch / "notes.txt").write_text("mine")
            assert export(data_dir, scratch, "--overwrite").returncode == 2


# -- row 17: storage errors say where, how much room, and leave nothing --------------------
@pytest.mark.parametrize("format", ["npy", "parquet"])
def test_a_full_disk_names_the_path_and_the_free_space_and_leaves_nothing(format, data_dir, tmp_path):
    with tmpfs(tmp_path / "small", "size=64k") as small:
        for target, left in ((small, []), (small / "out", [".out.export.lock"])):  # the lock, no export
            # and the installed command's exit 1
            result = export(data_dir, target, "--format", format, here=target == small)
            assert result.returncode == 1, result.stderr
            assert f"error: cannot write {target}: the disk is full (" in result.stderr
            assert "MB free there) (No space left on device). The export needs about 240.0 KB" in result.stderr
            assert [path.name for path in small.iterdir()] == left
    assert sorted(p.name for p in tmp_path.iterdir()) == [".small.export.lock", "small"]


def test_a_read_only_disk_is_named(data_dir, tmp_path):
    with tmpfs(tmp_path / "ro", "ro,size=1m") as read_only:
        for target in (read_only, read_only / "out"):
            result = export(data_dir, target)  # known before any work (issue #42 row 16): a bad argument
            assert result.returncode == 2, result.stderr
            where = "" if target == read_only else f" (to be made in {read_only})"
            assert (f"error: cannot export to {target}{where}: it is on a read-only file system. Give a directory "
                    "you can write to") in result.stderr
        assert list(read_only.iterdir()) == []


# -- row 11: exports at once -------------------------------------------------------------
@pytest.mark.slow
def test_exports_of_one_directory_take_turns_and_end_with_one_whole_export(built, data_dir, tmp_path):
    out = tmp_path / "out"
    with filelock.FileLock(tmp_path / ".out.export.lock"):  # as a running export of `out` holds it
        waiting = [start_export(data_dir, out) for _ in range(2)]
        with ThreadPoolExecutor(2) as pool:
            lines = [pool.submit(process.stderr.readline) for process in waiting]
            for line in lines:
                assert f"waiting for another process exporting to {out} (" in line.result(timeout=120)
        assert all(process.poll() is None for process in waiting) and not out.exists()
    for process in waiting:
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
        assert f"to {out} in " in stdout
    assert_whole_export(built, out)
    racing = [start_export(data_dir, tmp_path / "raced") for _ in range(2)]  # started together, unheld
    for process in racing:
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
    assert_whole_export(built, tmp_path / "raced")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.export.lock", ".raced.export.lock", "out", "raced"]


def test_staging_of_other_directories_is_left_and_own_leftovers_go(built, data_dir, tmp_path):
    other_staging = tmp_path / ".export-foo-bar-a1b2c3d4"  # a running export of foo-bar stages here
    other_staging.mkdir()
    (other_staging / "images.npy").write_bytes(b"half")
    leftover = tmp_path / ".export-foo-zz9_x1"  # an export of foo killed before it finished
    leftover.mkdir()
    (leftover / "row.npy").write_bytes(b"half")
    result = export(data_dir, tmp_path / "foo")
    assert result.returncode == 0, result.stderr
    assert_whole_export(built, tmp_path / "foo")
    assert (other_staging / "images.npy").read_bytes() == b"half" and not leftover.exists()
    inside = tmp_path / "bar" / ".glyphforge-export-k3x9"  # killed while staging inside the empty bar
    inside.mkdir(parents=True)
    assert export(data_dir, tmp_path / "bar").returncode == 0
    assert_whole_export(built, tmp_path / "bar")


# -- row 17: preview --out into a missing directory --------------------------------------
def test_preview_creates_the_missing_folder_of_its_png(data_dir, tmp_path):
    out = tmp_path / "missing" / "dir" / "x.png"
    result = run_here("glyphforge", "preview", "test-rows", "--out", out, "-n", "4", "--data-dir", data_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"wrote {out}\n" and os.listdir(out.parent) == ["x.png"]
    with Image.open(out) as image:
        assert image.format == "PNG" and image.width > 0
    result = run_here("glyphforge", "preview", "test-rows", "--out", out.parent, "--data-dir", data_dir)
    assert result.returncode == 1 and f"cannot write the preview to {out.parent}: it is a directory" in result.stderr
