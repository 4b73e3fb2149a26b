"""Where a `BuiltDataset` reads rows from: its entry's decoded copy, or the shards.

``random_access="auto"`` (the default) decodes shards until random reads thrash the LRU of
decoded shards, then wants the decoded copy (`glyphforge.builds.decoded_copy.life`): one already
made, by any process, is read at once; else one is made when its disk has room and it fits
the budget, announced by a WARNING (its size and where) before a byte is written. The
budget: ``decoded_budget=`` (bytes, or text such as ``"10GB"``; 0: never by itself), else
``$GLYPHFORGE_DECODED_BUDGET``, else `BUDGET_FRACTION` of the free space on the copy's disk
then: a quarter, so that a copy the user did not ask for leaves most of what was free to
them, while one that is small next to the disk (the usual case) is made without a word
asked. Beyond the budget (or without room) the dataset goes on decoding shard by shard and
says once why, and how to allow the copy. ``ds.materialize()`` and
``random_access="materialize"`` are explicit: no budget, only the disk's reserve.

Every read of a copy is checked (`glyphforge.builds.decoded_copy.rows`): a damaged copy is dropped (it
is glyphforge's own: removed under its lock), a WARNING names its file, the rows are read
from the shards, and this reader makes no copy by itself afterwards (the next reader, or
``ds.materialize()``, makes a new one). A ``<key>.decoded`` that is not glyphforge's (a
symbolic link, a file, a folder without its record): ``ds.materialize()`` and ``"materialize"``
raise `ForeignCopyError`, ``"auto"`` says so once and decodes.
"""
from __future__ import annotations

import logging
import math
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from glyphforge import config
from glyphforge.builds.decoded_copy.life import (
    ForeignCopyError,
    check_room,
    copy_nbytes,
    decoded_dir,
    drop_copy,
    make_copy,
    open_copy,
)
from glyphforge.builds.decoded_copy.rows import DamagedCopyError, DecodedCopy
from glyphforge.builds.reading.protocols import ShardReader
from glyphforge.cache.locks import LockTimeoutError
from glyphforge.config import ENV_DECODED_BUDGET
from glyphforge.textfmt import human_size

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The part of the free space an automatic copy may take without ``decoded_budget=`` or the variable.
BUDGET_FRACTION = 0.25
_FROM_SHARDS = ("rows are read from the shards (exact) by this reader from now on; ds.materialize() or the next "
                "reader makes a new copy")


class CopySource:
    """A dataset's decoded copy, found, made, checked and dropped as the module docstring says.

    Its methods take the dataset (they read its ``random_access`` and ``decoded_budget``), which
    it does not keep: no reference cycle.
    """

    def __init__(self) -> None:
        self.copy: DecodedCopy | None = None
        self._looked = False
        self._given_up = False  # no copy by itself any more: "auto" could not or may not make one, or one was dropped
        self._lock = threading.RLock()

    def read(self, dataset: ShardReader, thrashing: bool | None, reader: Callable[..., T], *args: Any) -> T | None:
        """``reader(copy, *args)`` of the copy to read rows from (``DecodedCopy.row``...), checked; None: read the
        shards.

        ``thrashing``: whether the dataset's reads thrash its LRU (a copy may be made, see
        `rows_copy`); None: only a copy already there is read.
        """
        copy = self.copy
        if copy is None:
            copy = self.existing(dataset) if thrashing is None else self.rows_copy(dataset, thrashing)
            if copy is None:
                return None
        try:
            return reader(copy, *args)
        except DamagedCopyError as error:
            with self._lock:
                dropping, self._given_up = self.copy is copy, True
                if dropping:
                    self.copy = None
            if dropping:  # one thread drops it and says so
                drop_copy(dataset.entry, error, _FROM_SHARDS)
            return None

    def existing(self, dataset: ShardReader) -> DecodedCopy | None:
        """The copy being read, or one already made (looked for once); None: none, or ``"decode"``."""
        if self.copy is not None or dataset.random_access == "decode":
            return self.copy
        if not self._looked:
            with self._lock:
                if self.copy is None and not self._looked:
                    self.copy = self._open(dataset)
                self._looked = True
        return self.copy

    def rows_copy(self, dataset: ShardReader, thrashing: bool) -> DecodedCopy | None:
        """The copy to read rows from, made when ``random_access`` says so (``"auto"``: when ``thrashing``)."""
        if self.existing(dataset) is not None or dataset.random_access == "decode" or self._given_up:
            return self.copy
        if dataset.random_access == "materialize":
            self.materialize(dataset)
        elif thrashing:
            self._make_auto(dataset)
        return self.copy

    def materialize(self, dataset: ShardReader) -> Path:
        """Make the copy now (no budget: asked for) and read rows from it; its directory."""
        with self._lock:
            if self.copy is None:
                self.copy = make_copy(dataset, lambda size, where: log.info(
                    "%s: writing its decoded copy (%s) to %s, as asked", _name(dataset), human_size(size), where))
            return self.copy.path

    def _open(self, dataset: ShardReader) -> DecodedCopy | None:
        """The copy already made; None: none, a damaged one (dropped), or in ``"auto"`` one not glyphforge's (said)."""
        try:
            return open_copy(dataset.entry)
        except DamagedCopyError as error:
            self._given_up = True
            drop_copy(dataset.entry, error, _FROM_SHARDS)
            return None
        except ForeignCopyError as error:
            if dataset.random_access == "materialize":
                raise
            self._give_up(f"{_name(dataset)}: {error}")
            return None

    def _make_auto(self, dataset: ShardReader) -> None:
        """``"auto"``: read a copy made since, else make one within the budget (said first), else say why not, once."""
        with self._lock:  # one thread decides, and says so once
            if self.copy is not None or self._given_up:
                return
            try:
                self.copy = self._open(dataset)
                if self.copy is None and not self._given_up and self._allowed(dataset):
                    self.copy = make_copy(dataset, lambda size, where: self._announce(dataset, size, where))
            except (OSError, LockTimeoutError) as error:  # not the error: a record would keep its frames (and dataset)
                self._give_up(f"{_name(dataset)}: random access goes on decoding a shard per row (slow), for want of "
                              f"a decoded copy: {error}")

    def _allowed(self, dataset: ShardReader) -> bool:
        """Whether ``"auto"`` may make the copy: its disk has room (else `NotEnoughSpaceError`) and it fits the budget
        (else said once)."""
        folder = decoded_dir(dataset.path).parent
        check_room(dataset, folder)
        needed = copy_nbytes(dataset)
        budget, source = config.decoded_budget_setting(dataset.decoded_budget) or _default_budget(folder)
        if needed <= budget:
            return True
        allow = _size_text(needed)
        self._give_up(
            f"{_thrashing(dataset)}. A decoded copy would make random reads fast, but it takes {human_size(needed)} "
            f"at {decoded_dir(dataset.path)}, more than glyphforge writes there without being asked: "
            f"{human_size(budget)} ({source}). It goes on decoding shard by shard (slow). To allow the copy: call "
            f"ds.materialize(), or pass decoded_budget={allow!r} (to gf.open_built, BuiltDataset or ds.reopened), "
            f"or set {ENV_DECODED_BUDGET}={allow}; or train from ds.stream(batch_size), which needs no copy")
        return False

    def _announce(self, dataset: ShardReader, size: int, where: Path) -> None:
        budget, source = config.decoded_budget_setting(dataset.decoded_budget) or _default_budget(where.parent)
        log.warning("%s. Writing a decoded copy to read rows from: %s at %s (once per machine; within the budget of "
                    "%s, %s). random_access='decode' or decoded_budget=0 (or %s=0) turns this off",
                    _thrashing(dataset), human_size(size), where, human_size(budget), source, ENV_DECODED_BUDGET)

    def _give_up(self, why: str) -> None:
        """Make no copy by itself from now on, and say ``why`` (a WARNING, once)."""
        if not self._given_up:
            self._given_up = True
            log.warning("%s", why)


def _name(dataset: ShardReader) -> str:
    return f"{dataset.entry.kind} {dataset.key[:12]}"


def _thrashing(dataset: ShardReader) -> str:
    return (f"{_name(dataset)}: random access decodes each shard again and again (an LRU of {dataset.cache_shards} "
            f"decoded shards of {len(dataset.index)})")


def _default_budget(folder: Path) -> tuple[int, str]:
    free = shutil.disk_usage(folder).free
    return int(free * BUDGET_FRACTION), f"{BUDGET_FRACTION:.0%} of the {human_size(free)} free there"


def _size_text(size: int) -> str:
    """``size`` rounded up to a whole unit, as `parse_size` reads it: ``"25MB"``, ``"91GB"``."""
    unit, scale = ("GB", 10**9) if size >= 10**9 else ("MB", 10**6)
    return f"{math.ceil(size / scale)}{unit}"
