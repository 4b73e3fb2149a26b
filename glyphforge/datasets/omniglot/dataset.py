"""Omniglot: fetch Brenden Lake's zips, convert them once per alphabet, load classes and episodes.

Sets
----
``background`` (30 alphabets, 964 characters), ``evaluation`` (20 alphabets, 659
characters), ``small1`` and ``small2`` (smaller training sets, 5 alphabets each).
Every character has 20 drawings, one per drawer, as 105x105 PNGs in
``<set folder>/<alphabet>/characterNN/<id>_<drawer>.png``.

Cache entries
-------------
One entry of kind ``"omniglot"`` per ``(set, shape)``. ``shape=(105, 105)`` is
converted from the zip (read member by member, never extracted); any other shape is
the resize (``method``, default ``"area"``) of every image of the 105x105 entry. An
entry holds one ``<alphabet>.pklz`` per alphabet: a uint8 array
``(n_characters, 20, H, W)``, white strokes (255) on black (0), characters in number
order, drawers in drawer order. ``entry.meta`` holds ``set``, ``shape``,
``n_characters``, ``n_images`` and ``alphabets``: one record per alphabet in name
order, ``{"name", "file", "characters": ["character01", ...], "ids": ["0683", ...]}``
(``ids`` are the upstream character ids of the PNG file names).

Class names
-----------
A class is ``"<alphabet>,<character number>"`` (``"Latin,3"``; numbers start at 1).
Sets that share an alphabet (``small1`` and ``small2`` both hold ``Greek`` and
``Latin``, with the same drawings, and so does ``background``) are never merged: when the selected
sets share an alphabet, each of its classes is qualified by its set,
``"small1/Latin,3"`` and ``"small2/Latin,3"``, and the bare ``"Latin,3"`` is refused as
ambiguous. Alphabets found in one selected set keep the bare form (the qualified form
is accepted too and means the same class). Omniglot has no class order of its own: the
loaders return the names sorted naturally (``"Latin,2"`` before ``"Latin,10"``; then ``" "``
with ``include_blank``) as a :class:`~glyphforge.datasets.class_names.ClassNames` list that the
labels index.

Drawers
-------
``indices`` lists the drawers (0-19) to take from every character;
``example_range=(a, b)`` takes drawers ``int(a * 20)`` to ``int(b * 20) - 1`` instead
(the rule of EMNIST's ``example_range``), so ``(0, 0.5)`` and ``(0.5, 1)`` split the
drawers into two disjoint halves.

Parts of this module: the Omniglot cache (`prepare_omniglot`) is
:mod:`~glyphforge.datasets.omniglot.prepare`, episodes are
:mod:`~glyphforge.datasets.omniglot.episodes`, the few-shot benchmarks' splits and task
batches :mod:`~glyphforge.datasets.omniglot.splits` and :mod:`~glyphforge.datasets.omniglot.tasks`;
all are exported here.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from glyphforge._checks import PathLike, check_shape
from glyphforge.batching import MapStyleDataset
from glyphforge.cache import Entry
from glyphforge.context import DataContext, as_context
from glyphforge.datasets.class_names import BLANK, ClassNames
from glyphforge.datasets.omniglot.archive import N_DRAWERS, NATIVE_SHAPE, PARALLEL_MIN_IMAGES, OmniglotFormatError
from glyphforge.datasets.omniglot.catalog import Catalog, OmniglotClass, select_drawers
from glyphforge.datasets.omniglot.episodes import Episode, omniglot_episodes
from glyphforge.datasets.omniglot.prepare import (
    DEFAULT_METHOD,
    DEFAULT_SETS,
    KIND,
    RESOURCES,
    SETS,
    announced,
    check_sets,
    in_use,
    not_prepared,
    open_catalog,
    params,
    prepare_omniglot,
    record_of,
)
from glyphforge.datasets.omniglot.splits import omniglot_split
from glyphforge.datasets.omniglot.tasks import OmniglotTasks, TaskBatch
from glyphforge.datasets.prepare_steps import resized
from glyphforge.datasets.torchvision_args import data_dir_of, subset_of

__all__ = [
    "BLANK", "DEFAULT_METHOD", "DEFAULT_SETS", "GLYPH_METHOD", "KIND", "N_DRAWERS", "NATIVE_SHAPE",
    "PARALLEL_MIN_IMAGES", "RESOURCES", "SETS", "Episode", "Omniglot", "OmniglotFormatError", "OmniglotTasks",
    "TaskBatch", "glyph_images", "load_omniglot", "omniglot_classes", "omniglot_episodes", "omniglot_split",
    "prepare_omniglot", "preview_examples",
]

#: The resize method of the glyphs scenes draw (:func:`glyph_images`): scenes resize glyphs with box.
GLYPH_METHOD = "box"


def omniglot_classes(
    sets: str | Iterable[str] = DEFAULT_SETS,
    *,
    data_dir: PathLike | None = None,
    download: bool | None = None,
    mirrors: Sequence[str] | str | None = None,
    offline: bool | None = None,
    context: DataContext | None = None,
) -> list[str]:
    """Return the class names of ``sets`` sorted naturally, e.g. ``["Alphabet_of_the_Magi,1", "...,2", ...]``.

    The names come from the converted sets (prepared first when ``download``). When
    several selected sets hold the same alphabet, its classes are qualified by set
    (``"small1/Latin,3"``, ``"small2/Latin,3"``): see the module docstring. The fetch
    keywords and ``context`` are those of :func:`load_omniglot`.
    """
    catalog = open_catalog(sets, None, DEFAULT_METHOD, DataContext.resolve(
        context, data_dir=data_dir, download=download, mirrors=mirrors, offline=offline
    ))
    return [item.name for item in catalog.select(None)]


def _labelled(
    catalog: Catalog,
    chosen: list[OmniglotClass],
    drawers: np.ndarray,
    *,
    include_blank: bool,
    seed: int | None,
    resize: Callable[[np.ndarray], np.ndarray] | None = None,
    shape: tuple[int, int] | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """The drawings of ``chosen`` (then the blank class), shuffled by ``seed``, their labels and class names.

    ``resize`` makes the drawings ``shape`` (see :meth:`Catalog.fill`); by default they
    keep the entries' shape.
    """
    n_labels, per_class = len(chosen) + include_blank, len(drawers)
    order = np.random.default_rng(seed).permutation(n_labels * per_class)
    where = np.empty_like(order)
    where[order] = np.arange(len(order))  # where each image of the class-ordered list lands
    where = where.reshape(n_labels, per_class)
    x = np.empty((len(order), *(shape or catalog.shape)), np.uint8)
    catalog.fill(chosen, drawers, x, where, resize)
    if include_blank:
        x[where[-1]] = 0
    y = np.repeat(np.arange(n_labels, dtype=np.int64), per_class)[order]
    return x, y, ClassNames([item.name for item in chosen] + [BLANK] * include_blank)


def load_omniglot(
    classes: str | Iterable[str] | None = None,
    *,
    sets: str | Iterable[str] = DEFAULT_SETS,
    include_blank: bool = False,
    shape: tuple[int, int] | None = None,
    one_hot: bool = False,
    indices: Iterable[int] | None = None,
    example_range: tuple[float, float] | None = None,
    seed: int | None = None,
    method: str = DEFAULT_METHOD,
    data_dir: PathLike | None = None,
    download: bool | None = None,
    mirrors: Sequence[str] | str | None = None,
    offline: bool | None = None,
    context: DataContext | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Load Omniglot characters as a shuffled labelled array, reading only their alphabets' files.

    Parameters
    ----------
    classes
        Class names such as ``"Latin,3"`` (``"<set>/<alphabet>,<n>"`` where the selected
        sets share the alphabet), or None for every class of ``sets``.
    sets
        The sets to draw from (default: ``background`` and ``evaluation``, 1,623 classes).
    include_blank
        Add the class ``' '`` (label after the others) of all-zero images, as many as
        drawers are selected.
    shape
        ``(height, width)``; None for 105x105. Other shapes read the resized entry,
        made from the 105x105 entry (with ``method``) when missing.
    one_hot
        Return float32 one-hot rows instead of int64 labels.
    indices
        The drawers (0-19) to take from every class; None for all 20 (or ``example_range``).
    example_range
        ``(a, b)`` with ``0 <= a < b <= 1``: drawers ``int(a * 20)`` to ``int(b * 20) - 1``
        of every class, so ``(0, 0.5)`` and ``(0.5, 1)`` are disjoint halves. Not with ``indices``.
    seed
        Seeds ``numpy.random.default_rng`` whose ``permutation`` shuffles the images.
    method
        The resize method for ``shape``.
    data_dir, mirrors, offline
        As in :func:`prepare_omniglot`.
    download
        Prepare missing sets (fetching their zips) first (None: the context's, by default True).
    context
        A `~glyphforge.context.DataContext` giving every fetch setting at once; the
        keywords above, when given, override its fields.

    Returns
    -------
    x : numpy.ndarray
        uint8 ``(n_classes * n_drawers, H, W)``, white strokes on black.
    y : numpy.ndarray
        int64 ``(n,)`` labels, or float32 ``(n, n_labels)`` one-hot rows.
    classes : ClassNames
        The class names that the labels index: sorted naturally, then ``' '``.

    Raises
    ------
    ValueError
        For an unknown or ambiguous class or set, bad drawers, both ``indices`` and
        ``example_range``, a range holding no drawer, or a bad shape or method.
    FileNotFoundError
        With ``download=False``, when a set is not prepared (the message names the command).
    """
    drawers = select_drawers(indices, example_range)
    context = DataContext.resolve(context, data_dir=data_dir, download=download, mirrors=mirrors, offline=offline)
    catalog = open_catalog(sets, shape, method, context)
    chosen = catalog.select(classes)
    x, y, names = _labelled(catalog, chosen, drawers, include_blank=include_blank, seed=seed)
    if one_hot:
        y = np.eye(len(names), dtype=np.float32)[y]
    return x, y, names


#: The Omniglot sets of each ``subset`` of :class:`Omniglot`: Lake's background sets train, his evaluation sets test.
SUBSET_SETS: dict[str, tuple[str, ...]] = {"all": DEFAULT_SETS, "train": ("background",), "test": ("evaluation",)}


class Omniglot(MapStyleDataset):
    """Omniglot classes as a map-style dataset: ``len(ds)``, ``ds[i] -> (image, label)``, ``ds.batches(...)``.

    ``Omniglot(root=None, background=None, transform=None, target_transform=None, download=None, *,
    subset=None, sets=None, shape=None, context=None, ...)``: torchvision's arguments first, so
    ``Omniglot("data", background=True)`` is torchvision's (see
    :mod:`glyphforge.datasets.torchvision_args`). Images
    are in a fixed order (classes sorted naturally, each class's drawers in the order
    selected), so a PyTorch ``DataLoader`` (which shuffles) or :meth:`batches` takes it as
    is. ``images`` is uint8 ``(n, H, W)``, ``labels`` int64 indices into ``classes`` (a
    :class:`~glyphforge.datasets.class_names.ClassNames`, as :func:`load_omniglot` returns it).

    Parameters
    ----------
    root
        The data dir (torchvision's name for ``data_dir``; give one of the two).
    background
        True: the ``background`` set, False: the ``evaluation`` set (torchvision's; give it,
        ``subset`` or ``sets``).
    transform
        Applied to each image by ``ds[i]`` (e.g. a torchvision transform).
    target_transform
        Applied to each label by ``ds[i]``.
    download
        False: never download (a set not prepared is a FileNotFoundError naming the command);
        None: the context's (by default True).
    subset
        ``"train"``: the ``background`` set (30 alphabets), ``"test"``: the ``evaluation``
        set (20 alphabets), ``"all"``: both. None: ``"all"`` (or ``background``'s).
    sets
        The sets to draw from (e.g. ``("small1",)``), instead of ``subset``'s or ``background``'s.
        None: ``subset``'s.
    classes, shape, indices, example_range, include_blank, method, data_dir, mirrors, offline, context
        As in :func:`load_omniglot`.
    """

    def __init__(
        self,
        root: PathLike | None = None,
        background: bool | None = None,
        transform: Callable[[np.ndarray], Any] | None = None,
        target_transform: Callable[[Any], Any] | None = None,
        download: bool | None = None,
        *,
        subset: str | None = None,
        sets: str | Iterable[str] | None = None,
        shape: tuple[int, int] | None = None,
        context: DataContext | None = None,
        classes: str | Iterable[str] | None = None,
        indices: Iterable[int] | None = None,
        example_range: tuple[float, float] | None = None,
        include_blank: bool = False,
        method: str = DEFAULT_METHOD,
        data_dir: PathLike | None = None,
        mirrors: Sequence[str] | str | None = None,
        offline: bool | None = None,
    ) -> None:
        subset = subset_of("background", background, subset, "all", {True: "train", False: "test"})
        if not isinstance(subset, str) or subset not in SUBSET_SETS:
            raise ValueError(f"subset {subset!r} is invalid: use one of {', '.join(SUBSET_SETS)}, or sets=... for "
                             "other sets (classes are given as classes=...)")
        if sets is not None and subset != "all":
            given = f"subset={subset!r}" if background is None else f"background={background!r}"
            raise ValueError(f"give {given} (the sets {', '.join(SUBSET_SETS[subset])}) or sets={sets!r}, not both")
        sets = SUBSET_SETS[subset] if sets is None else sets
        drawers = select_drawers(indices, example_range)
        context = DataContext.resolve(context, data_dir=data_dir_of(root, data_dir), download=download,
                                      mirrors=mirrors, offline=offline)
        catalog = open_catalog(sets, shape, method, context)
        chosen = catalog.select(classes)
        images = catalog.stack(chosen, drawers).reshape(-1, *catalog.shape)
        if include_blank:
            images = np.concatenate([images, np.zeros((len(drawers), *catalog.shape), np.uint8)])
        self.classes = ClassNames([item.name for item in chosen] + [BLANK] * include_blank)
        self.images = images
        self.labels = np.repeat(np.arange(len(self.classes), dtype=np.int64), len(drawers))
        self.subset, self.sets, self.shape = subset, check_sets(sets), catalog.shape
        self.transform, self.target_transform = transform, target_transform

    def __repr__(self) -> str:
        return (
            f"Omniglot(sets={self.sets}, shape={self.shape}, {len(self)} images, {len(self.classes)} classes)"
        )


# -- the registry's parts (glyphforge.datasets.registry) and the glyphs scenes draw ------------
def preview_examples(
    entry: Entry, n: int, rng: np.random.Generator, context: DataContext | PathLike | None = None,
) -> tuple[np.ndarray, list[str]]:
    """Return ``n`` drawings of distinct classes of ``entry``'s set and shape, and their class names.

    Reads the cache of ``context`` (a context, or a data dir path; None: the environment's) only.
    The classes and one drawer (shared by all) are picked with ``rng``.
    """
    set_name = entry.params["set"]
    context = as_context(context, download=False)
    names = omniglot_classes(sets=(set_name,), context=context)
    chosen = rng.choice(names, size=min(n, len(names)), replace=False).tolist()
    x, y, classes = load_omniglot(
        chosen, sets=(set_name,), shape=tuple(entry.params["shape"]), indices=[int(rng.integers(N_DRAWERS))],
        seed=int(rng.integers(2**32)), method=entry.params.get("resize", DEFAULT_METHOD), context=context,
    )
    return x, [classes[int(label)] for label in y]


def glyph_images(
    classes: Iterable[str] | None,
    *,
    example_range: tuple[float, float] | None,
    shape: tuple[int, int] | None,
    data_dir: PathLike | None = None,
    context: DataContext | None = None,
    sets: str | Iterable[str] = DEFAULT_SETS,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """The glyphs scenes draw: every selected drawing of ``classes``, box-resized to ``shape``; cache only.

    Returns what ``load_omniglot(classes, sets=sets, example_range=example_range, seed=0,
    shape=shape, method="box", download=False)`` returns, without ever downloading or
    writing to the cache (build workers must do neither): the box-resized entry at
    ``shape`` is read when prepared, else the 105x105 entries are read and each drawing
    resized with box, the same pixels. (``prepare-data omniglot --shape`` makes Omniglot's
    default ``"area"`` variants; ``prepare_omniglot(shapes=[shape], method="box")`` makes
    the variant read here.)

    Parameters
    ----------
    classes
        Class names, or None for every class of ``sets``.
    example_range
        The drawers of every class (see :func:`load_omniglot`); None for all 20.
    shape
        The glyphs' ``(height, width)``; None for 105x105.
    data_dir, context
        The data dir whose cache is read (``context``'s, unless ``data_dir`` is given).
    sets
        The Omniglot sets (as in :func:`load_omniglot`).

    Raises
    ------
    FileNotFoundError
        When a set is not prepared; the message names the ``prepare-data`` command.
    ValueError
        For bad classes, sets, shape or ``example_range`` (one holding no drawer).
    """
    drawers = select_drawers(None, example_range)
    names = check_sets(sets)
    size = NATIVE_SHAPE if shape is None else check_shape(shape)
    context = DataContext.resolve(context, data_dir=data_dir)
    store, copy = context.store, in_use(names, context)
    found = {name: store.get(KIND, params(name, size, GLYPH_METHOD, copy.own.get(name))) for name in names}
    resize: Callable[[np.ndarray], np.ndarray] | None = None
    if any(entry is None for entry in found.values()):  # not prepared at this shape: resize the 105x105 drawings
        found = {name: store.get(KIND, params(name, NATIVE_SHAPE, GLYPH_METHOD, copy.own.get(name))) for name in names}
        absent = [name for name, entry in found.items() if entry is None]
        if absent:
            raise not_prepared(absent, store.where, " first: scenes read glyphs from the cache and never download",
                               record_of(absent, copy, context))
        resize = functools.partial(resized, shape=size, method=GLYPH_METHOD, batch=True)
    catalog = Catalog(announced(found, context))  # type: ignore[arg-type]  # every set has its entry now
    chosen = catalog.select(classes)
    return _labelled(catalog, chosen, drawers, include_blank=False, seed=0, resize=resize, shape=size)
