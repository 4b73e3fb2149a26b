"""Omniglot in the cache: the upstream zips, the entries' params, `prepare_omniglot`, and opening prepared sets.

The entry format is described in :mod:`glyphforge.datasets.omniglot.dataset`; the conversion
of one zip is :mod:`glyphforge.datasets.omniglot.archive`.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from glyphforge._checks import PathLike, check_shape
from glyphforge.cache import Entry, Writer
from glyphforge.context import DataContext
from glyphforge.datasets import own_copies as _own_copy
from glyphforge.datasets.omniglot.archive import N_DRAWERS, NATIVE_SHAPE, convert_set
from glyphforge.datasets.omniglot.catalog import Catalog
from glyphforge.datasets.prepare_steps import (
    check_method,
    check_shapes,
    given_archives,
    resized,
    unknown,
    upstream_file,
)
from glyphforge.pipelines.resource import Resource

KIND = "omniglot"
DEFAULT_SETS = ("background", "evaluation")
DEFAULT_METHOD = "area"

_BASE_URL = "https://raw.githubusercontent.com/brendenlake/omniglot/master/python/"


def _resource(filename: str, hash_: str, size: int | None = None) -> Resource:
    return Resource("omniglot", filename, _BASE_URL + filename, hash_, size)


#: The upstream zip of each set (md5 of the full sets as torchvision pins them, their sizes as tensorflow-datasets).
RESOURCES: dict[str, Resource] = {
    "background": _resource("images_background.zip", "md5:68d2efa1b9178cc56df9314c21c6e718", 9_464_212),
    "evaluation": _resource("images_evaluation.zip", "md5:6b91aef0f799c5bb55b94e3f2daec811", 6_462_886),
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


def check_sets(sets: str | Iterable[str]) -> tuple[str, ...]:
    """Return the set names of ``sets`` (one name or several) without repeats, or raise a ValueError."""
    names = (sets,) if isinstance(sets, str) else tuple(dict.fromkeys(sets))
    if not names:
        raise ValueError(f"sets is empty: give at least one of {', '.join(SETS)}")
    bad = [name for name in names if name not in RESOURCES]
    if bad:
        raise unknown("Omniglot sets", bad, SETS, hint=" (the default is ('background', 'evaluation'))")
    return names


def needed(*, sets: str | Iterable[str] = DEFAULT_SETS, **_others: Any) -> list[Resource]:
    """The zips `prepare_omniglot` fetches for ``sets`` (the record's ``needs``; other options are ignored)."""
    return [RESOURCES[name] for name in check_sets(sets)]


def params(set_name: str, shape: tuple[int, int], method: str, source: str | None = None) -> dict[str, Any]:
    """The cache params of a set's entry at ``shape`` (``method`` only counts for resized shapes) made from the zip
    of hash ``source`` (None: upstream's; an own copy's ``sha256:<hex>``, see :mod:`glyphforge.datasets.own_copies`)."""
    values: dict[str, Any] = {"set": set_name, "shape": list(shape), "source": source or RESOURCES[set_name].hash}
    if shape != NATIVE_SHAPE:
        values["resize"] = method
    return values


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
    from tqdm import tqdm  # where a bar is made: importing it costs a cold start ~20 ms
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
    verify: bool | None = None,
    progress: bool | None = None,
    workers: int | None = None,
    offline: bool | None = None,
    context: DataContext | None = None,
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
        Local zips to convert instead of fetching them (used in place), by set name
        (``{"small1": path}``) or by upstream file name (``{"images_background_small1.zip": path}``).
    verify
        Check the hash of ``archives`` and of zips already in ``<data dir>/raw/omniglot/``
        (None: the context's, by default True); False converts such files as they are: a zip that
        is not upstream's makes entries keyed by its sha256, which loads serve (with a warning) while it
        is the one in use (see :mod:`glyphforge.datasets.own_copies`). Downloads are always verified and
        the layout is always checked.
    progress
        Show progress bars (None: the context's, by default True).
    workers
        Processes that decode a set's PNGs (one alphabet per task). None: one per CPU for
        sets of at least :data:`PARALLEL_MIN_IMAGES` images (the full sets), else decode
        in this process (``small1``, ``small2``).
    offline
        True: never use the network (zips placed in ``<data dir>/raw/omniglot/``, local
        mirrors and ``archives`` only); None: the context's (``$GLYPHFORGE_OFFLINE``).
    context
        A `~glyphforge.context.DataContext` giving every fetch setting at once; the
        keywords above, when given, override its fields.

    Returns
    -------
    list of Entry
        For each set in order: its 105x105 entry, then one entry per distinct other shape.

    Raises
    ------
    ValueError
        For an unknown set, a bad shape or method, or ``archives`` naming an unknown file
        or a set not in ``sets``.
    DownloadError, HashMismatchError
        When a zip cannot be fetched or is not the pinned file (nothing is cached); the
        message says where to place the zip by hand.
    OmniglotFormatError, ArchiveError
        When a zip is not laid out as Omniglot's or is corrupt (nothing is cached).
    """
    names = check_sets(sets)
    wanted = [shape for shape in check_shapes(shapes) if shape != NATIVE_SHAPE]
    check_method(method)
    given = given_archives(archives, RESOURCES, "Omniglot")
    stray = [name for name in given if name not in names]
    if stray:
        raise ValueError(f"archives names sets {stray} that are not in sets {list(names)}: add them to sets")
    context = DataContext.resolve(
        context, data_dir=data_dir, mirrors=mirrors, offline=offline, verify=verify, progress=progress
    )
    store, copy = context.store, _own_copy.chosen(KIND, {name: RESOURCES[name] for name in names}, context, given)
    entries = []
    for name in names:
        source = copy.own.get(name)
        base = store.get(KIND, params(name, NATIVE_SHAPE, method, source))
        if base is None:
            files = {name: upstream_file(RESOURCES[name], context, copy.paths().get(name, given.get(name)))}
            [(zip_path, verified)] = copy.checked(files).values()
            base = store.get_or_create(KIND, params(name, NATIVE_SHAPE, method, source), functools.partial(
                _write_native, set_name=name, zip_path=zip_path, workers=workers, verified=verified,
                progress=context.progress,
            ))
        entries.append(base)
        for shape in wanted:
            entries.append(store.get_or_create(KIND, params(name, shape, method, source), functools.partial(
                _write_resized, base=base, shape=shape, method=method, progress=context.progress,
            )))
    _own_copy.remember(KIND, context, copy, covered=names)
    return entries


def in_use(sets: Sequence[str], context: DataContext) -> _own_copy.OwnCopy:
    """The zips of ``sets`` that loads serve (:func:`glyphforge.datasets.own_copies.in_use`): the ``source`` of a
    set's entries is ``in_use(...).own.get(set)`` (None: upstream's)."""
    return _own_copy.in_use(KIND, {name: RESOURCES[name] for name in sets}, context)


def record_of(sets: Iterable[str], copy: _own_copy.OwnCopy, context: DataContext) -> Path | None:
    """The own-copy record naming the zips of ``sets`` in ``copy`` (for :func:`not_prepared`), or None: upstream's."""
    return context.raw_dir(KIND) / _own_copy.RECORD if any(name in copy.own for name in sets) else None


def announced(entries: Mapping[str, Entry], context: DataContext) -> dict[str, Entry]:
    """``entries`` (by set), each an own copy logged as such once per process (:func:`_own_copy.announce`)."""
    raw_dir = context.raw_dir(KIND)
    return {name: _own_copy.announce(entry, f"Omniglot {name}", raw_dir) for name, entry in entries.items()}


def not_prepared(sets: Sequence[str], root: str, hint: str, record: Path | None = None) -> FileNotFoundError:
    """The error for Omniglot ``sets`` missing from the cache at ``root`` (`CacheStore.where`), naming the command
    that prepares them (from the own zips ``record`` names, unchecked, when given)."""
    own = record is not None
    copy = f" as your own copy (the zips {record} names)" if own else ""
    return FileNotFoundError(
        f"Omniglot sets {list(sets)} are not prepared in {root}{copy}: run prepare_omniglot(sets={list(sets)!r}"
        f"{', verify=False' * own}) or `prepare-data omniglot --omniglot-sets {' '.join(sets)}{' --no-verify' * own}`"
        f"{hint}"
    )


def set_entries(sets: tuple[str, ...], shape: tuple[int, int], method: str, context: DataContext) -> dict[str, Entry]:
    """Return the entry of each set at ``shape``, preparing what is missing.

    A missing resized variant is always made from the cached 105x105 entry; a set
    whose 105x105 entry is missing is fetched and converted only when ``context.download``.
    """
    store, copy = context.store, in_use(sets, context)
    entries = {name: store.get(KIND, params(name, shape, method, copy.own.get(name))) for name in sets}
    missing = [name for name, entry in entries.items() if entry is None]
    absent = [name for name in missing
              if store.get(KIND, params(name, NATIVE_SHAPE, method, copy.own.get(name))) is None]
    if absent and not context.download:
        raise not_prepared(absent, store.where, ", or pass download=True", record_of(absent, copy, context))
    for name in missing:  # an own zip is prepared as it is (unchecked), upstream's within the context
        own = {name: copy.paths()[name]} if name in copy.own else {}
        entries[name] = prepare_omniglot(sets=[name], shapes=[shape], method=method, archives=own, context=(
            dataclasses.replace(context, verify=False) if own else context))[-1]
    return announced(entries, context)  # type: ignore[arg-type]  # every set has its entry now


def open_catalog(
    sets: str | Iterable[str], shape: tuple[int, int] | None, method: str, context: DataContext
) -> Catalog:
    """Check the arguments and return the catalog of ``sets`` at ``shape`` (None: 105x105)."""
    names = check_sets(sets)
    size = NATIVE_SHAPE if shape is None else check_shape(shape)
    check_method(method)
    return Catalog(set_entries(names, size, method, context))
