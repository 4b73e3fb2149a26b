"""Safe zip reading: members by name, guarded extraction, corrupt and hostile archives."""
from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from glyphforge.pipelines.archive import ArchiveError, extract, iter_members, list_members, open_member, read_member

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
    for action in (lambda: list_members(path), lambda: read_member(path, "run01/class_labels.txt"),
                   lambda: extract(path, tmp_path / "out")):
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
    with pytest.raises(ArchiveError, match=r"member 'bad.txt' is corrupt"):
        extract(path, tmp_path / "out")
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
    with pytest.raises(ArchiveError, match=r"member 'bomb.txt' (is corrupt|decompresses to more than)"):
        extract(path, tmp_path / "out", max_total_bytes=1000)
    assert leftovers(tmp_path) == ["bomb.zip"]


# extraction ----------------------------------------------------------------------------------
def test_extracts_a_real_archive_exactly(shared_data, tmp_path):
    path = shared_data / "omniglot" / "all_runs.zip"
    files = extract(path, tmp_path / "runs")
    assert len(files) == 20 * (20 + 20 + 1)
    assert files[0] == tmp_path / "runs" / "run01" / "class_labels.txt"
    with zipfile.ZipFile(path) as reference:
        for name in ("run01/class_labels.txt", "run20/test/item20.png"):
            assert (tmp_path / "runs" / name).read_bytes() == reference.read(name)
    assert sorted(p for p in (tmp_path / "runs").rglob("*") if p.is_file()) == sorted(files)
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]


def test_extract_into_an_existing_empty_directory(tmp_path):
    path = make_zip(tmp_path / "a.zip", {"d/x.txt": b"x", "y.txt": b"y"})
    (tmp_path / "out").mkdir()
    assert extract(path, tmp_path / "out") == [tmp_path / "out" / "d" / "x.txt", tmp_path / "out" / "y.txt"]
    assert (tmp_path / "out" / "d" / "x.txt").read_bytes() == b"x"


def test_extract_refuses_a_non_empty_destination(tmp_path):
    path = make_zip(tmp_path / "a.zip", {"x.txt": b"x"})
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_bytes(b"mine")
    with pytest.raises(ArchiveError, match="it exists and is not an empty directory"):
        extract(path, tmp_path / "out")
    assert leftovers(tmp_path / "out") == ["keep.txt"]


ZIP_SLIP_NAMES = ["../evil.txt", "/tmp/evil.txt", "a/../../evil.txt", "..\\evil.txt", "C:/evil.txt", "/"]


@pytest.mark.parametrize("evil", ZIP_SLIP_NAMES)
def test_zip_slip_names_are_refused_and_nothing_is_written(tmp_path, evil):
    archive_dir = tmp_path / "archives"
    archive_dir.mkdir()
    path = make_zip(archive_dir / "slip.zip", {"fine.txt": b"fine", evil: b"evil"})
    with pytest.raises(ArchiveError) as caught:
        extract(path, tmp_path / "inner" / "out")
    assert str(caught.value) == (
        f"{path}: member {evil!r} would be written outside the destination (absolute path or '..'; "
        "zip slip). Nothing was extracted; do not use this archive."
    )
    assert leftovers(tmp_path) == ["archives", "archives/slip.zip"]


def test_symlink_members_are_refused(tmp_path):
    path = tmp_path / "link.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("fine.txt", b"fine")
        link = zipfile.ZipInfo("link")
        link.create_system = 3
        link.external_attr = 0o120777 << 16
        archive.writestr(link, "/etc/passwd")
    with pytest.raises(ArchiveError) as caught:
        extract(path, tmp_path / "out")
    assert str(caught.value) == (
        f"{path}: member 'link' is a symlink, which extraction refuses (it could point outside the "
        "destination). Nothing was extracted; do not use this archive."
    )
    assert leftovers(tmp_path) == ["link.zip"]


def test_too_many_members_are_refused(tmp_path):
    path = make_zip(tmp_path / "many.zip", {f"f{i}.txt": b"x" for i in range(11)})
    assert len(extract(path, tmp_path / "ten-ok", max_members=11)) == 11
    with pytest.raises(ArchiveError) as caught:
        extract(path, tmp_path / "out", max_members=10)
    assert str(caught.value) == (
        f"{path} has 11 members, more than the cap of 10 (a zip bomb?). Nothing was extracted; "
        "raise max_members only if you trust this archive."
    )
    assert not (tmp_path / "out").exists()


def test_declared_total_over_the_cap_is_refused_before_writing(tmp_path):
    path = make_zip(tmp_path / "bomb.zip", {"a.bin": bytes(600_000), "b.bin": bytes(600_000)})
    assert path.stat().st_size < 5_000  # a real bomb: tiny archive, large content
    with pytest.raises(ArchiveError) as caught:
        extract(path, tmp_path / "out", max_total_bytes=1_000_000)
    assert str(caught.value) == (
        f"{path} declares 1200000 uncompressed bytes, more than the cap of 1000000 (a zip bomb?). "
        "Nothing was extracted; raise max_total_bytes only if you trust this archive."
    )
    assert leftovers(tmp_path) == ["bomb.zip"]


def test_duplicate_member_names_are_refused(tmp_path):
    path = tmp_path / "dup.zip"
    with zipfile.ZipFile(path, "w") as archive, pytest.warns(UserWarning, match="Duplicate name"):
        archive.writestr("x.txt", b"1")
        archive.writestr("x.txt", b"2")
    with pytest.raises(ArchiveError, match=r"member 'x.txt' collides with another member"):
        extract(path, tmp_path / "out")
    assert leftovers(tmp_path) == ["dup.zip"]
