"""A data dir a group shares (issue 22, rows 5 and 18), with two real uids running the real commands.

User A (uid 2001) and user B (uid 2002) are both only in group 3000 and work with umask
002 in a data dir made ``chmod 2775`` and given to that group, as a lab sets one up. A
prepares MNIST (synthetic files placed by hand, ``--offline``) and builds a small font
scene entry; B then lists, verifies, loads, builds and cleans. numba's cache is a group
folder too, so B loads the kernels A compiled. Another user's files that B may not read
or delete (made owner-only, as glyphforge before the fix made every entry: a whole entry,
or one data file of it) get clear messages and are left alone. Needs root (see `support.as_user`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from glyphforge import load_mnist
from glyphforge.cache import CacheStore

from support.as_user import GROUP, USER_A, USER_B, run_as, skip_reason
from support.cli import BIN
from support.synthetic_mnist import ALL_FILES, write_synthetic_mnist

pytestmark = pytest.mark.slow

#: What B's Python prints of a load: the arrays' sha256, so that the test compares them with its own load.
LOAD = ("import hashlib, sys; from glyphforge import load_mnist; "
        "x, y, _ = load_mnist('0123456789', subset='test', seed=4, shape=SHAPE, data_dir=sys.argv[1], offline=True); "
        "print(hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest())")


class Lab:
    """The shared data dir, each user's home and how to run a command as A or B."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.data = base / "data"
        self.numba = base / "numba"
        self.homes = {USER_A: base / "home-a", USER_B: base / "home-b"}

    def run(self, uid: int, *argv: str | Path, umask: int = 0o002, env: dict[str, str] | None = None):
        environment = {"NUMBA_CACHE_DIR": str(self.numba), "GLYPHFORGE_DATA_DIR": str(self.data), **(env or {})}
        return run_as(uid, [str(arg) for arg in argv], home=self.homes[uid], umask=umask, env=environment)

    def cli(self, uid: int, *argv: str | Path, umask: int = 0o002, command: str = "glyphforge"):
        """Run the installed ``glyphforge`` (or ``command``) on the shared data dir."""
        return self.run(uid, BIN / command, *argv, "--data-dir", self.data, umask=umask)

    def entry(self, shape: list[int]) -> Path:
        """The MNIST entry of ``shape``, found as root."""
        entries = CacheStore.for_data_dir(self.data).ls()
        [found] = [entry.path for entry in entries if entry.params.get("shape") == shape]
        return found

    def entry_dirs(self) -> dict[str, Path]:
        """``{key: entry directory}`` of every entry, read as root."""
        return {path.name: path for path in (self.data / "cache").glob("*/*") if (path / "manifest.json").exists()}


def group_folder(path: Path) -> Path:
    path.mkdir()
    os.chown(path, 0, GROUP)
    os.chmod(path, 0o2775)
    return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A lab's data dir after A prepared MNIST (native and 7x7) and built 50 font scenes in it."""
    base = Path(tempfile.mkdtemp(prefix="glyphforge-shared-"))  # not under pytest's root-only tmp dir
    try:
        os.chmod(base, 0o755)
        lab = Lab(base)
        for uid, home in lab.homes.items():
            home.mkdir()
            os.chown(home, uid, GROUP)
        reason = skip_reason(lab.homes[USER_A])
        if reason:
            pytest.skip(reason)
        group_folder(lab.data)
        group_folder(lab.numba)
        upstream = write_synthetic_mnist(base / "upstream").directory
        os.chmod(upstream, 0o755)
        for name in ALL_FILES:  # cp gives a copy the source's mode less the umask
            os.chmod(upstream / name, 0o666)
        raw = lab.data / "raw" / "mnist"
        placed = lab.run(USER_A, "sh", "-c", 'mkdir -p "$1" && cp "$2"/*.gz "$1"', "sh", raw, upstream)
        assert placed.returncode == 0, placed.stderr
        prepared = lab.cli(USER_A, "mnist", "--offline", "--no-verify", "--no-warmup", "--shape", "7x7", "-q",
                           command="prepare-data")  # the resize kernel, then the build's scene kernels, compile
        assert prepared.returncode == 0, prepared.stderr
        built = lab.cli(USER_A, "build", "scenes", "--glyphs", "font", "--n-examples", "50", "-q")
        assert built.returncode == 0, built.stderr
        yield lab
    finally:
        shutil.rmtree(base, ignore_errors=True)


def modes(root: Path) -> dict[str, tuple[int, int]]:
    """``{path relative to root: (mode bits, group)}`` of everything under ``root``."""
    return {str(path.relative_to(root)): (path.lstat().st_mode, path.lstat().st_gid) for path in root.rglob("*")}


def assert_group_shared(found: dict[str, tuple[int, int]]) -> None:
    """Every directory is 0o2775 (setgid kept), every file 0o664, all of the group."""
    expected = {stat.S_IFDIR: 0o2775, stat.S_IFREG: 0o664}
    wrong = {name: (stat.filemode(mode), gid) for name, (mode, gid) in found.items()
             if gid != GROUP or expected.get(stat.S_IFMT(mode)) != stat.S_IMODE(mode)}
    assert wrong == {}


def test_what_a_member_makes_is_the_groups_to_read_and_write(lab):
    found = modes(lab.data)
    kinds = {name.split("/")[1] for name in found if name.startswith("cache/") and name.count("/") >= 1}
    assert {"mnist", "scenes"} <= kinds and len(lab.entry_dirs()) == 3
    assert_group_shared(found)
    numba = modes(lab.numba)  # numba's own cache files, in the group's folder
    assert any(name.endswith(".nbi") for name in numba)
    assert_group_shared(numba)


def test_another_member_lists_verifies_loads_builds_into_and_cleans_the_data_dir(lab):
    keys = set(lab.entry_dirs())
    listed = lab.cli(USER_B, "cache", "ls")
    assert listed.returncode == 0, listed.stderr
    entries, upstream = listed.stdout.split("\n\n")  # the entries; then raw/'s files: the synthetic MNIST copies
    assert {line.split()[0] for line in entries.splitlines()[2:]} == {key[:12] for key in keys}
    assert upstream.count("placed  differs from the pinned hash") == 4
    verified = lab.cli(USER_B, "cache", "verify")
    assert (verified.returncode, verified.stdout.splitlines()[-2:]) == (
        0, ["4 upstream files hashed: 0 match the pinned hashes", f"all 3 entries in {lab.data / 'cache'} verified"])

    x, y, _ = load_mnist("0123456789", subset="test", seed=4, shape=(7, 7), data_dir=lab.data, offline=True)
    loaded = lab.run(USER_B, sys.executable, "-c", LOAD.replace("SHAPE", "(7, 7)"), lab.data)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest()

    built = lab.cli(USER_B, "build", "scenes", "--glyphs", "font", "--n-examples", "50", "--seed", "7")
    assert built.returncode == 0, built.stderr
    new = re.search(r"entry (\w+) at (\S+)", built.stdout)
    assert new and new.group(1) not in keys and Path(new.group(2)).stat().st_uid == USER_B
    cleaned = lab.cli(USER_B, "cache", "gc")
    assert (cleaned.returncode, cleaned.stdout.strip(), cleaned.stderr) == (0, "0 item(s) removed", "")
    assert set(lab.entry_dirs()) == keys | {new.group(1)}
    found = modes(lab.data)
    assert not [name for name in found if "/.trash-" in name or "/.tmp-" in name or name.endswith(".work")]
    assert_group_shared(found)


def test_a_lock_and_staging_left_by_one_member_do_not_stop_another(lab):
    """A is killed while making an entry: its lock file, holder record and staging dir stay; B makes the entry."""
    store = CacheStore.for_data_dir(lab.data)
    lock = store.root / "k" / f".{store.key('k', {'n': 1})}.lock"
    make = ("import os, sys; from glyphforge.cache import CacheStore\n"
            "with CacheStore.for_data_dir(sys.argv[1]).create('k', {'n': 1}) as writer:\n"
            "    writer.write('a.pklz', [1, 2, 3])\n"
            "    if sys.argv[2] == 'die': os._exit(0)\n")
    try:
        killed = lab.run(USER_A, sys.executable, "-c", make, lab.data, "die")
        assert killed.returncode == 0, killed.stderr
        left = sorted(path.name for path in lock.parent.iterdir())
        assert left[:2] == [lock.name, lock.name + ".holder"] and left[2].startswith(".tmp-")
        assert json.loads(Path(f"{lock}.holder").read_text())["pid"] > 0
        made = lab.run(USER_B, sys.executable, "-c", make, lab.data, "live")
        assert made.returncode == 0, made.stderr
        entry = store.get("k", {"n": 1})
        assert entry is not None and entry.load("a.pklz") == [1, 2, 3] and entry.path.stat().st_uid == USER_B
        readers = f".{entry.key}.readers"  # made with the entry by B (readers' shared lock, see glyphforge.cache.locks)
        assert {path.name for path in lock.parent.iterdir() if path.name.startswith(".")} in ({readers},
                                                                                             {lock.name, readers})
    finally:
        shutil.rmtree(lock.parent, ignore_errors=True)


def test_an_entry_another_member_made_owner_only_is_named_and_left_alone(lab):
    """What glyphforge before the fix made of every entry (0700/0600): B is told whose it is, nothing is lost."""
    small = lab.entry([7, 7])
    before = {path.name: path.read_bytes() for path in small.iterdir()}
    raw_before = {name: (lab.data / "raw" / "mnist" / name).read_bytes() for name in ALL_FILES}
    closed = lab.run(USER_A, "chmod", "-R", "go=", small)
    assert closed.returncode == 0, closed.stderr
    try:
        listed = lab.cli(USER_B, "cache", "ls")
        assert listed.returncode == 0 and small.name[:12] not in listed.stdout
        entries = listed.stdout.split("\n\n")[0].splitlines()
        assert len(entries) == 2 + len(lab.entry_dirs()) - 1  # the header, its rule, the others
        assert listed.stderr.startswith(f"not listed: {small}: you may not read it: permission is denied (owner uid "
                                        f"{USER_A}, group gid {GROUP}, mode drwx--S---)")
        assert f"`chmod -R g+rX {small}`" in listed.stderr

        verified = lab.cli(USER_B, "cache", "verify")
        assert verified.returncode == 1 and "CORRUPT" not in verified.stdout
        assert verified.stdout.splitlines()[-1:] == [  # after raw/'s 4 CUSTOM copies and their count
            f"UNREADABLE {small}: " + listed.stderr.split(": ", 2)[2].strip()]
        assert "1 item(s) you may not read, so not verified" in verified.stderr

        loaded = lab.run(USER_B, sys.executable, "-c", LOAD.replace("SHAPE", "(7, 7)"), lab.data)
        assert loaded.returncode == 1
        assert (f"UnreadableEntryError: the mnist entry {small.name[:12]} at {small} exists, but you may not read it: "
                f"permission is denied (owner uid {USER_A}") in loaded.stderr

        cleaned = lab.cli(USER_B, "cache", "gc")
        assert (cleaned.returncode, cleaned.stdout.strip()) == (0, "0 item(s) removed")
        assert cleaned.stderr.startswith(f"left alone: {small}: you may not read it")
    finally:
        subprocess.run(["chmod", "-R", "g+rwX,o+rX", small], check=True)  # as root: back to what A made
    assert {path.name: path.read_bytes() for path in small.iterdir()} == before  # nothing of A's was touched
    assert {name: (lab.data / "raw" / "mnist" / name).read_bytes() for name in ALL_FILES} == raw_before
    assert not [path for path in small.parent.iterdir() if path.name.startswith((".trash-", ".tmp-"))]


def test_a_data_file_another_member_made_owner_only_is_named_with_what_to_do(lab):
    """A readable entry with one owner-only data file used to fail B's reads with a bare `[Errno 13]`."""
    small = lab.entry([7, 7])
    [scenes] = [path.parent for path in (lab.data / "cache" / "scenes").glob("*/arrays.pklz")
                if path.stat().st_uid == USER_A]  # A's build (B may have built one too)
    data_file, arrays = small / "class_03.pklz", scenes / "arrays.pklz"  # one class of ten; the scenes' arrays
    closed = lab.run(USER_A, "chmod", "go=", data_file, arrays)
    assert closed.returncode == 0, closed.stderr
    said = (f"exists but you may not read it: permission is denied (owner uid {USER_A}, group gid {GROUP}, "
            "mode -rw-------). Another user made it readable by its owner only")
    try:
        loaded = lab.run(USER_B, sys.executable, "-c", LOAD.replace("SHAPE", "(7, 7)"), lab.data)
        assert loaded.returncode == 1 and "Errno 13" not in loaded.stderr
        assert (f"UnreadableEntryError: {data_file}, a data file of the mnist entry {small.name[:12]}, {said}"
                in loaded.stderr), loaded.stderr
        assert f"Ask its owner to run `chmod -R g+rX {small}`" in loaded.stderr
        assert "or use a data dir of your own (--data-dir or $GLYPHFORGE_DATA_DIR)" in loaded.stderr
        out = lab.homes[USER_B] / "scenes.png"
        previewed = lab.cli(USER_B, "preview", scenes.name[:12], "--out", out)
        assert previewed.returncode == 1 and "Errno 13" not in previewed.stderr
        assert previewed.stderr.startswith(
            f"error: {arrays}, a data file of the scenes entry {scenes.name[:12]}, {said}"), previewed.stderr
        assert not out.exists()
    finally:
        subprocess.run(["chmod", "g+rw,o+r", data_file, arrays], check=True)  # as root: back to what A made


def test_gc_names_what_of_another_members_it_may_not_delete_and_leaves_no_trash(lab):
    """A worked with umask 022 once: its trash and broken entry are not the group's to delete."""
    kind = lab.data / "cache" / "mnist"
    trash, broken = kind / ".trash-0123-abcd", kind / ("ab" * 32)
    made = lab.run(USER_A, "sh", "-c", 'mkdir -p "$1/x" "$2" && echo 1 > "$1/x/f" && echo {} > "$2/manifest.json"',
                   "sh", trash, broken, umask=0o022)
    assert made.returncode == 0, made.stderr
    try:
        cleaned = lab.cli(USER_B, "cache", "gc")
        assert cleaned.returncode == 1 and cleaned.stdout.strip() == "0 item(s) removed"
        assert "Errno" not in cleaned.stderr and "Traceback" not in cleaned.stderr
        assert cleaned.stderr.startswith("error: `glyphforge cache gc` removed 0 item(s) but could not remove 2: ")
        assert (f"{trash} (Permission denied at {trash / 'x' / 'f'}: owner uid {USER_A}, group gid {GROUP}, "
                "mode -rw-r--r--)") in cleaned.stderr
        assert f"{broken} (Permission denied at {broken}: owner uid {USER_A}, group gid {GROUP}, mode drwxr-sr-x)" \
            in cleaned.stderr
        assert "ask their owner to run `glyphforge cache gc`" in cleaned.stderr
        assert trash.exists() and (broken / "manifest.json").exists()
        assert sorted(path.name for path in kind.iterdir() if path.name.startswith(".trash-")) == [trash.name]
        by_owner = lab.cli(USER_A, "cache", "gc")  # its owner can
        assert by_owner.returncode == 0 and by_owner.stdout.strip().endswith("2 item(s) removed")
        assert not trash.exists() and not broken.exists()
    finally:
        shutil.rmtree(trash, ignore_errors=True)
        shutil.rmtree(broken, ignore_errors=True)


def test_warmup_says_where_the_kernels_went_when_numba_cache_dir_is_read_only(lab):
    """numba passes over a $NUMBA_CACHE_DIR it cannot write to; warmup names the folder that holds the kernels."""
    read_only = lab.base / "numba-read-only"
    read_only.mkdir(mode=0o755)  # root's: A may not write there
    home = lab.homes[USER_A]
    warmed = lab.run(USER_A, BIN / "glyphforge", "warmup", env={"NUMBA_CACHE_DIR": str(read_only)})
    assert warmed.returncode == 0, warmed.stderr
    said = re.search(r"compiled kernels are kept in (\S+); not in \$NUMBA_CACHE_DIR, (\S+), which numba cannot "
                     r"write to", warmed.stdout)
    assert said and said.group(2) == str(read_only), warmed.stdout
    kept = Path(said.group(1))
    assert kept.parent == home / ".cache" / "numba"  # the checkout's __pycache__ is root's: numba's last choice
    assert {index.name.split("-")[0] for index in kept.glob("*.nbi")} == {
        "resample_kernel.resample", "composite.ink_boxes", "composite.place_glyphs", "composite.composite"}
    assert list(read_only.iterdir()) == []


@pytest.mark.parametrize("command", [["export", "{key}", "{home}/out"], ["preview", "{key}", "--out", "{home}/a.png"],
                                     ["publish", "{key}", "file://{home}/published"], ["cache", "rm", "{key}"],
                                     ["cache", "gc"]], ids=lambda argv: " ".join(argv[:2]))
def test_every_command_on_a_built_entry_another_member_made_owner_only_names_it_and_its_owner(lab, command):
    """Issue #42 row 20: not "none built yet", nor a raw `[Errno 13]` of its decoded copy's record, but the entry
    and whose it is, as `cache ls` and `cache verify` say (test above)."""
    [scenes] = [path.parent for path in (lab.data / "cache" / "scenes").glob("*/arrays.pklz")
                if path.stat().st_uid == USER_A]
    decoded = scenes.with_name(f"{scenes.name}.decoded")
    made = "import sys, glyphforge as gf; gf.open_built(sys.argv[1]).materialize()"  # as random reads make it
    read = lab.run(USER_A, sys.executable, "-c", made, scenes)
    assert read.returncode == 0 and (decoded / "checks.json").is_file(), read.stderr
    closed = lab.run(USER_A, "chmod", "-R", "go=", scenes, decoded)
    assert closed.returncode == 0, closed.stderr
    home = lab.homes[USER_B]
    try:
        done = lab.cli(USER_B, *[arg.format(key=scenes.name[:12], home=home) for arg in command])
    finally:
        subprocess.run(["chmod", "-R", "g+rwX,o+rX", scenes, decoded], check=True)  # as root: back to what A made

    assert "Errno" not in done.stderr and "none built yet" not in done.stderr and "Traceback" not in done.stderr
    owner = f"permission is denied (owner uid {USER_A}, group gid {GROUP}, mode drwx--S---)"
    if command[-1] == "gc":
        assert (done.returncode, done.stdout.strip()) == (0, "0 item(s) removed"), done.stderr
        assert done.stderr.startswith(f"left alone: {scenes}: you may not read it: {owner}")
    else:
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith(f"error: the scenes entry {scenes.name[:12]} at {scenes} exists, but you may not "
                                      f"read it: {owner}"), done.stderr
        assert f"`chmod -R g+rX {scenes}`" in done.stderr
    assert scenes.is_dir() and decoded.is_dir() and not list(home.glob("out*")) + list(home.glob("published*"))


@pytest.mark.parametrize("format", ["npy", "parquet"])
@pytest.mark.parametrize("where", ["a new folder in it", "the folder itself"])
def test_an_export_into_a_folder_the_member_may_not_write_names_it_and_its_owner_before_any_work(lab, where, format):
    """Issue #42 row 16: B exports into A's folder (mode 0755): one paragraph, the folder and its owner, exit 2."""
    [scenes] = [path.parent for path in (lab.data / "cache" / "scenes").glob("*/arrays.pklz")
                if path.stat().st_uid == USER_A]
    folder = lab.homes[USER_A] / f"exports-{format}"
    made = lab.run(USER_A, "mkdir", "-m", "0755", folder)
    assert made.returncode == 0, made.stderr
    target = folder / "out" if where == "a new folder in it" else folder
    try:
        done = lab.cli(USER_B, "export", scenes.name[:12], target, "--format", format)
        assert done.returncode == 2, done.stderr
        assert "Errno" not in done.stderr and "Traceback" not in done.stderr and "free there" not in done.stderr
        mode = stat.filemode(folder.stat().st_mode)
        where = "" if target == folder else f" (to be made in {folder})"
        assert done.stderr.strip() == (
            f"error: cannot export to {target}{where}: you may not write in it (owner uid {USER_A}, group gid "
            f"{GROUP}, mode {mode}). Give a directory you can write to")
        assert list(folder.iterdir()) == []
    finally:
        shutil.rmtree(folder)
