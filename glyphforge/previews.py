"""What ``glyphforge preview TARGET`` draws: a prepared dataset, a cache entry, or a built dataset (a built video
dataset: a row of frames per video, or an animation, see `glyphforge.visualize.preview`).

Previews only read the cache (they never download): a dataset that is not prepared
gets an error saying which ``prepare-data`` command makes it. A registered dataset
draws its examples with its registry record's ``preview`` part
(see `glyphforge.datasets.registry`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from glyphforge._checks import PathLike
from glyphforge.builds.reading.dataset import BuiltDataset
from glyphforge.cache import CacheStore, Entry
from glyphforge.cache.lookup import of_kind
from glyphforge.context import DataContext
from glyphforge.datasets import registry
from glyphforge.datasets.registry import dataset_part
from glyphforge.visualize import preview


def preview_target(
    target: str, *, out: PathLike, n: int = 16, data_dir: PathLike | None = None, seed: int = 0,
    context: DataContext | None = None, animate: bool = False,
) -> Path:
    """Write a PNG grid of ``n`` examples of ``target``; return its path.

    Parameters
    ----------
    target
        A registered dataset such as ``"emnist"``, ``"omniglot"`` or ``"backgrounds"``
        (the first prepared entry of that dataset, native shape preferred); the kind
        of a built dataset such as ``"scenes"`` (its only entry; ``"scenes:newest"``: its
        newest, see `glyphforge.cache.lookup`); or a cache key, or a unique prefix of one
        (at least 6 characters), of any entry.
    out
        The PNG file to write.
    n
        How many examples.
    data_dir
        Data dir whose cache is read (None: ``context``'s).
    seed
        Which examples are picked (the same seed picks the same ones).
    context
        The `~glyphforge.context.DataContext` whose cache is read (None: the environment's).
    animate
        For a built video dataset: an animation of its frames (a GIF when ``out`` ends in ``.gif``,
        else an animated PNG) instead of a row of frames per video.

    Raises
    ------
    LookupError
        Nothing in the cache matches ``target``; the message says how to make it. An
        `AmbiguousKindError` when a built kind has several entries (listed).
    ValueError
        ``animate`` for a target that holds no videos.
    """
    context = DataContext.resolve(context, data_dir=data_dir, download=False)
    return preview_entry(find_target(context.store, target), context, out=out, n=n, seed=seed, animate=animate)


def preview_entry(entry: Entry, context: DataContext, *, out: PathLike, n: int = 16, seed: int = 0,
                  animate: bool = False) -> Path:
    """Write a PNG grid of ``n`` examples of the cache ``entry`` of ``context`` (see `preview_target`); return it."""
    if animate:
        check_animation(entry)
    if entry.kind in registry.registered():
        images, labels = dataset_part(entry.kind, "preview", context)(entry, n, np.random.default_rng(seed))
        return preview(images, n, out, labels=labels)
    return preview_built(BuiltDataset(entry), out=out, n=n, seed=seed, animate=animate)


def check_animation(entry: Entry) -> None:
    """Raise a ValueError unless ``entry`` is a built dataset of videos (images ``(T, H, W, 3)`` an example)."""
    layout: Any = entry.meta.get("layout")
    images = entry.meta.get("images")
    built = entry.kind not in registry.registered() and isinstance(layout, dict) and images in layout
    shape = list(layout[images]["shape"]) if built else []
    if not (len(shape) == 4 and shape[-1] == 3):
        raise ValueError(f"cannot animate {entry.kind} {entry.key[:12]}: it holds still images, and an animation "
                         "plays the frames of videos. Leave out animate (--animate) for a grid of its examples")


def preview_built(dataset: BuiltDataset, *, out: PathLike, n: int = 16, seed: int = 0, animate: bool = False
                  ) -> Path:
    """Write a PNG grid of ``n`` examples of the built ``dataset`` (picked by ``seed``; see `preview_target` for
    ``animate``); return its path."""
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(len(dataset), size=min(n, len(dataset)), replace=False))
    rows = dataset.take(picked)
    rows["images"] = rows.pop(dataset.image_name)  # the dataset's images, whatever the spec named them
    return preview(rows, n, out, class_names=dataset.classes, animate=animate)


def find_target(store: CacheStore, target: str) -> Entry:
    """The entry of ``store`` that ``target`` names (see `preview_target`); a LookupError listing what there is."""
    entries = store.ls()
    datasets = registry.registered()
    if target in datasets:
        prepared = [entry for entry in entries if entry.kind == target]
        if prepared:  # native entries first, then in creation order
            return min(prepared, key=lambda entry: "resize" in entry.params)
        store.refuse_unreadable(target)
        raise LookupError(f"{target} is not prepared in {store.root}: run `prepare-data {target}` first")
    chosen = of_kind(target, entries, store.root)
    if chosen is not None:
        return chosen
    try:
        return store.find(target)
    except KeyError as error:
        kinds = sorted({entry.kind for entry in entries} - set(datasets))
        raise LookupError(
            f"nothing to preview for {target!r}: {error.args[0]}. Give a dataset ({', '.join(datasets)}), the kind "
            f"of a built dataset ({', '.join(kinds) if kinds else 'none built yet'}) or a cache key"
        ) from None
