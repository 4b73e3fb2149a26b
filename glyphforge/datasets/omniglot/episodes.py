"""Few-shot episodes over Omniglot classes: `Episode` and `omniglot_episodes` (exported by ``omniglot``)."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from glyphforge._checks import PathLike, check_int
from glyphforge.context import DataContext
from glyphforge.datasets.omniglot.catalog import select_drawers
from glyphforge.datasets.omniglot.prepare import DEFAULT_METHOD, DEFAULT_SETS, open_catalog

#: The default image shape of episodes and task batches (`OmniglotTasks`): the few-shot benchmarks' 28x28.
FEW_SHOT_SHAPE = (28, 28)


@dataclasses.dataclass(frozen=True)
class Episode:
    """One few-shot episode: ``n_way`` classes labelled 0 to ``n_way - 1``.

    Attributes
    ----------
    support_x, query_x
        uint8 ``(n_way * k_shot, H, W)`` and ``(n_way * n_query, H, W)``, class by class (or what
        ``transform`` made of them).
    support_y, query_y
        int64 labels of those images (``classes[label]`` names the class).
    classes
        The episode's class names, in label order (the list the labels index, as the
        third value of :func:`~glyphforge.datasets.omniglot.dataset.load_omniglot`).
    """

    support_x: Any
    support_y: np.ndarray
    query_x: Any
    query_y: np.ndarray
    classes: list[str]


def omniglot_episodes(
    n_way: int,
    k_shot: int,
    n_query: int,
    *,
    n_episodes: int | None = None,
    classes: str | Iterable[str] | None = None,
    sets: str | Iterable[str] = DEFAULT_SETS,
    shape: tuple[int, int] | None = FEW_SHOT_SHAPE,
    indices: Iterable[int] | None = None,
    example_range: tuple[float, float] | None = None,
    seed: int | None = None,
    transform: Callable[[np.ndarray], Any] | None = None,
    method: str = DEFAULT_METHOD,
    data_dir: PathLike | None = None,
    download: bool | None = None,
    mirrors: Sequence[str] | str | None = None,
    offline: bool | None = None,
    context: DataContext | None = None,
) -> Iterator[Episode]:
    """Yield seeded few-shot episodes: ``n_way`` distinct classes, disjoint support and query drawers.

    Each episode draws ``n_way`` classes without replacement, then for each class
    ``k_shot + n_query`` distinct drawers of the selected ones: the first ``k_shot`` are its
    support images, the rest its queries. The same seed gives the same episodes.
    Arguments are checked and the images loaded when this is called, not on the first ``next``.

    Parameters
    ----------
    n_way, k_shot, n_query
        Classes per episode, support images per class, query images per class (>= 0).
    n_episodes
        How many episodes to yield; None for an endless stream.
    classes, sets, shape, indices, example_range, method, data_dir, download, mirrors, offline, context
        Which images to draw from, as in :func:`~glyphforge.datasets.omniglot.dataset.load_omniglot`; the
        default shape is the benchmarks' 28x28 (:data:`FEW_SHOT_SHAPE`, :class:`OmniglotTasks`'
        too; None for 105x105).
    seed
        Seeds the ``numpy.random.default_rng`` that draws the episodes.
    transform
        Applied to ``support_x`` and to ``query_x`` of each episode, each a whole uint8 array
        (e.g. ``lambda x: torch.from_numpy(x).float() / 255``); None keeps the arrays.
    """
    for name, value, least in (("n_way", n_way, 1), ("k_shot", k_shot, 1), ("n_query", n_query, 0)):
        check_int(name, value, least)
    if n_episodes is not None:
        check_int("n_episodes", n_episodes, 0)
    drawers = select_drawers(indices, example_range)
    if k_shot + n_query > len(drawers):
        raise ValueError(
            f"k_shot + n_query = {k_shot + n_query} drawings per class, but only {len(drawers)} drawers "
            f"are selected (indices or example_range); use at most {len(drawers)}"
        )
    context = DataContext.resolve(context, data_dir=data_dir, download=download, mirrors=mirrors, offline=offline)
    catalog = open_catalog(sets, shape, method, context)
    chosen = catalog.select(classes)
    if n_way > len(chosen):
        raise ValueError(f"n_way={n_way} is more than the {len(chosen)} classes selected; use at most {len(chosen)}")
    stack = catalog.stack(chosen, drawers)
    return _episodes(stack, [item.name for item in chosen], n_way, k_shot, n_query, n_episodes, seed,
                     transform or _unchanged)


def _unchanged(images: np.ndarray) -> np.ndarray:
    return images


def _episodes(
    stack: np.ndarray, names: list[str], n_way: int, k_shot: int, n_query: int, n_episodes: int | None,
    seed: int | None, transform: Callable[[np.ndarray], Any],
) -> Iterator[Episode]:
    rng = np.random.default_rng(seed)
    labels = np.arange(n_way, dtype=np.int64)
    count = 0
    while n_episodes is None or count < n_episodes:
        picked = rng.choice(len(names), n_way, replace=False)
        drawn = rng.permuted(np.tile(np.arange(stack.shape[1]), (n_way, 1)), axis=1)[:, :k_shot + n_query]
        images = stack[picked[:, None], drawn]
        yield Episode(
            support_x=transform(images[:, :k_shot].reshape(-1, *stack.shape[2:])),
            support_y=np.repeat(labels, k_shot),
            query_x=transform(images[:, k_shot:].reshape(-1, *stack.shape[2:])),
            query_y=np.repeat(labels, n_query),
            classes=[names[index] for index in picked],
        )
        count += 1
