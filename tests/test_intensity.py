import numpy as np
import pytest
from PIL import Image

from glyphforge.pipelines.intensity import invert, to_grey


def test_invert_maps_black_on_white_to_white_on_black():
    images = np.array([[[0, 255, 100]], [[1, 254, 128]]], np.uint8)
    assert invert(images).tolist() == [[[255, 0, 155]], [[254, 1, 127]]]


def test_invert_in_place_through_out():
    images = np.arange(256, dtype=np.uint8).reshape(16, 16)
    expected = 255 - images
    assert invert(images, out=images) is images
    assert np.array_equal(images, expected)


def test_to_grey_equals_pillow_convert_l():
    rng = np.random.default_rng(0)
    colours = rng.integers(0, 256, (4, 33, 17, 3), dtype=np.uint8)
    colours[0, 0, :3] = [[0, 0, 0], [255, 255, 255], [255, 0, 0]]
    grey = to_grey(colours)
    assert grey.shape == (4, 33, 17) and grey.dtype == np.uint8
    for image, result in zip(colours, grey):
        assert np.array_equal(result, np.asarray(Image.fromarray(image).convert("L")))
    assert np.array_equal(to_grey(colours[1]), grey[1])


def test_to_grey_into_out_and_from_a_view():
    colours = np.random.default_rng(1).integers(0, 256, (8, 9, 6), dtype=np.uint8)
    view = colours[:, :, ::2]  # not contiguous
    out = np.empty((8, 9), np.uint8)
    assert to_grey(view, out=out) is out
    assert np.array_equal(out, to_grey(np.ascontiguousarray(view)))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: invert(np.zeros(3, np.float32)), "images must be uint8, got dtype float32"),
        (lambda: invert(np.zeros(3, np.uint8), out=np.zeros(4, np.uint8)), r"out must be a uint8 array of shape \(3,"),
        (lambda: to_grey(np.zeros((2, 4), np.uint8)), r"must end with an RGB axis of length 3, got shape \(2, 4\)"),
        (lambda: to_grey(np.zeros((2, 3), np.int32)), "images must be uint8"),
        (lambda: to_grey(np.zeros((2, 3), np.uint8), out=np.zeros((2,), np.float32)), "out must be a uint8 array"),
        (lambda: to_grey(np.zeros((2, 2, 3), np.uint8), out=np.zeros((2, 4), np.uint8)[:, ::2]), "C-contiguous"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
