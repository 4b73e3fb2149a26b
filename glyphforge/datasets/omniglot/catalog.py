"""Omniglot class names over the selected sets' cache entries, and reading classes into arrays.

The naming rule: a class is ``"<alphabet>,<n>"`` (n from 1). When several selected sets
hold an alphabet of the same name, that alphabet's classes are ``"<set>/<alphabet>,<n>"``
in every one of them, so same-named classes of different sets are never merged. Omniglot has no
class order of its own: classes are in natural order (:func:`natural_key`, ``"Latin,2"`` before
``"Latin,10"``).
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from glyphforge._checks import MAX_READ_THREADS, check_example_range, example_bounds, worker_count
from glyphforge.cache import Entry
from glyphforge.datasets.omniglot.archive import N_DRAWERS
from glyphforge.datasets.prepare_steps import unknown

_CLASS = re.compile(r"^(?:(?P<set>[^/,]+)/)?(?P<alphabet>[^/,]+),(?P<number>\d+)$")
_DIGITS = re.compile(r"(\d+)")
#: Threads that read alphabet files during a load (gzip inflation and copies release the GIL).
_LOAD_THREADS = worker_count(None, cap=MAX_READ_THREADS)


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """The natural sort key of ``name``: its runs of digits compare as numbers (``"Latin,2"`` < ``"Latin,10"``)."""
    return tuple((1, int(part)) if part.isdecimal() else (0, part) for part in _DIGITS.split(name) if part)


def check_indices(indices: Iterable[int] | None) -> np.ndarray:
    """Return the drawer indices (None: all 20) as an array, or raise a ValueError naming the bad ones."""
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


def select_drawers(indices: Iterable[int] | None, example_range: tuple[float, float] | None) -> np.ndarray:
    """Return the drawers to take from every character: ``indices``, or those of ``example_range``.

    ``example_range=(a, b)`` selects drawers ``int(a * 20)`` to ``int(b * 20) - 1``
    (:func:`glyphforge._checks.example_bounds`, EMNIST's rule), so adjacent ranges
    partition the drawers. Giving both, or a range that holds no drawer, is a ValueError.
    """
    if example_range is None:
        return check_indices(indices)
    if indices is not None:
        raise ValueError(
            "give indices (the drawers 0-19 themselves) or example_range (a fraction of every character's "
            "drawers), not both"
        )
    bounds = check_example_range(example_range)
    start, stop = example_bounds(N_DRAWERS, bounds)
    if start >= stop:
        raise ValueError(
            f"example_range {example_range!r} holds none of the {N_DRAWERS} drawers of a character (it selects "
            f"drawers int(a * {N_DRAWERS}) to int(b * {N_DRAWERS}) - 1): widen it, at least {1 / N_DRAWERS:g} "
            "(one drawer) wide"
        )
    return np.arange(start, stop, dtype=np.intp)


@dataclasses.dataclass(frozen=True)
class OmniglotClass:
    """One character of one set; ``name`` is its class name among the selected sets."""

    name: str
    set: str
    alphabet: str
    file: str
    index: int  # 0-based character index in the alphabet's array


class Catalog:
    """The alphabets of the selected sets (``{set: entry}``, all of one shape), with the naming rule."""

    def __init__(self, entries: Mapping[str, Entry]) -> None:
        self.entries = dict(entries)
        self.records = {
            name: {record["name"]: record for record in entry.meta["alphabets"]} for name, entry in entries.items()
        }
        self.homes: dict[str, list[str]] = {}  # alphabet -> the selected sets holding it
        for set_name, alphabets in self.records.items():
            for alphabet in alphabets:
                self.homes.setdefault(alphabet, []).append(set_name)
        self.shape: tuple[int, int] = tuple(next(iter(entries.values())).meta["shape"])

    def _make(self, set_name: str, record: dict[str, Any], index: int) -> OmniglotClass:
        prefix = f"{set_name}/" if len(self.homes[record["name"]]) > 1 else ""
        name = f"{prefix}{record['name']},{index + 1}"
        return OmniglotClass(name, set_name, record["name"], record["file"], index)

    def all_classes(self) -> list[OmniglotClass]:
        """Every class of the selected sets, in set, alphabet and character order."""
        return [
            self._make(set_name, record, index)
            for set_name, alphabets in self.records.items()
            for record in alphabets.values()
            for index in range(len(record["characters"]))
        ]

    def resolve(self, spec: Any) -> OmniglotClass:
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

    def select(self, classes: str | Iterable[str] | None) -> list[OmniglotClass]:
        """Resolve ``classes`` (None: all), drop repeats and sort by class name, naturally (:func:`natural_key`)."""
        if classes is None:
            chosen = self.all_classes()
        else:
            specs = [classes] if isinstance(classes, str) else list(classes)
            if not specs:
                raise ValueError("classes is empty: give at least one class such as 'Latin,3', or None for all")
            chosen = [self.resolve(spec) for spec in specs]
        return sorted({item.name: item for item in chosen}.values(), key=lambda item: natural_key(item.name))

    def fill(
        self,
        chosen: Sequence[OmniglotClass],
        indices: np.ndarray,
        out: np.ndarray,
        where: np.ndarray,
        resize: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> None:
        """Copy drawer ``indices[j]`` of class ``chosen[i]`` to ``out[where[i, j]]``, reading each alphabet once.

        ``resize`` (given a uint8 ``(n, H, W)`` batch, return ``(n, h, w)``) is applied to the
        drawings first, for ``out`` of another shape than the entries': then the alphabets are
        read one after the other, so that one alphabet's drawings at most are in memory.
        """
        by_file: dict[tuple[str, str], list[int]] = {}
        for position, item in enumerate(chosen):
            by_file.setdefault((item.set, item.file), []).append(position)

        def copy(key: tuple[str, str]) -> None:
            images = self.entries[key[0]].load(key[1])
            if resize is not None:
                rows = [chosen[position].index for position in by_file[key]]
                picked = images[rows][:, indices]
                images = resize(picked.reshape(-1, *picked.shape[2:])).reshape(*picked.shape[:2], *out.shape[1:])
                for row, position in enumerate(by_file[key]):
                    out[where[position]] = images[row]
                return
            for position in by_file[key]:  # one class at a time: its drawings stay in the CPU cache
                out[where[position]] = images[chosen[position].index, indices]

        if resize is not None:
            for key in by_file:
                copy(key)
            return
        with ThreadPoolExecutor(_LOAD_THREADS) as pool:
            list(pool.map(copy, by_file))

    def stack(self, chosen: Sequence[OmniglotClass], indices: np.ndarray) -> np.ndarray:
        """Return uint8 ``(len(chosen), len(indices), H, W)``: each class's drawers ``indices``."""
        out = np.empty((len(chosen) * len(indices), *self.shape), np.uint8)
        self.fill(chosen, indices, out, np.arange(len(out)).reshape(len(chosen), len(indices)))
        return out.reshape(len(chosen), len(indices), *self.shape)
