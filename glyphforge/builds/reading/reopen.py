"""A built dataset opened again where it is unpickled: a DataLoader worker, a Dask task.

`glyphforge.builds.reading.dataset.BuiltDataset` pickles as its source's own pickle (an entry's path
and key, or its URL and options) and its options; `reopen` opens it again. In a child
process (a DataLoader worker under "spawn" or "forkserver", a Dask worker) a dataset that
cannot be opened again (its entry removed, its data dir not mounted there) would end the
process as it unpickles its arguments, before torch or Dask catch errors, and the reason
would be lost. There it becomes an `UnopenedDataset` instead, which raises the reason at its
first use, inside the worker's loop, whence the main process receives it with its message.
"""
from __future__ import annotations

import multiprocessing
import pickle
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from glyphforge.errors import GlyphforgeError

__all__ = ["UnopenedDataset", "handle", "reopen"]

T = TypeVar("T")


class UnopenedDataset:
    """A built dataset that could not be opened again in this child process: each use raises ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def _raise(self, *_: Any) -> NoReturn:
        raise self.error

    __len__ = __getitem__ = __getitems__ = __iter__ = _raise

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "error":  # the pickle and copy protocols look these up
            raise AttributeError(name)
        self._raise()


def handle(open_dataset: Callable[..., Any], source: Any, options: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a dataset's ``__reduce__`` returns: `reopen` of ``source`` pickled on its own, with ``options``."""
    return reopen, (open_dataset, pickle.dumps(source), options)


def reopen(open_dataset: Callable[..., T], source: bytes, options: tuple[Any, ...]) -> T | UnopenedDataset:
    """``open_dataset(pickle.loads(source), *options)``; in a child process, an `UnopenedDataset` if that fails."""
    try:
        return open_dataset(pickle.loads(source), *options)
    except (GlyphforgeError, OSError) as error:
        if multiprocessing.current_process().name == "MainProcess":  # a child's is named as it unpickles its start
            raise
        return UnopenedDataset(error)

