"""Background textures and shapes from github.com/e2crawfo/backgrounds, fetched file by file.

The 14 files of the pinned commit are registered in :data:`RESOURCES`, each verified
by sha256 (``space.jpg``, too large to carry in tests, by its git blob id). The 13
raster images are the backgrounds, named without extension (``"water"``,
``"red_x"``); ``red_x.svg`` is only the source of ``red_x.png`` and is never fetched
or loaded. The ``.jpg`` textures are the "hard" backgrounds.

Cache entries
-------------
One entry of kind ``"backgrounds"`` per ``(shape, method)``: the native entry
(``shape`` None) holds each image as decoded, uint8 RGB ``(H, W, 3)`` (transparency
composited on black); a resized entry holds the resize of each native image. Each
image is its own ``<name>.pklz``, and ``entry.meta["backgrounds"]`` maps each name to
``{"file", "source", "hash", "verified", "shape"}`` (``verified``: whether the
source file's hash was checked) and ``meta["verified"]`` whether all were. Users may
fetch only some backgrounds: an entry then holds those, and preparing more names
replaces it atomically by an entry holding the union (existing files are copied, never
decoded again). Images made from own files (not upstream's, used with ``verify=False``)
are in entries of their own: the params add ``"source": {name: "sha256:<hex>"}`` of
those files (see :mod:`glyphforge.datasets.own_copies`), so they never stand in for
upstream's images; upstream's entries keep the params ``{"commit"}`` (and the shape's).
"""
from __future__ import annotations

import dataclasses
import functools
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from glyphforge._checks import PathLike, check_shape
from glyphforge.cache import CacheStore, Entry
from glyphforge.context import DataContext
from glyphforge.datasets import own_copies as _own_copy
from glyphforge.datasets.class_names import ClassNames
from glyphforge.datasets.prepare_steps import (
    check_method,
    check_shapes,
    given_archives,
    resized,
    unknown,
    upstream_file,
)
from glyphforge.pipelines.decode import decode_image
from glyphforge.pipelines.resource import Resource

KIND = "backgrounds"
COMMIT = "23d3ad66a5223c42439b346d7f74c021d4f28439"
DEFAULT_METHOD = "bilinear"

_BASE_URL = f"https://raw.githubusercontent.com/e2crawfo/backgrounds/{COMMIT}/"
_FILES = (  # (file name, size in bytes or None, hash)
    ("blue_circle.png", 1760, "sha256:1387efa5bf1bfa18fee2a7666254a2d8a802b592438ffb38e264df326b5b2cc0"),
    ("blue_x.png", 1062, "sha256:b00979e0d4d13b23b425f2a1f97431262814ce78fa5742858a3f9746d2ffd360"),
    ("circles.jpg", 77514, "sha256:e09cbe0cad0fd6425fb10e7f617c5dd01a7d017ebf4458f239e87707ad05b6bc"),
    ("curves.jpg", 713776, "sha256:2c5d8df24c01d9cf6689c860a60f0536ed5010acda4d1dd29782d85c2c72e156"),
    ("floor.jpg", 473810, "sha256:dc791a352b66d943be1a6b1e24322ae728934d7cb19c8faddfa7c7c21b75b2aa"),
    ("gravel.jpg", 488337, "sha256:8e895acde12e02aa2fcfab1b9d664508ddd118f5989af0d6d3d7e9c1ee08b71e"),
    ("green_circle.png", 2317, "sha256:6e479989d0e2fa4a3e693ac79d61ca7c9d6dfab8ce896a923657f86785820236"),
    ("green_x.png", 2056, "sha256:1a256673523f7725282d2566bca29b8ba64ae25a0e9b07b3f7c137c031708d54"),
    ("ice.jpg", 412767, "sha256:04c097a9464ba938b9e7fa41da5e2c92058a145dcb0198e1c534d4e94ed909e1"),
    ("red_circle.png", 1756, "sha256:eef3ae386a009603494ee4d503389c6e7bb3ee7233c46b8d8cc908843ae47ad7"),
    ("red_x.png", 1060, "sha256:8f3430a0417d042f9aef6437056c7a3cdd6a78d2b5a25a7c242f423e02dce99d"),
    ("red_x.svg", 2671, "sha256:49cbea0aaab9871d444056123e367909cc70b1cb336806e4e794618456cc2d96"),
    ("water.jpg", 25120, "sha256:0a137aafc8129c33cba29d05e1ba006b86d3942b70841092e7bf66276151cd73"),
    ("space.jpg", None, "git-blob-sha1:c8ed07e97d4e345c1b77350b510ca19f895bd5e7"),
)
#: Every file of the pinned commit, by file name.
RESOURCES: dict[str, Resource] = {
    filename: Resource("backgrounds", filename, _BASE_URL + filename, hash_, size) for filename, size, hash_ in _FILES
}
#: The backgrounds (raster images), by name without extension.
IMAGES: dict[str, Resource] = {
    Path(filename).stem: resource
    for filename, resource in sorted(RESOURCES.items())
    if Path(filename).suffix in (".png", ".jpg")
}


def background_names() -> list[str]:
    """Return the sorted names of all 13 backgrounds (``"blue_circle"`` ... ``"water"``)."""
    return sorted(IMAGES)


def hard_background_names() -> list[str]:
    """Return the sorted names of the 7 textures (the ``.jpg`` files): the "hard" backgrounds."""
    return sorted(name for name, resource in IMAGES.items() if resource.filename.endswith(".jpg"))


def check_names(names: str | Iterable[str]) -> list[str]:
    """Resolve ``"all"``, ``"hard"`` (or ``["all"]``, ``["hard"]``), a space-separated string or a list, in order."""
    items = names.split() if isinstance(names, str) else list(names)
    if len(items) == 1 and items[0] in ("all", "hard"):
        return background_names() if items[0] == "all" else hard_background_names()
    if not items:
        raise ValueError("names is empty: give 'all', 'hard' or background names such as ['water', 'ice']")
    resolved, bad = [], []
    for item in items:
        stem = Path(item).stem if isinstance(item, str) and item in RESOURCES else item
        if isinstance(item, str) and stem in IMAGES and item in (stem, IMAGES[stem].filename):
            resolved.append(stem)
        else:
            bad.append(item)
    if bad:
        hint = " (or 'all', 'hard'); red_x.svg is not loaded, red_x is its PNG rendering"
        raise unknown("backgrounds", bad, background_names(), hint=hint)
    return resolved


def needed(*, names: str | Iterable[str] = "all", **_others: Any) -> list[Resource]:
    """The files `prepare_backgrounds` fetches for ``names`` (the record's ``needs``; other options are ignored)."""
    return list(_resources(check_names(names)).values())


def _params(shape: tuple[int, int] | None, method: str, own: Mapping[str, str]) -> dict[str, Any]:
    """The params of the entry at ``shape`` made from the own files of hashes ``own`` (by name) and upstream's."""
    params: dict[str, Any] = {"commit": COMMIT}
    if shape is not None:
        params.update(shape=list(shape), resize=method)
    if own:
        params["source"] = dict(sorted(own.items()))
    return params


def _resources(names: Iterable[str]) -> dict[str, Resource]:
    """The upstream files of the backgrounds ``names``, by name (as `_own_copy` takes them)."""
    return {name: IMAGES[name] for name in names}


def _holding(store: CacheStore, params: dict[str, Any], names: Iterable[str]) -> Entry | None:
    """Return the entry of ``params`` if it holds every one of ``names``."""
    entry = store.get(KIND, params)
    return entry if entry is not None and set(names) <= set(entry.meta["backgrounds"]) else None


def _grow(
    store: CacheStore,
    params: dict[str, Any],
    names: Sequence[str],
    make: Callable[[str], tuple[np.ndarray, bool]],
) -> Entry:
    """Return the entry of ``params`` holding ``names``, replacing it by one with the missing images added if needed.

    The new entry is staged under the key's lock from the entry found there (its files
    copied) plus ``make(name)`` of each image it lacks: the image, and whether its
    source file had its hash checked. It is committed atomically.
    """
    entry = _holding(store, params, names)
    if entry is not None:
        return entry
    with store.create(KIND, params) as writer:
        current = store.get(KIND, params)  # re-read under the lock: another process may have grown it
        records: dict[str, dict[str, Any]] = {}
        if current is not None:
            records.update(current.meta["backgrounds"])
            for record in records.values():
                shutil.copyfile(current.file(record["file"]), writer.path / record["file"])
        for name in names:
            if name not in records:
                image, verified = make(name)
                record = {"file": f"{name}.pklz", "source": IMAGES[name].filename,
                          "hash": params.get("source", {}).get(name, IMAGES[name].hash), "verified": verified,
                          "shape": list(image.shape)}
                writer.write(record["file"], image)
                records[name] = record
        writer.meta.update(
            commit=COMMIT,
            shape=params.get("shape"),
            n_images=len(records),
            verified=all(record["verified"] for record in records.values()),
            backgrounds=dict(sorted(records.items())),
        )
    entry = store.get(KIND, params)
    assert entry is not None, "a committed entry must be readable"
    return entry


def prepare_backgrounds(
    *,
    names: str | Iterable[str] = "all",
    shapes: Iterable[tuple[int, int]] = (),
    method: str = DEFAULT_METHOD,
    data_dir: PathLike | None = None,
    mirrors: Sequence[str] | str | None = None,
    archives: Mapping[str, PathLike] | None = None,
    verify: bool | None = None,
    progress: bool | None = None,
    offline: bool | None = None,
    context: DataContext | None = None,
) -> list[Entry]:
    """Fetch, verify and decode backgrounds, and make resized variants.

    Idempotent: when the entries already hold ``names``, they are returned without
    touching the raw files or the network; only the backgrounds missing from the
    native entry are fetched.

    Parameters
    ----------
    names
        ``"all"``, ``"hard"``, or background names (a list, or one space-separated string);
        ``["all"]`` and ``["hard"]`` mean ``"all"`` and ``"hard"``.
    shapes
        ``(height, width)`` variants: each image resized to exactly that shape.
    method
        The resize method of the variants (see :func:`glyphforge.pipelines.resize.resize`).
    data_dir
        The data dir (see :mod:`glyphforge.config`).
    mirrors
        Mirror bases tried before the origin (see :func:`glyphforge.pipelines.download.fetch`).
    archives
        Local copies to decode instead of fetching them (used in place), by background
        name or file name: ``{"water": path}`` or ``{"water.jpg": path}``. Each must be
        one of ``names``.
    verify
        Check the hash of ``archives`` and of files already in ``<data dir>/raw/backgrounds/``
        (None: the context's, by default True); False decodes such files as they are: files that
        are not upstream's make entries of their own (module docstring), which loads serve (with a
        warning) while they are the ones in use. Downloads are always verified.
    progress
        Show download progress bars (None: the context's, by default True).
    offline
        True: never use the network (files placed in ``<data dir>/raw/backgrounds/``,
        local mirrors and ``archives`` only); None: the context's (``$GLYPHFORGE_OFFLINE``).
    context
        A `~glyphforge.context.DataContext` giving every fetch setting at once; the
        keywords above, when given, override its fields.

    Returns
    -------
    list of Entry
        The native entry, then one entry per distinct requested shape.

    Raises
    ------
    ValueError
        For unknown names, a bad shape or method, or ``archives`` naming an unknown file
        or a background not in ``names``.
    DownloadError, HashMismatchError
        When a file cannot be fetched or is not the pinned file (the entry is left as it
        was); the message says where to place the file by hand.
    """
    wanted = check_names(names)
    variants = check_shapes(shapes)
    check_method(method)
    given = given_archives(archives, IMAGES, "backgrounds")
    stray = [name for name in given if name not in wanted]
    if stray:
        raise ValueError(f"archives names backgrounds {stray} that are not in names {wanted}: add them to names")
    context = DataContext.resolve(
        context, data_dir=data_dir, mirrors=mirrors, offline=offline, verify=verify, progress=progress
    )
    store, copy = context.store, _own_copy.chosen(KIND, _resources(wanted), context, given)
    native = _holding(store, _params(None, method, copy.own), wanted)
    if native is None:
        current = store.get(KIND, _params(None, method, copy.own))
        held = current.meta["backgrounds"] if current is not None else {}
        files: dict[str, tuple[Path, bool]] = {}

        def fetch(name: str) -> tuple[Path, bool]:
            if name not in files:
                found = {name: upstream_file(IMAGES[name], context, copy.paths().get(name, given.get(name)))}
                files.update(copy.checked(found))
            return files[name]

        for name in wanted:  # every missing file is fetched before the entry is staged
            if name not in held:
                fetch(name)

        def decode(name: str) -> tuple[np.ndarray, bool]:
            path, checked = fetch(name)
            return decode_image(path, channels=3, name=str(path)), checked

        native = _grow(store, _params(None, method, copy.own), wanted, decode)
    entries = [native]
    for shape in variants:
        entries.append(_grow(store, _params(shape, method, copy.own), wanted, functools.partial(
            _resized_image, native=native, shape=shape, method=method,
        )))
    _own_copy.remember(KIND, context, copy, covered=wanted)
    return entries


def _resized_image(name: str, *, native: Entry, shape: tuple[int, int], method: str) -> tuple[np.ndarray, bool]:
    """The resize of background ``name`` of the native entry, and whether its source file was verified."""
    record = native.meta["backgrounds"][name]
    return resized(native.load(record["file"]), shape, method, batch=False), record["verified"]


def load_backgrounds(
    classes: str | Iterable[str] | None = None,
    *,
    shape: tuple[int, int] | None = None,
    method: str = DEFAULT_METHOD,
    data_dir: PathLike | None = None,
    download: bool | None = None,
    mirrors: Sequence[str] | str | None = None,
    offline: bool | None = None,
    context: DataContext | None = None,
) -> tuple[list[np.ndarray], np.ndarray, ClassNames]:
    """Load backgrounds as uint8 RGB arrays, with labels and class names like every loader.

    Parameters
    ----------
    classes
        None or ``"all"`` (:func:`background_names`), ``"hard"`` (:func:`hard_background_names`),
        or background names: a list, or one space-separated string (``"water ice"``);
        ``["all"]`` and ``["hard"]`` mean ``"all"`` and ``"hard"``. A name may carry its
        file's extension (``"water.jpg"``).
    shape
        ``(height, width)``: every image resized to it (with ``method``); None keeps
        each image's own size.
    method
        The resize method for ``shape``.
    data_dir, mirrors, offline
        As in :func:`prepare_backgrounds`.
    download
        Fetch and decode the backgrounds missing from the cache first (None: the
        context's, by default True). False reads only the cache (a resized variant is
        still made from cached native images).
    context
        A `~glyphforge.context.DataContext` giving every fetch setting at once; the
        keywords above, when given, override its fields.

    Returns
    -------
    x : list of numpy.ndarray
        One uint8 ``(H, W, 3)`` array per name, in the order of ``classes`` (the sizes
        differ unless ``shape`` is given, so this is a list, not one array).
    y : numpy.ndarray
        int64 ``(len(x),)``: ``classes[y[i]]`` is the name of ``x[i]``.
    classes : ClassNames
        The sorted distinct names loaded.

    Raises
    ------
    ValueError
        For unknown names (the message lists the known ones) or a bad shape.
    FileNotFoundError
        With ``download=False``, when some backgrounds were never prepared.
    """
    wanted = check_names("all" if classes is None else classes)
    size = None if shape is None else check_shape(shape)
    check_method(method)
    context = DataContext.resolve(context, data_dir=data_dir, download=download, mirrors=mirrors, offline=offline)
    store, copy = context.store, _own_copy.in_use(KIND, _resources(wanted), context)
    entry = _holding(store, _params(size, method, copy.own), wanted)
    if entry is None:
        native = _holding(store, _params(None, method, copy.own), wanted)
        if native is None and not context.download:
            have = store.get(KIND, _params(None, method, copy.own))
            missing = sorted(set(wanted) - set(have.meta["backgrounds"] if have is not None else ()))
            own = f" as your own copy (the files {context.raw_dir(KIND) / _own_copy.RECORD} names)" * bool(copy.own)
            raise FileNotFoundError(
                f"backgrounds {missing} are not prepared in {store.where}{own}: run prepare_backgrounds(names="
                f"{missing!r}{', verify=False' * bool(copy.own)}) or `prepare-data backgrounds"
                f"{' --no-verify' * bool(copy.own)}`, or pass download=True"
            )
        given, context = ({name: copy.paths()[name] for name in copy.own}, dataclasses.replace(context, verify=False)
                          ) if copy.own else ({}, context)  # own files are prepared as they are (unchecked)
        entry = prepare_backgrounds(names=wanted, shapes=[] if size is None else [size], method=method,
                                    archives=given, context=context)[-1]
    _own_copy.announce(entry, "backgrounds", context.raw_dir(KIND))
    found = ClassNames(sorted(set(wanted)))
    x = [entry.load(entry.meta["backgrounds"][name]["file"]) for name in wanted]
    return x, np.array([found.index(name) for name in wanted], np.int64), found


def preview_examples(
    entry: Entry, n: int, rng: np.random.Generator, context: DataContext | PathLike | None = None,
) -> tuple[list[np.ndarray], list[str]]:
    """Return the first ``n`` backgrounds of ``entry`` (in name order) and their names (registry ``preview``).

    Reads the entry only; ``rng`` and ``context`` are part of the contract
    and unused (a preview shows the backgrounds themselves, in a fixed order).
    """
    names = list(entry.meta["backgrounds"])[:n]
    return [entry.load(entry.meta["backgrounds"][name]["file"]) for name in names], names
