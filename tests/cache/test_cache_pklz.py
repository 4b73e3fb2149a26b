import gzip
import hashlib
import os
import pickle

import dill
import numpy as np
import pytest

from glyphforge.cache import DamagedPklzError, UnsafePickleError, concat_pklz, dump_pklz, iter_pklz, load_pklz
from glyphforge.cache.pklz import DEFAULT_LEVEL, MemberMismatchError, gzip_member, write_array_pklz


def test_round_trip_of_arrays_and_dicts_is_exact(tmp_path):
    rng = np.random.default_rng(1)
    obj = {
        "images": rng.integers(0, 256, size=(5, 28, 28), dtype=np.uint8),
        "boxes": rng.random((5, 3, 4), dtype=np.float32),
        "fortran": np.asfortranarray(rng.random((3, 4))),
        "names": ["a", "b"],
        "nested": {"count": np.int64(7), "flag": np.bool_(True), "t": (1, 2.5, None)},
        "strings": np.array(["ab", "c"]),
    }
    path = dump_pklz(obj, tmp_path / "x.pklz")
    loaded = load_pklz(path)
    assert loaded.keys() == obj.keys()
    for name in ("images", "boxes", "fortran", "strings"):
        assert loaded[name].dtype == obj[name].dtype
        assert loaded[name].shape == obj[name].shape
        assert np.array_equal(loaded[name], obj[name])
    assert loaded["nested"] == obj["nested"] and loaded["names"] == ["a", "b"]


def test_file_is_plain_gzip_of_dill(tmp_path):
    array = np.arange(10, dtype=np.uint8)
    path = dump_pklz(array, tmp_path / "x.pklz")
    with gzip.open(path, "rb") as stream:
        assert np.array_equal(dill.load(stream), array)


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_every_level_reads_back(tmp_path, level):
    array = np.tile(np.arange(256, dtype=np.uint8), 100)
    assert np.array_equal(load_pklz(dump_pklz(array, tmp_path / "x.pklz", level=level)), array)


def test_bad_level_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"level \(isal's deflate level\) must be an integer >= 0 and <= 3, got 4"):
        dump_pklz(1, tmp_path / "x.pklz", level=4)
    assert not list(tmp_path.iterdir())


def test_multi_member_files_yield_every_pickle_in_order(tmp_path):
    parts = [dump_pklz({"i": i, "a": np.full(3, i)}, tmp_path / f"{i}.pklz") for i in range(3)]
    joined = concat_pklz(parts, tmp_path / "all.pklz")
    data = joined.path.read_bytes()
    assert data == b"".join(part.read_bytes() for part in parts)
    assert joined.sha256 == hashlib.sha256(data).hexdigest()  # hashed while copying
    assert list(joined.lengths) == [part.stat().st_size for part in parts]
    items = list(iter_pklz(joined.path))
    assert [item["i"] for item in items] == [0, 1, 2]
    assert np.array_equal(items[2]["a"], [2, 2, 2])
    with pytest.raises(ValueError, match="holds 3 pickles"):
        load_pklz(joined.path)


def test_concat_checks_recorded_hashes_and_writes_nothing_on_a_mismatch(tmp_path):
    parts = [dump_pklz(i, tmp_path / f"{i}.pklz") for i in range(3)]
    good = [hashlib.sha256(part.read_bytes()).hexdigest() for part in parts]
    assert concat_pklz(parts, tmp_path / "ok.pklz", expected_sha256=[None, good[1], good[2]]).lengths
    with pytest.raises(MemberMismatchError, match=r"2\.pklz has sha256 [0-9a-f]{64}, but it was recorded as 0+: "
                                                  "it changed on disk") as error:
        concat_pklz(parts, tmp_path / "bad.pklz", expected_sha256=[good[0], None, "0" * 64])
    assert error.value.index == 2 and not (tmp_path / "bad.pklz").exists()
    assert not list(tmp_path.glob(".bad.pklz*"))


def test_a_gzip_written_by_the_standard_library_with_two_members_reads(tmp_path):
    path = tmp_path / "std.pklz"
    with open(path, "wb") as out:
        for value in ("first", "second"):
            out.write(gzip.compress(dill.dumps(value, protocol=5), compresslevel=9))
    assert list(iter_pklz(path)) == ["first", "second"]


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_without_running_anything(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pklz"
    with gzip.open(path, "wb") as stream:
        stream.write(pickle.dumps(_Exploit(marker)))
    with pytest.raises(UnsafePickleError, match=r"evil\.pklz.*'posix\.system'"):
        load_pklz(path)
    assert not marker.exists()
    assert issubclass(UnsafePickleError, pickle.UnpicklingError)


class _Point:
    def __init__(self, x):
        self.x = x


def test_trusted_loading_uses_plain_dill(tmp_path):
    path = dump_pklz(_Point(3), tmp_path / "p.pklz")
    with pytest.raises(UnsafePickleError, match="test_cache_pklz._Point"):
        load_pklz(path)
    assert load_pklz(path, trusted=True).x == 3


def test_empty_file_is_an_error(tmp_path):
    path = tmp_path / "empty.pklz"
    with gzip.open(path, "wb"):
        pass
    with pytest.raises(ValueError, match="holds 0 pickles"):
        load_pklz(path)


def test_truncated_or_damaged_files_raise_an_error_naming_the_file(tmp_path):
    path = dump_pklz(np.arange(50_000), tmp_path / "a.pklz")
    data = path.read_bytes()
    (tmp_path / "short.pklz").write_bytes(data[: len(data) // 2])
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    (tmp_path / "flipped.pklz").write_bytes(bytes(flipped))
    (tmp_path / "text.pklz").write_bytes(b"not gzip at all")
    for name, why in (("short", "Compressed file ended"), ("flipped", "CRC check failed"), ("text", "Not a gzipped")):
        with pytest.raises(DamagedPklzError, match=rf"^{tmp_path / name}\.pklz is truncated or damaged \({why}.*"
                                                    r"`glyphforge cache verify`"):
            load_pklz(tmp_path / f"{name}.pklz")
    assert issubclass(DamagedPklzError, ValueError)


@pytest.mark.parametrize("shape", [(0, 28, 28), (1, 28, 28), (83, 28, 28), (84, 28, 28), (85, 28, 28),
                                   (3000, 14, 14), (70_000,)])
def test_an_array_written_in_place_is_numpys_own_pickle_read_by_every_reader(tmp_path, shape):
    """Small arrays (under 64 KiB) and large ones (filled inside the laid-out pickle) alike."""
    array = np.random.default_rng(2).integers(0, 256, shape, dtype=np.uint8)
    path = tmp_path / "a.pklz"
    digest = write_array_pklz(path, shape, np.uint8, lambda out: np.copyto(out, array))
    assert path.read_bytes() == gzip_member(pickle.dumps(array, protocol=5), DEFAULT_LEVEL)
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    loaded = load_pklz(path)  # the restricted reader
    assert loaded.shape == shape and loaded.flags.writeable and np.array_equal(loaded, array)
    with gzip.open(path, "rb") as stream:
        assert np.array_equal(dill.load(stream), array)
