"""Loaders: exact batch indices for every shuffle/drop_last/wrap mode, the mixin, ImageList."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from glyphforge.loaders import MapStyleDataset, batch_indices, batches


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


def test_shuffled_orders_are_distinct_permutations():
    first, second = _orders(True, seed=7, count=2)
    assert sorted(first) == sorted(second) == list(range(10))
    assert first != second and first != list(range(10))


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


def test_batches_validates_eagerly():
    x = np.arange(5)
    for bad in (0, -1, 2.5, True, "4", None):
        with pytest.raises(ValueError, match=rf"^batch_size must be a positive integer, got {bad!r}$"):
            batches(x, batch_size=bad)
    for bad in (0, -2, 1.0):
        with pytest.raises(ValueError, match=rf"^epochs must be a positive integer, got {bad!r}$"):
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
    assert unlabelled[1][1] is None


def test_mixin_batches_equal_function_batches():
    ds = _Digits()
    options = dict(batch_size=2, shuffle=True, seed=1, wrap=True, epochs=3)
    got = list(ds.batches(**options))
    want = list(batches(ds.images, ds.labels, **options))
    assert len(got) == len(want) == 8
    for (gx, gy), (wx, wy) in zip(got, want):
        assert np.array_equal(gx, wx) and np.array_equal(gy, wy)
