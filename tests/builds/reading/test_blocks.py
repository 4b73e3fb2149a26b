"""Issue 46: a shard's rows in blocks of a gzip member each, and ``blocks.npy`` saying where they are.

A reader asking for rows ``(first, stop)`` of a shard inflates only the blocks holding them: a
block damaged elsewhere in the shard does not stop it, a damaged block holding them is refused
naming its array and rows, on every source (an entry on disk, a multi-part entry, an entry at a
URL read through the shard cache). A lying ``blocks.npy`` is refused naming it.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import glyphforge as gf
from glyphforge import cli
from glyphforge.builds import ARRAYS_FILE, BuiltDataset, build
from glyphforge.builds.reading.blocks import BLOCKS_FILE
from glyphforge.builds.reading.index import DamagedIndexError
from glyphforge.builds.reading.members import Scratch
from glyphforge.cache import DamagedPklzError
from glyphforge.cache.declared import block_rows, member_bounds
from glyphforge.cache.keys import entry_sha256, metadata_sha256
from glyphforge.cache.manifest import DamagedManifestError, make_manifest
from glyphforge.cache.npy_members import dump_shard, iter_members
from glyphforge.cache.remote.files import DamagedRemoteEntryError

from support.http_server import LocalHTTPServer
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import RowSpec, WideRowSpec

#: 12,296-byte rows: blocks of 85 rows; shards of 400 rows hold 5 blocks (the last of 60 rows), the last shard 3.
SPEC = WideRowSpec(n_examples=1000, shard_size=400)
STEP = 85
SOURCES = ["disk", "parts", "url"]


@pytest.fixture(scope="module")
def builds(tmp_path_factory, s3_server) -> dict[str, Path]:
    """The entry's folder built on disk, and built into S3 (a multi-part entry) copied down to disk."""
    root = tmp_path_factory.mktemp("blocks")
    local = build(SPEC, data_dir=root / "local", progress=False)
    remote = build(SPEC, data_dir=f"{s3_server.bucket()}/data", progress=False)
    parts = root / "parts" / "cache" / SPEC.kind / local.key
    parts.mkdir(parents=True)
    fs = s3_server.fs()
    for name in [*remote.entry.files, "manifest.json"]:
        fs.get_file(f"{remote.url}/{name}", str(parts / name))
    assert block_rows(local.layout) == STEP and (parts / "part-000001.pklz").is_file()
    return {"disk": local.path, "parts": parts}


def _open(source: str, entry: Path, tmp_path: Path, request: pytest.FixtureRequest) -> BuiltDataset:
    """Open the entry folder ``entry`` (a copy a test may damage) as ``source`` reads it."""
    if source != "url":
        return gf.open_built(entry)
    server = LocalHTTPServer(directory=entry.parents[2]).start()
    request.addfinalizer(server.stop)
    return gf.open_built(server.url(f"cache/{SPEC.kind}/{entry.name}"))


def _copy(builds: dict[str, Path], source: str, tmp_path: Path) -> Path:
    """A copy of the entry ``source`` reads (the multi-part one for ``parts``), in a data dir of its own."""
    original = builds["parts" if source == "parts" else "disk"]
    copy = tmp_path / "data" / "cache" / SPEC.kind / original.name
    shutil.copytree(original, copy)
    return copy


def _damage_block(entry: Path, shard: int, array: int, block: int) -> None:
    """Flip a byte in the middle of block ``block`` of array number ``array`` (sorted) of shard ``shard``."""
    reader = gf.open_built(entry)
    items = reader.source.blocks.shard(shard)
    parts = reader.entry.meta.get("parts")
    path, offset = ((entry / parts[shard], 0) if parts else (entry / ARRAYS_FILE, int(reader.index.offset[shard])))
    data = bytearray(path.read_bytes())
    data[offset + (int(items[array, block]) + int(items[array, block + 1])) // 2] ^= 0x55
    path.write_bytes(bytes(data))


def _placed(dataset: BuiltDataset, shard: int, rows: tuple[int, int] | None) -> list[tuple[str, int, list[int]]]:
    """What ``read_blocks`` hands over: each block's array, first row and the ``row`` values it holds."""
    handed = []

    def put(name: str, first: int, block: np.ndarray) -> None:
        values = block.tolist() if name == "row" else [int(image[0, 0, 0]) for image in block]
        handed.append((name, first, values))

    dataset.read_blocks(shard, put, Scratch(), rows)
    return handed


@pytest.mark.parametrize("source", SOURCES)
def test_rows_are_read_from_the_blocks_holding_them_only(builds, source, tmp_path, request):
    dataset = _open(source, _copy(builds, source, tmp_path), tmp_path, request)
    placed = _placed(dataset, 1, (100, 180))  # shard 1's rows 100 to 179: blocks 1 (85 to 169) and 2 (170 to 254)
    assert [(name, first, len(values)) for name, first, values in placed] == [
        ("images", 85, 85), ("images", 170, 85), ("row", 85, 85), ("row", 170, 85)]
    rows = {first: values for name, first, values in placed if name == "row"}
    assert rows[85] == list(range(485, 570)) and rows[170] == list(range(570, 655))
    images = [values for name, _, values in placed if name == "images"]
    assert images[0] == [row % 251 for row in range(485, 570)]  # image[0, 0, 0] of WideRowSpec is row % 251
    last = _placed(dataset, 1, (399, 400))
    assert [(name, first, values) for name, first, values in last if name == "row"] == [
        ("row", 340, list(range(740, 800)))]  # the short last block
    assert _placed(dataset, 1, (5, 5)) == []
    whole = _placed(dataset, 2, None)
    assert np.concatenate([values for name, _, values in whole if name == "row"]).tolist() == list(range(800, 1000))


@pytest.mark.parametrize("source", SOURCES)
def test_a_damaged_block_is_refused_and_the_others_still_read(builds, source, tmp_path, request):
    entry = _copy(builds, source, tmp_path)
    _damage_block(entry, shard=1, array=0, block=2)  # images of rows 570 to 654
    dataset = _open(source, entry, tmp_path, request)
    fine = _placed(dataset, 1, (0, 170))  # blocks 0 and 1: the damaged one is never inflated
    assert [values for name, _, values in fine if name == "row"] == [list(range(400, 485)), list(range(485, 570))]
    named = (rf"shard 1 of the {SPEC.kind} entry at .* is damaged: fetched twice" if source == "url" else
             r"shard 1 \(bytes \d+ to \d+\), array 'images', the block of rows 170 to 254 is truncated or damaged")
    for rows in ((200, 201), (0, 400), None):
        with pytest.raises(DamagedPklzError, match=named if rows is not None or source == "url" else "shard 1"):
            _placed(dataset, 1, rows)
    assert _placed(dataset, 1, (300, 301))[0][:2] == ("images", 255)  # the blocks after it still read


@pytest.mark.parametrize("source", ["disk", "parts"])  # (at a URL, the shard cache's copy is read again)
def test_a_small_array_read_again_is_inflated_whole_and_kept(builds, source, tmp_path, request):
    # "row" (3,200 bytes a shard) is a small array: a first read of some of its rows reads their blocks; a second
    # inflates it whole, and the scratch keeps it: the reads of the shard's other blocks take its rows from there
    # (the file is not read for it again: damaged since, it is not seen)
    entry = _copy(builds, source, tmp_path)
    dataset = _open(source, entry, tmp_path, request)
    scratch, handed = Scratch(), []

    def put(name: str, first: int, block: np.ndarray) -> None:
        if name == "row":
            handed.append((name, first, block.tolist()))

    for rows in ((0, 1), (1, 2)):
        dataset.read_blocks(1, put, scratch, rows)
    assert handed == [("row", 0, list(range(400, 485))), ("row", 1, [401])]
    _damage_block(entry, shard=1, array=1, block=3)  # "row" of rows 655 to 739
    dataset.read_blocks(1, put, scratch, (260, 262))
    assert handed[-1] == ("row", 260, [660, 661])
    with pytest.raises(DamagedPklzError, match="array 'row', the block of rows 255 to 339"):  # read afresh
        dataset.read_blocks(1, put, Scratch(), (260, 262))


@pytest.mark.parametrize("source", SOURCES)
def test_a_damaged_block_of_a_small_array_refuses_the_array_read_whole(builds, source, tmp_path, request):
    # a small array read whole is inflated in one call, each block's CRC-32 checked: a damaged one refuses it
    entry = _copy(builds, source, tmp_path)
    _damage_block(entry, shard=1, array=1, block=3)  # "row" of rows 655 to 739
    dataset = _open(source, entry, tmp_path, request)
    assert [values for name, _, values in _placed(dataset, 1, (0, 1)) if name == "row"] == [list(range(400, 485))]
    named = (rf"shard 1 of the {SPEC.kind} entry at .* is damaged: fetched twice" if source == "url" else
             r"shard 1 \(bytes \d+ to \d+\), array 'row', the blocks of rows 0 to 399 is truncated or damaged")
    with pytest.raises(DamagedPklzError, match=named):
        _placed(dataset, 1, None)
    assert [name for name, _, _ in _placed(dataset, 0, None)] == ["images"] * 5 + ["row"]  # other shards still read


def test_the_small_arrays_kept_are_bounded(builds, monkeypatch):
    from glyphforge.builds.reading import members

    monkeypatch.setattr(members, "KEPT_BYTES", 2 * 400 * 8)  # two shards' "row" arrays
    dataset, scratch = gf.open_built(builds["disk"]), Scratch()
    for shard in (0, 1, 2, 1):
        dataset.read_blocks(shard, lambda name, first, block: None, scratch)
    assert [(offset, name, len(array)) for (_, offset, name), array in scratch.kept.items()] == [
        (int(dataset.index.offset[2]), "row", 200), (int(dataset.index.offset[1]), "row", 400)]  # 0 went first
    assert scratch.kept_bytes == 600 * 8


def test_a_new_shard_is_still_one_gzip_stream_plain_tools_read(builds):
    arrays = builds["disk"] / ARRAYS_FILE
    with gzip.open(arrays) as stream:
        names = np.lib.format.read_array(stream)
        shard = {str(name): np.lib.format.read_array(stream) for name in names}
    assert shard["row"].tolist() == list(range(400)) and shard["images"].shape == (400, 64, 64, 3)
    assert [len(shard["row"]) for shard in iter_members(arrays)] == [400, 400, 200]


def _rewritten(entry: Path, blocks: bytes) -> None:
    """Replace the entry's ``blocks.npy`` by ``blocks``, its manifest written again to match (hashes recomputed)."""
    manifest = json.loads((entry / "manifest.json").read_text())
    table = {**manifest["files"], BLOCKS_FILE: {"size": len(blocks), "sha256": hashlib.sha256(blocks).hexdigest()}}
    kind, key, params, meta = manifest["kind"], manifest["key"], manifest["params"], manifest["meta"]
    fresh = make_manifest(kind, key, params, table, meta)
    fresh.update(meta_sha256=metadata_sha256(kind, key, params, meta),
                 entry_sha256=entry_sha256(kind, key, params, meta, table))
    (entry / BLOCKS_FILE).write_bytes(blocks)
    (entry / "manifest.json").write_text(json.dumps(fresh))


def _npy(table: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, table, allow_pickle=False)
    return buffer.getvalue()


def _lies(entry: Path, other: Path) -> dict[str, bytes]:
    items = np.load(entry / BLOCKS_FILE)
    shard_1 = slice(2 * 6, 2 * 6 + 2 * 6)  # shard 0: 2 arrays of 5 blocks (6 items each); shard 1 after it
    swapped, past, inside = items.copy(), items.copy(), items.copy()
    swapped[shard_1][[2, 3]] = swapped[shard_1][[3, 2]]
    past[shard_1.stop - 1] += 1
    inside[shard_1.start] = 0
    return {"short": _npy(items[:-1]), "float": _npy(items.astype(np.float64)), "2-D": _npy(items.reshape(2, -1)),
            "swapped": _npy(swapped), "past its end": _npy(past), "at byte 0": _npy(inside),
            "foreign": (other / BLOCKS_FILE).read_bytes(), "not npy": bytes(len(_npy(items)))}


LIES = ["short", "float", "2-D", "swapped", "past its end", "at byte 0", "foreign", "not npy"]


@pytest.fixture(scope="module")
def other(tmp_path_factory) -> Path:
    """Another entry's folder (RowSpec): its blocks.npy is foreign to SPEC's."""
    return build(RowSpec(n_examples=4000, shard_size=300), data_dir=tmp_path_factory.mktemp("other"),
                 progress=False).path


@pytest.mark.parametrize("lie", LIES)
def test_a_lying_block_table_is_refused_naming_it(builds, other, lie, tmp_path):
    entry = _copy(builds, "disk", tmp_path)
    _rewritten(entry, _lies(entry, other)[lie])
    dataset = gf.open_built(entry)
    with pytest.raises(DamagedIndexError, match=rf"^{entry / ARRAYS_FILE}: its block table {BLOCKS_FILE} .*"
                                                r"build it again"):
        _placed(dataset, 1, (0, 10))
    if lie in ("swapped", "past its end", "at byte 0"):  # shard 1's blocks lie; shard 0's are where they are
        assert dataset[5][1]["row"] == 5


def test_a_lying_block_table_at_a_url_says_what_to_do_there(builds, other, tmp_path, request):
    entry = _copy(builds, "disk", tmp_path)
    _rewritten(entry, _lies(entry, other)["swapped"])
    dataset = _open("url", entry, tmp_path, request)
    with pytest.raises(DamagedRemoteEntryError, match=rf"^the {SPEC.kind} entry at .*: its block table {BLOCKS_FILE} "
                                                      r"records blocks of shard 1 .*its local copy was removed"):
        _placed(dataset, 1, (0, 10))


def test_a_block_table_larger_than_the_rows_make_is_a_broken_manifest(builds, tmp_path):
    entry = _copy(builds, "disk", tmp_path)
    _rewritten(entry, _npy(np.zeros(1 << 16, np.int64)))
    with pytest.raises(DamagedManifestError, match=rf"its files table records {BLOCKS_FILE} as 524,416 bytes, where "
                                                   r"the block table of 1,000 rows of 2 arrays in blocks of 85 rows in "
                                                   r"3 shards is 240 to 4,368 bytes"):
        gf.open_built(entry)


def test_cache_verify_names_a_damaged_block_table(builds, tmp_path, capsys):
    entry = _copy(builds, "disk", tmp_path)
    data = bytearray((entry / BLOCKS_FILE).read_bytes())
    data[-3] ^= 1
    (entry / BLOCKS_FILE).write_bytes(bytes(data))
    capsys.readouterr()
    assert cli.main(["cache", "verify", "--data-dir", str(tmp_path / "data")]) == 1
    assert str(entry / BLOCKS_FILE) in capsys.readouterr().out


@pytest.mark.parametrize("level", [0, 1])
def test_a_shard_of_one_row_blocks_of_many_arrays_is_within_its_bounds(tmp_path, level):
    """Rows of 1 MiB and more make blocks of one row: each array's block is a member of its own, framed."""
    rng = np.random.default_rng(0)
    arrays = {f"a{number:02d}": rng.integers(0, 256, (3, 26_000), np.uint8) for number in range(41)}
    layout = {name: {"dtype": "|u1", "shape": [26_000]} for name in arrays}
    assert block_rows(layout) == 1
    table = dump_shard(arrays, tmp_path / "shard.pklz", level)
    size = (tmp_path / "shard.pklz").stat().st_size
    fewest, most = member_bounds(np.array([3]), layout)
    assert table.shape == (41, 4) and table[-1, -1] == size and fewest[0] <= size <= most[0]
    assert all(np.array_equal(read, arrays[name]) for name, read in next(iter_members(tmp_path / "shard.pklz")).items())
