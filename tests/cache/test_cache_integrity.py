"""Cache integrity under attack (issue 22, rows 12, 14 and 15).

Each test damages a real entry on disk as someone who can write the cache would, hashes
recomputed where the row says so, then reads it through the real loaders and commands:

* 12: a shard member asking the restricted unpickler for far more memory than the
  shard's layout holds is refused, naming the shard, before the memory is taken;
* 14: a truncated ``arrays.pklz`` still serves its intact shards; the lost ones are named
  (numbers and examples) by every read and by ``cache verify``;
* 15: class files swapped together with their manifest records break the entry (its
  ``entry_sha256`` covers the files table): never mislabelled images.
"""
from __future__ import annotations

import gc
import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from isal import isal_zlib

import glyphforge as gf
from glyphforge import cli, config
from glyphforge._files import sha256_file
from glyphforge.builds import ARRAYS_FILE, BuiltDataset, DamagedShardsError, build
from glyphforge.builds.reading.blocks import BLOCKS_FILE
from glyphforge.builds.reading.index import INDEX_FILE, ShardIndex
from glyphforge.cache import (
    CacheStore,
    DamagedPklzError,
    OversizedPickleError,
    UnsafePickleError,
    dump_pklz,
    load_pklz,
)
from glyphforge.cache.keys import entry_sha256
from glyphforge.cache.manifest import DamagedManifestError, make_manifest, read_manifest
from glyphforge.cache.safe_pickle import MIN_BUDGET
from glyphforge.datasets.classes.mnist_form import class_file_name
from glyphforge.datasets.mnist import load_mnist

from support.specs import RowSpec
from support.synthetic_mnist import ALL_FILES, SyntheticMNIST, write_synthetic_mnist

#: A pickle of a few bytes calling ``bytearray(2_500_000_000)``: 2.5 GB of zeros when loaded.
BYTEARRAY_2_5_GB = b"\x80\x04cbuiltins\nbytearray\n\x8a\x05" + (2_500_000_000).to_bytes(5, "little") + b"\x85R."


def _manifest(entry_dir: Path) -> dict:
    return json.loads((entry_dir / "manifest.json").read_text())


def _write_manifest(entry_dir: Path, manifest: dict) -> None:
    (entry_dir / "manifest.json").write_text(json.dumps(manifest))


# -- 12: a member asking for far more memory than its shard's layout declares ---------------------
@pytest.fixture(scope="module")
def rows_build(tmp_path_factory) -> BuiltDataset:
    """A real build of 30 rows in 3 shards of 10 (tests copy its entry before damaging it)."""
    return build(RowSpec(n_examples=30, shard_size=10), data_dir=tmp_path_factory.mktemp("built"), progress=False)


def _copy_build(dataset: BuiltDataset, tmp_path: Path) -> tuple[Path, Path]:
    """Copy ``dataset``'s entry into a data dir in ``tmp_path``; return the data dir and the copy's directory."""
    data_dir = tmp_path / "data"
    entry_dir = data_dir / "cache" / dataset.entry.kind / dataset.key
    shutil.copytree(dataset.path, entry_dir)
    return data_dir, entry_dir


def _replace_member(entry_dir: Path, number: int, member: bytes) -> None:
    """Put ``member`` in place of shard ``number``'s gzip member, recomputing the index, a block table that fits
    it, the file's size and sha256 and the manifest's hashes, as anyone who can write the cache can."""
    manifest = _manifest(entry_dir)
    index = ShardIndex.read(entry_dir / INDEX_FILE, "entry")
    path = entry_dir / ARRAYS_FILE
    data = path.read_bytes()
    members = [data[offset:offset + length] for offset, length in zip(index.offset, index.length, strict=True)]
    members[number] = member
    path.write_bytes(b"".join(members))
    ShardIndex.from_lengths([len(part) for part in members], index.rows).write(entry_dir / INDEX_FILE)
    blocks = np.load(entry_dir / BLOCKS_FILE)
    per_shard = len(blocks) // len(index)  # RowSpec's shards: one block of each array
    blocks[number * per_shard:(number + 1) * per_shard] = np.linspace(1, len(member), per_shard).astype(np.int64)
    np.save(entry_dir / BLOCKS_FILE, blocks, allow_pickle=False)
    for changed in (path, entry_dir / INDEX_FILE, entry_dir / BLOCKS_FILE):
        manifest["files"][changed.name] = {"size": changed.stat().st_size, "sha256": sha256_file(changed)}
    _write_manifest(entry_dir, make_manifest(manifest["kind"], manifest["key"], manifest["params"],
                                             manifest["files"], manifest["meta"]))


def _bomb(inflated: int) -> bytes:
    """A gzip member of a pickle of ``inflated`` zero bytes (a few hundred KB on disk)."""
    compressor = isal_zlib.compressobj(1, isal_zlib.DEFLATED, 31)
    parts = [compressor.compress(b"\x80\x05\x8e" + inflated.to_bytes(8, "little"))]
    block = bytes(1 << 20)
    parts += [compressor.compress(block) for _ in range(inflated >> 20)]
    parts += [compressor.compress(b"."), compressor.flush()]
    return b"".join(parts)


#: Reads one row of the built dataset in a data dir, in a process of at most 4 GB of address space,
#: and prints the error and the peak resident memory of the read in KB: the process's VmHWM, reset just
#: before the read (``5`` to /proc/self/clear_refs). Not ``ru_maxrss``: Linux carries the parent's peak
#: over into a child's at fork and exec, so a test process grown big by earlier tests polluted it.
_READER = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    from glyphforge.builds.reading.lookup import find_built
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # the peak resident memory (VmHWM) starts again from what is resident now
    try:
        find_built("test-rows", sys.argv[1]).take([int(sys.argv[2])])
    except Exception as error:
        print(type(error).__name__, error)
    with open("/proc/self/status") as status:
        print(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
    """)


@pytest.mark.parametrize("make_member", [
    lambda: gzip.compress(BYTEARRAY_2_5_GB, mtime=0),  # a pickle asking for a bytearray of 2,500,000,000 bytes
    lambda: _bomb(800 << 20),  # a pickle of 800 MB of zeros
], ids=["bytearray-2.5GB", "gzip-bomb-800MB"])
def test_a_member_asking_beyond_its_layout_is_refused_naming_the_shard_before_the_memory_is_taken(
        rows_build, tmp_path, make_member):
    data_dir, entry_dir = _copy_build(rows_build, tmp_path)
    _replace_member(entry_dir, 1, make_member())
    assert read_manifest(entry_dir)  # the entry is valid: every hash was recomputed
    done = subprocess.run([sys.executable, "-c", _READER, str(data_dir), "15"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    error, peak_kb = done.stdout.strip().splitlines()
    assert error.startswith(f"DamagedPklzError {entry_dir / ARRAYS_FILE}: shard 1 (bytes {_index(entry_dir)[1]}) is "
                            "truncated or damaged (the array of names has no readable .npy header"), error
    assert int(peak_kb) < 600_000  # far below the 2.5 GB (or 800 MB) asked for: no pickle is read
    dataset = BuiltDataset(CacheStore.for_data_dir(data_dir).get(rows_build.entry.kind, rows_build.entry.params))
    assert dataset.take([0, 29])["row"].tolist() == [0, 29]  # the other shards still read


def _index(entry_dir: Path) -> list[str]:
    """Each shard's "bytes A to B" as errors quote it."""
    index = ShardIndex.read(entry_dir / INDEX_FILE, "entry")
    return [f"{offset} to {offset + length}" for offset, length in zip(index.offset, index.length, strict=True)]


# -- 14: a truncated arrays.pklz ---------------------------------------------------------------------
def test_a_truncated_arrays_file_serves_its_whole_shards_and_every_read_and_verify_name_the_lost_ones(
        rows_build, tmp_path, capsys):
    data_dir, entry_dir = _copy_build(rows_build, tmp_path)
    path = entry_dir / ARRAYS_FILE
    size = path.stat().st_size
    index = ShardIndex.read(entry_dir / INDEX_FILE, "entry")
    cut = int(index.offset[1] + index.length[1] // 2)  # half of shard 1 left, shard 2 gone
    with open(path, "r+b") as file:
        file.truncate(cut)
    store = CacheStore.for_data_dir(data_dir)
    dataset = BuiltDataset(store.get(rows_build.entry.kind, rows_build.entry.params))
    assert dataset.take([9, 0, 3])["row"].tolist() == [9, 0, 3]  # shard 0 is whole: it still reads

    lost = "Lost: shards 1 to 2 of 3 (examples 10 to 29); intact: shard 0 of 3 (examples 0 to 9)"
    for row, shard in ((15, 1), (29, 2)):
        with pytest.raises(DamagedShardsError) as caught:
            dataset.take([0, row])
        assert isinstance(caught.value, DamagedPklzError) and caught.value.path == path
        assert str(caught.value) == (
            f"{path} is truncated: {cut:,} bytes where the test-rows entry {dataset.key[:12]}'s manifest records "
            f"{size:,}, so shard {shard} is lost. {lost}. Run `glyphforge cache gc` to remove the entry, then build "
            "it again: the build makes its shards again")
    capsys.readouterr()
    assert cli.main(["cache", "verify", "--data-dir", str(data_dir)]) == 1
    assert capsys.readouterr().out == f"CORRUPT {path}: size {cut} bytes, manifest says {size} (truncated?). {lost}\n"

    assert cli.main(["cache", "gc", "--data-dir", str(data_dir)]) == 0  # the fix the messages give
    rebuilt = build(RowSpec(n_examples=30, shard_size=10), data_dir=data_dir, progress=False)
    assert rebuilt.take(np.arange(30))["row"].tolist() == list(range(30)) and store.verify() == []


class _Call:
    """Pickles as a call of ``function(*args)`` (its global and arguments), without calling it."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


_RECONSTRUCT = np.ndarray.__reduce__(np.zeros(1))[0]
_SCALAR = np.float64(1).__reduce__()[0]


@pytest.mark.parametrize("pickled, error, complaint", [
    (_Call(bytearray, 200 << 20), OversizedPickleError, "its pickle asks for a bytearray of 209,715,200 bytes"),
    (_Call(set, range(10 ** 12)), OversizedPickleError, "its pickle asks for a set of 1,000,000,000,000 items"),
    (_Call(frozenset, range(10 ** 30)), OversizedPickleError, "its pickle asks for a frozenset of"),
    (_Call(_RECONSTRUCT, np.ndarray, (50_000, 1000), b"f8"), OversizedPickleError,
     "its pickle asks for a numpy array of shape (50000, 1000) and dtype float64 of 400,000,000 bytes"),
    (_Call(_SCALAR, np.dtype("V2000000000")), OversizedPickleError,
     "its pickle asks for a numpy scalar of dtype |V2000000000 of 2,000,000,000 bytes"),
    (_Call(np.ndarray, (10 ** 9,), "u1"), UnsafePickleError, "it calls numpy.ndarray directly"),
    (np.array([1, "a"], dtype=object), UnsafePickleError, "it holds an object array"),
    (_Call(_RECONSTRUCT, np.ndarray, (3,), "O"), UnsafePickleError, "it holds an object array"),
], ids=["bytearray", "set-of-range", "frozenset-of-range", "reconstruct", "scalar", "ndarray-call", "object-array",
        "object-reconstruct"])
def test_every_allocating_callable_is_bounded_by_the_budget(tmp_path, pickled, error, complaint):
    path = tmp_path / "hostile.pklz"
    path.write_bytes(gzip.compress(pickle.dumps(pickled, protocol=4), mtime=0))
    with pytest.raises(error) as caught:
        load_pklz(path)
    assert str(caught.value).startswith(f"refused to load {path}: {complaint}")
    if error is OversizedPickleError:
        assert f"At most {MIN_BUDGET:,} bytes are allowed for it (what its {path.stat().st_size:,} compressed " in str(
            caught.value)


def test_what_a_restricted_load_returns_is_freed_without_the_garbage_collector(tmp_path):
    """No reference cycle through the unpickler's guards: a stream's decoded shards go as soon as they are dropped."""
    path = dump_pklz({"a": np.zeros(1000), "n": np.float32(1)}, tmp_path / "a.pklz")
    gc.disable()
    try:
        loaded = weakref.ref(load_pklz(path)["a"])
        assert loaded() is None
    finally:
        gc.enable()


def test_a_pickle_declaring_more_bytes_than_it_holds_is_a_damaged_file(tmp_path):
    path = tmp_path / "short.pklz"
    path.write_bytes(gzip.compress(b"\x80\x05\x8e" + (2_500_000_000).to_bytes(8, "little") + b"xx.", mtime=0))
    with pytest.raises(DamagedPklzError, match=f"^{path} is truncated or damaged \\(pickle data was truncated\\)"):
        load_pklz(path)


def test_a_pickle_declaring_a_bytearray_beyond_memory_is_refused_by_name(tmp_path):
    """Protocol 5's BYTEARRAY8 is allocated before its bytes are read: a tiny file declaring an exabyte used to
    raise a bare MemoryError (class files use the opcode since cache format 4)."""
    path = tmp_path / "exabyte.pklz"
    path.write_bytes(gzip.compress(b"\x80\x05\x96" + (1 << 60).to_bytes(8, "little") + b".", mtime=0))
    with pytest.raises(OversizedPickleError, match=f"^refused to load {path}: a pickle in it asks for more memory "
                                                   "than this machine can give. At most "):
        load_pklz(path)


def test_plain_data_within_the_budget_still_loads(tmp_path):
    data = {"a": np.arange(12).reshape(3, 4)[:, ::2], "f": np.asfortranarray(np.ones((3, 2))), "s": {1, 2},
            "z": frozenset("ab"), "b": bytearray(b"xy"), "n": np.float32(2.5), "r": range(5),
            "t": np.zeros(2, [("x", "<f4"), ("y", "u1", (2,))])}
    for protocol in (4, 5):
        path = tmp_path / f"p{protocol}.pklz"
        path.write_bytes(gzip.compress(pickle.dumps(data, protocol=protocol), mtime=0))
        loaded = load_pklz(path)
        assert loaded.keys() == data.keys() and np.array_equal(loaded["a"], data["a"])
        assert loaded["s"] == {1, 2} and loaded["b"] == b"xy" and loaded["n"] == np.float32(2.5)
    zeros = dump_pklz(np.zeros(20_000_000, np.uint8), tmp_path / "zeros.pklz")  # inflates ~1000 times: still fine
    assert load_pklz(zeros).sum() == 0


# -- 15: class files swapped together with their manifest records -------------------------------
@pytest.fixture(scope="module")
def synthetic_mnist(tmp_path_factory) -> SyntheticMNIST:
    return write_synthetic_mnist(tmp_path_factory.mktemp("mnist-upstream"), (600, 100))


def _prepare_mnist_offline(synthetic: SyntheticMNIST, data_dir: Path) -> None:
    """`prepare-data mnist --offline --no-verify` from the four files placed by hand, as a user would."""
    raw = config.raw_dir("mnist", data_dir)
    raw.mkdir(parents=True, exist_ok=True)
    for file in ALL_FILES:
        shutil.copy(synthetic.path(file), raw / file)
    assert cli.prepare_data_main(["mnist", "--offline", "--no-verify", "--data-dir", str(data_dir), "-q"]) == 0


def _rows(images: np.ndarray) -> set[bytes]:
    return {image.tobytes() for image in images}


def test_class_files_swapped_with_their_records_break_the_entry_and_never_serve_mislabelled_images(
        synthetic_mnist, tmp_path, capsys):
    data_dir = tmp_path / "data"
    _prepare_mnist_offline(synthetic_mnist, data_dir)
    store = CacheStore.for_data_dir(data_dir)
    [entry] = store.ls()
    zero, one = entry.path / class_file_name(0), entry.path / class_file_name(1)
    zero.rename(tmp_path / "zero")
    one.rename(zero)
    (tmp_path / "zero").rename(one)
    manifest = _manifest(entry.path)
    files = manifest["files"]
    files[zero.name], files[one.name] = files[one.name], files[zero.name]
    _write_manifest(entry.path, manifest)  # every file still has the size and sha256 its record says

    with pytest.raises(DamagedManifestError, match="its files table differs from its entry_sha256"):
        read_manifest(entry.path)
    capsys.readouterr()
    assert cli.main(["cache", "verify", "--data-dir", str(data_dir)]) == 1
    out = capsys.readouterr().out
    assert f"CORRUPT {entry.path / 'manifest.json'}: its files table differs from its entry_sha256" in out
    with pytest.raises(FileNotFoundError, match="MNIST is not prepared"):  # never the '1' images labelled '0'
        load_mnist("0", data_dir=data_dir, download=False)

    _prepare_mnist_offline(synthetic_mnist, data_dir)  # the broken entry is made again
    x, y, classes = load_mnist("01", subset="all", data_dir=data_dir, download=False)
    assert classes == ["0", "1"] and store.verify() == []
    assert _rows(x[y == 0]) == _rows(synthetic_mnist.class_images(0))
    assert _rows(x[y == 1]) == _rows(synthetic_mnist.class_images(1))


def test_a_manifest_without_the_files_hash_is_broken(tmp_path):
    """glyphforge 0.2 wrote no entry_sha256: such a manifest is refused (and `gc` removes its entry)."""
    store = CacheStore(tmp_path)
    entry = store.get_or_create("k", {"n": 1}, lambda writer: writer.write("A.pklz", np.arange(3)))
    manifest = _manifest(entry.path)
    assert manifest["entry_sha256"] == entry_sha256("k", entry.key, {"n": 1}, {}, manifest["files"])
    del manifest["entry_sha256"]
    _write_manifest(entry.path, manifest)
    assert store.get("k", {"n": 1}) is None
    assert [problem.message for problem in store.verify()] == ["not a manifest of the right shape: no 'entry_sha256'"]
    assert store.gc() == [entry.path] and not entry.path.exists()


# -- #42 row 3: every kind of damage to every deflated cache file is a DamagedPklzError naming the file -------------
def _damage(data: bytes, how: str) -> bytes:
    """The gzip member ``data`` damaged ``how``: its header's magic, its first deflate block made of the reserved type
    (isal: "Invalid deflate block"), its CRC-32, or cut in half."""
    damaged = bytearray(data)
    if how == "header":
        damaged[0] ^= 0xFF
    elif how == "deflate":
        damaged[10] = 0x07  # BFINAL 1, BTYPE 11: a block type deflate reserves
    elif how == "crc":
        damaged[-8] ^= 0xFF
    else:
        del damaged[len(damaged) // 2:]
    return bytes(damaged)


def _damage_file(path: Path, how: str, offset: int = 0, length: int | None = None) -> None:
    """Damage the gzip member at ``offset`` (``length`` bytes; None: to the end) of ``path`` in place (see `_damage`);
    "truncated" cuts the file inside it."""
    data = path.read_bytes()
    end = len(data) if length is None else offset + length
    member = _damage(data[offset:end], how)
    path.write_bytes(data[:offset] + member + (data[end:] if how != "truncated" else b""))


@pytest.fixture(scope="module")
def prepared_mnist(synthetic_mnist, tmp_path_factory) -> Path:
    data_dir = tmp_path_factory.mktemp("mnist-prepared") / "data"
    _prepare_mnist_offline(synthetic_mnist, data_dir)
    return data_dir


def _class_file(data_dir: Path) -> tuple[Path, Callable[[], Any]]:
    [entry] = CacheStore.for_data_dir(data_dir).ls()
    return entry.path / class_file_name(3), lambda: load_mnist("3", data_dir=data_dir, download=False)


def _labels_file(data_dir: Path) -> tuple[Path, Callable[[], Any]]:
    [entry] = CacheStore.for_data_dir(data_dir).ls()
    return entry.path / "upstream_labels.pklz", lambda: gf.MNIST(subset="train", data_dir=data_dir, download=False)


def _shard(read: str) -> Callable[[Path], tuple[Path, Callable[[], Any]]]:
    def damaged(data_dir: Path) -> tuple[Path, Callable[[], Any]]:
        dataset = gf.open_built(next((data_dir / "cache" / "test-rows").iterdir()), random_access="decode")
        if read == "take":
            return dataset.path / ARRAYS_FILE, lambda: dataset.take([3])
        return dataset.path / ARRAYS_FILE, lambda: list(dataset.stream(4, shuffle=False))
    return damaged


def _read_first(kind: str, path: Path) -> tuple[int, ...]:
    """Where the first gzip member a read of ``kind`` inflates is in ``path``: ``(offset, length)``, or () for the
    whole file. Random rows decode shard 0's run whole from its first member; the stream inflates only the blocks it
    needs, each a member of its own (`glyphforge.builds.reading.blocks`): shard 0's first block of its first array."""
    if not kind.startswith("shard"):
        return ()
    index = ShardIndex.read(path.parent / INDEX_FILE, "entry")
    if kind == "shard (random rows)":
        return int(index.offset[0]), int(index.length[0])
    start, end = np.load(path.parent / BLOCKS_FILE)[:2].tolist()  # shard 0, its first array: the first block's bytes
    return int(index.offset[0]) + start, end - start


#: Each kind of deflated cache file: where it is in a data dir, and a read of it by its users' call.
DEFLATED = {"class file": _class_file, "labels file": _labels_file, "shard (random rows)": _shard("take"),
            "shard (stream)": _shard("stream")}


@pytest.mark.parametrize("how", ["header", "deflate", "crc", "truncated"])
@pytest.mark.parametrize("kind", list(DEFLATED))
def test_every_damage_to_every_deflated_cache_file_is_a_corrupt_pklz_error_naming_it(
        kind, how, prepared_mnist, rows_build, tmp_path):
    if kind.startswith("shard"):
        data_dir, entry_dir = _copy_build(rows_build, tmp_path)
    else:
        data_dir = tmp_path / "data"
        shutil.copytree(prepared_mnist, data_dir)
    path, read = DEFLATED[kind](data_dir)
    _damage_file(path, how, *_read_first(kind, path))
    with pytest.raises(DamagedPklzError) as raised:
        read()
    assert str(path) in str(raised.value) and "glyphforge cache" in str(raised.value)
