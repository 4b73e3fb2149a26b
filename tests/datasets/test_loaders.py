"""Loaders: exact batch indices for every shuffle/drop_last/wrap mode, the mixin, ImageList."""
from __future__ import annotations

import itertools
import pickle
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from glyphforge.batching import rebatch
from glyphforge.loaders import ImageList, MapStyleDataset, batch_indices, batches
from glyphforge.pipelines.decode import ImageDecodeError, decode_image
from glyphforge.pipelines.resize import resize

from support.collate import NEEDS_TORCH, loaded_examples


def _r(start: int, stop: int) -> list[int]:
    return list(range(start, stop))


# 10 items, batch_size 4, 3 epochs. Entries are *stream positions*: position p is
# item p % 10 of epoch p // 10's order; 30 and 31 come from a 4th order (padding).
STREAM_TABLES = {
    # (drop_last, wrap)
    (False, False): [_r(0, 4), _r(4, 8), _r(8, 10), _r(10, 14), _r(14, 18), _r(18, 20),
                     _r(20, 24), _r(24, 28), _r(28, 30)],
    (True, False): [_r(0, 4), _r(4, 8), _r(10, 14), _r(14, 18), _r(20, 24), _r(24, 28)],
    (False, True): [_r(0, 4), _r(4, 8), _r(8, 12), _r(12, 16), _r(16, 20), _r(20, 24),
                    _r(24, 28), _r(28, 32)],
    (True, True): [_r(0, 4), _r(4, 8), _r(8, 12), _r(12, 16), _r(16, 20), _r(20, 24),
                   _r(24, 28)],
}


def _orders(shuffle: bool, seed: int, count: int, n: int = 10) -> list[list[int]]:
    """The documented visiting orders: one permutation per epoch from default_rng(seed)."""
    if not shuffle:
        return [list(range(n))] * count
    rng = np.random.default_rng(seed)
    return [rng.permutation(n).tolist() for _ in range(count)]


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize(("drop_last", "wrap"), list(STREAM_TABLES))
def test_exact_indices_for_every_mode(shuffle, drop_last, wrap):
    orders = _orders(shuffle, seed=7, count=4)
    expected = [[orders[p // 10][p % 10] for p in batch] for batch in STREAM_TABLES[drop_last, wrap]]
    x = np.arange(10) * 10
    y = np.arange(10) + 100
    got = list(batches(x, y, batch_size=4, shuffle=shuffle, seed=7, drop_last=drop_last,
                       wrap=wrap, epochs=3))
    assert [xb.tolist() for xb, _ in got] == [[10 * i for i in batch] for batch in expected]
    assert [yb.tolist() for _, yb in got] == [[100 + i for i in batch] for batch in expected]


def test_no_shuffle_tables_spelled_out():
    """The tables above, as literal item indices, without the order mapping."""
    assert [b.tolist() for b in batch_indices(10, batch_size=4, wrap=True, epochs=2)] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]
    assert [b.tolist() for b in batch_indices(10, batch_size=4, wrap=True, epochs=3)][-1] == [
        8, 9, 0, 1]
    assert [b.tolist() for b in batch_indices(10, batch_size=4, drop_last=True)] == [
        [0, 1, 2, 3], [4, 5, 6, 7]]
    assert [b.tolist() for b in batch_indices(10, batch_size=4)] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_dict_targets_are_batched_by_name():
    x = np.arange(10) * 10
    targets = {"boxes": np.arange(20).reshape(10, 2), "labels": [5, 4, 3, 2, 1, 0, 9, 8, 7, 6]}
    order = np.random.default_rng(2).permutation(10)
    got = list(batches(x, targets, batch_size=4, shuffle=True, seed=2, drop_last=True))
    assert len(got) == 2
    for number, (xb, yb) in enumerate(got):
        indices = order[4 * number : 4 * number + 4]
        assert xb.tolist() == (indices * 10).tolist()
        assert sorted(yb) == ["boxes", "labels"]
        assert yb["boxes"].tolist() == targets["boxes"][indices].tolist()
        assert yb["labels"].tolist() == np.asarray(targets["labels"])[indices].tolist()
    with pytest.raises(ValueError, match=r"^x has 10 items but y\['labels'\] has 3; they must pair up"):
        batches(x, {"boxes": targets["boxes"], "labels": [1, 2, 3]}, batch_size=2)


@pytest.mark.parametrize(("drop_last", "wrap", "expected"), [
    (False, False, [[0, 1, 2], [0, 1, 2]]),
    (True, False, []),
    (False, True, [[0, 1, 2, 0, 1, 2, 0, 1]]),  # 6 items, padded from a third order
    (True, True, []),
])
def test_batch_larger_than_data(drop_last, wrap, expected):
    got = batch_indices(3, batch_size=8, drop_last=drop_last, wrap=wrap, epochs=2)
    assert [b.tolist() for b in got] == expected


def test_wrapped_batch_spanning_several_shuffled_orders():
    orders = _orders(True, seed=3, count=3, n=3)
    got = [b.tolist() for b in batch_indices(3, batch_size=8, shuffle=True, seed=3, wrap=True)]
    assert got == [orders[0] + orders[1] + orders[2][:2]]


@pytest.mark.parametrize(("shuffle", "drop_last", "wrap"), list(itertools.product([False, True], repeat=3)))
def test_fewer_epochs_give_a_prefix_and_endless_epochs_continue(shuffle, drop_last, wrap):
    options = dict(batch_size=4, shuffle=shuffle, seed=11, drop_last=drop_last, wrap=wrap)
    two = [b.tolist() for b in batch_indices(10, epochs=2, **options)]
    five = [b.tolist() for b in batch_indices(10, epochs=5, **options)]
    endless = [b.tolist() for b in itertools.islice(batch_indices(10, epochs=None, **options), 20)]
    assert five[: len(two)] == two
    assert endless[:10] == five[:10]
    assert len(endless) == 20


def test_seeded_reproducibility():
    def run(seed):
        return [b.tolist() for b in batch_indices(50, batch_size=8, shuffle=True, seed=seed, epochs=3)]

    assert run(5) == run(5)
    assert run(5) != run(6)
    generator_run = batch_indices(50, batch_size=8, shuffle=True, seed=np.random.default_rng(5), epochs=3)
    assert [b.tolist() for b in generator_run] == run(5)
    unseeded = np.concatenate(list(batch_indices(50, batch_size=8, shuffle=True)))
    assert sorted(unseeded.tolist()) == list(range(50))


def test_lists_and_array_indexable_sequences():
    class Squares:
        def __len__(self):
            return 5

        def __getitem__(self, index):
            return np.asarray(index) ** 2

    got = list(batches(Squares(), ["a", "b", "c", "d", "e"], batch_size=2, wrap=True))
    assert [(xb.tolist(), yb.tolist()) for xb, yb in got] == [
        ([0, 1], ["a", "b"]), ([4, 9], ["c", "d"]), ([16, 0], ["e", "a"])]


def test_without_labels_and_multidimensional_items():
    x = np.arange(24, dtype=np.uint8).reshape(6, 2, 2)
    got = list(batches(x, batch_size=4))
    assert [yb for _, yb in got] == [None, None]
    assert np.array_equal(got[0][0], x[:4]) and np.array_equal(got[1][0], x[4:])
    got[0][0][...] = 255  # batches are copies
    assert x[0, 0, 0] == 0


def test_empty_data_yields_nothing():
    for wrap, epochs in itertools.product([False, True], [1, None]):
        assert list(batches(np.empty((0, 3)), batch_size=2, wrap=wrap, epochs=epochs)) == []


def test_rebatch_cuts_rows_end_to_end_across_chunks_views_inside_one():
    rows = np.arange(11)
    chunks = [{"a": rows[0:3], "b": -rows[0:3]}, {"a": rows[3:3], "b": -rows[3:3]},
              {"a": rows[3:9], "b": -rows[3:9]}, {"a": rows[9:11], "b": -rows[9:11]}]
    got = list(rebatch(chunks, 4, drop_last=False))
    assert [batch["a"].tolist() for batch in got] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]
    assert all(np.array_equal(batch["b"], -batch["a"]) for batch in got)
    assert np.shares_memory(got[1]["a"], rows)  # inside one chunk: a view
    assert not np.shares_memory(got[0]["a"], rows)  # across chunks: joined
    assert [batch["a"].tolist() for batch in rebatch(chunks, 4, drop_last=True)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert list(rebatch([], 4, drop_last=False)) == []


def test_wrapped_batches_draw_the_completion_from_the_next_permutation():
    rng = np.random.default_rng(7)
    orders = [rng.permutation(5) for _ in range(4)]
    got = list(batch_indices(5, batch_size=4, shuffle=True, seed=7, wrap=True, epochs=2))
    stream = np.concatenate(orders)  # 2 epochs of 5 = 10 rows; the third batch takes 2 of the third order
    assert [batch.tolist() for batch in got] == [stream[0:4].tolist(), stream[4:8].tolist(), stream[8:12].tolist()]
    wide = list(batch_indices(5, batch_size=12, shuffle=True, seed=7, wrap=True, epochs=1))
    assert [batch.tolist() for batch in wide] == [stream[:12].tolist()]  # spans three orders
    assert all(batch.dtype == np.int64 for batch in got + wide)


def test_batches_validates_eagerly():
    x = np.arange(5)
    for bad in (0, -1, 2.5, True, "4", None):
        with pytest.raises(ValueError, match=rf"^batch_size must be an integer >= 1, got {bad!r}$"):
            batches(x, batch_size=bad)
    for bad in (0, -2, 1.0):
        with pytest.raises(ValueError, match=rf"^epochs must be an integer >= 1, got {bad!r}$"):
            batches(x, batch_size=2, epochs=bad)
    with pytest.raises(ValueError, match=r"^x has 5 items but y has 4; they must pair up"):
        batches(x, np.arange(4), batch_size=2)
    with pytest.raises(ValueError, match=r"drop_last=True with batch_size=8 > 5 items .* loops forever"):
        batches(x, batch_size=8, drop_last=True, epochs=None)
    assert batch_indices(5, batch_size=np.int64(2)) is not None


class _Digits(MapStyleDataset):
    def __init__(self, labelled: bool = True):
        self.images = np.arange(5 * 2 * 2, dtype=np.uint8).reshape(5, 2, 2)
        self.labels = np.array([3, 1, 4, 1, 5]) if labelled else None


def test_mixin_protocol():
    ds = _Digits()
    assert len(ds) == 5
    image, label = ds[2]
    assert image.tolist() == [[8, 9], [10, 11]] and label == 4
    images, labels = ds[np.array([4, 0])]
    assert images.tolist() == [[[16, 17], [18, 19]], [[0, 1], [2, 3]]] and labels.tolist() == [5, 3]
    assert [int(label) for _, label in ds] == [3, 1, 4, 1, 5]
    assert [int(image[0, 0]) for image, _ in ds] == [0, 4, 8, 12, 16]
    unlabelled = _Digits(labelled=False)
    unlabelled.target_transform = lambda label: label + 100  # not called: there is no label
    assert unlabelled[1][1] == -1 and type(unlabelled[1][1]) is int and unlabelled[np.int64(1)][1] == -1
    assert unlabelled[np.array([4, 0])][1].tolist() == [-1, -1] and unlabelled[1:4][1].tolist() == [-1, -1, -1]


def test_mixin_batches_equal_function_batches():
    ds = _Digits()
    options = dict(batch_size=2, shuffle=True, seed=1, wrap=True, epochs=3)
    got = list(ds.batches(**options))
    want = list(batches(ds.images, ds.labels, **options))
    assert len(got) == len(want) == 8
    for (gx, gy), (wx, wy) in zip(got, want, strict=True):
        assert np.array_equal(gx, wx) and np.array_equal(gy, wy)


# ---------------------------------------------------------------------- ImageList


def _grey(seed: int, shape=(6, 5)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


@pytest.fixture
def grey_pngs(tmp_path) -> list[np.ndarray]:
    """Four grey PNGs a.png..d.png in tmp_path/img, listed (relative) in tmp_path/img/list.txt."""
    folder = tmp_path / "img"
    folder.mkdir()
    pixels = [_grey(seed) for seed in range(4)]
    for name, array in zip("abcd", pixels, strict=True):
        Image.fromarray(array, "L").save(folder / f"{name}.png")
    (folder / "list.txt").write_text("a.png\n  b.png \nc.png\r\nd.png\n\n\n")
    (folder / "labels.txt").write_text("3\n-1\n+4\n1\n")
    return pixels


def test_list_file_relative_paths_and_int_labels(tmp_path, grey_pngs):
    ds = ImageList(tmp_path / "img" / "list.txt", tmp_path / "img" / "labels.txt")
    assert len(ds) == 4
    assert [p.name for p in ds.paths] == ["a.png", "b.png", "c.png", "d.png"]
    assert ds.labels.dtype == np.int64 and ds.labels.tolist() == [3, -1, 4, 1]
    image, label = ds[1]
    assert image.dtype == np.uint8 and np.array_equal(image, grey_pngs[1]) and label == -1
    image, label = ds[-1]
    assert np.array_equal(image, grey_pngs[3]) and label == 1
    images, labels = ds[np.array([2, 0])]
    assert np.array_equal(images, np.stack([grey_pngs[2], grey_pngs[0]])) and labels.tolist() == [4, 3]
    assert [int(label) for _, label in ds] == [3, -1, 4, 1]
    assert repr(ds) == "ImageList(4 images, lazy, labels=True)"


def test_root_overrides_list_folder_and_absolute_paths_stay(tmp_path, grey_pngs):
    (tmp_path / "lists").mkdir()
    listing = tmp_path / "lists" / "mixed.txt"
    listing.write_text(f"b.png\n{tmp_path / 'img' / 'd.png'}\n")
    ds = ImageList(listing, [7, 8], root=tmp_path / "img")
    assert ds.paths == [tmp_path / "img" / "b.png", tmp_path / "img" / "d.png"]
    assert np.array_equal(ds.load(), np.stack([grey_pngs[1], grey_pngs[3]]))
    assert ds.labels.tolist() == [7, 8]


def test_python_lists_with_root_and_without(tmp_path, grey_pngs, monkeypatch):
    folder = tmp_path / "img"
    by_root = ImageList(["c.png", "a.png"], root=folder)
    monkeypatch.chdir(folder)
    by_cwd = ImageList(["c.png", Path("a.png")])
    want = np.stack([grey_pngs[2], grey_pngs[0]])
    assert np.array_equal(by_root.load(), want) and np.array_equal(by_cwd.load(), want)
    assert by_root.labels is None and by_root[0][1] == -1


@NEEDS_TORCH
@pytest.mark.parametrize("labelled", [True, False])
def test_an_image_list_with_or_without_labels_batches_in_a_stock_dataloader(labelled, tmp_path, grey_pngs):
    names = [f"{name}.png" for name in "abcd"] * 10  # 40 items: a shuffle is never the identity (4 were, 1 in 24)
    ds = ImageList(names, [3, -1, 4, 1] * 10 if labelled else None, root=tmp_path / "img")
    images, labels = loaded_examples(ds, batch_size=4)  # every batch checked against ds[i]
    assert tuple(images.shape) == (4, 6, 5) and set(labels.tolist()) <= ({3, -1, 4, 1} if labelled else {-1})


def test_lazy_reads_on_demand_and_load_caches(tmp_path, grey_pngs):
    folder = tmp_path / "img"
    ds = ImageList(folder / "list.txt")
    (folder / "b.png").write_bytes(b"garbage written after construction")
    assert np.array_equal(ds[0][0], grey_pngs[0])  # only a.png is read
    with pytest.raises(ImageDecodeError, match=r"cannot decode image .*b\.png \(.*list\.txt line 2\)"):
        ds[1]
    Image.fromarray(grey_pngs[1], "L").save(folder / "b.png")
    loaded = ds.load()
    assert loaded.shape == (4, 6, 5) and np.array_equal(loaded, np.stack(grey_pngs))
    assert ds.load() is loaded and ds.images is loaded
    for name in "abcd":
        (folder / f"{name}.png").unlink()
    assert np.array_equal(ds[3][0], grey_pngs[3])  # served from memory now
    assert repr(ds) == "ImageList(4 images, loaded, labels=False)"


def test_image_list_batches_equal_batches_over_loaded_arrays(tmp_path, grey_pngs):
    ds = ImageList(tmp_path / "img" / "list.txt", tmp_path / "img" / "labels.txt")
    options = dict(batch_size=3, shuffle=True, seed=4, wrap=True, epochs=2)
    lazy = list(ds.batches(**options))
    eager = list(batches(np.stack(grey_pngs), np.array([3, -1, 4, 1]), **options))
    assert len(lazy) == len(eager) == 3
    for (lx, ly), (ex, ey) in zip(lazy, eager, strict=True):
        assert lx.dtype == np.uint8 and np.array_equal(lx, ex) and ly.tolist() == ey.tolist()
    ds.load()
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(ds.batches(**options), eager, strict=True))


def test_png_rgb_rgba_and_jpeg_channel_conversion(tmp_path):
    rgb = np.random.default_rng(1).integers(0, 256, size=(4, 3, 3), dtype=np.uint8)
    rgba = np.dstack([rgb, np.full((4, 3), 255, np.uint8)])
    rgba[0, 0, 3] = 0  # one transparent pixel: composited on black
    Image.fromarray(rgb, "RGB").save(tmp_path / "rgb.png")
    Image.fromarray(rgba, "RGBA").save(tmp_path / "rgba.png")
    flat = np.broadcast_to(np.array([200, 40, 90], np.uint8), (4, 3, 3))
    Image.fromarray(np.ascontiguousarray(flat), "RGB").save(tmp_path / "flat.jpg", quality=95)
    names = ["rgb.png", "rgba.png", "flat.jpg"]
    colour = ImageList(names, root=tmp_path, channels=3).load()
    grey = ImageList(names, root=tmp_path, channels=1).load()
    assert colour.shape == (3, 4, 3, 3) and grey.shape == (3, 4, 3)
    assert np.array_equal(colour[0], rgb)
    assert colour[1, 0, 0].tolist() == [0, 0, 0] and np.array_equal(
        colour[1].reshape(-1, 3)[1:], rgb.reshape(-1, 3)[1:]
    )
    assert np.array_equal(grey[0], np.asarray(Image.fromarray(rgb, "RGB").convert("L")))
    jpeg = tmp_path / "flat.jpg"
    assert np.array_equal(colour[2], np.asarray(Image.open(jpeg).convert("RGB")))
    assert np.array_equal(grey[2], decode_image(jpeg, channels=1))
    assert np.abs(colour[2].astype(int) - flat).max() <= 3  # really the image written above


@pytest.mark.parametrize(("text", "dtype", "expected"), [
    ("1.5\n2\n-3e-1\n", np.float32, [1.5, 2.0, -0.3]),
    ("1 2\n3 4\n-5 6\n", np.int64, [[1, 2], [3, 4], [-5, 6]]),
    ("0.5 1\n1 0.25\n2 2\n", np.float32, [[0.5, 1.0], [1.0, 0.25], [2.0, 2.0]]),
])
def test_label_files_floats_and_columns(tmp_path, grey_pngs, text, dtype, expected):
    (tmp_path / "labels.txt").write_text(text)
    ds = ImageList(["a.png", "b.png", "c.png"], tmp_path / "labels.txt", root=tmp_path / "img")
    assert ds.labels.dtype == dtype
    assert np.array_equal(ds.labels, np.array(expected, dtype=dtype))
    assert ds[1][1].tolist() == np.array(expected, dtype=dtype)[1].tolist()


def test_unequal_sizes_need_a_shape(tmp_path, grey_pngs):
    Image.fromarray(_grey(9, (3, 8)), "L").save(tmp_path / "img" / "wide.png")
    ds = ImageList(["a.png", "b.png", "wide.png"], root=tmp_path / "img")
    assert ds[2][0].shape == (3, 8)
    message = (r"^images\[2\] \(.*wide\.png\) is 3x8 \(height x width\) but images\[0\] \(.*a\.png\) "
               r"is 6x5 \(height x width\); pass shape=\(height, width\) to resize them to one size$")
    with pytest.raises(ValueError, match=message):
        ds.load()
    with pytest.raises(ValueError, match=message):
        list(ds.batches(batch_size=3))
    assert ds[np.array([], dtype=int)][0].shape == (0, 6, 5)


def test_box_resize_by_hand(tmp_path):
    blocks = np.array([[0, 2, 10, 30], [4, 6, 50, 70], [9, 9, 100, 200], [9, 9, 100, 200]], np.uint8)
    Image.fromarray(blocks, "L").save(tmp_path / "blocks.png")
    image, _ = ImageList(["blocks.png"], root=tmp_path, shape=(2, 2))[0]
    assert image.tolist() == [[3, 40], [9, 150]]  # the mean of each 2x2 block


@pytest.mark.parametrize("method", ["box", "bilinear", "lanczos", "area"])
@pytest.mark.parametrize("channels", [1, 3])
def test_resizing_equals_resize_of_decoded_images(tmp_path, grey_pngs, method, channels):
    Image.fromarray(_grey(9, (9, 14)), "L").save(tmp_path / "img" / "wide.png")
    Image.fromarray(_grey(8, (5, 5, 3)), "RGB").save(tmp_path / "img" / "colour.jpg")
    names = ["a.png", "wide.png", "colour.jpg", "d.png"]
    ds = ImageList(names, [0, 1, 2, 3], root=tmp_path / "img", shape=(4, 7), channels=channels, method=method)
    decoded = [decode_image(tmp_path / "img" / name, channels=channels) for name in names]
    want = np.stack([resize(image, (4, 7), method=method, batch=False) for image in decoded])
    assert want.shape == (4, 4, 7) + ((3,) if channels == 3 else ())
    assert np.array_equal(ds[1][0], want[1])
    (xb, yb), = ds.batches(batch_size=4, shuffle=True, seed=2)
    order = yb.tolist()
    assert sorted(order) == [0, 1, 2, 3] and np.array_equal(xb, want[order])
    assert np.array_equal(ds.load(), want)
    if method == "box":  # box is Pillow's BOX filter, pixel for pixel
        mode = "L" if channels == 1 else "RGB"
        pillow = np.asarray(Image.fromarray(decoded[1], mode).resize((7, 4), Image.Resampling.BOX))
        assert np.array_equal(want[1], pillow)


def test_missing_files_name_the_list_line(tmp_path, grey_pngs):
    folder = tmp_path / "img"
    (folder / "gaps.txt").write_text("a.png\nnope.png\nb.png\nalso-gone.png\n")
    with pytest.raises(FileNotFoundError, match=r"^.*gaps\.txt line 2: no such image file .*img/nope\.png "
                                                r"\(2 listed files are missing\)$"):
        ImageList(folder / "gaps.txt")
    with pytest.raises(FileNotFoundError, match=r"^images\[1\]: no such image file .*img/x\.png$"):
        ImageList(["a.png", "x.png"], root=folder)
    with pytest.raises(FileNotFoundError, match=r"absent\.txt"):
        ImageList(folder / "absent.txt")
    ds = ImageList(folder / "list.txt")
    (folder / "c.png").unlink()
    with pytest.raises(FileNotFoundError, match=r"^.*list\.txt line 3: no such image file .*img/c\.png$"):
        ds.load()


def test_undecodable_image_names_file_and_line(tmp_path, grey_pngs):
    folder = tmp_path / "img"
    (folder / "c.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    ds = ImageList(folder / "list.txt")
    with pytest.raises(ImageDecodeError, match=r"^cannot decode image .*img/c\.png \(.*list\.txt line 3\): "):
        ds.load()
    with pytest.raises(ImageDecodeError, match=r"c\.png \(images\[0\]\)"):
        ImageList(["c.png"], root=folder)[0]


@pytest.mark.parametrize(("images", "labels", "message"), [
    ("a.png\nb.png\nc.png\n", "1\n2\n", r"^.*list\.txt line 3 has no label: 3 images but 2 labels$"),
    ("a.png\nb.png\n", "1\n2\n3\n", r"^.*labels\.txt line 3 has no image: 2 images but 3 labels$"),
    ("a.png\nb.png\n", "1\n\n", None),  # trailing blank lines are ignored: one label short
    ("a.png\nb.png\n", "1\ntwo\n", r"^.*labels\.txt line 2: label is not a number \(could not convert "
                                   r"string to float: 'two'\)$"),
    ("a.png\nb.png\n", "1 2\n3\n", r"^.*labels\.txt line 2 has 1 values but line 1 has 2$"),
    ("a.png\n\nb.png\n", "1\n2\n", r"^.*list\.txt line 2 is blank; every line must be an entry"),
    ("a.png\nb.png\n", "\n1\n2\n", r"^.*labels\.txt line 1 is blank"),
    ("\n\n", "", r"^.*list\.txt lists no images$"),
])
def test_list_and_label_file_errors(tmp_path, grey_pngs, images, labels, message):
    folder = tmp_path / "img"
    (folder / "list.txt").write_text(images)
    (folder / "labels.txt").write_text(labels)
    if message is None:
        message = r"^.*list\.txt line 2 has no label: 2 images but 1 labels$"
    with pytest.raises(ValueError, match=message):
        ImageList(folder / "list.txt", folder / "labels.txt")


def test_python_list_errors(tmp_path, grey_pngs):
    folder = tmp_path / "img"
    with pytest.raises(ValueError, match=r"^images\[2\] has no label: 3 images but 2 labels$"):
        ImageList(["a.png", "b.png", "c.png"], [1, 2], root=folder)
    with pytest.raises(ValueError, match=r"^labels\[1\] has no image: 1 images but 3 labels$"):
        ImageList(["a.png"], np.array([1, 2, 3]), root=folder)
    with pytest.raises(ValueError, match=r"^images lists no images$"):
        ImageList([])
    (folder / "binary.txt").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ValueError, match=r"^.*binary\.txt is not a UTF-8 text list: "):
        ImageList(folder / "binary.txt")


@pytest.mark.parametrize(("options", "message"), [
    (dict(channels=2), r"^channels must be 1 \(grey\) or 3 \(RGB\), got 2$"),
    (dict(channels=4), r"^channels must be 1 \(grey\) or 3 \(RGB\), got 4$"),
    (dict(shape=(0, 5)),
     r"^shape \(0, 5\) is invalid: give \(height, width\) as two positive integers, e\.g\. \(28, 28\)$"),
    (dict(shape=(5,)),
     r"^shape \(5,\) is invalid: give \(height, width\) as two positive integers, e\.g\. \(28, 28\)$"),
    (dict(shape=32), r"^shape 32 is invalid: give \(height, width\) as two positive integers, e\.g\. \(28, 28\)$"),
    (dict(shape=(4.5, 4)),
     r"^shape \(4\.5, 4\) is invalid: give \(height, width\) as two positive integers, e\.g\. \(28, 28\)$"),
    (dict(shape=(4, 4), method="nearest"),
     r"^method must be one of 'box', 'bilinear', 'lanczos', 'area', got 'nearest'$"),
])
def test_bad_arguments(tmp_path, grey_pngs, options, message):
    with pytest.raises(ValueError, match=message):
        ImageList(["a.png"], root=tmp_path / "img", **options)


def test_index_errors(tmp_path, grey_pngs):
    ds = ImageList(tmp_path / "img" / "list.txt")
    with pytest.raises(IndexError, match="index 4 is out of bounds"):
        ds[4]
    with pytest.raises(IndexError, match="index -5 is out of bounds"):
        ds.images[np.array([0, -5])]


def _textures(shared_data: Path) -> list[Path]:
    folder = shared_data / "backgrounds"
    paths = sorted([*folder.glob("*.jpg"), *folder.glob("*.png")])
    assert len(paths) >= 2, f"expected JPEG and PNG textures in {folder}"
    return paths


def test_real_textures_lazy_equal_decoder(shared_data, tmp_path):
    paths = _textures(shared_data)
    listing = tmp_path / "textures.txt"
    listing.write_text("".join(f"{path.name}\n" for path in paths))
    labels = np.arange(len(paths)) % 3
    ds = ImageList(listing, labels, channels=3, root=shared_data / "backgrounds")
    for i in (0, len(paths) - 1):
        image, label = ds[i]
        assert np.array_equal(image, decode_image(paths[i], channels=3)) and label == labels[i]
    small = [i for i, path in enumerate(paths) if path.suffix == ".png"]  # the 99x99 PNG textures
    images, got = ds[np.array(small)]
    assert images.shape == (len(small), 99, 99, 3) and got.tolist() == labels[small].tolist()
    assert np.array_equal(images[-1], decode_image(paths[small[-1]], channels=3))


def test_real_textures_resized_and_batched(shared_data):
    paths = _textures(shared_data)
    ds = ImageList(paths, np.arange(len(paths)), shape=(24, 32), channels=3)
    loaded = ds.load()
    assert loaded.shape == (len(paths), 24, 32, 3) and loaded.dtype == np.uint8
    for i, path in enumerate(paths):
        decoded = decode_image(path, channels=3)
        assert np.array_equal(loaded[i], resize(decoded, (24, 32), batch=False)), path.name
        pillow = Image.fromarray(decoded).resize((32, 24), Image.Resampling.BOX)
        assert np.array_equal(loaded[i], np.asarray(pillow)), path.name
    got = list(ds.batches(batch_size=5, shuffle=True, seed=0, wrap=True, epochs=2))
    assert len(got) == -(-2 * len(paths) // 5)
    for xb, yb in got:
        assert xb.shape == (5, 24, 32, 3) and np.array_equal(xb, loaded[yb])


def test_real_svg_is_reported_undecodable(shared_data):
    ds = ImageList(["red_x.svg"], root=shared_data / "backgrounds")
    with pytest.raises(ImageDecodeError, match=r"^cannot decode image .*backgrounds/red_x\.svg \(images\[0\]\)"):
        ds[0]


def test_image_list_pickles_for_worker_processes(tmp_path, grey_pngs):
    ds = ImageList(tmp_path / "img" / "list.txt", tmp_path / "img" / "labels.txt")
    clone = pickle.loads(pickle.dumps(ds))
    assert np.array_equal(clone[2][0], grey_pngs[2]) and clone[2][1] == 4
