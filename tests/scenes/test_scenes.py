"""ScatteredGlyphs: boxes, labels, overlap, counts, determinism, backgrounds, bad input."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import glyphforge
from glyphforge import config
from glyphforge.builds.making.spec import SpecError
from glyphforge.context import DataContext
from glyphforge.datasets.emnist import prepare_emnist
from glyphforge.datasets.omniglot.dataset import load_omniglot
from glyphforge.pipelines.font_glyphs import check_characters, render_font_glyphs, render_glyph, shrink_rendered
from glyphforge.pipelines.resize import resize
from glyphforge.scenes.sources import glyph_sources
from glyphforge.scenes.spec import ScatteredGlyphs

from support.synthetic_emnist import write_synthetic_emnist

#: The "hard" textures carried in ../shared/data (space.jpg is not: too large).
CARRIED_TEXTURES = ["circles", "curves", "floor", "gravel", "ice", "water"]


def _shard(spec: ScatteredGlyphs, n: int | None = None, seed: int = 0, index: int = 0,
           context: DataContext | None = None) -> dict[str, np.ndarray]:
    """Prepare what ``spec`` reads (as build's driver does, within ``context``), then make one shard in this process."""
    spec.prepare(context or config.data_dir())
    return spec.make_shard(index, np.random.default_rng(seed), n or spec.n_examples)


def _pairwise_worst_overlap(boxes: np.ndarray) -> float:
    worst = 0.0
    for i in range(len(boxes)):
        for j in range(i):
            a, b = boxes[i], boxes[j]
            height = min(a[2], b[2]) - max(a[0], b[0])
            width = min(a[3], b[3]) - max(a[1], b[1])
            if height > 0 and width > 0:
                shared = height * width
                area_a = (a[2] - a[0]) * (a[3] - a[1])
                area_b = (b[2] - b[0]) * (b[3] - b[1])
                worst = max(worst, shared / area_a, shared / area_b)
    return worst


def test_each_box_tightly_contains_its_glyph_in_a_black_scene():
    spec = ScatteredGlyphs(300, glyphs="font", image_shape=(40, 44), max_glyphs=4, max_overlap=0.0)
    shard = _shard(spec)
    for image, count, boxes in zip(shard["images"], shard["n_glyphs"], shard["boxes"], strict=True):
        assert (image[..., 0] == image[..., 1]).all() and (image[..., 0] == image[..., 2]).all()  # white on black
        ink = image[..., 0] > 0
        covered = np.zeros_like(ink)
        for top, left, bottom, right in boxes[:count].astype(int):
            region = ink[top:bottom, left:right]
            rows, cols = np.flatnonzero(region.any(1)), np.flatnonzero(region.any(0))
            assert (rows[0], cols[0], rows[-1] + 1, cols[-1] + 1) == (0, 0, bottom - top, right - left)
            covered[top:bottom, left:right] = True
        assert not (ink & ~covered).any()  # no glyph pixel outside every box


def test_overlap_never_exceeds_max_overlap():
    spec = ScatteredGlyphs(300, glyphs="font", max_glyphs=6, min_glyphs=4, max_overlap=0.3, image_shape=(40, 40))
    shard = _shard(spec)
    worst = max(
        _pairwise_worst_overlap(boxes[:count])
        for boxes, count in zip(shard["boxes"], shard["n_glyphs"], strict=True)
    )
    assert 0.1 < worst <= 0.3


def test_counts_labels_names_and_padding():
    spec = ScatteredGlyphs(400, glyphs="font", characters="XA7", min_glyphs=2, max_glyphs=4)
    shard = _shard(spec)
    assert spec.class_names() == ("7", "A", "X")
    counts = shard["n_glyphs"]
    assert counts.dtype == np.int64 and sorted(set(counts.tolist())) == [2, 3, 4]
    assert shard["images"].shape == (400, 48, 48, 3) and shard["images"].dtype == np.uint8
    assert shard["boxes"].shape == (400, 4, 4) and shard["boxes"].dtype == np.float32
    assert shard["labels"].shape == (400, 4) and shard["labels"].dtype == np.int64
    real = np.arange(4)[None, :] < counts[:, None]
    assert (shard["labels"][~real] == -1).all() and (shard["boxes"][~real] == -1).all()
    assert set(shard["labels"][real].tolist()) == {0, 1, 2}
    assert set(shard) == {"images", "n_glyphs", "boxes", "labels"}  # names: the class list labels index, not strings
    boxes = shard["boxes"][real]
    assert (boxes[:, :2] >= 0).all() and (boxes[:, 2:] <= 48).all() and (boxes[:, 2:] > boxes[:, :2]).all()


def test_same_generator_same_bytes_different_seed_different_scenes():
    spec = ScatteredGlyphs(50, glyphs="font", background_colours=["navy", "grey"], colours=["red", "white"],
                           glyph_shape_jitter=0.3)
    first, second, other = _shard(spec, seed=5), _shard(spec, seed=5), _shard(spec, seed=6)
    for name in first:
        assert first[name].tobytes() == second[name].tobytes()
    assert first["images"].tobytes() != other["images"].tobytes()


def test_the_same_spec_gives_the_same_bytes_through_local_and_processes_sessions(tmp_path):
    spec = ScatteredGlyphs(250, glyphs="font", shard_size=60, seed=11, background_colours=["olive"],
                           colours=["red", "cyan"])
    local = glyphforge.build(spec, session="local", data_dir=tmp_path / "a", progress=False)
    with glyphforge.open_session("processes", n_workers=2) as session:
        spread = glyphforge.build(spec, session=session, data_dir=tmp_path / "b", progress=False)
    assert len(local) == len(spread) == 250 and local.key == spread.key
    assert set(local.arrays) == {"images", "n_glyphs", "boxes", "labels"}
    for name, array in local.arrays.items():
        assert array.tobytes() == spread[name].tobytes(), name
    # shard i is make_shard(i, SeedSequence(seed).spawn(n)[i], n_i): check the last, short one
    rng = np.random.default_rng(np.random.SeedSequence(11).spawn(5)[4])
    assert spec.make_shard(4, rng, 10)["images"].tobytes() == local["images"][240:].tobytes()
    # the class list labels index is kept with the data, and examples come out map-style
    assert local.metadata == spread.metadata == {"class_names": list(spec.class_names())}
    assert local.classes == spread.classes == list(spec.class_names())
    image, targets = local[7]
    assert np.array_equal(image, local["images"][7])
    count = targets["n_glyphs"]
    assert (targets["labels"][:count] >= 0).all() and (targets["labels"][count:] == -1).all()


def test_glyph_and_background_colours():
    spec = ScatteredGlyphs(100, glyphs="font", colours=[(255, 0, 0), "#00ff00"], background_colours=["#102030"],
                           max_overlap=0.0)
    shard = _shard(spec)
    images = shard["images"].astype(int)
    outside = np.ones(images.shape[:3], bool)
    for i, (boxes, count) in enumerate(zip(shard["boxes"], shard["n_glyphs"], strict=True)):
        for top, left, bottom, right in boxes[:count].astype(int):
            outside[i, top:bottom, left:right] = False
    assert (images[outside] == [16, 32, 48]).all()
    assert (images[..., 2] <= 48).all()  # neither glyph colour adds blue
    red = (images[..., 0] == 255).any()
    green = (images[..., 1] == 255).any()
    assert red and green


def test_glyph_shape_jitter_changes_sizes_within_bounds():
    plain = _shard(ScatteredGlyphs(300, glyphs="font", characters="H"))
    jittered = _shard(ScatteredGlyphs(300, glyphs="font", characters="H", glyph_shape_jitter=0.5))

    def heights(shard):
        real = shard["labels"] >= 0
        return (shard["boxes"][real][:, 2] - shard["boxes"][real][:, 0]).astype(int)

    assert heights(jittered).max() <= 21 and heights(jittered).min() < heights(plain).min()
    assert heights(jittered).max() > heights(plain).max()


def test_background_only_scenes_with_min_glyphs_zero():
    shard = _shard(ScatteredGlyphs(200, glyphs="font", min_glyphs=0, max_glyphs=1))
    empty = shard["n_glyphs"] == 0
    assert 0 < empty.sum() < 200
    assert not shard["images"][empty].any() and (shard["boxes"][empty] == -1).all()


def test_impossible_constraints_give_a_clear_error():
    spec = ScatteredGlyphs(10, glyphs="font", image_shape=(14, 14), min_glyphs=20, max_glyphs=20, max_overlap=0.0)
    with pytest.raises(ValueError, match=r"could not place 20 glyphs in scene 0 of shard 3.*Lower min_glyphs"):
        spec.make_shard(3, np.random.default_rng(0), 10)
    with pytest.raises(SpecError, match=r"scenes spec: could not place 20 glyphs .*Lower min_glyphs"):
        spec.prepare(config.data_dir())  # found on the driver, before any shard runs


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(glyphs="kanji"), "glyphs must be one of emnist, fashion-mnist, kmnist, mnist, omniglot, font"),
        (dict(glyph_shape=(50, 10)), r"do not fit in image_shape \(48, 48\)"),
        (dict(glyph_shape=(30, 30), glyph_shape_jitter=0.7), "glyphs of up to 51x51"),
        (dict(glyph_shape_jitter=1.0), r"glyph_shape_jitter must be a number in \[0, 1\), got 1\.0"),
        (dict(image_shape=(0, 48)),
         r"image_shape \(0, 48\) is invalid: give \(height, width\) as two positive integers"),
        (dict(min_glyphs=4, max_glyphs=3), "max_glyphs must be an integer >= 4"),
        (dict(min_glyphs=-1), "min_glyphs must be an integer >= 0"),
        (dict(max_overlap=1.5), r"max_overlap \(a fraction of a box's area\) must be a number in \[0, 1\], got 1\.5"),
        (dict(colours=["chartreuse-ish"]), "colours has 'chartreuse-ish', which is not a colour"),
        (dict(colours=(255, 0, 0)), r"for one RGB colour write \[\(255, 0, 0\)\]"),
        (dict(background_colours=[(0, 0, 300)]), "three integers in 0..255"),
        (dict(backgrounds=[3]), "backgrounds must be None, 'all', 'hard' or a list"),
        (dict(glyphs="font", glyph_example_range=(0, 0.5)), "font glyphs are rendered fresh"),
        (dict(glyph_example_range=(0.5, 0.5)),
         r"glyph_example_range \(0\.5, 0\.5\) is invalid: give \(a, b\) with 0 <= a < b <= 1"),
        (dict(glyphs="font", characters=["AB"]), "font characters must be single characters"),
        (dict(glyphs="font", characters="a b"), "character ' ' draws no ink"),
        (dict(characters=""), "characters is empty"),
        (dict(seed=-1), "seed must be an integer >= 0"),
        (dict(shard_size=0), "shard_size must be an integer >= 1"),
    ],
)
def test_bad_arguments_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        ScatteredGlyphs(10, **options)


def test_the_parameters_are_what_makes_the_scenes():
    spec = ScatteredGlyphs(10, glyphs="font")
    assert "data_dir" not in spec.params()
    assert spec.params() != ScatteredGlyphs(10, glyphs="font", max_overlap=0.1).params()
    assert ScatteredGlyphs(10, glyphs="font", characters="BA").params() == ScatteredGlyphs(
        10, glyphs="font", characters=["A", "B", "A"]).params()


def test_font_glyphs_are_centred_ink_on_black_and_follow_the_generator():
    labels = np.array([0, 1, 1, 0, 2])
    first = render_font_glyphs("gW1", labels, np.random.default_rng(2), 32)
    again = render_font_glyphs("gW1", labels, np.random.default_rng(2), 32)
    assert first.shape == (5, 32, 32) and first.dtype == np.uint8
    assert first.tobytes() == again.tobytes()
    for glyph in first:
        rows, cols = np.flatnonzero(glyph.any(1)), np.flatnonzero(glyph.any(0))
        assert glyph.max() >= 200  # strokes stay bright through rotation
        assert abs((rows[0] + rows[-1] + 1) - 32) <= 1 and abs((cols[0] + cols[-1] + 1) - 32) <= 1
    assert first[1].tobytes() != first[2].tobytes()  # same character, different style


# (9, 28): the vertical pass comes first (Pillow >= 13)
@pytest.mark.parametrize("shape", [(14, 14), (9, 13), (9, 28), (23, 5), (32, 32), (40, 36)])
def test_rendered_glyphs_are_shrunk_to_the_pixels_resize_gives(shape):
    glyphs = render_font_glyphs("aG7", np.arange(12) % 3, np.random.default_rng(8), 32)
    shrunk = shrink_rendered(glyphs, shape)
    assert shrunk.shape == (12, *shape) and shrunk.dtype == np.uint8
    np.testing.assert_array_equal(shrunk, resize(glyphs, shape, method="box"))


def test_render_glyph_crops_to_ink_and_rejects_blank_characters():
    glyph = render_glyph("L", size=40)
    assert glyph.any(0).all() and glyph.any(1).all()  # every row and column of the crop has ink
    assert render_glyph(" ", size=20).shape == (0, 0)
    with pytest.raises(ValueError, match="single characters"):
        check_characters(["ab"])


def _ink(image: np.ndarray) -> bytes:
    rows, cols = np.flatnonzero(image.any(1)), np.flatnonzero(image.any(0))
    return image[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1].tobytes()


def test_emnist_glyphs_and_disjoint_glyph_example_ranges(tmp_path):
    synthetic = write_synthetic_emnist(tmp_path / "gzip.zip")
    prepare_emnist(archives={"gzip.zip": synthetic.path}, verify=False, progress=False)
    data = synthetic.splits["byclass"]
    halves: dict[str, tuple[set[bytes], set[bytes]]] = {}
    for char in "A0z":  # each class's images: test first, then train (load_emnist's order)
        label = data.first_label + data.classes.index(char)
        images = np.concatenate(
            [data.test_images[data.test_labels == label], data.train_images[data.train_labels == label]]
        )
        cut = int(0.5 * len(images))
        halves[char] = ({_ink(image) for image in images[:cut]}, {_ink(image) for image in images[cut:]})
    used = []
    for half, example_range in enumerate([(0, 0.5), (0.5, 1)]):
        # 28x28 glyphs keep the source pixels, so each scene glyph's box crop is an EMNIST image's ink
        spec = ScatteredGlyphs(60, glyphs="emnist", characters="z0A", glyph_shape=(28, 28), image_shape=(64, 64),
                               max_glyphs=2, max_overlap=0.0, glyph_example_range=example_range)
        assert spec.class_names() == ("0", "A", "z")
        shard = _shard(spec, context=DataContext.resolve(verify=False))  # the glyphs are an own copy
        crops = set()
        glyph_names = np.array([*spec.class_names(), ""])[shard["labels"]]  # -1 pads: ""
        for image, boxes, names in zip(shard["images"], shard["boxes"], glyph_names, strict=True):
            for (top, left, bottom, right), name in zip(boxes.astype(int), names, strict=True):
                if name:
                    crop = image[top:bottom, left:right, 0].tobytes()
                    assert crop in halves[name][half] and crop not in halves[name][1 - half]
                    crops.add(crop)
        used.append(crops)
    assert len(used[0]) > 5 and len(used[1]) > 5 and not used[0] & used[1]
    # smaller glyphs are Pillow's BOX resize of the EMNIST images
    small = ScatteredGlyphs(40, glyphs="emnist", characters="A", glyph_shape=(14, 12), max_overlap=0.0)
    label = data.first_label + data.classes.index("A")
    sources = np.concatenate(
        [data.test_images[data.test_labels == label], data.train_images[data.train_labels == label]]
    )
    resized = {_ink(np.asarray(Image.fromarray(image).resize((12, 14), Image.Resampling.BOX))) for image in sources}
    shard = _shard(small, context=DataContext.resolve(verify=False))
    crops = set()
    for i, k in np.argwhere(shard["labels"] >= 0):
        top, left, bottom, right = shard["boxes"][i, k].astype(int)
        crops.add(shard["images"][i, top:bottom, left:right, 0].tobytes())
    assert len(crops) > 3 and crops <= resized


def test_omniglot_glyphs_use_only_the_drawers_of_glyph_example_range(shared_data, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_MIRROR", str(shared_data))  # serves omniglot/images_background_small1.zip
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")
    classes = ["Balinese,2", "Balinese,1"]
    for drawers, example_range in [(range(0, 10), (0, 0.5)), (range(10, 20), (0.5, 1))]:
        spec = ScatteredGlyphs(30, glyphs="omniglot", characters=classes, glyph_options={"sets": ["small1"]},
                               glyph_shape=(105, 105), image_shape=(112, 112), max_glyphs=1,
                               glyph_example_range=example_range)
        spec.prepare(config.data_dir())
        assert spec.class_names() == ("Balinese,1", "Balinese,2")
        inks: dict[str, set[bytes]] = {name: set() for name in classes}
        for drawer in range(20):
            images, labels, names = load_omniglot(classes, sets=("small1",), indices=[drawer], seed=0)
            for image, label in zip(images, labels, strict=True):
                inks[names[label]].add((drawer, _ink(image)))
        shard = _shard(spec)
        names = np.array(spec.class_names())[shard["labels"][:, 0]]
        for image, (top, left, bottom, right), name in zip(shard["images"], shard["boxes"][:, 0].astype(int), names,
                                                           strict=True):
            crop = image[top:bottom, left:right, 0].tobytes()
            matching = {drawer for drawer, ink in inks[name] if ink == crop}
            assert matching and matching <= set(drawers)


@pytest.fixture
def texture_mirror(shared_data, monkeypatch):
    """Serve the real backgrounds from ../shared/data, offline; return Pillow's RGB decodes by name."""
    monkeypatch.setenv("GLYPHFORGE_MIRROR", str(shared_data))
    monkeypatch.setenv("GLYPHFORGE_OFFLINE", "1")

    def decoded(name: str) -> np.ndarray:
        [path] = (shared_data / "backgrounds").glob(f"{name}.*[gp]")
        with Image.open(path) as image:
            return np.asarray(image.convert("RGB"))

    return decoded


def _packed(rgb: np.ndarray) -> np.ndarray:
    return (rgb[..., 0].astype(np.int32) << 16) | (rgb[..., 1].astype(np.int32) << 8) | rgb[..., 2]


def _find_crop(scene: np.ndarray, keep: np.ndarray, textures: dict[str, np.ndarray]) -> tuple[str, int, int] | None:
    """Where ``scene`` equals a crop of a (packed RGB) texture on the pixels ``keep`` marks, or None."""
    height, width = scene.shape[:2]
    scene = _packed(scene)
    kept = np.argwhere(keep)
    anchors = kept[[0, len(kept) // 2, -1]]
    for name, texture in textures.items():
        (ay, ax), rows, cols = anchors[0], texture.shape[0] - height + 1, texture.shape[1] - width + 1
        ys, xs = np.nonzero(texture[ay : ay + rows, ax : ax + cols] == scene[ay, ax])
        for ay, ax in anchors[1:]:  # narrow the candidate corners down pixel by pixel, then compare all
            match = texture[ys + ay, xs + ax] == scene[ay, ax]
            ys, xs = ys[match], xs[match]
        for y, x in zip(ys, xs, strict=True):
            if (texture[y : y + height, x : x + width][keep] == scene[keep]).all():
                return name, int(y), int(x)
    return None


def test_backgrounds_are_crops_of_the_real_textures(texture_mirror):
    spec = ScatteredGlyphs(60, glyphs="font", min_glyphs=0, max_glyphs=1, backgrounds=" ".join(CARRIED_TEXTURES))
    shard = _shard(spec)
    textures = {name: _packed(texture_mirror(name)) for name in CARRIED_TEXTURES}
    found = []
    for image, boxes, count in zip(shard["images"], shard["boxes"], shard["n_glyphs"], strict=True):
        keep = np.ones((48, 48), bool)
        if count:  # everything but the glyph's box is the texture crop
            top, left, bottom, right = boxes[0].astype(int)
            keep[top:bottom, left:right] = False
        found.append(_find_crop(image, keep, textures))
    assert None not in found
    assert len({name for name, _, _ in found}) == len(CARRIED_TEXTURES) and len(set(found)) == len(found)
    assert 15 < (shard["n_glyphs"] == 0).sum() < 45


def test_textures_smaller_than_the_scene_are_resized_to_it_and_flat_colours_mix_in(texture_mirror):
    spec = ScatteredGlyphs(40, glyphs="font", image_shape=(120, 110), min_glyphs=0, max_glyphs=1,
                           backgrounds=["blue_circle"], background_colours=["#123456"])
    shard = _shard(spec)
    with_texture = np.asarray(Image.fromarray(texture_mirror("blue_circle")).resize((110, 120), Image.Resampling.BOX))
    empty = shard["images"][shard["n_glyphs"] == 0]
    textured = [(image == with_texture).all() for image in empty]
    flat = [(image == [0x12, 0x34, 0x56]).all() for image in empty]
    assert all(a != b for a, b in zip(textured, flat, strict=True))  # each empty scene is exactly one of the two
    assert 3 < sum(textured) < len(empty) - 3


def test_glyph_sources_are_the_registered_glyph_datasets_font_and_shapes():
    assert glyph_sources() == ("emnist", "fashion-mnist", "kmnist", "mnist", "omniglot", "font", "shapes")
    with pytest.raises(ValueError, match="glyphs must be one of emnist, fashion-mnist, kmnist, mnist, omniglot, font, "
                                         "shapes; got 'backgrounds'"):
        ScatteredGlyphs(10, glyphs="backgrounds")
    with pytest.raises(ValueError, match="glyph_options .* are for a glyph dataset; font glyphs take none"):
        ScatteredGlyphs(10, glyphs="font", glyph_options={"split": "letters"})


def test_a_shard_worker_never_downloads_and_says_what_to_prepare(tmp_path):
    spec = ScatteredGlyphs(5, glyphs="emnist", characters="01", glyph_shape=(14, 14))
    with pytest.raises(FileNotFoundError, match=r"prepare-data emnist"):
        spec.make_shard(0, np.random.default_rng(0), 5, data_dir=tmp_path)
    assert not (tmp_path / "raw").exists()  # nothing was fetched or placed
    textured = ScatteredGlyphs(5, glyphs="font", backgrounds=["water"])
    with pytest.raises(
        FileNotFoundError, match=r"backgrounds \['water'\] are not prepared .*`prepare-data backgrounds`"
    ):
        textured.make_shard(0, np.random.default_rng(0), 5, data_dir=tmp_path)
