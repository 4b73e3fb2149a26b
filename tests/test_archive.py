"""Safe zip reading: members by name, corrupt, truncated and hostile archives."""
from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from glyphforge.pipelines.archive import ArchiveError, iter_members, list_members, open_member, read_member

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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
    data = read_member(path, first)
    assert data.startswith(PNG_SIGNATURE)
    with zipfile.ZipFile(path) as reference:
        assert data == reference.read(first)
    with open_member(path, first) as stream:
        assert stream.read() == data


def test_iter_members_reads_chosen_members_in_the_given_order(shared_data):
    path = shared_data / "omniglot" / "all_runs.zip"
    wanted = ["run02/class_labels.txt", "run01/class_labels.txt"]
    got = list(iter_members(path, wanted))
    assert [name for name, _ in got] == wanted
    with zipfile.ZipFile(path) as reference:
        assert got == [(name, reference.read(name)) for name in wanted]
    assert got[1][1].startswith(b"run01/test/item01.png run01/training/class")
    everything = dict(iter_members(path))
    assert list(everything) == list_members(path)
    assert len(everything) == 20 * (20 + 20 + 1)  # runs x (test + training images + class_labels.txt)


def test_missing_member_names_archive_and_member(tmp_path):
    path = make_zip(tmp_path / "a.zip", {"gzip/one.txt": b"1"})
    with pytest.raises(ArchiveError) as caught:
        read_member(path, "gzip/two.txt")
    assert str(caught.value) == (
        f"{path} has no member 'gzip/two.txt' (it holds 1 members, e.g. 'gzip/one.txt'). "
        "Check the member name, or that this is the right archive."
    )


def test_member_larger_than_the_cap_is_refused_before_reading(tmp_path):
    path = make_zip(tmp_path / "a.zip", {"big.bin": bytes(5000)})
    assert len(read_member(path, "big.bin", max_bytes=5000)) == 5000
    with pytest.raises(ArchiveError, match=r"'big.bin' declares 5000 uncompressed bytes, more than the cap of 4999"):
        read_member(path, "big.bin", max_bytes=4999)


# corrupt and truncated archives ------------------------------------------------------------
def test_truncated_archive_is_reported_as_truncated(shared_data, tmp_path):
    data = (shared_data / "omniglot" / "all_runs.zip").read_bytes()
    path = tmp_path / "all_runs.zip"
    path.write_bytes(data[: len(data) // 2])
    for action in (lambda: list_members(path), lambda: read_member(path, "run01/class_labels.txt")):
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
    assert read_member(path, "ok.txt") == b"fine"
    with pytest.raises(ArchiveError, match=rf"^{path}: member 'bad.txt' is corrupt \((BadZipFile|error): .*"
                                           r"the archive is damaged or truncated\. Delete the archive"):
        read_member(path, "bad.txt")
    with pytest.raises(ArchiveError, match=r"member 'bad.txt' is corrupt"):
        with open_member(path, "bad.txt") as stream:
            stream.read()
    assert leftovers(tmp_path) == ["a.zip"]


def test_forged_small_size_header_is_detected(tmp_path):
    """A member whose headers declare 10 bytes but whose data inflates to 100,000."""
    data = b"A" * 100_000
    path = make_zip(tmp_path / "bomb.zip", {"bomb.txt": data})
    raw = bytearray(path.read_bytes())
    local = raw.index(b"PK\x03\x04")
    central = raw.index(b"PK\x01\x02")
    struct.pack_into("<I", raw, local + 22, 10)
    struct.pack_into("<I", raw, central + 24, 10)
    path.write_bytes(bytes(raw))
    assert zlib.crc32(data) != zlib.crc32(data[:10])
    with pytest.raises(ArchiveError, match=r"member 'bomb.txt' (is corrupt|decompresses to more than)"):
        read_member(path, "bomb.txt")
    assert leftovers(tmp_path) == ["bomb.zip"]
