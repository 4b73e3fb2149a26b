"""Hash strings: parsing, computing (sha256, md5, git blob ids) and checking."""
from __future__ import annotations

import random
import subprocess

import pytest

from glyphforge.hashes import ALGORITHMS, check_hash, file_hash, normalise_hash, parse_hash

from support.hashes import bytes_hash

FORMS = "write it as one of sha256:<64 hex digits>, md5:<32 hex digits>, git-blob-sha1:<40 hex digits>"


def test_known_digests_of_abc(tmp_path):
    path = tmp_path / "abc"
    path.write_bytes(b"abc")
    assert file_hash(path, "md5") == "md5:900150983cd24fb0d6963f7d28e17f72"
    assert file_hash(path, "sha256") == "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_git_blob_sha1_is_what_git_hash_object_prints(tmp_path):
    hello = tmp_path / "hello"
    hello.write_bytes(b"hello world\n")
    assert file_hash(hello, "git-blob-sha1") == "git-blob-sha1:3b18e512dba79e4c8300dd08aeb37f8e728b8dad"
    path = tmp_path / "blob.bin"
    path.write_bytes(random.Random(3).randbytes(70_001))
    git = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True, check=True)
    assert file_hash(path, "git-blob-sha1") == f"git-blob-sha1:{git.stdout.strip()}"


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_file_hash_streams_many_chunks_like_bytes_hash(tmp_path, algorithm):
    data = random.Random(1).randbytes((4 << 20) + 12_345)  # more than one 4 MiB read
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    assert file_hash(path, algorithm) == bytes_hash(data, algorithm)
    assert file_hash(path, algorithm) != bytes_hash(data[:-1], algorithm)


def test_real_upstream_files_match_their_published_hashes(shared_data):
    small1 = shared_data / "omniglot" / "images_background_small1.zip"
    assert check_hash(small1, "md5:e704a628b5459e08445c13499850abc4") == (True, "md5:e704a628b5459e08445c13499850abc4")
    sha = "sha256:f38eb80f801274ac2b4dff5b24289016bfaba4a7d5bb50deebf27104ad6cb8a4"
    assert check_hash(small1, sha) == (True, sha)
    blue_x = "sha256:b00979e0d4d13b23b425f2a1f97431262814ce78fa5742858a3f9746d2ffd360"
    assert check_hash(shared_data / "backgrounds" / "blue_x.png", blue_x) == (True, blue_x)


def test_check_hash_reports_the_actual_hash_on_mismatch(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    assert check_hash(path, "md5:" + "0" * 32) == (False, "md5:900150983cd24fb0d6963f7d28e17f72")


def test_uppercase_hex_is_accepted_and_normalised(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    upper = "md5:900150983CD24FB0D6963F7D28E17F72"
    assert parse_hash(upper) == ("md5", "900150983cd24fb0d6963f7d28e17f72")
    assert normalise_hash(upper) == "md5:900150983cd24fb0d6963f7d28e17f72"
    assert check_hash(path, upper)[0] is True


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("sha1:" + "0" * 40, "is not understood: " + FORMS),
        ("0" * 64, "is not understood: " + FORMS),
        ("md5:" + "0" * 31, "is malformed: a md5 digest is 32 hex digits (0-9, a-f)"),
        ("sha256:" + "g" * 64, "is malformed: a sha256 digest is 64 hex digits (0-9, a-f)"),
    ],
)
def test_bad_hash_strings_are_refused_with_the_expected_form(spec, message):
    with pytest.raises(ValueError) as caught:
        parse_hash(spec)
    assert str(caught.value) == f"hash {spec!r} {message}"


def test_unknown_algorithm_for_computing_is_refused(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(ValueError, match="unknown hash algorithm 'sha1': use one of sha256, md5, git-blob-sha1"):
        file_hash(tmp_path / "empty", "sha1")
