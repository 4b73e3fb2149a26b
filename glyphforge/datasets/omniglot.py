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
is accepted too and means the same class).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from glyphforge.cache import CacheStore, Entry, Writer
from glyphforge.datasets._omniglot_archive import (
    N_DRAWERS,
    NATIVE_SHAPE,
    PARALLEL_MIN_IMAGES,
    OmniglotFormatError,
    convert_set,
)
from glyphforge.datasets._omniglot_catalog import Catalog, check_indices
from glyphforge.datasets._prepare import (
    PathLike,
    check_method,
    check_shape,
    check_shapes,
    resized,
    unknown,
    upstream_file,
)
from glyphforge.batching import MapStyleDataset
from glyphforge.pipelines.download import Resource

__all__ = [
    "BLANK", "DEFAULT_METHOD", "DEFAULT_SETS", "KIND", "N_DRAWERS", "NATIVE_SHAPE", "PARALLEL_MIN_IMAGES",
    "RESOURCES", "SETS", "Episode", "Omniglot", "OmniglotFormatError", "load_omniglot", "omniglot_classes",
    "omniglot_episodes", "prepare_omniglot",
]

KIND = "omniglot"
DEFAULT_SETS = ("background", "evaluation")
DEFAULT_METHOD = "area"
BLANK = " "

_BASE_URL = "https://raw.githubusercontent.com/brendenlake/omniglot/master/python/"


def _resource(filename: str, hash_: str, size: int | None = None) -> Resource:
    return Resource("omniglot", filename, _BASE_URL + filename, hash_, size)


#: The upstream zip of each set (md5 of the full sets as torchvision pins them).
RESOURCES: dict[str, Resource] = {
    "background": _resource("images_background.zip", "md5:68d2efa1b9178cc56df9314c21c6e718"),
    "evaluation": _resource("images_evaluation.zip", "md5:6b91aef0f799c5bb55b94e3f2daec811"),
    "small1": _resource(
        "images_background_small1.zip",
        "sha256:f38eb80f801274ac2b4dff5b24289016bfaba4a7d5bb50deebf27104ad6cb8a4",
        1_319_022,
    ),
    "small2": _resource(
        "images_background_small2.zip",
        "sha256:3ccaa407515a8778e5d0861875af38b17e418f301ad5bb3b5a6b65d901a41c7f",
        1_580_917,
    ),
}
SETS = tuple(RESOURCES)


# -- argument checks -----------------------------------------------------------------
def _check_sets(sets: str | Iterable[str]) -> tuple[str, ...]:
    names = (sets,) if isinstance(sets, str) else tuple(dict.fromkeys(sets))
    if not names:
        raise ValueError(f"sets is empty: give at least one of {', '.join(SETS)}")
    bad = [name for name in names if name not in RESOURCES]
    if bad:
        raise unknown("Omniglot sets", bad, SETS, hint=" (the default is ('background', 'evaluation'))")
    return names


# -- prepare ------------------------------------------------------------------------------
def _params(set_name: str, shape: tuple[int, int], method: str) -> dict[str, Any]:
    params: dict[str, Any] = {"set": set_name, "shape": list(shape), "source": RESOURCES[set_name].hash}
    if shape != NATIVE_SHAPE:
        params["resize"] = method
    return params


def _write_native(
    writer: Writer, set_name: str, zip_path: Path, workers: int | None, verified: bool, progress: bool
) -> None:
    """Convert every alphabet of ``zip_path`` into ``writer`` and describe them in its meta."""
    folder = Path(RESOURCES[set_name].filename).stem
    label = f"Omniglot {set_name}: decoding {zip_path.name}"
    alphabets = convert_set(writer, zip_path, folder, workers=workers, label=label, progress=progress)
    n_characters = sum(len(alphabet.characters) for alphabet in alphabets)
    writer.meta.update(
        set=set_name,
        shape=list(NATIVE_SHAPE),
        n_characters=n_characters,
        n_images=n_characters * N_DRAWERS,
        verified_archive=verified,
        alphabets=[alphabet.record() for alphabet in alphabets],
    )


def _write_resized(writer: Writer, base: Entry, shape: tuple[int, int], method: str, progress: bool) -> None:
    """Write the resize of every image of every alphabet of ``base``."""
    label = f"Omniglot {base.meta['set']}: resizing to {shape[0]}x{shape[1]}"
    with tqdm(total=base.meta["n_images"], desc=label, unit="img", disable=not progress) as bar:
        for record in base.meta["alphabets"]:
            images = base.load(record["file"])
            small = resized(images.reshape(-1, *images.shape[2:]), shape, method, batch=True)
            writer.write(record["file"], small.reshape(*images.shape[:2], *shape))
            bar.update(images.shape[0] * images.shape[1])
    writer.meta.update({**base.meta, "shape": list(shape), "resized_from": base.key, "resize": method})


def prepare_omniglot(
    *,
    sets: str | Iterable[str] = DEFAULT_SETS,
    shapes: Iterable[tuple[int, int]] = (),
    method: str = DEFAULT_METHOD,
    data_dir: PathLike | None = None,
    mirrors: Sequence[str] | str | None = None,
    archives: Mapping[str, PathLike] | None = None,
    verify: bool = True,
    progress: bool = True,
    workers: int | None = None,
) -> list[Entry]:
    """Fetch, verify and convert Omniglot sets, and make resized variants.

    Idempotent: entries already in the cache are returned without touching the
    archives or the network.

    Parameters
    ----------
    sets
        Names from :data:`SETS` (a single name may be given as a string).
    shapes
        Extra ``(height, width)`` variants, each the resize of the 105x105 entry.
    method
        The resize method of the variants (see :func:`glyphforge.pipelines.resize.resize`).
    data_dir
        The data dir (see :mod:`glyphforge.config`).
    mirrors
        Mirror bases tried before the origin (see :func:`glyphforge.pipelines.download.fetch`).
    archives
        ``{set: path}`` of local zips to convert instead of fetching them (used in place).
    verify
        Check the hash of ``archives`` and of zips already in ``<data dir>/raw/omniglot/``;
        False converts such files as they are. Downloads are always verified and the
        layout is always checked.
    progress
        Show progress bars.
    workers
        Processes that decode a set's PNGs (one alphabet per task). None: one per CPU for
        sets of at least :data:`PARALLEL_MIN_IMAGES` images (the full sets), else decode
        in this process (``small1``, ``small2``).

    Returns
    -------
    list of Entry
        For each set in order: its 105x105 entry, then one entry per distinct other shape.

    Raises
    ------
    ValueError
        For an unknown set, a bad shape or method, or ``archives`` naming a set not in ``sets``.
    DownloadError, HashMismatchError
        When a zip cannot be fetched or is not the pinned file (nothing is cached).
    OmniglotFormatError, ArchiveError
        When a zip is not laid out as Omniglot's or is corrupt (nothing is cached).
    """
    names = _check_sets(sets)
    wanted = [shape for shape in check_shapes(shapes) if shape != NATIVE_SHAPE]
    check_method(method)
    archives = dict(archives or {})
    stray = [name for name in archives if name not in names]
    if stray:
        raise ValueError(f"archives names sets {stray} that are not in sets {list(names)}: add them to sets")
    store = CacheStore.for_data_dir(data_dir)
    entries = []
    for name in names:
        base = store.get(KIND, _params(name, NATIVE_SHAPE, method))
        if base is None:
            zip_path, verified = upstream_file(
                RESOURCES[name], data_dir=data_dir, mirrors=mirrors, verify=verify, progress=progress,
                given=archives.get(name),
            )
            base = store.get_or_create(
                KIND, _params(name, NATIVE_SHAPE, method),
                lambda writer: _write_native(writer, name, zip_path, workers, verified, progress),
            )
        entries.append(base)
        for shape in wanted:
            entries.append(store.get_or_create(
                KIND, _params(name, shape, method),
                lambda writer, shape=shape: _write_resized(writer, base, shape, method, progress),
            ))
    return entries


# -- catalog and class names -----------------------------------------------------------
def _entries(
    sets: tuple[str, ...],
    shape: tuple[int, int],
    method: str,
    data_dir: PathLike | None,
    download: bool,
    mirrors: Sequence[str] | str | None,
) -> dict[str, Entry]:
    """Return the entry of each set at ``shape``, preparing what is missing when allowed."""
    store = CacheStore.for_data_dir(data_dir)
    entries = {name: store.get(KIND, _params(name, shape, method)) for name in sets}
    missing = [name for name, entry in entries.items() if entry is None]
    if missing:
        absent = [name for name in missing if store.get(KIND, _params(name, NATIVE_SHAPE, method)) is None]
        if absent and not download:
            raise FileNotFoundError(
                f"Omniglot sets {absent} are not prepared in {store.root}: run "
                f"prepare_omniglot(sets={absent!r}) or `prepare-data omniglot --omniglot-sets {' '.join(absent)}`, "
                "or pass download=True"
            )
        prepared = prepare_omniglot(sets=missing, shapes=[shape], method=method, data_dir=data_dir, mirrors=mirrors)
        per_set = 1 if shape == NATIVE_SHAPE else 2  # the 105x105 entry, then the resized one
        entries.update(zip(missing, prepared[per_set - 1::per_set]))
    return entries  # type: ignore[return-value]  # every set has its entry now


def _catalog(
    sets: str | Iterable[str],
    shape: tuple[int, int] | None,
    method: str,
    data_dir: PathLike | None,
    download: bool,
    mirrors: Sequence[str] | str | None,
) -> Catalog:
    names = _check_sets(sets)
    shape = NATIVE_SHAPE if shape is None else check_shape(shape)
    check_method(method)
    return Catalog(_entries(names, shape, method, data_dir, download, mirrors))


def omniglot_classes(
    sets: str | Iterable[str] = DEFAULT_SETS,
    *,
    data_dir: PathLike | None = None,
    download: bool = True,
    mirrors: Sequence[str] | str | None = None,
) -> list[str]:
    """Return the sorted class names of ``sets``, e.g. ``["Alphabet_of_the_Magi,1", ...]``.

    The names come from the converted sets (prepared first when ``download``). When
    several selected sets hold the same alphabet, its classes are qualified by set
    (``"small1/Latin,3"``, ``"small2/Latin,3"``): see the module docstring.
    """
    catalog = _catalog(sets, None, DEFAULT_METHOD, data_dir, download, mirrors)
    return sorted(item.name for item in catalog.all_classes())


def load_omniglot(
    classes: str | Iterable[str] | None = None,
    *,
    sets: str | Iterable[str] = DEFAULT_SETS,
    include_blank: bool = False,
    shape: tuple[int, int] | None = None,
    one_hot: bool = False,
    indices: Iterable[int] | None = None,
    seed: int | None = None,
    method: str = DEFAULT_METHOD,
    data_dir: PathLike | None = None,
    download: bool = True,
    mirrors: Sequence[str] | str | None = None,
) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Load Omniglot characters as a shuffled labelled array, reading only their alphabets' files.

    Parameters
    ----------
    classes
        Class names such as ``"Latin,3"`` (``"<set>/<alphabet>,<n>"`` where the selected
        sets share the alphabet), or None for every class of ``sets``.
    sets
        The sets to draw from (default: ``background`` and ``evaluation``, 1,623 classes).
    include_blank
        Add the class ``' '`` (label after the others) of all-zero images, ``len(indices)`` of them.
    shape
        ``(height, width)``; None for 105x105. Other shapes read the resized entry,
        made from the 105x105 entry (with ``method``) when missing.
    one_hot
        Return float32 one-hot rows instead of int64 labels.
    indices
        The drawers (0-19) to take from every class; None for all 20.
    seed
        Seeds ``numpy.random.default_rng`` whose ``permutation`` shuffles the images.
    method
        The resize method for ``shape``.
    data_dir, mirrors
        As in :func:`prepare_omniglot`.
    download
        Prepare missing sets (fetching their zips) first.

    Returns
    -------
    x : numpy.ndarray
        uint8 ``(n_classes * len(indices), H, W)``, white strokes on black.
    y : numpy.ndarray
        int64 ``(n,)`` labels, or float32 ``(n, n_labels)`` one-hot rows.
    class_map : dict
        Each class name to its label: labels follow the sorted class names, then ``' '``.
    """
    drawers = check_indices(indices)
    catalog = _catalog(sets, shape, method, data_dir, download, mirrors)
    chosen = catalog.select(classes)
    n_labels, per_class = len(chosen) + include_blank, len(drawers)
    order = np.random.default_rng(seed).permutation(n_labels * per_class)
    where = np.empty_like(order)
    where[order] = np.arange(len(order))  # where each image of the class-ordered list lands
    where = where.reshape(n_labels, per_class)
    x = np.empty((len(order), *catalog.shape), np.uint8)
    catalog.fill(chosen, drawers, x, where)
    if include_blank:
        x[where[-1]] = 0
    y = np.repeat(np.arange(n_labels, dtype=np.int64), per_class)[order]
    if one_hot:
        y = np.eye(n_labels, dtype=np.float32)[y]
    class_map = {item.name: label for label, item in enumerate(chosen)}
    if include_blank:
        class_map[BLANK] = len(chosen)
    return x, y, class_map


class Omniglot(MapStyleDataset):
    """Omniglot classes as a map-style dataset: ``len(ds)``, ``ds[i] -> (image, label)``, ``ds.batches(...)``.

    Images are in a fixed order (classes in sorted name order, each class's drawers in
    ``indices`` order), so a PyTorch ``DataLoader`` (which shuffles) or :meth:`batches`
    takes it as is. ``images`` is uint8 ``(n, H, W)``, ``labels`` int64 indices into
    ``classes``, and ``class_map`` maps each class name to its label (as
    :func:`load_omniglot` returns it).

    Parameters
    ----------
    classes, sets, shape, indices, include_blank, method, data_dir, download, mirrors
        As in :func:`load_omniglot`.
    transform
        Applied to each image by ``ds[i]`` (e.g. a torchvision transform).
    """

    def __init__(
        self,
        classes: str | Iterable[str] | None = None,
        *,
        sets: str | Iterable[str] = DEFAULT_SETS,
        shape: tuple[int, int] | None = None,
        indices: Iterable[int] | None = None,
        include_blank: bool = False,
        method: str = DEFAULT_METHOD,
        transform: Callable[[np.ndarray], Any] | None = None,
        data_dir: PathLike | None = None,
        download: bool = True,
        mirrors: Sequence[str] | str | None = None,
    ) -> None:
        drawers = check_indices(indices)
        catalog = _catalog(sets, shape, method, data_dir, download, mirrors)
        chosen = catalog.select(classes)
        images = catalog.stack(chosen, drawers).reshape(-1, *catalog.shape)
        if include_blank:
            images = np.concatenate([images, np.zeros((len(drawers), *catalog.shape), np.uint8)])
        self.classes = [item.name for item in chosen] + [BLANK] * include_blank
        self.class_map = {name: label for label, name in enumerate(self.classes)}
        self.images = images
        self.labels = np.repeat(np.arange(len(self.classes), dtype=np.int64), len(drawers))
        self.sets, self.shape, self.transform = _check_sets(sets), catalog.shape, transform

    def __getitem__(self, index: Any) -> tuple[Any, Any]:
        image, label = super().__getitem__(index)
        return (image if self.transform is None else self.transform(image)), label

    def __repr__(self) -> str:
        return (
            f"Omniglot(sets={self.sets}, shape={self.shape}, {len(self)} images, {len(self.classes)} classes)"
        )


@dataclasses.dataclass(frozen=True)
class Episode:
    """One few-shot episode: ``n_way`` classes labelled 0 to ``n_way - 1``.

    Attributes
    ----------
    support_x, query_x
        uint8 ``(n_way * k_shot, H, W)`` and ``(n_way * n_query, H, W)``, class by class.
    support_y, query_y
        int64 labels of those images (``classes[label]`` names the class).
    classes
        The episode's class names, in label order.
    """

    support_x: np.ndarray
    support_y: np.ndarray
    query_x: np.ndarray
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
    shape: tuple[int, int] | None = None,
    indices: Iterable[int] | None = None,
    seed: int | None = None,
    method: str = DEFAULT_METHOD,
    data_dir: PathLike | None = None,
    download: bool = True,
    mirrors: Sequence[str] | str | None = None,
) -> Iterator[Episode]:
    """Yield seeded few-shot episodes: ``n_way`` distinct classes, disjoint support and query drawers.

    Each episode draws ``n_way`` classes without replacement, then for each class
    ``k_shot + n_query`` distinct drawers of ``indices``: the first ``k_shot`` are its
    support images, the rest its queries. The same seed gives the same episodes.
    Arguments are checked and the images loaded when this is called, not on the first ``next``.

    Parameters
    ----------
    n_way, k_shot, n_query
        Classes per episode, support images per class, query images per class (>= 0).
    n_episodes
        How many episodes to yield; None for an endless stream.
    classes, sets, shape, indices, method, data_dir, download, mirrors
        Which images to draw from, as in :func:`load_omniglot`.
    seed
        Seeds the ``numpy.random.default_rng`` that draws the episodes.
    """
    for name, value, least in (("n_way", n_way, 1), ("k_shot", k_shot, 1), ("n_query", n_query, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    if n_episodes is not None and (not isinstance(n_episodes, (int, np.integer)) or n_episodes < 0):
        raise ValueError(f"n_episodes must be a non-negative integer or None, got {n_episodes!r}")
    drawers = check_indices(indices)
    if k_shot + n_query > len(drawers):
        raise ValueError(
            f"k_shot + n_query = {k_shot + n_query} drawings per class, but only {len(drawers)} drawers "
            f"are selected (indices); use at most {len(drawers)}"
        )
    catalog = _catalog(sets, shape, method, data_dir, download, mirrors)
    chosen = catalog.select(classes)
    if n_way > len(chosen):
        raise ValueError(f"n_way={n_way} is more than the {len(chosen)} classes selected; use at most {len(chosen)}")
    stack = catalog.stack(chosen, drawers)
    return _episodes(stack, [item.name for item in chosen], n_way, k_shot, n_query, n_episodes, seed)


def _episodes(
    stack: np.ndarray, names: list[str], n_way: int, k_shot: int, n_query: int, n_episodes: int | None, seed: int | None
) -> Iterator[Episode]:
    rng = np.random.default_rng(seed)
    labels = np.arange(n_way, dtype=np.int64)
    count = 0
    while n_episodes is None or count < n_episodes:
        picked = rng.choice(len(names), n_way, replace=False)
        drawn = rng.permuted(np.tile(np.arange(stack.shape[1]), (n_way, 1)), axis=1)[:, :k_shot + n_query]
        images = stack[picked[:, None], drawn]
        yield Episode(
            support_x=images[:, :k_shot].reshape(-1, *stack.shape[2:]),
            support_y=np.repeat(labels, k_shot),
            query_x=images[:, k_shot:].reshape(-1, *stack.shape[2:]),
            query_y=np.repeat(labels, n_query),
            classes=[names[index] for index in picked],
        )
        count += 1
