"""preview: PNG grids of scenes (boxes and labels drawn) and of plain images."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
from PIL import Image, ImageDraw

import glyphforge
from glyphforge.scenes.spec import ScatteredGlyphs
from glyphforge.visualize import BACKDROP, BOX_COLOURS, CAPTION_HEIGHT, GAP, preview


def _scene_arrays(boxes, labels):
    """One black 48x48 scene with the given (top, left, bottom, right) boxes and integer labels."""
    padded = np.full((1, 3, 4), -1, np.float32)
    padded[0, : len(boxes)] = boxes
    padded_labels = np.full((1, 3), -1, np.int64)
    padded_labels[0, : len(labels)] = labels
    return {"images": np.zeros((1, 48, 48, 3), np.uint8), "boxes": padded, "labels": padded_labels}


def test_scene_preview_has_the_documented_size(tmp_path):
    shard = ScatteredGlyphs(20, glyphs="font").make_shard(0, np.random.default_rng(0), 20)
    path = preview(shard, n=16, path=tmp_path / "scenes.png")
    with Image.open(path) as image:
        assert image.format == "PNG"
        # 48x48 scenes zoomed 2x (128 // 48) in a 4x4 grid with 4-pixel gaps
        assert image.size == (4 * 96 + 5 * GAP, 4 * 96 + 5 * GAP)


def test_a_built_dataset_previews_its_first_examples(tmp_path):
    dataset = glyphforge.build(ScatteredGlyphs(30, glyphs="font", image_shape=(32, 64)), progress=False)
    path = glyphforge.preview(dataset, n=6, path=tmp_path / "built.png", columns=3)
    with Image.open(path) as image:
        # 64 wide -> zoom 2 (128 // 64); 3 columns, 2 rows
        assert image.size == (3 * 128 + 4 * GAP, 2 * 64 + 3 * GAP)
        cell = np.asarray(image)[GAP : GAP + 64, GAP : GAP + 128]
    zoomed = np.repeat(np.repeat(dataset["images"][0], 2, 0), 2, 1)
    untouched = np.ones(cell.shape[:2], bool)  # away from outlines and the labels beside them
    for top, left, bottom, right in dataset["boxes"][0][: dataset["n_glyphs"][0]].astype(int) * 2:
        untouched[max(0, top - CAPTION_HEIGHT) : bottom + CAPTION_HEIGHT, left : max(right, left + 20)] = False
    assert untouched.mean() > 0.5
    np.testing.assert_array_equal(cell[untouched], zoomed[untouched])
    assert (cell != zoomed).any()  # and something was drawn
    # the glyphs' labels are named by the dataset's class list (its labels are integer codes)
    named = np.asarray(Image.open(glyphforge.preview(dataset, n=6, path=tmp_path / "named.png", columns=3)))
    unnamed = glyphforge.preview(dataset, n=6, path=tmp_path / "unnamed.png", columns=3,
                                 class_names=[""] * len(dataset.classes))
    assert (named != np.asarray(Image.open(unnamed))).any()
    given = glyphforge.preview(dataset, n=6, path=tmp_path / "given.png", columns=3, class_names=dataset.classes)
    np.testing.assert_array_equal(named, np.asarray(Image.open(given)))


def test_boxes_are_outlined_at_their_zoomed_position(tmp_path):
    path = preview(_scene_arrays([(10, 20, 30, 25), (1, 2, 5, 9)], [0, 1]), n=4, path=tmp_path / "one.png",
                   class_names="QZ")
    picture = np.asarray(Image.open(path))
    assert picture.shape == (2 * 48 + 2 * GAP, 2 * 48 + 2 * GAP, 3)
    origin = GAP
    first, second = BOX_COLOURS[0], BOX_COLOURS[1]
    # first box: zoomed x2 -> rows 20..59, columns 40..49 of the cell
    assert picture[origin + 59, origin + 40].tolist() == list(first)  # bottom-left corner
    assert picture[origin + 59, origin + 49].tolist() == list(first)  # bottom-right corner
    assert picture[origin + 40, origin + 45].tolist() == [0, 0, 0]  # inside stays the scene's black
    assert picture[origin + 9, origin + 17].tolist() == list(second)  # second box bottom-right corner
    # the label of the first box is written above it, in its (anti-aliased) red
    label_area = picture[origin + 20 - CAPTION_HEIGHT : origin + 20, origin + 40 : origin + 52].astype(int)
    assert ((label_area[..., 0] > 128) & (label_area[..., 1] < label_area[..., 0] // 2)).any()
    assert not picture[origin + 20 - CAPTION_HEIGHT : origin + 20, origin + 60 : origin + 96].any()  # nothing else


def test_labels_of_a_built_style_mapping_use_class_names(tmp_path):
    arrays = _scene_arrays([(10, 20, 30, 25)], [1])
    with_names = np.asarray(Image.open(preview(arrays, path=tmp_path / "a.png", class_names=["a", "b"])))
    without = np.asarray(Image.open(preview(arrays, path=tmp_path / "b.png", class_names=["a", ""])))
    assert (with_names != without).any()  # the name "b" was drawn


def test_grey_images_with_captions_and_explicit_columns(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (7, 28, 28)).astype(np.uint8)
    path = preview(images, n=5, path=tmp_path / "grey.png", labels=[0, 1, 2, 3, 4, 5, 6],
                   class_names="abcdefg", columns=2)
    picture = np.asarray(Image.open(path))
    # 28 * 4 = 112 pixel cells, 2 columns, 3 rows each with a caption line
    assert picture.shape == (3 * (112 + CAPTION_HEIGHT) + 4 * GAP, 2 * 112 + 3 * GAP, 3)
    top_left = picture[GAP : GAP + 112, GAP : GAP + 112, 0]
    np.testing.assert_array_equal(top_left, np.repeat(np.repeat(images[0], 4, 0), 4, 1))  # nearest zoom
    assert picture[-GAP - 1, -GAP - 1].tolist() == list(BACKDROP)  # the sixth cell is empty


def test_a_list_of_images_of_different_sizes_is_shrunk_to_fit(tmp_path):
    images = [np.full((300, 200, 3), 200, np.uint8), np.full((50, 400, 3), 90, np.uint8)]
    picture = np.asarray(Image.open(preview(images, path=tmp_path / "textures.png")))
    # scale 128 / 400: cells 300 * 0.32 = 96 high, 128 wide
    assert picture.shape == (96 + 2 * GAP, 2 * 128 + 3 * GAP, 3)
    assert picture[GAP + 10, GAP + 10].tolist() == [200, 200, 200]


@pytest.mark.parametrize(
    ("data", "options", "message"),
    [
        (np.zeros((4, 8, 8), np.float32), {}, "preview draws uint8"),
        (np.zeros((8, 8), np.uint8), {}, r"for one image pass image\[None\]"),
        ({"boxes": np.zeros((1, 1, 4))}, {}, "preview needs an 'images' array"),
        (np.zeros((2, 8, 8), np.uint8), {"n": 0}, r"n \(how many examples to show\) must be an integer >= 1, got 0"),
        (np.zeros((2, 8, 8), np.uint8), {"labels": [1]}, "labels has 1 entries for 2 images"),
        (np.zeros((2, 8, 8), np.uint8), {"columns": 0}, "columns must be an integer >= 1, got 0"),
    ],
)
def test_bad_input(tmp_path, data, options, message):
    with pytest.raises(ValueError, match=message):
        preview(data, path=tmp_path / "x.png", **options)


def test_unsupported_type(tmp_path):
    with pytest.raises(TypeError, match="preview takes a built dataset"):
        preview("scenes", path=tmp_path / "x.png")


#: Real Omniglot class names, the longest ones among them, too wide for a 96-pixel tile.
LONG_NAMES = ["Inuktitut_(Canadian_Aboriginal_Syllabics),12", "Japanese_(hiragana),41", "Mkhedruli_(Georgian),3"]


@pytest.fixture
def drawn_text(monkeypatch):
    """Every text box preview draws, measured with Pillow's textbbox: ``[(box, text)]``."""
    drawn = []
    real = ImageDraw.ImageDraw.text

    def measured(self, xy, text, *args, **kwargs):
        font = inspect.signature(real).bind(self, xy, text, *args, **kwargs).arguments.get("font")
        drawn.append((self.textbbox(xy, text, font=font), text))
        return real(self, xy, text, *args, **kwargs)

    monkeypatch.setattr(ImageDraw.ImageDraw, "text", measured)
    return drawn


def _inside(box, tiles):
    return any(left <= box[0] and top <= box[1] and box[2] <= right and box[3] <= bottom
               for left, top, right, bottom in tiles)


@pytest.mark.parametrize("boxes", [
    [(1, 1, 11, 9), (2, 38, 12, 47), (37, 30, 47, 47)],  # top left, top right, bottom right
    [(20, 40, 30, 47), (0, 0, 47, 47), (38, 2, 47, 12)],  # right edge, the whole scene, bottom left
])
def test_long_scene_labels_stay_inside_their_tiles(tmp_path, drawn_text, boxes):
    arrays = _scene_arrays(boxes, [0, 1, 2])
    arrays = {name: np.concatenate([array] * 4) for name, array in arrays.items()}  # a 2x2 grid of 96-pixel tiles
    picture = np.asarray(Image.open(preview(arrays, path=tmp_path / "long.png", class_names=LONG_NAMES)))
    tiles = [(GAP + column * 100, GAP + row * 100, GAP + column * 100 + 96, GAP + row * 100 + 96)
             for row in range(2) for column in range(2)]
    assert sorted(text.replace("\n", "") for _, text in drawn_text) == sorted(LONG_NAMES * 4)  # whole names
    crossing = [(box, text) for box, text in drawn_text if not _inside(box, tiles)]
    assert not crossing, f"labels crossing their tile's edge: {crossing}"
    gaps = np.ones(picture.shape[:2], bool)
    for left, top, right, bottom in tiles:
        gaps[top:bottom, left:right] = False
    assert (picture[gaps] == BACKDROP).all()


def test_long_captions_stay_inside_their_caption_rows(tmp_path, drawn_text):
    images = np.zeros((3, 105, 105), np.uint8)  # Omniglot's drawings, at scale 1
    picture = np.asarray(Image.open(preview(images, path=tmp_path / "captions.png", labels=LONG_NAMES, columns=3)))
    rows = [(GAP + i * 109, GAP + 105, GAP + i * 109 + 105, GAP + 105 + CAPTION_HEIGHT) for i in range(3)]
    assert drawn_text and not [(box, text) for box, text in drawn_text if not _inside(box, rows)]
    assert (picture[:, GAP + 105 : GAP + 109] == BACKDROP).all()  # nothing in the gap between the first two
