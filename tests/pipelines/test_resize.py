import zipfile

import numpy as np
import PIL
import pytest
from PIL import Image

from glyphforge.pipelines.decode import decode_image
from glyphforge.pipelines.resize import resize

PILLOW_FILTERS = {"box": Image.BOX, "bilinear": Image.BILINEAR, "lanczos": Image.LANCZOS}
PILLOW_13 = int(PIL.__version__.split(".")[0]) >= 13

# (H, W) -> (h, w): the sizes, odd, non-square, 1xN / Nx1, and both pass orders
SIZES = [
    ((28, 28), (14, 14)),
    ((28, 28), (20, 20)),
    ((105, 105), (28, 28)),
    ((105, 105), (37, 37)),
    ((28, 28), (56, 56)),
    ((27, 19), (11, 7)),
    ((13, 7), (5, 11)),
    ((7, 13), (29, 3)),
    ((1, 9), (1, 4)),
    ((9, 1), (4, 1)),
    ((1, 1), (3, 5)),
    ((6, 1), (1, 1)),
    ((28, 28), (28, 14)),
    ((40, 30), (17, 53)),  # height shrinks more than width: Pillow 13 runs the vertical pass first
    ((60, 20), (30, 10)),
    ((64, 64), (8, 37)),
    ((64, 64), (8, 36)),  # the boundary: horizontal first
]


def _vertical_first(src, dst):
    return dst[0] < src[0] and src[0] - dst[0] > 2 * (src[1] - dst[1])


def _skip_old_pillow_order(src, dst):
    if not PILLOW_13 and _vertical_first(src, dst):
        pytest.skip("Pillow < 13 always runs the horizontal pass first; glyphforge follows Pillow 13")


def _pillow(image, shape, method, mode=None):
    return np.asarray(Image.fromarray(image, mode).resize((shape[1], shape[0]), PILLOW_FILTERS[method]))


def _random(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


@pytest.mark.parametrize("method", PILLOW_FILTERS)
@pytest.mark.parametrize("src, dst", SIZES)
@pytest.mark.parametrize("channels", [0, 3])
def test_uint8_equals_pillow(method, src, dst, channels):
    _skip_old_pillow_order(src, dst)
    images = _random((3, *src, channels) if channels else (3, *src))
    result = resize(images, dst, method=method)
    expected = np.stack([_pillow(image, dst, method) for image in images])
    assert result.dtype == np.uint8 and result.shape == expected.shape
    assert np.array_equal(result, expected)


@pytest.mark.parametrize("method", PILLOW_FILTERS)
@pytest.mark.parametrize("src, dst", SIZES)
def test_float32_equals_pillow_f_mode(method, src, dst):
    _skip_old_pillow_order(src, dst)
    images = (np.random.default_rng(1).random((2, *src), np.float32) * 300 - 20).astype(np.float32)
    result = resize(images, dst, method=method)
    expected = np.stack([_pillow(image, dst, method, "F") for image in images])
    assert result.dtype == np.float32
    assert np.array_equal(result, expected)


def test_float32_rgb_is_per_channel_f_mode():
    images = np.random.default_rng(2).random((2, 21, 17, 3), np.float32)
    result = resize(images, (8, 30), method="lanczos")
    for image, resized in zip(images, result, strict=True):
        for c in range(3):
            expected = _pillow(np.ascontiguousarray(image[..., c]), (8, 30), "lanczos", "F")
            assert np.array_equal(resized[..., c], expected)


def test_float32_is_neither_rounded_nor_clipped():
    edge = np.zeros((1, 12, 12), np.float32)
    edge[:, :, 6:] = 255.0
    result = resize(edge, (12, 5), method="lanczos")
    assert result.min() < 0 and result.max() > 255  # lanczos rings past the input range
    assert not np.array_equal(result, np.round(result))
    assert resize(edge.astype(np.uint8), (12, 5), method="lanczos").max() == 255


def _omniglot(shared_data, count):
    with zipfile.ZipFile(shared_data / "omniglot" / "images_background_small1.zip") as archive:
        names = sorted(n for n in archive.namelist() if n.endswith(".png"))[:: 2720 // count][:count]
        return np.stack([decode_image(archive.read(name), name=name) for name in names])


@pytest.mark.parametrize("method", PILLOW_FILTERS)
def test_real_omniglot_strokes_equal_pillow(shared_data, method):
    images = 255 - _omniglot(shared_data, 40)  # white strokes on black, as stored
    for shape in [(28, 28), (37, 37), (14, 14), (20, 105), (210, 150)]:
        _skip_old_pillow_order(images.shape[1:], shape)
        expected = np.stack([_pillow(image, shape, method) for image in images])
        assert np.array_equal(resize(images, shape, method=method), expected)


@pytest.mark.parametrize("method", PILLOW_FILTERS)
def test_real_rgb_texture_equals_pillow(shared_data, method):
    texture = decode_image(shared_data / "backgrounds" / "floor.jpg", channels=3)[:150, :120]
    for shape in [(37, 53), (300, 17), (150, 60)]:
        _skip_old_pillow_order(texture.shape[:2], shape)
        assert np.array_equal(resize(texture, shape, method=method), _pillow(texture, shape, method))


def test_batch_sizes_not_multiple_of_block_equal_pillow():
    images = _random((131, 28, 28), seed=3)
    expected = np.stack([_pillow(image, (14, 14), "box") for image in images])
    assert np.array_equal(resize(images, (14, 14)), expected)
    assert np.array_equal(resize(images[:1], (14, 14)), expected[:1])


# ---------------------------------------------------------------- area averaging


def _coverage(in_size, out_size):
    """Dense integer overlaps: output o covers [o*in, (o+1)*in), input i covers [i*out, (i+1)*out)."""
    o = np.arange(out_size)[:, None]
    i = np.arange(in_size)[None, :]
    return np.clip(np.minimum((o + 1) * in_size, (i + 1) * out_size) - np.maximum(o * in_size, i * out_size), 0, None)


def _area_reference(image, shape):
    """Exact area average of one uint8 image (H, W[, C]), rounded half up, in integer arithmetic."""
    rows, cols = _coverage(image.shape[0], shape[0]), _coverage(image.shape[1], shape[1])
    total = np.einsum("ph,hw...,qw->pq...", rows, image.astype(np.int64), cols)
    area = image.shape[0] * image.shape[1]
    return ((2 * total + area) // (2 * area)).astype(np.uint8), total, area


AREA_SIZES = [s for s in SIZES if s[0] != (1, 1)] + [((28, 28), (7, 7)), ((105, 105), (35, 21))]


@pytest.mark.parametrize("src, dst", AREA_SIZES)
@pytest.mark.parametrize("channels", [0, 3])
def test_area_equals_exact_reference(src, dst, channels):
    images = _random((3, *src, channels) if channels else (3, *src), seed=4)
    expected = np.stack([_area_reference(image, dst)[0] for image in images])
    assert np.array_equal(resize(images, dst, method="area"), expected)


def test_area_rounds_half_up():
    image = np.array([[0, 1], [2, 3]], np.uint8)  # mean 1.5
    assert resize(image, (1, 1), method="area").tolist() == [[2]]
    assert resize(np.array([[1, 2]], np.uint8), (1, 1), method="area").tolist() == [[2]]


def test_area_float32_is_the_unrounded_mean():
    images = _random((2, 28, 28), seed=5)
    floats = resize(images.astype(np.float32), (14, 14), method="area")
    exact = images.astype(np.float64).reshape(2, 14, 2, 14, 2).mean(axis=(2, 4))
    assert np.array_equal(floats, exact.astype(np.float32))  # sums of halves: exact in float
    uneven = resize(images.astype(np.float32), (9, 11), method="area")
    _, total, area = _area_reference(images[0], (9, 11))
    np.testing.assert_allclose(uneven[0], total / area, rtol=1e-6)


# OpenCV INTER_AREA: exact equality when shrinking, except exact .5 ties outside its 2x2 path
CV2_EQUAL = [((28, 28), (14, 14)), ((28, 28), (20, 20)), ((105, 105), (28, 28)), ((105, 105), (37, 37)),
             ((27, 19), (11, 7)), ((9, 9), (3, 3)), ((1, 9), (1, 4)), ((28, 28), (56, 56)), ((20, 30), (50, 45))]


@pytest.mark.parametrize("src, dst", CV2_EQUAL)
@pytest.mark.parametrize("channels", [0, 3])
def test_area_equals_opencv_inter_area(src, dst, channels):
    cv2 = pytest.importorskip("cv2")
    images = _random((4, *src, channels) if channels else (4, *src), seed=6)
    expected = np.stack([cv2.resize(image, dst[::-1], interpolation=cv2.INTER_AREA) for image in images])
    assert np.array_equal(resize(images, dst, method="area"), expected)


def test_area_on_real_omniglot_equals_opencv(shared_data):
    cv2 = pytest.importorskip("cv2")
    images = 255 - _omniglot(shared_data, 40)
    for shape in [(28, 28), (37, 37), (14, 14)]:
        expected = np.stack([cv2.resize(image, shape[::-1], interpolation=cv2.INTER_AREA) for image in images])
        assert np.array_equal(resize(images, shape, method="area"), expected)


def test_area_differs_from_opencv_only_on_ties_it_rounds_to_even():
    cv2 = pytest.importorskip("cv2")
    images = _random((6, 28, 28), seed=7)
    ours = resize(images, (7, 7), method="area")  # 4x4 blocks: OpenCV's generic path, half to even
    theirs = np.stack([cv2.resize(image, (7, 7), interpolation=cv2.INTER_AREA) for image in images])
    totals = np.stack([_area_reference(image, (7, 7))[1] for image in images])
    area = 28 * 28
    ties = (2 * totals) % (2 * area) == area
    assert ties.any() and np.array_equal(ours[~ties], theirs[~ties])
    half = totals[ties] / area
    assert np.array_equal(ours[ties], half + 0.5)
    assert np.array_equal(theirs[ties], np.round(half))  # numpy rounds half to even too


def test_area_enlarging_by_non_integer_factor_is_within_one_of_opencv():
    cv2 = pytest.importorskip("cv2")
    images = _random((4, 28, 28), seed=8)
    theirs = np.stack([cv2.resize(image, (37, 37), interpolation=cv2.INTER_AREA) for image in images])
    difference = np.abs(resize(images, (37, 37), method="area").astype(int) - theirs)
    assert difference.max() == 1  # OpenCV enlarges with 11-bit fixed-point weights


def test_box_is_not_area_averaging_for_non_integer_factors():
    images = 255 - np.zeros((1, 105, 105), np.uint8)
    images[:, ::7] = 0
    box, area = resize(images, (28, 28), method="box"), resize(images, (28, 28), method="area")
    assert np.abs(box.astype(int) - area).max() > 10


# ---------------------------------------------------------------- layouts, out=, copies


def test_single_images_and_batches_agree():
    grey, rgb = _random((5, 30, 22), seed=9), _random((5, 30, 22, 3), seed=10)
    assert np.array_equal(resize(grey[2], (9, 13)), resize(grey, (9, 13))[2])
    assert np.array_equal(resize(rgb[2], (9, 13)), resize(rgb, (9, 13))[2])
    assert resize(rgb[2], (9, 13)).shape == (9, 13, 3)
    assert resize(grey, (9, 13)).shape == (5, 9, 13)


def test_batch_flag_resolves_three_wide_grey_batches():
    narrow = _random((4, 10, 3), seed=11)
    assert resize(narrow, (5, 2)).shape == (5, 2, 3)  # guessed: one RGB image
    as_batch = resize(narrow, (5, 2), batch=True)
    assert as_batch.shape == (4, 5, 2)
    assert np.array_equal(as_batch[1], _pillow(narrow[1], (5, 2), "box"))
    assert resize(_random((10, 7, 4)), (5, 5), batch=False).shape == (5, 5, 4)


def test_non_contiguous_input():
    images = _random((4, 56, 56, 3), seed=12)[:, ::2, 1::2, ::-1]
    expected = resize(np.ascontiguousarray(images), (14, 14), method="lanczos")
    assert np.array_equal(resize(images, (14, 14), method="lanczos"), expected)


def test_read_only_input_and_the_callers_flags():
    images = _random((100, 28, 28), seed=16)
    frozen = np.frombuffer(images.tobytes(), np.uint8).reshape(images.shape)  # as IDX parsing gives
    assert np.array_equal(resize(frozen, (14, 14)), resize(images, (14, 14)))
    assert images.flags.writeable


def test_out_is_filled_and_returned():
    images = _random((7, 28, 28), seed=13)
    out = np.full((7, 14, 14), 99, np.uint8)
    assert resize(images, (14, 14), method="bilinear", out=out) is out
    assert np.array_equal(out, resize(images, (14, 14), method="bilinear"))
    rgb_out = np.empty((20, 20, 3), np.uint8)
    assert resize(_random((28, 28, 3)), (20, 20), out=rgb_out) is rgb_out


@pytest.mark.parametrize(
    "out, message",
    [
        (np.empty((7, 14, 15), np.uint8), r"out must be a uint8 array of shape \(7, 14, 14\), got uint8 \(7, 14, 15\)"),
        (np.empty((7, 14, 14), np.float32), "out must be a uint8 array"),
        (np.empty((7, 14, 28), np.uint8)[:, :, ::2], "C-contiguous"),
        ([[0]], "got list"),
    ],
)
def test_bad_out(out, message):
    with pytest.raises(ValueError, match=message):
        resize(_random((7, 28, 28)), (14, 14), out=out)


def test_out_overlapping_images_is_refused():
    buffer = np.zeros((2, 28, 28), np.uint8)
    inside = buffer.reshape(-1)[: 2 * 14 * 14].reshape(2, 14, 14)
    with pytest.raises(ValueError, match="out must not overlap images"):
        resize(buffer, (14, 14), out=inside)


def test_same_size_is_a_copy():
    images = _random((3, 28, 28), seed=14)
    for method in ("box", "lanczos", "area"):
        copy = resize(images, (28, 28), method=method)
        assert np.array_equal(copy, images) and not np.shares_memory(copy, images)


def test_empty_batch():
    assert resize(np.zeros((0, 28, 28), np.uint8), (14, 14)).shape == (0, 14, 14)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "images, message",
    [
        (np.zeros((28, 28), np.float64), "images must be uint8 or float32, got dtype float64"),
        (np.zeros((28, 28), np.int16), "images must be uint8 or float32"),
        (np.zeros((28, 28), bool), "images must be uint8 or float32"),
        (
            np.zeros(28, np.uint8),
            r"images must be \(N, H, W\), \(N, H, W, C\), \(H, W\) or \(H, W, C\), got an array of shape \(28,\)",
        ),
        (np.zeros((1, 2, 3, 4, 5), np.uint8), "images must be"),
        (np.zeros((3, 0, 28), np.uint8), "images must be at least 1x1 pixels"),
        (np.zeros((0, 28), np.uint8), "images must be at least 1x1 pixels"),
        (np.zeros((3, 28, 28, 0), np.uint8), "images must be at least 1x1 pixels with 1 channel"),
    ],
)
def test_bad_images(images, message):
    with pytest.raises(ValueError, match=message):
        resize(images, (14, 14))


@pytest.mark.parametrize("shape", [(0, 14), (14, -1), (14.0, 14), (14,), (1, 2, 3), "14x14", 14, (True, 3), None])
def test_bad_shape(shape):
    with pytest.raises(ValueError, match=r"^shape .* is invalid: give \(height, width\) as two positive integers"):
        resize(np.zeros((28, 28), np.uint8), shape)


def test_numpy_integer_shape_is_accepted():
    assert resize(np.zeros((28, 28), np.uint8), np.array([14, 7])).shape == (14, 7)


def test_bad_method_and_batch():
    images = np.zeros((2, 28, 28), np.uint8)
    with pytest.raises(ValueError, match="method must be one of 'box', 'bilinear', 'lanczos', 'area', got 'nearest'"):
        resize(images, (14, 14), method="nearest")
    with pytest.raises(ValueError, match="batch must be None, True or False, got 'yes'"):
        resize(images, (14, 14), batch="yes")
    with pytest.raises(ValueError, match=r"batch=False contradicts images of shape \(2, 28, 28, 1\)"):
        resize(images[..., None], (14, 14), batch=False)


def test_area_uint8_side_limit():
    with pytest.raises(ValueError, match="method='area' on uint8 images takes at most 65793 pixels per side"):
        resize(np.zeros((1, 65794), np.uint8), (1, 10), method="area")


@pytest.mark.parametrize("method", [*PILLOW_FILTERS, "area"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_threaded_batches_equal_single_image_calls(method, dtype):
    images = _random((150, 30, 25, 3), seed=15).astype(dtype)  # large enough for the thread pool
    batched = resize(images, (17, 40), method=method)
    assert np.array_equal(batched, np.stack([resize(image, (17, 40), method=method) for image in images]))
