"""Omniglot: fetch Brenden Lake's zips, convert them once per alphabet, load classes and episodes.

Sets
----
``background`` (30 alphabets, 964 characters), ``evaluation`` (20 alphabets, 659
characters), ``small1`` and ``small2`` (5 alphabets each, subsets of ``background``).
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
``Latin``, and both are part of ``background``) are never merged: when the selected
sets share an alphabet, each of its classes is qualified by its set,
``"small1/Latin,3"`` and ``"small2/Latin,3"``, and the bare ``"Latin,3"`` is refused as
ambiguous. Alphabets found in one selected set keep the bare form (the qualified form
is accepted too and means the same class).
"""
from __future__ import annotations

import dataclasses
import multiprocessing
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from glyphforge.cache import CacheStore, Entry, Writer
from glyphforge.datasets._prepare import (
    PathLike,
    check_method,
    check_shape,
    check_shapes,
    resized,
    unknown,
    upstream_file,
)
from glyphforge.pipelines.archive import iter_members, list_members
from glyphforge.pipelines.decode import decode_image
from glyphforge.pipelines.download import Resource

KIND = "omniglot"
NATIVE_SHAPE = (105, 105)
N_DRAWERS = 20
DEFAULT_SETS = ("background", "evaluation")
DEFAULT_METHOD = "area"
BLANK = " "
#: Sets with at least this many images are decoded in worker processes by default.
PARALLEL_MIN_IMAGES = 10_000
#: Threads that read alphabet files during a load (gzip and copies release the GIL).
_LOAD_THREADS = max(1, min(4, os.cpu_count() or 1))

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

_CLASS = re.compile(r"^(?:(?P<set>[^/,]+)/)?(?P<alphabet>[^/,]+),(?P<number>\d+)$")


class OmniglotFormatError(ValueError):
    """A zip does not have Omniglot's layout; the message names the archive and the member."""


# -- argument checks -----------------------------------------------------------------
def _check_sets(sets: str | Iterable[str]) -> tuple[str, ...]:
    names = (sets,) if isinstance(sets, str) else tuple(dict.fromkeys(sets))
    if not names:
        raise ValueError(f"sets is empty: give at least one of {', '.join(SETS)}")
    bad = [name for name in names if name not in RESOURCES]
    if bad:
        raise unknown("Omniglot sets", bad, SETS, hint=" (the default is ('background', 'evaluation'))")
    return names


def _check_indices(indices: Iterable[int] | None) -> np.ndarray:
    if indices is None:
        return np.arange(N_DRAWERS)
    values = list(indices)
    if any(isinstance(value, bool) or not isinstance(value, (int, np.integer)) for value in values):
        raise ValueError(f"indices {values!r} must be drawer numbers: integers from 0 to {N_DRAWERS - 1}")
    outside = sorted({int(value) for value in values if not 0 <= value < N_DRAWERS})
    if outside:
        raise ValueError(
            f"drawer indices {outside} are outside 0-{N_DRAWERS - 1}: every Omniglot character has "
            f"{N_DRAWERS} drawings, indexed 0 to {N_DRAWERS - 1}"
        )
    if not values:
        raise ValueError(f"indices is empty: give drawer numbers from 0 to {N_DRAWERS - 1}, or None for all")
    return np.array(values, dtype=np.intp)


# -- reading an archive ----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Alphabet:
    """The members of one alphabet: ``members[c][d]`` is character ``c``'s drawer ``d``."""

    name: str
    characters: list[str]
    ids: list[str]
    members: list[list[str]]

    @property
    def file(self) -> str:
        return f"{self.name}.pklz"


def _layout(zip_path: Path, folder: str) -> list[_Alphabet]:
    """Group the PNG members of ``zip_path`` by alphabet and character, checking Omniglot's layout."""
    pattern = re.compile(rf"^{re.escape(folder)}/([^/.][^/]*)/(character(\d+))/(\d+)_(\d+)\.png$")
    found: dict[str, dict[int, dict[int, tuple[str, str]]]] = {}
    for member in list_members(zip_path):
        if not member.startswith(f"{folder}/"):
            continue
        match = pattern.match(member)
        if match is None:
            if member.endswith(".png"):
                raise OmniglotFormatError(
                    f"{zip_path}: member {member!r} is not '{folder}/<alphabet>/characterNN/<id>_<drawer>.png'; "
                    "the archive is not an Omniglot image set"
                )
            continue
        alphabet, _, number, character_id, drawer = match.groups()
        drawers = found.setdefault(alphabet, {}).setdefault(int(number), {})
        drawers[int(drawer)] = (character_id, member)
    if not found:
        raise OmniglotFormatError(
            f"{zip_path} holds no images under {folder}/: it is not the Omniglot zip it should be "
            "(delete it and download it again)"
        )
    return [_alphabet(zip_path, name, found[name]) for name in sorted(found)]


def _alphabet(zip_path: Path, name: str, characters: dict[int, dict[int, tuple[str, str]]]) -> _Alphabet:
    numbers = sorted(characters)
    if numbers != list(range(1, len(numbers) + 1)):
        raise OmniglotFormatError(
            f"{zip_path}: alphabet {name} has characters {numbers}, expected character01 to character{len(numbers):02d}"
        )
    ids, members, names = [], [], []
    for number in numbers:
        drawers = characters[number]
        character_ids = {character_id for character_id, _ in drawers.values()}
        if sorted(drawers) != list(range(1, N_DRAWERS + 1)) or len(character_ids) != 1:
            raise OmniglotFormatError(
                f"{zip_path}: {name}/character{number:02d} has drawers {sorted(drawers)} and ids "
                f"{sorted(character_ids)}; expected drawers 1-{N_DRAWERS} of one character id"
            )
        ids.append(character_ids.pop())
        members.append([drawers[drawer][1] for drawer in range(1, N_DRAWERS + 1)])
        names.append(f"character{number:02d}")
    return _Alphabet(name, names, ids, members)


def _convert_alphabet(writer: Writer, zip_path: Path, alphabet: _Alphabet) -> int:
    """Decode one alphabet's PNGs to white-on-black and write its array; return the image count.

    Runs in worker processes for the large sets, so it takes and returns only picklable values.
    """
    flat = [member for character in alphabet.members for member in character]
    images = np.empty((len(flat), *NATIVE_SHAPE), np.uint8)
    for index, (member, data) in enumerate(iter_members(zip_path, flat)):
        image = decode_image(data, channels=1, name=f"{member} in {zip_path}")
        if image.shape != NATIVE_SHAPE:
            raise OmniglotFormatError(
                f"{zip_path}: {member} is {image.shape[1]}x{image.shape[0]} pixels, Omniglot images are "
                f"{NATIVE_SHAPE[1]}x{NATIVE_SHAPE[0]}; the archive is not Omniglot's"
            )
        np.subtract(255, image, out=images[index])  # black strokes on white -> white on black
    writer.write(alphabet.file, images.reshape(len(alphabet.members), N_DRAWERS, *NATIVE_SHAPE))
    return len(flat)


# -- prepare ------------------------------------------------------------------------------
def _params(set_name: str, shape: tuple[int, int], method: str) -> dict[str, Any]:
    params: dict[str, Any] = {"set": set_name, "shape": list(shape), "source": RESOURCES[set_name].hash}
    if shape != NATIVE_SHAPE:
        params["resize"] = method
    return params


def _worker_count(workers: int | None, n_images: int, n_alphabets: int) -> int:
    if workers is None:
        workers = (os.cpu_count() or 1) if n_images >= PARALLEL_MIN_IMAGES else 1
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers {workers!r} is invalid: give a positive number of processes, or None")
    return min(workers, n_alphabets)


def _write_native(
    writer: Writer, set_name: str, zip_path: Path, workers: int | None, verified: bool, progress: bool
) -> None:
    """Convert every alphabet of ``zip_path`` into ``writer`` (in worker processes when asked or large)."""
    alphabets = _layout(zip_path, Path(RESOURCES[set_name].filename).stem)
    n_images = sum(len(alphabet.members) for alphabet in alphabets) * N_DRAWERS
    n_workers = _worker_count(workers, n_images, len(alphabets))
    label = f"Omniglot {set_name}: decoding {zip_path.name}"
    with tqdm(total=n_images, desc=label, unit="img", disable=not progress) as bar:
        if n_workers == 1:
            for alphabet in alphabets:
                bar.update(_convert_alphabet(writer, zip_path, alphabet))
        else:
            context = multiprocessing.get_context("spawn")  # no fork of a process running numba/dask threads
            with ProcessPoolExecutor(n_workers, mp_context=context) as pool:
                jobs = [pool.submit(_convert_alphabet, writer, zip_path, alphabet) for alphabet in alphabets]
                for job in jobs:
                    bar.update(job.result())
    writer.meta.update(
        set=set_name,
        shape=list(NATIVE_SHAPE),
        n_characters=sum(len(alphabet.characters) for alphabet in alphabets),
        n_images=n_images,
        verified_archive=verified,
        alphabets=[
            {"name": alphabet.name, "file": alphabet.file, "characters": alphabet.characters, "ids": alphabet.ids}
            for alphabet in alphabets
        ],
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
            zip_path = upstream_file(
                RESOURCES[name], data_dir=data_dir, mirrors=mirrors, verify=verify, progress=progress,
                given=archives.get(name),
            )
            base = store.get_or_create(
                KIND, _params(name, NATIVE_SHAPE, method),
                lambda writer: _write_native(writer, name, zip_path, workers, verify, progress),
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
    if missing and not download:
        absent = [name for name in missing if store.get(KIND, _params(name, NATIVE_SHAPE, method)) is None]
        if absent:
            raise FileNotFoundError(
                f"Omniglot sets {absent} are not prepared in {store.root}: run "
                f"prepare_omniglot(sets={absent!r}) or `prepare-data omniglot --omniglot-sets {' '.join(absent)}`, "
                "or pass download=True"
            )
    if missing:
        prepared = prepare_omniglot(
            sets=missing, shapes=[shape], method=method, data_dir=data_dir, mirrors=mirrors, progress=False
        )
        entries.update(zip(missing, prepared[1::2] if shape != NATIVE_SHAPE else prepared))
    return {name: entry for name, entry in entries.items() if entry is not None}


@dataclasses.dataclass(frozen=True)
class _Class:
    """One character of one set: ``name`` is its class name among the selected sets."""

    name: str
    set: str
    alphabet: str
    file: str
    index: int  # 0-based character index in the alphabet's array


class _Catalog:
    """The alphabets of the selected sets, and the class naming rule (see the module docstring)."""

    def __init__(self, entries: Mapping[str, Entry]) -> None:
        self.entries = dict(entries)
        self.records = {
            name: {record["name"]: record for record in entry.meta["alphabets"]} for name, entry in entries.items()
        }
        homes: dict[str, list[str]] = {}
        for set_name, alphabets in self.records.items():
            for alphabet in alphabets:
                homes.setdefault(alphabet, []).append(set_name)
        self.homes = homes
        self.shape: tuple[int, int] = tuple(next(iter(entries.values())).meta["shape"])

    def class_name(self, set_name: str, alphabet: str, number: int) -> str:
        prefix = f"{set_name}/" if len(self.homes[alphabet]) > 1 else ""
        return f"{prefix}{alphabet},{number}"

    def all_classes(self) -> list[_Class]:
        return [
            self._make(set_name, record, index)
            for set_name, alphabets in self.records.items()
            for record in alphabets.values()
            for index in range(len(record["characters"]))
        ]

    def _make(self, set_name: str, record: dict[str, Any], index: int) -> _Class:
        name = self.class_name(set_name, record["name"], index + 1)
        return _Class(name, set_name, record["name"], record["file"], index)

    def resolve(self, spec: Any) -> _Class:
        """Return the class ``spec`` names (``"Latin,3"`` or ``"small1/Latin,3"``), or raise a ValueError."""
        match = _CLASS.match(spec.strip()) if isinstance(spec, str) else None
        if match is None:
            raise ValueError(
                f"class {spec!r} is not understood: write '<alphabet>,<character number>' such as 'Latin,3' "
                "(or '<set>/<alphabet>,<number>' such as 'small1/Latin,3'); see omniglot_classes()"
            )
        set_name, alphabet, number = match["set"], match["alphabet"], int(match["number"])
        homes = self.homes.get(alphabet)
        if homes is None:
            hint = f" in sets {', '.join(self.records)} (class {spec!r})"
            raise unknown("Omniglot alphabet", [alphabet], self.homes, hint=hint)
        if set_name is None:
            if len(homes) > 1:
                options = " or ".join(repr(f"{home}/{alphabet},{number}") for home in homes)
                raise ValueError(
                    f"class {spec!r} is ambiguous: alphabet {alphabet} is in sets {', '.join(homes)}, which "
                    f"are never merged; write {options}"
                )
            set_name = homes[0]
        elif set_name not in homes:
            raise ValueError(
                f"class {spec!r} names set {set_name!r}, but alphabet {alphabet} is in the selected sets "
                f"{', '.join(homes)} only; pass sets=... including {set_name!r} or change the prefix"
            )
        record = self.records[set_name][alphabet]
        count = len(record["characters"])
        if not 1 <= number <= count:
            raise ValueError(
                f"class {spec!r}: {alphabet} in set {set_name} has characters 1 to {count}; "
                f"character {number} does not exist"
            )
        return self._make(set_name, record, number - 1)

    def select(self, classes: Iterable[str] | None) -> list[_Class]:
        """Resolve ``classes`` (None: all), drop repeats and sort by class name."""
        if classes is None:
            chosen = self.all_classes()
        else:
            specs = [classes] if isinstance(classes, str) else list(classes)
            if not specs:
                raise ValueError("classes is empty: give at least one class such as 'Latin,3', or None for all")
            chosen = [self.resolve(spec) for spec in specs]
        return sorted({item.name: item for item in chosen}.values(), key=lambda item: item.name)

    def fill(self, chosen: Sequence[_Class], indices: np.ndarray, out: np.ndarray, where: np.ndarray) -> None:
        """Copy drawer ``indices[j]`` of class ``chosen[i]`` to ``out[where[i, j]]``, reading each alphabet once."""
        by_file: dict[tuple[str, str], list[int]] = {}
        for position, item in enumerate(chosen):
            by_file.setdefault((item.set, item.file), []).append(position)

        def copy(key: tuple[str, str]) -> None:
            positions = by_file[key]
            images = self.entries[key[0]].load(key[1])
            rows = np.array([chosen[position].index for position in positions])
            out[where[positions].ravel()] = images[rows[:, None], indices[None, :]].reshape(-1, *out.shape[1:])

        with ThreadPoolExecutor(_LOAD_THREADS) as pool:
            list(pool.map(copy, by_file))

    def stack(self, chosen: Sequence[_Class], indices: np.ndarray) -> np.ndarray:
        """Return uint8 ``(len(chosen), len(indices), H, W)``: each class's drawers ``indices``."""
        out = np.empty((len(chosen) * len(indices), *self.shape), np.uint8)
        self.fill(chosen, indices, out, np.arange(len(out)).reshape(len(chosen), len(indices)))
        return out.reshape(len(chosen), len(indices), *self.shape)


def _catalog(
    sets: str | Iterable[str],
    shape: tuple[int, int] | None,
    method: str,
    data_dir: PathLike | None,
    download: bool,
    mirrors: Sequence[str] | str | None,
) -> _Catalog:
    names = _check_sets(sets)
    shape = NATIVE_SHAPE if shape is None else check_shape(shape)
    check_method(method)
    return _Catalog(_entries(names, shape, method, data_dir, download, mirrors))


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
    drawers = _check_indices(indices)
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
    drawers = _check_indices(indices)
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
