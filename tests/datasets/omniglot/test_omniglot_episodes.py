"""omniglot_episodes on the real small1 zip: seeded, disjoint support and query drawers, bad input."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from glyphforge.cache import CacheStore
from glyphforge.datasets.omniglot.dataset import RESOURCES, Episode, omniglot_episodes, prepare_omniglot


@pytest.fixture(scope="module")
def prepared(shared_data, tmp_path_factory) -> Path:
    """A data dir with small1 converted from the file:// mirror."""
    data_dir = tmp_path_factory.mktemp("omniglot")
    prepare_omniglot(sets="small1", data_dir=data_dir, mirrors=[shared_data.as_uri()], progress=False)
    return data_dir


def class_array(data_dir: Path, alphabet: str, number: int) -> np.ndarray:
    """The (20, 105, 105) drawings of one small1 character, from the cache entry."""
    params = {"set": "small1", "shape": [105, 105], "source": RESOURCES["small1"].hash}
    return CacheStore.for_data_dir(data_dir).get("omniglot", params).load(f"{alphabet}.pklz")[number - 1]


def drawers_of(data_dir: Path, episode: Episode, label: int) -> list[int]:
    """The drawers of the support image and queries of class ``label`` of the episode, in that order."""
    alphabet, number = episode.classes[label].split(",")
    drawings = class_array(data_dir, alphabet, int(number))
    picked = [*episode.support_x[episode.support_y == label], *episode.query_x[episode.query_y == label]]
    return [int(np.flatnonzero((drawings == image).all(axis=(1, 2)))[0]) for image in picked]


def test_episodes_are_seeded_and_disjoint(prepared):
    episodes = list(omniglot_episodes(5, 1, 3, n_episodes=4, sets="small1", shape=None, seed=11, data_dir=prepared))
    again = list(omniglot_episodes(5, 1, 3, n_episodes=4, sets="small1", shape=None, seed=11, data_dir=prepared))
    assert len(episodes) == 4
    for episode, twin in zip(episodes, again, strict=True):
        np.testing.assert_array_equal(episode.support_x, twin.support_x)
        np.testing.assert_array_equal(episode.query_x, twin.query_x)
        assert episode.classes == twin.classes
    for episode in episodes:
        assert len(set(episode.classes)) == 5 and isinstance(episode.classes, list)
        assert episode.support_x.shape == (5, 105, 105) and episode.query_x.shape == (15, 105, 105)
        np.testing.assert_array_equal(episode.support_y, np.arange(5))
        np.testing.assert_array_equal(episode.query_y, np.repeat(np.arange(5), 3))
        for label in range(5):
            assert len(set(drawers_of(prepared, episode, label))) == 4  # different drawings of the class
    assert [e.classes for e in omniglot_episodes(5, 1, 3, n_episodes=4, sets="small1", shape=None, seed=12,
                                                 data_dir=prepared)] \
        != [e.classes for e in episodes]


def test_episodes_respect_classes_indices_and_shape(prepared):
    stream = omniglot_episodes(2, 2, 1, classes=["Latin,1", "Latin,2"], indices=[0, 1, 2], shape=(28, 28),
                               sets="small1", seed=0, data_dir=prepared)
    for _ in range(3):  # endless without n_episodes
        episode = next(stream)
        assert sorted(episode.classes) == ["Latin,1", "Latin,2"]
        assert episode.support_x.shape == (4, 28, 28) and episode.query_x.shape == (2, 28, 28)


def test_episodes_draw_from_the_drawers_of_example_range(prepared):
    for episode in omniglot_episodes(3, 2, 3, n_episodes=5, classes=["Latin,1", "Latin,2", "Korean,7", "Greek,3"],
                                     example_range=(0.5, 0.75), sets="small1", shape=None, seed=3, data_dir=prepared):
        for label in range(3):
            drawers = drawers_of(prepared, episode, label)
            assert len(set(drawers)) == 5 and set(drawers) <= set(range(10, 15))


@pytest.mark.parametrize(
    ("arguments", "options", "message"),
    [
        ((0, 1, 1), {}, r"n_way must be an integer >= 1"),
        ((2, 0, 1), {}, r"k_shot must be an integer >= 1"),
        ((2, 1, -1), {}, r"n_query must be an integer >= 0"),
        ((2, True, 1), {}, r"k_shot must be an integer >= 1, got True"),
        ((2, 15, 6), {}, r"k_shot \+ n_query = 21 drawings per class, but only 20 drawers"),
        ((2, 2, 1), {"indices": [0, 1]}, r"only 2 drawers are selected"),
        ((2, 2, 1), {"example_range": (0, 0.1)}, r"only 2 drawers are selected \(indices or example_range\)"),
        ((2, 1, 1), {"indices": [0, 1], "example_range": (0, 0.5)}, r"not both"),
        ((3, 1, 1), {"classes": ["Latin,1", "Latin,2"]}, r"n_way=3 is more than the 2 classes selected"),
        ((2, 1, 1), {"n_episodes": -1}, r"n_episodes must be an integer >= 0, got -1"),
    ],
)
def test_bad_episode_arguments(prepared, arguments, options, message):
    with pytest.raises(ValueError, match=message):
        omniglot_episodes(*arguments, **{"sets": "small1", "data_dir": prepared, "download": False, **options})
