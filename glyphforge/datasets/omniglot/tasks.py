"""Batches of few-shot tasks over an Omniglot benchmark split: `OmniglotTasks` and `TaskBatch`.

The benchmark setups of torchmeta and learn2learn as one seeded, resumable iterator: a split's
classes (:mod:`~glyphforge.datasets.omniglot.splits`), rotated by 90, 180 and 270 degrees as
new classes, drawn into ``[tasks, n_way * k_shot, H, W]`` support and
``[tasks, n_way * n_query, H, W]`` query arrays. Batch ``i`` is drawn by its own generator,
``numpy.random.default_rng([seed, i])``, so a state (``seed`` and the next ``i``) resumes
exactly the batches that were left.
"""
from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from glyphforge._checks import PathLike, check_int
from glyphforge.context import DataContext
from glyphforge.datasets.class_names import ClassNames
from glyphforge.datasets.omniglot.archive import N_DRAWERS
from glyphforge.datasets.omniglot.catalog import OmniglotClass
from glyphforge.datasets.omniglot.episodes import FEW_SHOT_SHAPE, _unchanged
from glyphforge.datasets.omniglot.prepare import DEFAULT_METHOD, DEFAULT_SETS, open_catalog
from glyphforge.datasets.omniglot.splits import omniglot_split

#: The rotations of the benchmarks (torchmeta's ``Rotation([90, 180, 270])`` beside the originals,
#: learn2learn's ``RandomClassRotation(dataset, [0, 90, 180, 270])``), in degrees counterclockwise.
ROTATIONS = (0, 90, 180, 270)


@dataclasses.dataclass(frozen=True)
class TaskBatch:
    """A batch of few-shot tasks; in each, labels 0 to ``n_way - 1`` stand for its classes.

    Attributes
    ----------
    support_x, query_x
        uint8 ``(tasks, n_way * k_shot, H, W)`` and ``(tasks, n_way * n_query, H, W)``, class by
        class within a task, white strokes on black (or what ``transform`` made of them).
    support_y, query_y
        int64 ``(tasks, n_way * k_shot)`` and ``(tasks, n_way * n_query)``: the labels.
    classes
        int64 ``(tasks, n_way)``: label ``j`` of task ``t`` is class ``classes[t, j]`` of
        :attr:`OmniglotTasks.classes` (indices, for arrays indexed by class).
    class_names
        The names of those classes: label ``j`` of task ``t`` is the class ``class_names[t][j]``
        (``"Latin,3@90"``), as an :class:`~glyphforge.datasets.omniglot.episodes.Episode`'s
        ``classes`` names its own.
    """

    support_x: Any
    support_y: np.ndarray
    query_x: Any
    query_y: np.ndarray
    classes: np.ndarray
    class_names: list[list[str]]


def _split_classes(
    chosen: list[OmniglotClass], split: str | None, part: str | None, split_seed: int | None
) -> list[OmniglotClass]:
    """The classes of ``chosen`` in the split's part, each character once (from the first set holding it)."""
    if split is None and part is None:
        if split_seed is not None:
            raise ValueError("split_seed shuffles a split: give split='ravi' and a part with it, or leave it None")
        return chosen
    if split is None or part is None:
        raise ValueError(
            f"split={split!r}, part={part!r}: give both (e.g. split='vinyals', part='train') for a benchmark's "
            "classes, or neither for every class of sets"
        )
    wanted = set(omniglot_split(split, part, seed=split_seed))
    found: dict[str, OmniglotClass] = {}
    for item in chosen:
        found.setdefault(f"{item.alphabet},{item.index + 1}", item)
    picked = [item for key, item in found.items() if key in wanted]
    if not picked:
        raise ValueError(
            f"the selected Omniglot sets hold none of the classes of part {part!r} of split {split!r}; "
            "choose sets holding its alphabets (the default, background and evaluation, holds every class)"
        )
    return picked


def _check_rotations(rotations: Iterable[int], shape: tuple[int, int]) -> tuple[int, ...]:
    values = tuple(rotations)
    if not values or any(value not in ROTATIONS for value in values) or len(set(values)) != len(values):
        raise ValueError(
            f"rotations {values!r} must be distinct angles among {ROTATIONS} (degrees counterclockwise); "
            "(0,) keeps the classes unrotated"
        )
    if shape[0] != shape[1] and any(value % 180 for value in values):
        raise ValueError(f"rotations by 90 or 270 degrees need square images, but shape is {shape}: use a square shape")
    return values


class OmniglotTasks(Iterator[TaskBatch]):
    """Seeded, resumable batches of few-shot tasks over an Omniglot benchmark split, for a meta-learning loop.

    The classes are those of ``part`` of ``split`` (see :func:`~glyphforge.omniglot_split`)
    that ``sets`` hold, each character once, times ``rotations``: class ``r * n + c`` is
    character ``c`` rotated by ``rotations[r]`` degrees counterclockwise (``np.rot90``), named
    ``"<class>@<angle>"`` (the bare name at 0). A task draws ``n_way`` distinct classes, then
    ``k_shot + n_query`` distinct drawers of each: the first ``k_shot`` are its support images.
    Arguments are checked and the images loaded when this is made.

    Parameters
    ----------
    n_way, k_shot, n_query
        Classes per task, support images per class, query images per class (>= 0).
    tasks
        Tasks per batch.
    n_batches
        How many batches to yield; None for an endless stream.
    split, part
        The benchmark split (``"vinyals"``, ``"ravi"``) and its part (``"train"``, ``"val"``,
        ``"test"``); both None for every class of ``sets``.
    split_seed
        The shuffle of the ``"ravi"`` split (None: 0).
    rotations
        The angles each character is taken at, each a class of its own; ``(0,)`` for none.
    sets, shape, method, data_dir, download, mirrors, offline, context
        The images, as in :func:`~glyphforge.datasets.omniglot.dataset.load_omniglot`; the default
        shape is the benchmarks' 28x28 (``FEW_SHOT_SHAPE``, :func:`~glyphforge.omniglot_episodes`'
        too; None for 105x105).
    seed
        Seeds the batches (None: a fresh seed, kept in :meth:`state_dict`).
    transform
        Applied to ``support_x`` and to ``query_x`` of each batch, each a whole uint8 array
        (e.g. ``lambda x: torch.from_numpy(x).float() / 255``); None keeps the arrays.

    Attributes
    ----------
    classes : ClassNames
        Every class tasks draw from, in class index order.
    images : numpy.ndarray
        uint8 ``(n, 20, H, W)``: the drawings of the ``n`` unrotated characters.
    """

    def __init__(
        self,
        n_way: int,
        k_shot: int,
        n_query: int,
        *,
        tasks: int = 16,
        n_batches: int | None = None,
        split: str | None = "vinyals",
        part: str | None = "train",
        split_seed: int | None = None,
        rotations: Iterable[int] = ROTATIONS,
        sets: str | Iterable[str] = DEFAULT_SETS,
        shape: tuple[int, int] | None = FEW_SHOT_SHAPE,
        seed: int | None = None,
        transform: Callable[[np.ndarray], Any] | None = None,
        method: str = DEFAULT_METHOD,
        data_dir: PathLike | None = None,
        download: bool | None = None,
        mirrors: Sequence[str] | str | None = None,
        offline: bool | None = None,
        context: DataContext | None = None,
    ) -> None:
        for name, value, least in (("n_way", n_way, 1), ("k_shot", k_shot, 1), ("n_query", n_query, 0),
                                   ("tasks", tasks, 1)):
            check_int(name, value, least)
        if n_batches is not None:
            check_int("n_batches", n_batches, 0)
        if k_shot + n_query > N_DRAWERS:
            raise ValueError(f"k_shot + n_query = {k_shot + n_query} drawings per class, but every Omniglot class "
                             f"has {N_DRAWERS}; use at most {N_DRAWERS}")
        context = DataContext.resolve(context, data_dir=data_dir, download=download, mirrors=mirrors, offline=offline)
        catalog = open_catalog(sets, shape, method, context)
        self.rotations = _check_rotations(rotations, catalog.shape)
        chosen = _split_classes(catalog.all_classes(), split, part, split_seed)
        n_classes = len(chosen) * len(self.rotations)
        if n_way > n_classes:
            raise ValueError(f"n_way={n_way} is more than the {n_classes} classes selected; use at most {n_classes}")
        self.images = catalog.stack(chosen, np.arange(N_DRAWERS))
        self.classes = ClassNames(
            item.name if angle == 0 else f"{item.name}@{angle}" for angle in self.rotations for item in chosen
        )
        self.n_way, self.k_shot, self.n_query, self.tasks, self.n_batches = n_way, k_shot, n_query, tasks, n_batches
        self.transform = transform or _unchanged
        self.seed = int(np.random.default_rng().integers(2**63)) if seed is None else check_int("seed", seed, 0)
        self.index = 0  # the next batch

    def __next__(self) -> TaskBatch:
        if self.n_batches is not None and self.index >= self.n_batches:
            raise StopIteration
        batch = self.batch(self.index)
        self.index += 1
        return batch

    def batch(self, index: int) -> TaskBatch:
        """Return batch ``index`` of the stream (the same whichever batches were drawn before)."""
        rng = np.random.default_rng([self.seed, check_int("index", index, 0)])
        per_class, n = self.k_shot + self.n_query, len(self.images)
        picked = np.stack([rng.choice(len(self.classes), self.n_way, replace=False) for _ in range(self.tasks)])
        drawn = rng.permuted(np.tile(np.arange(N_DRAWERS), (self.tasks, self.n_way, 1)), axis=2)[..., :per_class]
        images = self.images[(picked % n)[..., None], drawn]  # (tasks, n_way, per_class, H, W)
        turns = picked // n
        for turn, angle in enumerate(self.rotations):
            if angle:
                images[turns == turn] = np.rot90(images[turns == turn], angle // 90, axes=(-2, -1))
        labels = np.arange(self.n_way, dtype=np.int64)
        return TaskBatch(
            support_x=self.transform(images[:, :, :self.k_shot].reshape(self.tasks, -1, *images.shape[-2:])),
            support_y=np.tile(np.repeat(labels, self.k_shot), (self.tasks, 1)),
            query_x=self.transform(images[:, :, self.k_shot:].reshape(self.tasks, -1, *images.shape[-2:])),
            query_y=np.tile(np.repeat(labels, self.n_query), (self.tasks, 1)),
            classes=picked.astype(np.int64),
            class_names=[[self.classes[index] for index in task] for task in picked.tolist()],
        )

    def _identity(self) -> dict[str, Any]:
        """What a state must match to resume this stream: the draw and the classes (by digest) and their shape."""
        digest = hashlib.sha256("\n".join(self.classes).encode("utf-8")).hexdigest()
        return {"n_way": self.n_way, "k_shot": self.k_shot, "n_query": self.n_query, "tasks": self.tasks,
                "shape": list(self.images.shape[-2:]), "classes": digest}

    def state_dict(self) -> dict[str, Any]:
        """Return the stream's position as plain JSON-able data: its seed, the next batch and what it draws from."""
        return {"seed": self.seed, "next": self.index, **self._identity()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at ``state`` (from :meth:`state_dict` of a stream with the same arguments): the rest follows.

        Raises
        ------
        ValueError
            When ``state`` is not a state of this stream's draw (the message names what differs).
        """
        mine = self._identity()
        differ = sorted(key for key in mine if not isinstance(state, dict) or state.get(key) != mine[key])
        if differ:
            raise ValueError(
                f"this state is not one of this task stream's: its {', '.join(differ)} differ (a state resumes "
                "a stream of the same n_way, k_shot, n_query, tasks, shape and classes); make the stream as the "
                "state's was made"
            )
        self.seed = check_int("state seed", state.get("seed"), 0)
        self.index = check_int("state next", state.get("next"), 0)

    def __repr__(self) -> str:
        return (
            f"OmniglotTasks({self.n_way}-way {self.k_shot}-shot, {self.n_query} queries, {self.tasks} tasks a batch, "
            f"{len(self.classes)} classes of shape {tuple(self.images.shape[-2:])}, next batch {self.index})"
        )
