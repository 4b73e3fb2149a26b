"""The data context: where data lives and how it may be fetched, resolved once and passed down.

A `DataContext` holds what every prepare, load and build needs to know about fetching:
the data dir, the mirrors, whether the network may be used, whether hand-placed files
are verified, whether progress bars show, and whether a missing dataset may be
prepared on load. It is resolved once from arguments and the environment
(:meth:`DataContext.resolve`), frozen, small and picklable, so the same object travels
from the command line or the caller down to the dataset code and to build workers.

The data dir may be a URL (``s3://bucket/data``, ``gs://...``, ``https://...`` read-only; a
``file://`` URL is the path it names, made absolute once): the context then has a
`~glyphforge.storage.Location` as :attr:`DataContext.remote` (the URL and fsspec's
``storage_options``), and its :attr:`~DataContext.data_dir` is a local
directory under the local cache dir (:attr:`~DataContext.cache_dir`, see
`glyphforge.config.local_cache_dir`) where what is fetched from the URL, downloaded or
prepared on this machine lives before it is read or published.

Precedence, per field: an explicit argument, else the given context's value, else the
environment (``$GLYPHFORGE_DATA_DIR``, ``$GLYPHFORGE_MIRROR``, ``$GLYPHFORGE_OFFLINE``;
see `glyphforge.config`), else the default. Mirrors given explicitly come before the
environment's, without repeats.

A context is also an ``os.PathLike`` of its data dir, and ``str(context)`` and
``context / "name"`` are those of the data dir, so code written for a ``data_dir``
path (a spec's ``prepare(data_dir)``, which `glyphforge.build` used to hand a
``Path``) works when handed a context.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from glyphforge import config
from glyphforge._checks import PathLike
from glyphforge.storage.location import Location, UnsupportedURLError, parse_place

if TYPE_CHECKING:
    from glyphforge.cache.store import CacheStore
    from glyphforge.cache.store_protocol import Store

__all__ = ["DataContext", "as_context"]

Mirrors = str | Iterable[PathLike] | None
"""Mirror bases: URLs or directories, as a sequence or one space-separated string."""


def _mirror_list(mirrors: Mirrors) -> tuple[str, ...]:
    if mirrors is None:
        return ()
    if isinstance(mirrors, str):
        return tuple(mirrors.split())
    return tuple(os.fspath(mirror) for mirror in mirrors)


@dataclass(frozen=True)
class DataContext:
    """Where data lives and how it may be fetched (see the module docstring); build one with :meth:`resolve`.

    Attributes
    ----------
    data_dir
        The data dir, absolute (see `glyphforge.config.data_dir`); for a data dir that is a URL,
        the local directory ``<cache_dir>/data`` where what this machine fetches, downloads or
        prepares for it lives.
    mirrors
        Mirror bases tried in order before the origin (explicit ones, then ``$GLYPHFORGE_MIRROR``'s).
    offline
        Never use the network: only files in place and local mirrors.
    verify
        Check hand-placed files and given archives against the pinned hashes (downloads
        are always checked).
    progress
        Show progress bars.
    download
        Loaders may prepare (fetch and convert) a dataset that is not in the cache.
    remote
        The data dir's URL and storage options when it is a URL, else None.
    cache_dir
        Where data read from URLs is kept on this machine (see `glyphforge.config.local_cache_dir`).
    """

    data_dir: Path
    mirrors: tuple[str, ...] = ()
    offline: bool = False
    verify: bool = True
    progress: bool = True
    download: bool = True
    remote: Location | None = None
    cache_dir: Path | None = None

    @classmethod
    def resolve(
        cls,
        context: DataContext | None = None,
        *,
        data_dir: PathLike | Location | None = None,
        mirrors: Mirrors = None,
        offline: bool | None = None,
        verify: bool | None = None,
        progress: bool | None = None,
        download: bool | None = None,
        storage_options: Mapping[str, Any] | None = None,
        cache_dir: PathLike | None = None,
    ) -> DataContext:
        """Return the context the arguments describe: explicit values, else ``context``'s, else the environment's.

        Parameters
        ----------
        context
            A context to start from (None: the environment and the defaults).
        data_dir, mirrors, offline, verify, progress, download, cache_dir
            Explicit values; None keeps ``context``'s (or the environment's, or the default).
            ``data_dir`` may be a URL (see the module docstring; also in ``$GLYPHFORGE_DATA_DIR``) or a
            `~glyphforge.storage.Location`.
        storage_options
            fsspec's options for a URL data dir (e.g. ``{"endpoint_url": ...}``); None keeps
            ``context``'s when the data dir stays its.

        Returns
        -------
        DataContext
            A new context (``context`` itself when nothing changes it).

        Raises
        ------
        TypeError
            When ``context`` is not a DataContext.
        """
        if context is not None and not isinstance(context, DataContext):
            raise TypeError(f"context must be a glyphforge.DataContext, got {type(context).__name__}: build one with "
                            "glyphforge.DataContext.resolve(data_dir=..., mirrors=..., offline=...)")
        if context is None:  # the environment's and the defaults
            chosen = data_dir if data_dir is not None else config.data_dir_setting()
            try:
                place = _place(chosen, storage_options, cache_dir)
            except UnsupportedURLError as error:
                if data_dir is not None:
                    raise
                raise type(error)(f"${config.ENV_DATA_DIR}: {error}") from None
            context = cls(mirrors=config.mirror_setting(), offline=config.offline_setting(), **place)
        elif data_dir is not None or storage_options is not None or cache_dir is not None:
            kept = data_dir is None  # the context's data dir, with other options or another local cache
            chosen = (context.remote.url if context.remote else context.data_dir) if kept else data_dir
            if storage_options is None and kept and context.remote:
                storage_options = context.remote.storage_options
            place = _place(chosen, storage_options, cache_dir if cache_dir is not None else context.cache_dir)
            context = dataclasses.replace(context, **place)
        resolved = dataclasses.replace(
            context,
            mirrors=tuple(dict.fromkeys([*_mirror_list(mirrors), *context.mirrors])),
            offline=context.offline if offline is None else bool(offline),
            verify=context.verify if verify is None else bool(verify),
            progress=context.progress if progress is None else bool(progress),
            download=context.download if download is None else bool(download),
        )
        return context if resolved == context else resolved

    @property
    def local_cache(self) -> Path:
        """Where data read from URLs is kept on this machine (`cache_dir`, else the default)."""
        return config.local_cache_dir(self.cache_dir)

    def __fspath__(self) -> str:
        return os.fspath(self.data_dir)

    def __str__(self) -> str:
        return str(self.data_dir)

    def __truediv__(self, other: PathLike) -> Path:
        return self.data_dir / other

    @property
    def store(self) -> CacheStore:
        """The cache store under ``<data dir>/cache``.

        For a data dir at a URL, the store of this machine's copy (under :attr:`local_cache`) with the
        URL as its source (`~glyphforge.cache.remote.pull_through.PullThrough`): prepared entries it lacks
        are fetched from there.
        """
        from glyphforge.cache.store import CacheStore

        if self.remote is None:
            return CacheStore.for_data_dir(self.data_dir)
        from glyphforge.cache.remote.pull_through import PullThrough

        return CacheStore(config.cache_dir(self.data_dir), source=PullThrough(self.remote, self.cache_dir))

    @property
    def entry_store(self) -> Store:
        """The store of the data dir's entries where they lie, listed, verified and cleaned as one
        (`glyphforge.cache.store_protocol.Store`): :attr:`store` for a data dir on disk; for one at a URL
        the `~glyphforge.cache.remote.entries.RemoteCache` there (read where it lies; deleting nothing).
        """
        if self.remote is None:
            return self.store
        from glyphforge.cache.remote.entries import RemoteCache

        return RemoteCache(self.remote, self.data_dir, self.cache_dir)

    def raw_dir(self, dataset: str) -> Path:
        """Return ``<data dir>/raw/<dataset>``, where the upstream files of ``dataset`` live."""
        return config.raw_dir(dataset, self.data_dir)


def as_context(place: DataContext | PathLike | None, **fields: Any) -> DataContext:
    """Return the context ``place`` names: ``place`` itself, else the one of the data dir ``place`` (None: the
    environment's), with ``fields`` (:meth:`DataContext.resolve`'s keywords) overriding.

    For arguments that are a context or a data dir path (a spec's ``prepare(context)``, a dataset's
    ``preview(entry, n, rng, context)``): turned into a context once, at the function that takes them.
    """
    if isinstance(place, DataContext):
        return DataContext.resolve(place, **fields)
    return DataContext.resolve(data_dir=place, **fields)


def _place(chosen: PathLike | Location | None, storage_options: Mapping[str, Any] | None,
           cache_dir: PathLike | None) -> dict[str, Any]:
    """The ``data_dir``, ``remote`` and ``cache_dir`` fields for the data dir ``chosen`` (a path, a URL or None)."""
    local_cache = None if cache_dir is None else config.local_cache_dir(cache_dir)
    place = None if chosen is None else parse_place(chosen, storage_options)  # file://: its path
    if isinstance(place, Location):
        return {"data_dir": config.local_cache_dir(local_cache) / "data", "remote": place, "cache_dir": local_cache}
    if storage_options:
        raise ValueError(f"storage_options apply to a data dir that is a URL (s3://, gs://, https://...), and "
                         f"{place or 'the default data dir'} is a path: drop them, or give a URL")
    return {"data_dir": config.data_dir(place), "remote": None, "cache_dir": local_cache}
