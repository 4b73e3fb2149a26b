"""Safe zip reading: members by name, corrupt, truncated and hostile archives."""
from __future__ import annotations

import struct
import threading
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from glyphforge.pipelines.archive import AHEAD_BYTES, ArchiveError, iter_members, list_members, open_member, read_member

from support.synthetic_emnist import forge_header

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CAP = 1 << 20


def make_zip(path: Path, members: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# reading members ---------------------------------------------------------------------------
def test_lists_and_reads_members_of_a_real_omniglot_zip(shared_data):
    path = shared_data / "omniglot" / "images_background_small1.zip"
    names = list_members(path)
    assert len(names) == 2720 and all(name.endswith(".png") for name in names)
    first = "images_background_small1/Balinese/character01/0108_01.png"
    assert names[0] == first
    data = read_member(path, first, max_bytes=CAP)
    assert data.startswith(PNG_SIGNATURE)
    with zipfile.ZipFile(path) as reference:
        assert data == reference.read(first)
    with open_member(path, first, max_bytes=CAP) as stream:
        assert stream.read() == data


def test_iter_members_reads_chosen_members_in_the_given_order(shared_data):
    path = shared_data / "omniglot" / "all_runs.zip"
    wanted = ["run02/class_labels.txt", "run01/class_labels.txt"]
    got = list(iter_members(path, wanted, max_bytes=CAP))
    assert [name for name, _ in got] == wanted
    with zipfile.ZipFile(path) as reference:
        assert got == [(name, reference.read(name)) for name in wanted]
    assert got[1][1].startswith(b"run01/test/item01.png run01/training/class")
    everything = dict(iter_members(path, max_bytes=CAP))
    assert list(everything) == list_members(path)
    assert len(everything) == 20 * (20 + 20 + 1)  # runs x (test + training images + class_labels.txt)


def test_missing_member_names_archive_and_member(tmp_path):
    path = make_zip(tmp_path / "a.zip", {"gzip/one.txt": b"1"})
    with pytest.raises(ArchiveError) as caught:
        read_member(path, "gzip/two.txt", max_bytes=CAP)
    assert str(caught.value) == (
        f"{path} has no member 'gzip/two.txt' (it holds 1 members, e.g. 'gzip/one.txt'). "
        "Check the member name, or that this is the right archive."
    )


def test_long_member_names_are_quoted_cut_short(tmp_path):
    long_name = "x" * 60_000 + ".png"
    path = make_zip(tmp_path / "a.zip", {long_name: b"1"})
    with pytest.raises(ArchiveError) as caught:
        read_member(path, "wanted.png", max_bytes=CAP)
    assert len(str(caught.value)) < 500
    assert f"e.g. '{'x' * 199}... (60,004 characters in all))" in str(caught.value)


def test_member_larger_than_the_cap_is_refused_before_reading(tmp_path):
    path = make_zip(tmp_path / "a.zip", {"big.bin": bytes(5000)})
    data = read_member(path, "big.bin", max_bytes=5000)
    assert data == bytes(5000) and isinstance(data, bytearray)  # read into one buffer of the declared size
    with pytest.raises(ArchiveError) as caught:
        read_member(path, "big.bin", max_bytes=4999)
    assert str(caught.value) == (
        f"{path}: member 'big.bin' declares 5,000 uncompressed bytes, more than the 4,999 bytes such a member may "
        "hold: a zip bomb, or not the archive it should be. Delete the archive and download it again (or place a "
        "good copy by hand)."
    )
    with pytest.raises(ArchiveError, match=r"'big.bin' declares 5,000 uncompressed bytes, more than the 4,999"):
        with open_member(path, "big.bin", max_bytes=4999):
            pass
    with pytest.raises(ArchiveError, match=r"'big.bin' declares 5,000 uncompressed bytes, more than the 4,999"):
        list(iter_members(path, max_bytes=4999))


@pytest.mark.parametrize("method, label", [(zipfile.ZIP_BZIP2, "bzip2"), (zipfile.ZIP_LZMA, "LZMA")])
def test_members_with_unbounded_methods_are_refused(tmp_path, method, label):
    """bzip2 and LZMA inflate without bound in one step: only stored and deflate members are read."""
    path = make_zip(tmp_path / "a.zip", {"x.txt": b"fine"}, compression=method)
    with pytest.raises(ArchiveError) as caught:
        read_member(path, "x.txt", max_bytes=CAP)
    assert str(caught.value).startswith(
        f"{path}: member 'x.txt' is compressed with {label} (zip method {method}); only stored and deflate members "
        "are read (the upstream archives use them): this is not the archive it should be. Delete the archive"
    )
    stored = make_zip(tmp_path / "stored.zip", {"x.txt": b"fine"}, compression=zipfile.ZIP_STORED)
    assert read_member(stored, "x.txt", max_bytes=CAP) == b"fine"


def test_encrypted_members_are_refused(tmp_path):
    path = make_zip(tmp_path / "a.zip", {"x.txt": b"fine"})
    raw = bytearray(path.read_bytes())
    for header, flags_at in ((raw.index(b"PK\x03\x04"), 6), (raw.index(b"PK\x01\x02"), 8)):
        raw[header + flags_at] |= 0x1
    path.write_bytes(bytes(raw))
    with pytest.raises(ArchiveError, match=rf"^{path}: member 'x.txt' is encrypted: this is not the archive"):
        read_member(path, "x.txt", max_bytes=CAP)


# corrupt and truncated archives ------------------------------------------------------------
def test_truncated_archive_is_reported_as_truncated(shared_data, tmp_path):
    data = (shared_data / "omniglot" / "all_runs.zip").read_bytes()
    path = tmp_path / "all_runs.zip"
    path.write_bytes(data[: len(data) // 2])
    for action in (lambda: list_members(path), lambda: read_member(path, "run01/class_labels.txt", max_bytes=CAP)):
        with pytest.raises(ArchiveError) as caught:
            action()
        assert str(caught.value).startswith(f"{path} is not a complete zip archive (File is not a zip file)")
        assert "truncated or corrupt. Delete the archive and download it again" in str(caught.value)
    assert leftovers(tmp_path) == ["all_runs.zip"]


def test_damaged_member_data_names_the_member(tmp_path):
    text = b"the quick brown fox " * 500
    path = make_zip(tmp_path / "a.zip", {"ok.txt": b"fine", "bad.txt": text})
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("bad.txt")
    name_length, extra_length = struct.unpack("<HH", raw[info.header_offset + 26: info.header_offset + 30])
    data_start = info.header_offset + 30 + name_length + extra_length
    raw[data_start + info.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert read_member(path, "ok.txt", max_bytes=CAP) == b"fine"
    with pytest.raises(ArchiveError, match=rf"^{path}: member 'bad.txt' is corrupt \((BadZipFile|error): .*"
                                           r"the archive is damaged, truncated or forged \(its headers do not match "
                                           r"its data\)\. Delete the archive"):
        read_member(path, "bad.txt", max_bytes=CAP)
    with pytest.raises(ArchiveError, match=r"member 'bad.txt' is corrupt"):
        with open_member(path, "bad.txt", max_bytes=CAP) as stream:
            stream.read()
    assert leftovers(tmp_path) == ["a.zip"]


def test_forged_small_size_header_is_detected(tmp_path):
    """A member whose headers declare 10 bytes but whose data inflates to 100,000: refused at byte 10."""
    data = b"A" * 100_000
    path = make_zip(tmp_path / "bomb.zip", {"bomb.txt": data})
    forge_header(path, "bomb.txt", file_size=10)
    assert zlib.crc32(data) != zlib.crc32(data[:10])
    with pytest.raises(ArchiveError, match=r"member 'bomb.txt' is corrupt \(BadZipFile: .*Bad CRC-32.*forged"):
        read_member(path, "bomb.txt", max_bytes=CAP)
    with pytest.raises(ArchiveError, match=r"member 'bomb.txt' is corrupt \(BadZipFile: .*Bad CRC-32"):
        with open_member(path, "bomb.txt", max_bytes=CAP) as stream:
            assert len(stream.read()) == 10  # never more than declared
    assert leftovers(tmp_path) == ["bomb.zip"]


def test_forged_large_size_header_is_reported_as_truncated(tmp_path):
    """Headers declaring 100,000 bytes (with the CRC of the real 1,000): the data end early."""
    data = b"B" * 1000
    path = make_zip(tmp_path / "a.zip", {"short.txt": data})
    forge_header(path, "short.txt", file_size=100_000)
    with pytest.raises(ArchiveError) as caught:
        read_member(path, "short.txt", max_bytes=CAP)
    assert str(caught.value) == (
        f"{path}: member 'short.txt' ends after 1,000 bytes, but its header declares 100,000: the archive is "
        "truncated, damaged or forged. Delete the archive and download it again (or place a good copy by hand)."
    )


# large members: inflated ahead of the reader, on a thread of their own -----------------------
def large_member(size: int = AHEAD_BYTES + 12_345) -> bytes:
    rng = np.random.default_rng(0)
    return (rng.integers(0, 8, size, dtype=np.uint8) * 31).tobytes()  # deflates, but not to nothing


def large_zip(path: Path, data: bytes) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:  # quick to write
        archive.writestr("big.bin", data)
    return path


def test_a_large_member_streams_its_exact_bytes_in_any_read_size(tmp_path):
    data = large_member()
    path = large_zip(tmp_path / "big.zip", data)
    with open_member(path, "big.bin", max_bytes=len(data)) as stream:
        parts = [stream.read(7), stream.read(3 << 20), bytes(stream.read1(1000))]  # type: ignore[attr-defined]
        parts.append(stream.read())
        assert stream.read(10) == b""
    assert b"".join(parts) == data
    assert read_member(path, "big.bin", max_bytes=len(data)) == data


def test_a_damaged_large_member_names_the_member_and_stops_its_thread(tmp_path):
    data = large_member()
    path = large_zip(tmp_path / "big.zip", data)
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("big.bin")
    name_length, extra_length = struct.unpack("<HH", raw[info.header_offset + 26: info.header_offset + 30])
    raw[info.header_offset + 30 + name_length + extra_length + info.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(ArchiveError, match=rf"^{path}: member 'big.bin' is corrupt \((BadZipFile|error): "):
        with open_member(path, "big.bin", max_bytes=len(data)) as stream:
            while stream.read(1 << 20):
                pass
    assert not [thread for thread in threading.enumerate() if thread.name == "zip-read-ahead"]


def test_leaving_a_large_member_early_stops_its_thread(tmp_path):
    data = large_member(3 * AHEAD_BYTES)  # more than the thread may hold ready: it waits for the reader
    path = large_zip(tmp_path / "big.zip", data)
    with open_member(path, "big.bin", max_bytes=len(data)) as stream:
        assert stream.read(100) == data[:100]
    assert not [thread for thread in threading.enumerate() if thread.name == "zip-read-ahead"]
