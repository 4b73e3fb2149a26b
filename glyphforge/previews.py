"""What ``glyphforge preview TARGET`` draws: a prepared dataset, a cache entry, or a built dataset.

Previews only read the cache (they never download): a dataset that is not prepared
gets an error saying which ``prepare-data`` command makes it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Union

import numpy as np

from glyphforge.build import BuiltDataset
from glyphforge.cache import CacheStore, Entry
from glyphforge.visualize import preview

PathLike = Union[str, "os.PathLike[str]"]
DATASET_KINDS = ("emnist", "omniglot", "backgrounds")


def preview_target(
    target: str, *, out: PathLike, n: int = 16, data_dir: PathLike | None = None, seed: int = 0
) -> Path:
    """Write a PNG grid of ``n`` examples of ``target``; return its path.

    Parameters
    ----------
    target
        ``"emnist"``, ``"omniglot"`` or ``"backgrounds"`` (the first prepared entry of
        that dataset, native shape preferred); the kind of a built dataset such as
        ``"scenes"`` (its newest entry); or a cache key, or a unique prefix of one
        (at least 6 characters), of any entry.
    out
        The PNG file to write.
    n
        How many examples.
    data_dir
        Data dir whose cache is read.
    seed
        Which examples are picked (the same seed picks the same ones).

    Raises
    ------
    LookupError
        Nothing in the cache matches ``target``; the message says how to make it.
    """
    entry = _find_entry(CacheStore.for_data_dir(data_dir), target)
    rng = np.random.default_rng(seed)
    if entry.kind == "emnist":
        return _preview_emnist(entry, out, n, rng, data_dir)
    if entry.kind == "omniglot":
        return _preview_omniglot(entry, out, n, rng, data_dir)
    if entry.kind == "backgrounds":
        names = list(entry.meta["backgrounds"])[:n]
        return preview([entry.load(entry.meta["backgrounds"][name]["file"]) for name in names], n, out, labels=names)
    return _preview_built(BuiltDataset(entry), out, n, rng)


def _find_entry(store: CacheStore, target: str) -> Entry:
    entries = store.ls()
    of_kind = [entry for entry in entries if entry.kind == target]
    if of_kind:
        if target in DATASET_KINDS:  # native entries first, then in creation order
            return min(of_kind, key=lambda entry: "resize" in entry.params)
        return of_kind[-1]  # `ls` sorts by creation time within a kind: the newest
    if target in DATASET_KINDS:
        raise LookupError(f"{target} is not prepared in {store.root}: run `prepare-data {target}` first")
    try:
        return store.find(target)
    except KeyError as error:
        kinds = sorted({entry.kind for entry in entries})
        raise LookupError(
            f"nothing to preview for {target!r}: {error.args[0]}. Give emnist, omniglot, backgrounds, the kind of a "
            f"built dataset ({', '.join(kinds) if kinds else 'none built yet'}) or a cache key"
        ) from None


def _preview_emnist(entry: Entry, out: PathLike, n: int, rng: np.random.Generator, data_dir: PathLike | None) -> Path:
    from glyphforge.datasets.emnist import load_emnist

    chars = [record["char"] for record in entry.meta["classes"]]
    chosen = rng.choice(chars, size=min(n, len(chars)), replace=False)
    x, y, classes = load_emnist(
        chosen.tolist(), split=entry.params["split"], shape=tuple(entry.params["shape"]), n_examples=n,
        seed=int(rng.integers(2**32)), data_dir=data_dir, download=False,
    )
    return preview(x, n, out, labels=y, class_names=classes)


def _preview_omniglot(
    entry: Entry, out: PathLike, n: int, rng: np.random.Generator, data_dir: PathLike | None
) -> Path:
    from glyphforge.datasets.omniglot import load_omniglot, omniglot_classes

    set_name = entry.params["set"]
    names = omniglot_classes(sets=(set_name,), data_dir=data_dir, download=False)
    chosen = rng.choice(names, size=min(n, len(names)), replace=False).tolist()
    x, y, class_map = load_omniglot(
        chosen, sets=(set_name,), shape=tuple(entry.params["shape"]), indices=[int(rng.integers(20))],
        seed=int(rng.integers(2**32)), method=entry.params.get("resize", "box"), data_dir=data_dir, download=False,
    )
    by_label = {label: name for name, label in class_map.items()}
    return preview(x, n, out, labels=[by_label[int(label)] for label in y])


def _preview_built(dataset: BuiltDataset, out: PathLike, n: int, rng: np.random.Generator) -> Path:
    picked = np.sort(rng.choice(len(dataset), size=min(n, len(dataset)), replace=False))
    return preview(dataset.take(picked), n, out)
