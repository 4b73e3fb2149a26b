"""Shards as gzip members of .npy arrays (build format 3): writing, checked reading, block reads, older entries."""
from __future__ import annotations

import gzip
import io
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from glyphforge.builds import ARRAYS_FILE, build
from glyphforge.builds.reading.members import Member, Scratch, decode_shard, place_shard
from glyphforge.cache import DamagedPklzError, concat_pklz
from glyphforge.cache.declared import rows_per_block
from glyphforge.cache.npy_members import ArraysMember, ArraySpec, dump_shard, iter_members

from support.specs import RowSpec

ARRAYS = {"row": np.arange(10, 15, dtype=np.int64), "images": np.arange(60, dtype=np.uint8).reshape(5, 3, 4),
          "name": np.array(["a", "bb", "c", "dd", "e"], "<U2")}
LAYOUT = {"images": {"dtype": "|u1", "shape": [3, 4]}, "name": {"dtype": "<U2", "shape": []},
          "row": {"dtype": "<i8", "shape": []}}


def member(path, rows: int = 5, layout=None, blocks=None, block_rows: int = 5) -> Member:
    """Shard 0 at ``path``: a whole-run read needs no ``blocks``, a read by blocks those `dump_shard` returned."""
    return Member(path, 0, path.stat().st_size, layout or LAYOUT, rows, "shard 0", blocks, block_rows)


def dumped(arrays: dict, path: Path, level: int | None = None) -> Path:
    """``path`` once ``arrays`` are written there as a shard (`dump_shard`)."""
    dump_shard(arrays, path, level)
    return path


def same(left: dict, right: dict) -> bool:
    return sorted(left) == sorted(right) and all(np.array_equal(left[name], right[name]) for name in left)


def test_a_member_is_its_sorted_names_then_each_array_as_npy_readable_with_plain_tools(tmp_path):
    path = dumped(ARRAYS, tmp_path / "one.pklz")
    with gzip.open(path) as stream:  # what the module docstring tells a user with nothing else at hand
        names = np.lib.format.read_array(stream)
        plain = {name: np.lib.format.read_array(stream) for name in names}
        assert stream.read() == b""
    assert names.tolist() == ["images", "name", "row"] and same(plain, ARRAYS)
    assert same(decode_shard(member(path)), ARRAYS)


def test_the_same_arrays_give_the_same_bytes_whatever_their_order(tmp_path):
    first = dumped(ARRAYS, tmp_path / "a.pklz").read_bytes()
    second = dumped(dict(reversed(list(ARRAYS.items()))), tmp_path / "b.pklz").read_bytes()
    assert first == second and first[4:8] == b"\0\0\0\0"  # no mtime in the gzip header


def test_object_arrays_are_refused_and_nothing_is_left(tmp_path):
    with pytest.raises(TypeError, match="array 'x' has dtype object: object arrays cannot be stored"):
        dumped({"x": np.array([None, 1], object)}, tmp_path / "o.pklz")
    assert list(tmp_path.iterdir()) == []


def test_iter_members_reads_joined_members_in_order(tmp_path):
    parts = [dumped({"row": np.arange(n, n + 3)}, tmp_path / f"{n}.pklz") for n in (0, 3, 6)]
    joined = concat_pklz(parts, tmp_path / ARRAYS_FILE)
    assert [shard["row"].tolist() for shard in iter_members(joined.path)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def test_iter_members_refuses_what_no_member_holds_without_allocating_it(tmp_path):
    header = io.BytesIO()
    np.lib.format.write_array(header, np.array(["images"]), allow_pickle=False)
    np.lib.format.write_array_header_1_0(header, {"descr": "|u1", "fortran_order": False, "shape": (10**12,)})
    path = tmp_path / ARRAYS_FILE
    path.write_bytes(gzip.compress(header.getvalue()))
    tracemalloc.start()
    try:
        with pytest.raises(DamagedPklzError, match=rf"{path} is truncated or damaged \(an array is uint8 of shape "
                                                   r"\(1000000000000,\), which no member written by glyphforge"):
            list(iter_members(path))
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()


def raw_npy(array: np.ndarray) -> bytes:
    """``array`` as a ``.npy`` file's bytes."""
    stream = io.BytesIO()
    np.lib.format.write_array(stream, array, allow_pickle=False)
    return stream.getvalue()


def raw_member(*arrays: np.ndarray, names=None, after: bytes = b"") -> bytes:
    """A member written by hand: the names array (``names``, default one per array), arrays, then ``after``."""
    stream = io.BytesIO()
    names = np.array(names if names is not None else ["images", "name", "row"][:len(arrays)], dtype=str)
    for array in (names, *arrays):
        np.lib.format.write_array(stream, array, allow_pickle=False)
    return gzip.compress(stream.getvalue() + after, mtime=0)


@pytest.mark.parametrize(("data", "found"), [
    (raw_member(ARRAYS["images"], ARRAYS["name"], names=["images", "name"]),
     r"the array of names is <U6 of shape \(2,\) where <U6 of shape \(3,\) is expected"),
    (raw_member(ARRAYS["images"], ARRAYS["name"], ARRAYS["row"], names=["images", "name", "rows"]),
     r"it holds the arrays \['images', 'name', 'rows'\], not \['images', 'name', 'row'\]"),
    (raw_member(ARRAYS["images"].astype(np.uint16), ARRAYS["name"], ARRAYS["row"]),
     r"the array 'images' is uint16 of shape \(5, 3, 4\) where uint8 of shape \(5, 3, 4\) is expected"),
    (raw_member(np.zeros((2_000_000_000, 3, 4), np.uint8)[:0].reshape(0, 3, 4), ARRAYS["name"], ARRAYS["row"]),
     r"the array 'images' is uint8 of shape \(0, 3, 4\) where uint8 of shape \(5, 3, 4\)"),
    (raw_member(np.asfortranarray(np.zeros((5, 3, 4), np.uint8)), ARRAYS["name"], ARRAYS["row"]),
     r"the array 'images' is uint8 of shape \(5, 3, 4\) in Fortran order where uint8 of shape \(5, 3, 4\)"),
    (raw_member(ARRAYS["images"], ARRAYS["name"], ARRAYS["row"], after=b"more"), r"bytes follow its last array"),
    (raw_member(ARRAYS["images"], ARRAYS["name"], ARRAYS["row"])[:-30],
     r"it does not inflate \(Compressed file ended before the end-of-stream marker was reached\)"),
    # a header's length is bounded before it is read (numpy's own bound), and a member may end inside one
    (gzip.compress(b"\x93NUMPY\x01\x00" + (60_000).to_bytes(2, "little") + b" " * 60_000, mtime=0),
     r"the array of names has no readable \.npy header \(a \.npy header of 60,000 bytes \(at most 10,000 expected\)"),
    (gzip.compress(raw_npy(np.array(["images", "name", "row"]))[:30], mtime=0),
     r"the array of names has no readable \.npy header \(the member ends inside the \.npy header\)"),
])
def test_a_member_holding_anything_else_is_refused_naming_the_shard_and_what_it_holds(tmp_path, data, found):
    path = tmp_path / "bad.pklz"
    path.write_bytes(data)
    with pytest.raises(DamagedPklzError, match=rf"{path}: shard 0 \(bytes 0 to {len(data)}\) is truncated or "
                                               rf"damaged \({found}"):
        decode_shard(member(path))


@pytest.mark.parametrize(("rows", "message"), [
    (5, r"the array 'images' is uint8 of shape \(1000000000, 3, 4\) where uint8 of shape \(5, 3, 4\)"),
    # index, layout and header all say 10**9 rows: more than the member's few compressed bytes can inflate to
    (10**9, r"its arrays declare more bytes than its compressed size can hold \(deflate inflates at most 1032 "
            r"times\): its index or layout lies"),
])
def test_a_header_declaring_a_huge_array_is_refused_before_anything_is_allocated(tmp_path, rows, message):
    header = io.BytesIO()
    np.lib.format.write_array(header, np.array(["images"]), allow_pickle=False)
    np.lib.format.write_array_header_1_0(header, {"descr": "|u1", "fortran_order": False, "shape": (10**9, 3, 4)})
    path = tmp_path / "huge.pklz"
    path.write_bytes(gzip.compress(header.getvalue()))
    tracemalloc.start()
    try:
        with pytest.raises(DamagedPklzError, match=message):
            decode_shard(member(path, rows=rows, layout={"images": LAYOUT["images"]}))
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()


def test_a_flipped_byte_is_found_by_the_gzip_check_even_in_array_bytes(tmp_path):
    data = bytearray(dumped(ARRAYS, tmp_path / "ok.pklz").read_bytes())
    data[-8] ^= 0x01  # the CRC-32 of the trailer: the bytes inflate, the check at the end fails
    path = tmp_path / "flipped.pklz"
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedPklzError, match=r"shard 0 .* is truncated or damaged \(.*(CRC|crc).*\)"):
        decode_shard(member(path))


def test_blocks_cover_every_array_in_order_in_one_reused_buffer_each(tmp_path):
    step = rows_per_block(4096 + 8)
    rows = 3 * step + 7  # three full blocks and a short one of 4 KB rows
    arrays = {"images": (np.arange(rows * 4096) % 251).astype(np.uint8).reshape(rows, 64, 64), "row": np.arange(rows)}
    path = tmp_path / "big.pklz"
    blocks = dump_shard(arrays, path)
    layout = {"images": {"dtype": "|u1", "shape": [64, 64]}, "row": {"dtype": "<i8", "shape": []}}
    scratch, seen = Scratch(), []

    def put(name, first, block):
        seen.append((name, first, len(block), block.base if block.base is not None else block))
        assert np.array_equal(block, arrays[name][first:first + len(block)])

    place_shard(member(path, rows, layout, blocks, step), put, scratch)
    # "row" (6 KB) is a small array: its blocks inflated at once, handed over whole
    assert [(name, first, count) for name, first, count, _ in seen] == [
        *(("images", first, min(step, rows - first)) for first in range(0, rows, step)), ("row", 0, rows)]
    assert len({id(buffer) for name, _, _, buffer in seen if name == "images"}) == 1
    place_shard(member(path, rows, layout, blocks, step), put, scratch)  # a second shard: the same buffers
    assert len({id(buffer) for name, _, _, buffer in seen if name == "images"}) == 1


@pytest.fixture(scope="module")
def rows_entry(tmp_path_factory):
    return build(RowSpec(n_examples=250, shard_size=60), data_dir=tmp_path_factory.mktemp("data"), progress=False)


def test_a_built_dataset_stores_each_shard_as_an_npy_member(rows_entry):
    shards = list(iter_members(rows_entry.path / ARRAYS_FILE))
    assert [len(shard["row"]) for shard in shards] == [60, 60, 60, 60, 10]
    assert np.concatenate([shard["row"] for shard in shards]).tolist() == list(range(250))
    assert rows_entry.entry.params["builder"] == 4


def test_array_spec_row_bytes():
    assert ArraySpec(np.dtype("<U5"), (7, 3)).row_nbytes == 60 and ArraySpec(np.dtype(np.uint8), (2,)).row_nbytes == 1


def test_a_member_can_be_read_from_a_buffer_a_caller_reuses(tmp_path):
    data = bytearray(dumped(ARRAYS, tmp_path / "one.pklz").read_bytes()) + bytearray(100)
    with ArraysMember(memoryview(data)[:len(data) - 100], {k: ArraySpec(v.dtype, v.shape) for k, v in ARRAYS.items()},
                      "buffer") as arrays:
        assert same(arrays.read_all(), ARRAYS)
