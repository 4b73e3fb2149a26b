import io

import numpy as np
import pytest

from glyphforge.pipelines import idx
from glyphforge.pipelines.idx import CountCap, IDXError, read_images, read_labels

from support.synthetic_emnist import gzip_bytes, idx_header

NAME = "gzip/emnist-digits-test-images-idx3-ubyte.gz"


def _images(n: int = 5, rows: int = 28, cols: int = 28) -> np.ndarray:
    return (np.arange(n * rows * cols, dtype=np.int64) * 7 % 251).astype(np.uint8).reshape(n, rows, cols)


def _image_file(images: np.ndarray, *, count: int | None = None, extra: bytes = b"") -> bytes:
    n, rows, cols = images.shape
    return idx_header(2051, n if count is None else count, rows, cols) + images.tobytes() + extra


def test_images_are_read_as_stored():
    images = _images()
    parsed = read_images(io.BytesIO(gzip_bytes(_image_file(images))), NAME)
    assert parsed.dtype == np.uint8 and parsed.shape == (5, 28, 28)
    assert np.array_equal(parsed, images)
    parsed[0, 0, 0] = 1  # writable: read into our own array, not a read-only view


def test_labels_and_uncompressed_files():
    labels = np.array([3, 0, 9, 255, 1], np.uint8)
    data = idx_header(2049, 5) + labels.tobytes()
    assert np.array_equal(read_labels(io.BytesIO(gzip_bytes(data)), NAME), labels)
    assert np.array_equal(read_labels(io.BytesIO(data), NAME, gzipped=False), labels)
    images = _images(2, 5, 3)
    assert np.array_equal(read_images(io.BytesIO(_image_file(images)), NAME, gzipped=False, dims=None), images)


def test_multi_chunk_files_are_read_completely(monkeypatch):
    monkeypatch.setattr(idx, "_CHUNK", 1000)  # many readinto calls, one partial at the end
    images = _images(13)
    assert np.array_equal(read_images(io.BytesIO(gzip_bytes(_image_file(images))), NAME), images)


def test_wrong_magic_names_the_file_and_both_numbers():
    label_file = gzip_bytes(idx_header(2049, 3) + bytes(3))
    wrong_magic = rf"^{NAME} has magic number 2049 \(that of a label file\), expected 2051 for an image file"
    with pytest.raises(IDXError, match=wrong_magic):
        read_images(io.BytesIO(label_file), NAME)
    with pytest.raises(IDXError, match=rf"^{NAME} has magic number 2051 \(that of an image file\), expected 2049"):
        read_labels(io.BytesIO(gzip_bytes(_image_file(_images(1)))), NAME)
    with pytest.raises(IDXError, match=r"has magic number 1234, expected 2049 for a label file"):
        read_labels(io.BytesIO(gzip_bytes(idx_header(1234, 3) + bytes(3))), NAME)


def test_truncated_data_names_declared_and_actual_bytes():
    images = _images(10)
    short = _image_file(images)[: 16 + 7 * 784]
    with pytest.raises(IDXError) as caught:
        read_images(io.BytesIO(gzip_bytes(short)), NAME)
    assert str(caught.value) == (
        f"{NAME} is truncated: its header declares 10 images of 28x28 (7,840 bytes of data) but only "
        "5,488 bytes follow. The file is incomplete: get a complete copy"
    )
    with pytest.raises(IDXError, match=r"declares 9 labels \(9 bytes of data\) but only 4 bytes follow"):
        read_labels(io.BytesIO(gzip_bytes(idx_header(2049, 9) + bytes(4))), NAME)


def test_truncated_header():
    short_header = rf"^{NAME} is truncated: an IDX image header needs 16 bytes but the file holds only 7$"
    with pytest.raises(IDXError, match=short_header):
        read_images(io.BytesIO(gzip_bytes(idx_header(2051, 1)[:7])), NAME)
    with pytest.raises(IDXError, match=r"an IDX label header needs 8 bytes but the file holds only 0$"):
        read_labels(io.BytesIO(gzip_bytes(b"")), NAME)


def test_truncated_gzip_stream():
    compressed = gzip_bytes(_image_file(_images(40)))
    message = rf"^{NAME} is truncated: its gzip stream ends early \(.+\)\. The file is incomplete: get a complete copy$"
    with pytest.raises(IDXError, match=message):
        read_images(io.BytesIO(compressed[: len(compressed) // 2]), NAME)
    with pytest.raises(IDXError, match=message):  # all data there, but the gzip trailer is cut off
        read_images(io.BytesIO(compressed[:-4]), NAME)


def test_corrupt_gzip_stream():
    compressed = bytearray(gzip_bytes(_image_file(_images(40))))
    compressed[len(compressed) // 2] ^= 0xFF
    compressed[len(compressed) // 2 + 1] ^= 0x55
    with pytest.raises(IDXError, match=rf"^{NAME} (is not a valid gzip stream|is truncated|has at least)"):
        read_images(io.BytesIO(bytes(compressed)), NAME)
    with pytest.raises(IDXError, match=rf"^{NAME} is not a valid gzip stream \(BadGzipFile: .*get a complete copy$"):
        read_images(io.BytesIO(b"<html>not gzip</html>"), NAME)


def test_bytes_after_the_declared_data():
    data = _image_file(_images(3), count=2)
    extra = rf"^{NAME} has 784 bytes after the 1,568 bytes of data its header declares \(2 images of 28x28\)"
    with pytest.raises(IDXError, match=extra):
        read_images(io.BytesIO(gzip_bytes(data)), NAME)


def test_empty_files():
    assert read_images(io.BytesIO(gzip_bytes(idx_header(2051, 0, 28, 28))), NAME).shape == (0, 28, 28)
    assert read_labels(io.BytesIO(gzip_bytes(idx_header(2049, 0))), NAME).shape == (0,)


def test_wrong_image_size():
    data = gzip_bytes(_image_file(_images(2, 32, 32)))
    with pytest.raises(IDXError, match=rf"^{NAME} holds 32x32 images, expected 28x28"):
        read_images(io.BytesIO(data), NAME)
    assert read_images(io.BytesIO(data), NAME, dims=(32, 32)).shape == (2, 32, 32)


def test_absurd_counts_are_refused_before_allocating():
    header = idx_header(2051, 4_000_000_000, 28, 28)
    absurd = r"declares 4,000,000,000 images of 28x28 \(3,136,000,000,000 bytes\), more than the"
    with pytest.raises(IDXError, match=absurd):
        read_images(io.BytesIO(gzip_bytes(header)), NAME)


def test_wrong_image_size_is_refused_from_the_header():
    """Checked before the data are read: a header alone (no data) gets the same refusal."""
    with pytest.raises(IDXError) as caught:
        read_images(io.BytesIO(gzip_bytes(idx_header(2051, 7, 32, 32))), NAME)
    assert str(caught.value) == (
        f"{NAME} holds 32x32 images, expected 28x28 (its header declares 7 images of 32x32, 7,168 bytes): it is not "
        "an EMNIST/MNIST image file, or its header is corrupt; get a good copy"
    )


def test_overflowing_dimensions_are_computed_exactly():
    """2**22 x 2**21 x 2**21 is 2**64 bytes: a product in int64 wraps to 0 and numpy fails unnamed."""
    header = gzip_bytes(idx_header(2051, 2**22, 2**21, 2**21))
    with pytest.raises(IDXError) as caught:
        read_images(io.BytesIO(header), NAME, dims=None)
    assert str(caught.value) == (
        f"{NAME} declares 4,194,304 images of 2097152x2097152 (18,446,744,073,709,551,616 bytes), more than the "
        "8,589,934,592-byte cap: its header is corrupt; get a good copy"
    )
    with pytest.raises(IDXError, match=rf"^{NAME} holds 2097152x2097152 images, expected 28x28 \(its header "
                                       r"declares 4,194,304 images of 2097152x2097152, "
                                       r"18,446,744,073,709,551,616 bytes\)"):
        read_images(io.BytesIO(header), NAME)


def test_count_cap_refuses_before_reading_the_data():
    cap = CountCap(10, "the test allows 10. Use a smaller file")
    assert read_images(io.BytesIO(gzip_bytes(_image_file(_images(10)))), NAME, cap=cap).shape == (10, 28, 28)
    with pytest.raises(IDXError) as caught:  # a header alone: refused before any data is expected
        read_images(io.BytesIO(gzip_bytes(idx_header(2051, 2_500_000, 28, 28))), NAME, cap=cap)
    assert str(caught.value) == (
        f"{NAME} declares 2,500,000 images of 28x28 (1,960,000,000 bytes), more than the 10 it may hold: "
        "the test allows 10. Use a smaller file"
    )
    with pytest.raises(IDXError, match=rf"^{NAME} declares 11 labels \(11 bytes\), more than the 10 it may hold"):
        read_labels(io.BytesIO(gzip_bytes(idx_header(2049, 11) + bytes(11))), NAME, cap=cap)
