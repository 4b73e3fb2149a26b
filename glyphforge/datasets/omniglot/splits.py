"""The Omniglot class splits of the few-shot benchmarks: `omniglot_split` (torchmeta's and learn2learn's).

``"vinyals"``
    Vinyals et al. (2016): 1,028 train, 172 val and 423 test classes, whole alphabets
    (but Gurmukhi, split 41/4), the list torchmeta ships (``use_vinyals_split=True``),
    carried as package data (``omniglot_splits.json``, which names its source).
``"ravi"``
    learn2learn's ``omniglot_tasksets``: the 1,623 classes of both sets shuffled and cut
    1,100 / 100 / 423 (the split in the manner of Ravi and Larochelle (2017) that
    learn2learn's ``FullOmniglot`` cites). learn2learn shuffles with Python's unseeded
    ``random``, so its lists change from run to run; here the shuffle is
    ``numpy.random.default_rng(seed).permutation`` of the classes in the order of
    :func:`full_classes`, seeded (0 by default), with learn2learn's counts.

A split names classes of the full sets (``background`` and ``evaluation``) as
``"<alphabet>,<n>"``; a class's alphabet and number say which character it is in any set
holding that alphabet (the ``small1``/``small2`` sets hold whole alphabets of
``background``).
"""
from __future__ import annotations

import functools
import json
from importlib import resources

import numpy as np

from glyphforge._checks import check_int
from glyphforge.datasets.prepare_steps import unknown

#: The parts of every split, in order.
PARTS = ("train", "val", "test")
#: learn2learn's class counts of the ``"ravi"`` split, by part.
RAVI_COUNTS = {"train": 1100, "val": 100, "test": 423}
#: The split names `omniglot_split` takes.
SPLITS = ("vinyals", "ravi")
_FULL_SETS = ("background", "evaluation")


@functools.cache
def _vinyals() -> dict[str, dict[str, list[str]]]:
    """``{part: {set: [class name, ...]}}`` of the Vinyals split, read from the package data."""
    text = resources.files("glyphforge.datasets").joinpath("omniglot_splits.json").read_text(encoding="utf-8")
    parts: dict[str, dict[str, list[str]]] = json.loads(text)["vinyals"]
    return parts


def _order(name: str) -> tuple[str, int]:
    alphabet, _, number = name.rpartition(",")
    return alphabet, int(number)


@functools.cache
def full_classes() -> tuple[str, ...]:
    """The 1,623 classes of ``background`` then ``evaluation``, each set by alphabet name then character number.

    This is the class order of torchvision's Omniglot concatenated as learn2learn's
    ``FullOmniglot`` does (background labels 0-963, evaluation 964-1622), alphabets sorted.
    """
    by_set = {name: [c for part in _vinyals().values() for c in part.get(name, [])] for name in _FULL_SETS}
    return tuple(c for name in _FULL_SETS for c in sorted(by_set[name], key=_order))


def omniglot_split(split: str, part: str, *, seed: int | None = None) -> list[str]:
    """Return the class names (``"<alphabet>,<n>"``) of ``part`` of a few-shot benchmark split.

    Parameters
    ----------
    split
        ``"vinyals"`` (torchmeta's split, 1,028 / 172 / 423 classes) or ``"ravi"``
        (learn2learn's, 1,100 / 100 / 423 classes cut from a seeded shuffle).
    part
        ``"train"``, ``"val"`` or ``"test"``.
    seed
        The shuffle of ``"ravi"`` (None: 0, the same lists every time); the ``"vinyals"``
        split is a fixed list and takes no seed.

    Returns
    -------
    list of str
        The classes, in the order of :func:`full_classes` (background's, then evaluation's).
    """
    if split not in SPLITS:
        raise unknown("Omniglot split", [split], SPLITS, hint=" (torchmeta's is 'vinyals', learn2learn's 'ravi')")
    if part not in PARTS:
        raise unknown("split part", [part], PARTS)
    if split == "vinyals":
        if seed is not None:
            raise ValueError(
                f"seed={seed!r}: the 'vinyals' split is a fixed list of classes and takes no seed; "
                "seed shuffles the 'ravi' split only"
            )
        chosen = {c for classes in _vinyals()[part].values() for c in classes}
    else:
        check_int("seed", 0 if seed is None else seed, 0)
        order = np.random.default_rng(0 if seed is None else seed).permutation(len(full_classes()))
        start = sum(RAVI_COUNTS[name] for name in PARTS[:PARTS.index(part)])
        chosen = {full_classes()[int(i)] for i in order[start:start + RAVI_COUNTS[part]]}
    return [c for c in full_classes() if c in chosen]
