import io

import numpy as np
import pytest
from PIL import Image

from glyphforge.pipelines.decode import ImageDecodeError, decode_image

from support.synthetic_emnist import black_png


def _png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_grey_and_rgb_decode_equal_pillow(tmp_path):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    path = tmp_path / "x.png"
    Image.fromarray(pixels, "RGB").save(path)
    assert np.array_equal(decode_image(path, channels=3), pixels)
    expected_grey = np.asarray(Image.fromarray(pixels, "RGB").convert("L"))
    assert np.array_equal(decode_image(path.read_bytes(), channels=1), expected_grey)


def test_alpha_is_composited_on_black():
    rgba = np.array([[[200, 100, 50, 255], [200, 100, 50, 0], [255, 255, 255, 128]]], np.uint8)
    decoded = decode_image(_png_bytes(Image.fromarray(rgba, "RGBA")), channels=3)
    assert decoded.tolist() == [[[200, 100, 50], [0, 0, 0], [128, 128, 128]]]


def test_bilevel_png_decodes_to_0_and_255():
    bits = Image.fromarray(np.array([[0, 255], [255, 0]], np.uint8)).convert("1")
    assert decode_image(_png_bytes(bits)).tolist() == [[0, 255], [255, 0]]


def test_undecodable_data_names_the_file(tmp_path):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"not an image at all")
    with pytest.raises(ImageDecodeError, match="broken.png"):
        decode_image(bad)


def test_bad_channel_count():
    with pytest.raises(ValueError, match="channels must be 1"):
        decode_image(b"", channels=2)


def test_bytearrays_decode_like_bytes():
    data = _png_bytes(Image.fromarray(np.array([[0, 9], [200, 255]], np.uint8)))
    assert decode_image(bytearray(data)).tolist() == decode_image(data).tolist() == [[0, 9], [200, 255]]


def test_more_pixels_than_max_pixels_are_refused_before_decoding():
    data = black_png(5000, 4000)
    assert decode_image(black_png(105, 105), max_pixels=105 * 105).shape == (105, 105)
    with pytest.raises(ImageDecodeError) as caught:
        decode_image(data, name="a/b.png in x.zip", max_pixels=4096 * 4096)
    assert str(caught.value) == (
        "cannot decode image a/b.png in x.zip: its header declares 5000x4000 pixels (20,000,000), more than the "
        "16,777,216 such an image may have: a decompression bomb, or not the image it should be. Replace it with a "
        "good copy (download it again)."
    )
    assert decode_image(data).shape == (4000, 5000)  # without max_pixels, Pillow's own limit (179 Mpx) applies


def test_pillows_decompression_bomb_error_names_the_image(tmp_path):
    path = tmp_path / "bomb.png"
    path.write_bytes(black_png(20_000, 20_000))
    bomb = rf"^cannot decode image {path}: Image size \(400000000 pixels\) exceeds limit .*bomb.* Replace it"
    with pytest.raises(ImageDecodeError, match=bomb):
        decode_image(path)
