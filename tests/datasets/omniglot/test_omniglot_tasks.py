"""OmniglotTasks on the real small1/small2 zips: split classes, rotations as classes, seeded resumable batches."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.cache import CacheStore
from glyphforge.datasets.omniglot.dataset import RESOURCES

from support.optional import NO_TORCH

SMALL = ("small1", "small2")  # the sets `prepared` (tests/datasets/conftest.py) holds



def drawings(data_dir: Path, set_name: str, name: str) -> np.ndarray:
    """The (20, 105, 105) drawings of one character (``"Latin,3"``), from the cache entry."""
    alphabet, _, number = name.rpartition(",")
    params = {"set": set_name, "shape": [105, 105], "source": RESOURCES[set_name].hash}
    return CacheStore.for_data_dir(data_dir).get("omniglot", params).load(f"{alphabet}.pklz")[int(number) - 1]


def assert_batches_equal(batches, others):
    assert len(batches) == len(others)
    for batch, other in zip(batches, others, strict=True):
        for field in ("support_x", "support_y", "query_x", "query_y", "classes"):
            np.testing.assert_array_equal(getattr(batch, field), getattr(other, field))


def test_a_split_selects_the_classes_the_sets_hold(prepared):
    train = gf.OmniglotTasks(5, 1, 1, sets="small1", rotations=(0,), seed=0, data_dir=prepared)
    assert train.classes == [c for c in gf.omniglot_split("vinyals", "train")
                             if c.rpartition(",")[0] in {"Balinese", "Greek", "Korean", "Latin"}]
    assert len(train.classes) == 24 + 24 + 40 + 26 and train.images.shape == (114, 20, 28, 28)
    val = gf.OmniglotTasks(5, 1, 1, sets="small1", part="val", rotations=(0,), seed=0, data_dir=prepared)
    assert val.classes == [f"Early_Aramaic,{n}" for n in range(1, 23)]  # small1's one Vinyals val alphabet
    both = gf.OmniglotTasks(5, 1, 1, sets=SMALL, rotations=(0,), seed=0, data_dir=prepared)
    assert len(both.classes) == 114 + 47 + 42 + 17  # Greek and Latin (in both sets, same drawings) taken once
    assert "small1/Latin,3" in both.classes and "small2/Latin,3" not in both.classes
    everything = gf.OmniglotTasks(5, 1, 1, sets="small2", split=None, part=None, rotations=(0,), seed=0,
                                  data_dir=prepared)
    assert len(everything.classes) == 156
    ravi = gf.OmniglotTasks(5, 1, 1, sets=SMALL, split="ravi", part="train", rotations=(0,), seed=0,
                            data_dir=prepared)
    wanted = set(gf.omniglot_split("ravi", "train"))
    assert {name.rpartition("/")[2] for name in ravi.classes} == wanted & {
        name.rpartition("/")[2] for name in both.classes + val.classes + everything.classes}


def test_rotations_are_new_classes_of_rotated_drawings(prepared):
    tasks = gf.OmniglotTasks(4, 2, 3, tasks=6, n_batches=5, sets="small1", shape=None, seed=4, data_dir=prepared)
    n = len(tasks.images)
    assert n == 114 and len(tasks.classes) == 4 * n
    assert tasks.classes[:n] == gf.OmniglotTasks(4, 2, 3, sets="small1", rotations=(0,), data_dir=prepared).classes
    assert tasks.classes[n + 5] == f"{tasks.classes[5]}@90" and tasks.classes[3 * n + 5] == f"{tasks.classes[5]}@270"
    turns_seen = set()
    for batch in tasks:
        assert batch.support_x.shape == (6, 8, 105, 105) and batch.query_x.shape == (6, 12, 105, 105)
        assert batch.support_x.dtype == np.uint8 and batch.support_y.dtype == batch.classes.dtype == np.int64
        np.testing.assert_array_equal(batch.support_y, np.tile(np.repeat(np.arange(4), 2), (6, 1)))
        np.testing.assert_array_equal(batch.query_y, np.tile(np.repeat(np.arange(4), 3), (6, 1)))
        for t in range(6):
            assert len(set(batch.classes[t])) == 4
            assert batch.class_names[t] == [tasks.classes[index] for index in batch.classes[t]]  # label j's name
            for label, index in enumerate(batch.classes[t]):
                name = tasks.classes[index].partition("@")[0]
                turn = int(index) // n
                turns_seen.add(turn)
                rotated = np.rot90(drawings(prepared, "small1", name), turn, axes=(1, 2))  # the upstream drawings
                picked = [*batch.support_x[t][batch.support_y[t] == label],
                          *batch.query_x[t][batch.query_y[t] == label]]
                found = [np.flatnonzero((rotated == image).all(axis=(1, 2))) for image in picked]
                assert all(len(where) == 1 for where in found)  # each image is exactly one drawing, rotated
                assert len({int(where[0]) for where in found}) == 5  # distinct drawers
    assert turns_seen == {0, 1, 2, 3}


def test_batches_are_seeded_and_resume_exactly(prepared):
    def stream(seed=3, **options):
        return gf.OmniglotTasks(5, 1, 5, tasks=3, sets="small1", seed=seed, data_dir=prepared,
                                **{"n_batches": 7, **options})

    batches = list(stream())
    assert len(batches) == 7 and batches[0].support_x.shape == (3, 5, 28, 28)
    assert_batches_equal(batches, list(stream()))
    assert not np.array_equal(batches[0].classes, next(stream(seed=4)).classes)
    first = stream()
    for _ in range(3):
        next(first)
    state = json.loads(json.dumps(first.state_dict()))  # plain data
    resumed = stream(seed=99)
    resumed.load_state_dict(state)
    assert_batches_equal(list(resumed), batches[3:])
    assert_batches_equal([stream().batch(5)], [batches[5]])
    unseeded = stream(seed=None, n_batches=None)
    taken = [next(unseeded) for _ in range(2)]
    again = stream(seed=None, n_batches=None)
    again.load_state_dict({**unseeded.state_dict(), "next": 0})
    assert_batches_equal([next(again), next(again)], taken)


def test_the_same_classes_drawn_again_get_other_drawers(prepared):
    """Unlike torchmeta, where a task's images are fixed by its classes (tristandeleu/pytorch-meta#69)."""
    every_class = gf.OmniglotTasks(22, 1, 0, tasks=2, sets="small1", part="val", rotations=(0,), seed=0,
                                   data_dir=prepared)
    batch = next(every_class)
    first, second = (batch.support_x[t][np.argsort(batch.classes[t])] for t in range(2))  # in class order
    assert sorted(batch.classes[0]) == sorted(batch.classes[1]) == list(range(22))
    assert sum(np.array_equal(a, b) for a, b in zip(first, second, strict=True)) < 11  # 1 in 20 alike, not all


def test_a_foreign_state_is_refused(prepared):
    state = gf.OmniglotTasks(5, 1, 5, tasks=3, sets="small1", seed=0, data_dir=prepared).state_dict()
    other = gf.OmniglotTasks(5, 1, 5, tasks=3, sets="small1", rotations=(0, 180), seed=0, data_dir=prepared)
    with pytest.raises(ValueError, match=r"not one of this task stream's: its classes differ"):
        other.load_state_dict(state)
    wider = gf.OmniglotTasks(10, 1, 5, tasks=3, sets="small1", seed=0, data_dir=prepared)
    with pytest.raises(ValueError, match=r"its n_way differ"):
        wider.load_state_dict(state)


@pytest.mark.parametrize(
    ("arguments", "options", "message"),
    [
        ((0, 1, 1), {}, r"n_way must be an integer >= 1"),
        ((2, 1, 1), {"tasks": 0}, r"tasks must be an integer >= 1"),
        ((2, 15, 6), {}, r"k_shot \+ n_query = 21 drawings per class, but every Omniglot class has 20"),
        ((2, 1, 1), {"n_batches": -1}, r"n_batches must be an integer >= 0"),
        ((23, 1, 1), {"part": "val", "rotations": (0,)}, r"n_way=23 is more than the 22 classes selected"),
        ((2, 1, 1), {"part": "test"}, r"the selected Omniglot sets hold none of the classes of part 'test'"),
        ((2, 1, 1), {"part": None}, r"split='vinyals', part=None: give both"),
        ((2, 1, 1), {"split": None, "part": None, "split_seed": 1}, r"split_seed shuffles a split"),
        ((2, 1, 1), {"rotations": (0, 45)}, r"rotations \(0, 45\) must be distinct angles among \(0, 90, 180, 270\)"),
        ((2, 1, 1), {"shape": (28, 20)}, r"rotations by 90 or 270 degrees need square images"),
    ],
)
def test_bad_task_arguments(prepared, arguments, options, message):
    with pytest.raises(ValueError, match=message):
        gf.OmniglotTasks(*arguments, **{"sets": "small1", "data_dir": prepared, "download": False, **options})


def test_a_prototypical_network_learns_above_chance(prepared, request):
    """5-way 1-shot on held-out classes (small1's Vinyals val alphabet): 300 training episodes lift a linear
    embedding from about 0.42 to about 0.69 accuracy (chance is 0.2) at this seed."""
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny net: threads would only contend on a loaded machine
    request.addfinalizer(lambda: torch.set_num_threads(threads))
    torch.manual_seed(0)
    net = torch.nn.Linear(28 * 28, 64)

    def logits(batch: gf.TaskBatch):
        support, query = (net(torch.from_numpy(x).float().div(255).flatten(2))
                          for x in (batch.support_x, batch.query_x))
        return -torch.cdist(query, support) ** 2  # 1-shot: the prototypes are the support embeddings

    def accuracy() -> float:
        held_out = gf.OmniglotTasks(5, 1, 5, tasks=100, n_batches=2, sets="small1", part="val", seed=1,
                                    data_dir=prepared)
        with torch.no_grad():
            return float(np.mean([(logits(batch).argmax(-1).numpy() == batch.query_y).mean() for batch in held_out]))

    before = accuracy()
    optimizer = torch.optim.Adam(net.parameters(), 1e-3)
    for batch in gf.OmniglotTasks(5, 1, 5, tasks=4, n_batches=75, sets=SMALL, seed=0, data_dir=prepared):
        loss = torch.nn.functional.cross_entropy(logits(batch).flatten(0, 1), torch.from_numpy(batch.query_y).flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = accuracy()
    assert after >= 0.5 and after >= before + 0.15, (before, after)


def test_tasks_and_episodes_share_the_default_shape_and_take_a_transform(prepared):
    options = {"sets": "small1", "seed": 2, "data_dir": prepared}
    tasks = gf.OmniglotTasks(3, 1, 2, tasks=2, rotations=(0,), **options)
    episode = next(gf.omniglot_episodes(3, 1, 2, **options))
    assert tasks.batch(0).support_x.shape[-2:] == episode.support_x.shape[-2:] == (28, 28)  # the benchmarks' shape
    scaled = gf.OmniglotTasks(3, 1, 2, tasks=2, rotations=(0,), transform=lambda x: x / 255, **options).batch(0)
    np.testing.assert_array_equal(scaled.support_x, tasks.batch(0).support_x / 255)
    np.testing.assert_array_equal(scaled.query_x, tasks.batch(0).query_x / 255)
    assert scaled.class_names == tasks.batch(0).class_names
    turned = next(gf.omniglot_episodes(3, 1, 2, transform=lambda x: x.transpose(0, 2, 1), **options))
    np.testing.assert_array_equal(turned.support_x, episode.support_x.transpose(0, 2, 1))
    np.testing.assert_array_equal(turned.query_x, episode.query_x.transpose(0, 2, 1))
    assert turned.classes == episode.classes
