"""The reader of built datasets: random access against ds.arrays, the index, pickling, damage, 0.1 entries."""
from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest

from glyphforge._files import sha256_file
from glyphforge.builds import ARRAYS_FILE, BuiltDataset, build
from glyphforge.builds.reading.blocks import BLOCKS_FILE
from glyphforge.builds.reading.dataset import DatasetTooLargeError
from glyphforge.builds.reading.index import INDEX_FILE, DamagedIndexError, ShardIndex
from glyphforge.builds.reading.lookup import find_built
from glyphforge.cache import CacheStore, DamagedPklzError

from support.specs import RowSpec


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """1,030 rows in 11 shards (the last of 30), built once for the module; tests only read it."""
    data_dir = tmp_path_factory.mktemp("built")
    dataset = build(RowSpec(), data_dir=data_dir, progress=False)
    return dataset, dataset.reopened().arrays


def fresh(dataset: BuiltDataset, **options) -> BuiltDataset:
    """A new reader of the same entry: nothing decoded yet."""
    return dataset.reopened(**options)


def test_the_index_locates_every_shard(built):
    dataset, _ = built
    index = fresh(dataset).index
    assert len(index) == 11 and index.start.tolist() == list(range(0, 1001, 100))
    assert index.stop.tolist() == [*range(100, 1001, 100), 1030] and index.rows[-1] == 30
    assert int(index.offset[-1] + index.length[-1]) == (dataset.path / ARRAYS_FILE).stat().st_size
    assert index.shard_of(np.array([0, 99, 100, 1029])).tolist() == [0, 0, 1, 10]


@pytest.mark.parametrize("indices", [
    [0], [1029], [-1], [-1030], [5, 5, 5], [999, 3, 512, 3, 100, 99], list(range(1029, -1, -7)), [],
    np.array([[4, 8], [15, 16]]),
])
def test_take_equals_the_arrays(built, indices):
    dataset, arrays = built
    got = fresh(dataset).take(indices)
    flat = np.asarray(indices, np.int64).reshape(-1)
    for name, array in arrays.items():
        assert np.array_equal(got[name], array[flat]) and got[name].dtype == array.dtype, name


def test_indexing_one_row_a_slice_and_an_index_array(built):
    dataset, arrays = built
    reader = fresh(dataset)
    assert len(reader) == 1030
    for i in (0, 57, 1029, -1, -1030):
        image, targets = reader[i]
        assert np.array_equal(image, arrays["images"][i]) and targets["row"] == arrays["row"][i]
        assert targets["name"] == f"r{arrays['row'][i]}"
    for part in (slice(95, 205), slice(None, None, -97), slice(1000, None), slice(5, 5)):
        images, targets = reader[part]
        assert np.array_equal(images, arrays["images"][part]) and np.array_equal(targets["row"], arrays["row"][part])
    images, targets = reader[np.array([3, -2])]
    assert targets["row"].tolist() == [3, 1028]
    assert np.array_equal(reader["row"], np.arange(1030))


@pytest.mark.parametrize("bad", [1030, -1031, [0, 1030], 10**12])
def test_rows_out_of_range_raise_index_error(built, bad):
    dataset, _ = built
    with pytest.raises(IndexError, match=r"example indices must be in -1030\.\.1029"):
        fresh(dataset)[bad] if isinstance(bad, int) else fresh(dataset).take(bad)


def test_non_integer_indices_are_refused(built):
    dataset, _ = built
    with pytest.raises(TypeError, match="example indices must be integers, got float64"):
        fresh(dataset).take([1.5])
    with pytest.raises(KeyError, match="test-rows has no array 'labels'; it has images, name, row"):
        fresh(dataset)["labels"]


def test_reads_decode_only_the_shards_they_need_and_keep_a_few(built, monkeypatch):
    dataset, _ = built
    reader = fresh(dataset, cache_shards=2, random_access="decode")  # the LRU itself: no decoded copy
    decoded = []
    original = BuiltDataset._decode
    monkeypatch.setattr(BuiltDataset, "_decode", lambda self, number: decoded.append(number) or original(self, number))
    reader[150], reader[160], reader[199]
    assert decoded == [1]  # one decode: the LRU serves the neighbours
    reader.take([1029, 5, 151])
    assert decoded == [1, 0, 10]  # only shards 0 and 10 were new
    reader[350]
    reader[150]  # shard 1 fell out of an LRU of 2 (0 and 10 were used after it, then 3)
    assert decoded == [1, 0, 10, 3, 1]
    assert fresh(dataset, cache_shards=0).shard(4)["row"][0] == 400


def test_iterating_yields_every_example_in_order(built):
    dataset, arrays = built
    rows = [targets["row"] for _, targets in fresh(dataset)]
    assert rows == list(range(1030))


def test_arrays_refuse_beyond_the_limit_naming_the_alternatives(built):
    dataset, _ = built
    reader = fresh(dataset, arrays_limit=1000)
    assert reader.nbytes == 1030 * (12 + 8 + 4 * 5)  # uint8 3x4, int64, <U5
    with pytest.raises(DatasetTooLargeError, match=r"decodes to 0\.00 GB, more than the 0\.00 GB ds\.arrays may fill "
                                                   r".*ds\.take\(indices\).*ds\.stream\(batch_size\).*ds\.export\(dir\)"):
        _ = reader.arrays
    assert reader.take([7])["row"].tolist() == [7]  # other paths still work
    assert np.array_equal(fresh(dataset, arrays_limit=reader.nbytes).arrays["row"], np.arange(1030))


def test_a_pickled_dataset_is_a_small_handle_that_works_in_another_process(built, tmp_path):
    dataset, arrays = built
    reader = fresh(dataset)
    _ = reader.arrays  # loaded arrays must not travel with it
    payload = pickle.dumps(reader)
    assert len(payload) < 600
    again = pickle.loads(payload)
    assert again.key == dataset.key and np.array_equal(again.take([1000])["row"], [1000])
    (tmp_path / "handle.pkl").write_bytes(payload)
    code = ("import pickle, sys; ds = pickle.load(open(sys.argv[1], 'rb')); "
            "print(len(ds), ds[1029][1]['row'], ds.take([3, 1])['name'].tolist())")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "handle.pkl")], capture_output=True,
                            text=True, check=True)
    assert result.stdout.split("\n")[0] == "1030 1029 ['r3', 'r1']"


def test_a_handle_to_a_removed_entry_says_so(tmp_path):
    dataset = build(RowSpec(n_examples=5, shard_size=2), data_dir=tmp_path, progress=False)
    payload = pickle.dumps(dataset)
    CacheStore.for_data_dir(tmp_path).rm(dataset.key)
    with pytest.raises(FileNotFoundError, match=f"the built dataset {dataset.key[:12]} is no longer at"):
        pickle.loads(payload)


def _damaged_copy(dataset: BuiltDataset, tmp_path, change) -> BuiltDataset:
    """A copy of the entry in a fresh store whose arrays.pklz ``change`` alters."""
    store = CacheStore.for_data_dir(tmp_path)
    with store.create(dataset.entry.kind, {"copy": 1}) as writer:
        data = bytearray((dataset.path / ARRAYS_FILE).read_bytes())
        (writer.path / ARRAYS_FILE).write_bytes(bytes(change(data)))
        for name in (INDEX_FILE, BLOCKS_FILE):
            writer.add_file(name, shutil.copy(dataset.path / name, tmp_path / name))
        writer.meta.update(dataset.entry.meta)
    return BuiltDataset(store.get(dataset.entry.kind, {"copy": 1}))


def test_a_truncated_file_raises_corrupt_pklz_error_naming_the_file_and_the_shard(built, tmp_path):
    dataset, _ = built
    index = dataset.index
    cut = int(index.offset[7] + index.length[7] // 2)
    damaged = _damaged_copy(dataset, tmp_path, lambda data: data[:cut])
    assert damaged.take([0, 699])["row"].tolist() == [0, 699]  # shards before the cut still read
    with pytest.raises(DamagedPklzError, match=rf"{damaged.path / ARRAYS_FILE}: shard 7 \(bytes \d+ to \d+\) is "
                                               r"truncated or damaged \(the file ends \d+ bytes early\)"):
        damaged[700]


def test_a_flipped_byte_raises_corrupt_pklz_error_naming_the_shard(built, tmp_path):
    dataset, _ = built
    index = dataset.index
    where = int(index.offset[3] + index.length[3] // 2)

    def flip(data: bytearray) -> bytearray:
        data[where] ^= 0x55
        return data

    damaged = _damaged_copy(dataset, tmp_path, flip)
    with pytest.raises(DamagedPklzError, match=r"arrays\.pklz: shard 3 \(bytes .*\) is truncated or damaged"):
        damaged.take([350])
    with pytest.raises(DamagedPklzError, match="shard 3"):
        _ = damaged.reopened().arrays


def test_an_index_file_with_a_damaged_header_is_named_damaged(tmp_path):
    path = tmp_path / INDEX_FILE
    ShardIndex.from_lengths([10, 12], [3, 4]).write(path)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # the start of the header's dict: np.load's parser raises a TokenError, not a ValueError
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedIndexError, match=rf"x: its shard index {path} cannot be read .*The entry is damaged: "
                                                "remove it with `glyphforge cache rm KEY`"):
        ShardIndex.read(path, "x")


def test_an_index_that_does_not_tile_the_data_is_refused():
    index = ShardIndex.from_lengths([10, 12], [3, 4])
    assert index.offset.tolist() == [0, 10] and index.stop.tolist() == [3, 7]
    with pytest.raises(ValueError, match="its shard index does not tile the data .* the manifest says 8"):
        index.check(8, "x/arrays.pklz")


def test_find_built_by_kind_or_key(built, tmp_path):
    dataset, _ = built
    data_dir = dataset.path.parents[2]
    assert find_built("test-rows", data_dir).key == dataset.key
    assert find_built(dataset.key[:8], data_dir).key == dataset.key
    with pytest.raises(LookupError, match=r"no built dataset 'scenes'.*Give a built kind \(test-rows\)"):
        find_built("scenes", data_dir)
    (tmp_path / "cache").mkdir()
    with pytest.raises(LookupError, match="none built yet"):
        find_built("scenes", tmp_path)


def test_the_index_is_a_data_file_of_the_entry_not_part_of_the_manifest(built):
    dataset, _ = built
    manifest = json.loads((dataset.path / "manifest.json").read_text())
    assert "index" not in manifest["meta"] and "shard_bytes" not in manifest["meta"]
    table = np.load(dataset.path / INDEX_FILE, allow_pickle=False)
    assert table.dtype == np.int64 and table.shape == (4, dataset.entry.meta["n_shards"])
    assert manifest["files"][INDEX_FILE]["sha256"] == sha256_file(dataset.path / INDEX_FILE)
    assert table.tolist() == [dataset.index.offset.tolist(), dataset.index.length.tolist(),
                              dataset.index.start.tolist(), dataset.index.stop.tolist()]


def test_a_damaged_index_file_is_refused_naming_it(tmp_path):
    copy = tmp_path / "copy" / "index.npy"
    copy.parent.mkdir()
    np.save(copy, np.zeros((3, 2), np.int64))
    with pytest.raises(ValueError, match=r"x: its shard index .*index\.npy holds a int64 array of shape \(3, 2\), "
                                         r"not int64 of shape \(4, shards\)"):
        ShardIndex.read(copy, "x")
    copy.write_bytes(b"not an npy file")
    with pytest.raises(ValueError, match=r"x: its shard index .*index\.npy cannot be read"):
        ShardIndex.read(copy, "x")
