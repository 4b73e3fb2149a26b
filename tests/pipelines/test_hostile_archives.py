"""Hostile archives: zip bombs, lying headers, impossible IDX headers and decompression bombs.

Each is a real file run through the real command or loader, and refused with a message
naming the archive, the member, the limit and what to do. The bombs run in a child
process that reads its own peak RSS (``VmHWM`` in ``/proc/self/status``, reset just
before the call), which must stay under twice the largest legitimate member of the
archive plus a margin for buffers: before these caps the same files took gigabytes.
"""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from glyphforge.cli import prepare_data_main
from glyphforge.datasets.emnist import MAX_MAPPING_BYTES, EMNISTFormatError, prepare_emnist
from glyphforge.datasets.omniglot.archive import MAX_PNG_BYTES, MAX_PNG_PIXELS
from glyphforge.datasets.omniglot.dataset import prepare_omniglot
from glyphforge.pipelines.decode import ImageDecodeError

from support.synthetic_emnist import (
    DEFAULT_COUNTS,
    black_png,
    forge_header,
    idx_header,
    member_names,
    write_hostile_copy,
    write_synthetic_emnist,
    zero_chunks,
)

BOMB_BYTES = 256 << 20  # inflates from about 260 KB
#: Room for buffers and the modules a refused call imports (a bomb without the caps took gigabytes).
MARGIN = 32 << 20
#: The largest legitimate member of the synthetic EMNIST archive, inflated: byclass's train images.
EMNIST_LARGEST = max(train for train, _ in DEFAULT_COUNTS.values()) * 28 * 28
OMNIGLOT_FOLDER = "images_background_small1"
ADVICE = "Delete the archive and download it again (or place a good copy by hand)."

CHILD = """
import importlib, json, sys

def status(key):
    with open("/proc/self/status") as lines:
        return next(int(line.split()[1]) * 1024 for line in lines if line.startswith(key + ":"))

target, arguments, preload = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
for module in preload:
    importlib.import_module(module)
module, name = target.split(":")
function = getattr(importlib.import_module(module), name)
try:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # VmHWM := VmRSS (where not allowed, the peak of the imports counts too: a looser bound)
except OSError:
    pass
baseline = status("VmRSS")
try:
    result = {"returned": function(*arguments["args"], **arguments["kwargs"])}
except Exception as error:
    result = {"error": type(error).__name__, "message": str(error)}
result["peak"] = status("VmHWM") - baseline
print(json.dumps(result))
"""


def run_measured(target: str, *args: Any, preload: tuple[str, ...] = (), **kwargs: Any) -> tuple[dict, str]:
    """Call ``module:function`` in a child process; return its result, with ``peak`` (bytes over its start), and stderr.

    ``preload`` modules are imported before the measure starts.
    """
    if not Path("/proc/self/status").exists():
        pytest.skip("the peak RSS is read from /proc/self/status, which only Linux has")
    argv = [sys.executable, "-c", CHILD, target, json.dumps({"args": args, "kwargs": kwargs}), json.dumps(preload)]
    child = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout), child.stderr


def prepare_command(zip_path: Path, data_dir: Path) -> tuple[dict, str]:
    """``prepare-data emnist --emnist-archive ZIP --no-verify -q`` in a child process, measured."""
    argv = ["emnist", "--emnist-archive", str(zip_path), "--no-verify", "-q", "--data-dir", str(data_dir)]
    return run_measured("glyphforge.cli:prepare_data_main", argv,
                        preload=("glyphforge.datasets.emnist",))


@pytest.fixture(scope="module")
def emnist_zip(tmp_path_factory) -> Path:
    """A small synthetic gzip.zip in NIST's layout, every split (only read)."""
    return write_synthetic_emnist(tmp_path_factory.mktemp("emnist") / "gzip.zip").path


@pytest.fixture(scope="module")
def omniglot_zip(tmp_path_factory) -> Path:
    """A small Omniglot set zip: one alphabet of two characters, 20 drawings each (only read)."""
    path = tmp_path_factory.mktemp("omniglot") / "images_background_small1.zip"
    drawing = black_png(105, 105)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for character, drawer in itertools.product((1, 2), range(1, 21)):
            archive.writestr(f"{OMNIGLOT_FOLDER}/Latin/character{character:02d}/07{character:02d}_{drawer:02d}.png",
                             drawing)
    return path


def omniglot_member(drawer: int) -> str:
    return f"{OMNIGLOT_FOLDER}/Latin/character02/0702_{drawer:02d}.png"


# -- row 1: a mapping file inflating to hundreds of MB -------------------------------------------
def test_mapping_bomb_is_refused_before_inflating(emnist_zip, tmp_path):
    mapping = member_names("byclass")["mapping"]
    bomb = write_hostile_copy(emnist_zip, tmp_path / "bomb.zip", mapping, zero_chunks(BOMB_BYTES))
    assert bomb.stat().st_size < 1 << 20
    result, stderr = prepare_command(bomb, tmp_path / "data")
    assert result["returned"] == 1
    assert stderr.startswith(
        f"error: {bomb}: member '{mapping}' declares 268,435,456 uncompressed bytes, more than the "
        f"{MAX_MAPPING_BYTES:,} bytes such a member may hold: a zip bomb, or not the archive it should be. {ADVICE}\n"
    )
    assert result["peak"] < 2 * EMNIST_LARGEST + MARGIN, result

    # the same bomb with headers declaring 1,000 bytes (within the cap): inflating stops there, where the CRC fails
    forge_header(bomb, mapping, file_size=1000)
    result, stderr = prepare_command(bomb, tmp_path / "data")
    assert result["returned"] == 1
    assert f"error: {bomb}: member '{mapping}' is corrupt (BadZipFile: " in stderr
    assert "the archive is damaged, truncated or forged (its headers do not match its data)" in stderr
    assert result["peak"] < 2 * EMNIST_LARGEST + MARGIN, result

    # a long line within the cap is quoted cut short (it was quoted whole: 537 MB for 128 MiB)
    line = "1" * (MAX_MAPPING_BYTES - 10)
    long_line = write_hostile_copy(emnist_zip, tmp_path / "line.zip", mapping, [f"0 48\n{line} x\n".encode()])
    with pytest.raises(EMNISTFormatError) as caught:
        prepare_emnist(archives={"gzip.zip": long_line}, verify=False, progress=False, data_dir=tmp_path / "data")
    message = str(caught.value)
    assert message.startswith(f"{mapping} in {long_line} line 2 is '{'1' * 199}... (65,528 characters in all): "
                              "expected 'label ascii_code [more codes]'")
    assert len(message) < 500


# -- row 2: an Omniglot PNG inflating to hundreds of MB ------------------------------------------
def test_png_bomb_is_refused_before_inflating(omniglot_zip, tmp_path):
    member = omniglot_member(5)
    bomb = write_hostile_copy(omniglot_zip, tmp_path / "bomb.zip", member, zero_chunks(BOMB_BYTES))
    result, _ = run_measured("glyphforge.datasets.omniglot.dataset:prepare_omniglot", sets="small1",
                             archives={"small1": str(bomb)}, verify=False, progress=False,
                             data_dir=str(tmp_path / "data"), preload=("glyphforge.datasets.omniglot.prepare",))
    assert result["error"] == "ArchiveError"
    assert result["message"] == (
        f"{bomb}: member '{member}' declares 268,435,456 uncompressed bytes, more than the {MAX_PNG_BYTES:,} "
        f"bytes such a member may hold: a zip bomb, or not the archive it should be. {ADVICE}"
    )
    largest = 2 * 20 * 105 * 105  # the alphabet's array: two characters of 20 drawings
    assert result["peak"] < 2 * largest + MARGIN, result


# -- row 3: a well-formed IDX file declaring 2.5 M images -------------------------------------------
def test_idx_with_more_images_than_the_split_may_hold_is_refused_before_allocating(emnist_zip, tmp_path):
    member = member_names("byclass")["train-images"]
    data = itertools.chain([idx_header(2051, 2_500_000, 28, 28)], zero_chunks(2_500_000 * 28 * 28))
    large = write_hostile_copy(emnist_zip, tmp_path / "large.zip", member, data, gzipped=True)
    assert large.stat().st_size < 1 << 20  # 1.96 GB of images
    result, stderr = prepare_command(large, tmp_path / "data")
    assert result["returned"] == 1
    assert stderr.startswith(
        f"error: {member} in {large} declares 2,500,000 images of 28x28 (1,960,000,000 bytes), more than the "
        "872,415 it may hold: NIST's EMNIST byclass has 697,932 train images, and a custom archive (verify=False, "
        "--no-verify) may hold at most 1.25x that. The header is corrupt or this is not an EMNIST archive: use "
        "NIST's gzip.zip (prepare-data emnist without --emnist-archive downloads it)\n"
    )
    assert result["peak"] < 2 * EMNIST_LARGEST + MARGIN, result


# -- row 4: IDX dimensions whose byte count wraps in int64 -----------------------------------------
def test_idx_dimensions_overflowing_int64_name_archive_member_and_dimensions(emnist_zip, tmp_path, capsys):
    member = member_names("byclass")["train-images"]
    header = idx_header(2051, 2**22, 2**21, 2**21)  # 2**64 bytes: 0 in int64
    huge = write_hostile_copy(emnist_zip, tmp_path / "huge.zip", member, [header, bytes(1000)], gzipped=True)
    status = prepare_data_main(["emnist", "--emnist-archive", str(huge), "--no-verify", "-q",
                                "--data-dir", str(tmp_path / "data")])
    assert status == 1
    assert capsys.readouterr().err == (
        f"error: {member} in {huge} holds 2097152x2097152 images, expected 28x28 (its header declares 4,194,304 "
        "images of 2097152x2097152, 18,446,744,073,709,551,616 bytes): it is not an EMNIST/MNIST image file, or "
        "its header is corrupt; get a good copy\n(run again with -v for the Python traceback)\n"
    )


# -- row 18: a 400 Mpx PNG inside an archive ---------------------------------------------------------
def test_decompression_bomb_png_errors_name_the_zip_and_the_member(omniglot_zip, tmp_path):
    member = omniglot_member(7)
    giant = write_hostile_copy(omniglot_zip, tmp_path / "giant.zip", member, [black_png(20_000, 20_000)])
    assert giant.stat().st_size < 1 << 20
    with pytest.raises(ImageDecodeError, match=rf"^cannot decode image {member} in {giant}: Image size "
                                                r"\(400000000 pixels\) exceeds limit .*Replace it with a good copy"):
        prepare_omniglot(sets="small1", archives={"small1": giant}, verify=False, progress=False,
                         data_dir=tmp_path / "data")
    large = write_hostile_copy(omniglot_zip, tmp_path / "large.zip", member, [black_png(5000, 4000)])
    with pytest.raises(ImageDecodeError) as caught:  # under Pillow's limit, over the Omniglot cap
        prepare_omniglot(sets="small1", archives={"small1": large}, verify=False, progress=False,
                         data_dir=tmp_path / "data")
    assert str(caught.value) == (
        f"cannot decode image {member} in {large}: its header declares 5000x4000 pixels (20,000,000), more than "
        f"the {MAX_PNG_PIXELS:,} such an image may have: a decompression bomb, or not the image it should be. "
        "Replace it with a good copy (download it again)."
    )
