"""`prepare`: a registered dataset prepared into a data dir, on this machine or at a URL (what ``prepare-data`` does).

A local data dir (a path, or a ``file://`` URL) gets the dataset's entries in its cache,
made by the dataset's own ``prepare`` (a cache hit when they are there). A data dir at a URL
(``s3://``, ``gs://``...) is prepared into in three steps: the dataset is prepared on this
machine (in the local cache's data dir, as everything fetched or made for a URL data dir:
`glyphforge.DataContext`), each entry it made or used is published there
(`glyphforge.cache.remote.publish.publish_entry`: a whole entry there is not uploaded again), then
the request is recorded at ``<url>/prepared/`` (`glyphforge.cache.remote.prepared`), so that the
same request later, from any machine, finds every entry whole there and does no local work
at all. With ``verify=False`` no record is read or written (own files may change). An
``http(s)://`` data dir is read-only: preparing into one is refused before any work.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from glyphforge.cache.remote.prepared import published_request, record_request, request_key
from glyphforge.cache.remote.publish import Published, publish_entry, target_location
from glyphforge.context import DataContext
from glyphforge.datasets.registry import get, resolve

if TYPE_CHECKING:
    from glyphforge._checks import PathLike
    from glyphforge.cache.store import Entry
    from glyphforge.context import Mirrors

__all__ = ["Prepared", "prepare"]


@dataclass(frozen=True)
class Prepared:
    """What `prepare` did with one dataset.

    Attributes
    ----------
    dataset
        The dataset's name.
    entries
        The entries of this machine's cache the request made or used (for a data dir at a URL,
        the ones published there); empty when `found`.
    made
        Whether one of ``entries`` was made now (False: all were in the cache already).
    seconds
        How long preparing on this machine took (0.0 when nothing was prepared).
    published
        For a data dir at a URL, what publishing did with each entry (`Published`: its URL there,
        what was uploaded); empty for a local data dir, or when `found`.
    urls
        For a data dir at a URL, the URL of each entry there (published now, or found); empty for a
        local data dir.
    found
        The request's record at the URL names entries that are all still whole there: nothing was
        prepared, fetched or published.
    """

    dataset: str
    entries: tuple[Entry, ...] = ()
    made: bool = False
    seconds: float = 0.0
    published: tuple[Published, ...] = ()
    urls: tuple[str, ...] = ()
    found: bool = False


def prepare(
    name: str,
    *,
    shapes: Sequence[tuple[int, int]] = (),
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
    storage_options: Mapping[str, Any] | None = None,
    mirrors: Mirrors = None,
    offline: bool | None = None,
    verify: bool | None = None,
    progress: bool | None = None,
    cache_dir: PathLike | None = None,
    **options: Any,
) -> Prepared:
    """Prepare the registered dataset ``name`` into the data dir, on this machine or at a URL (see the module).

    The twin of `glyphforge.load`, and what ``prepare-data NAME --data-dir DIR`` does:
    ``glyphforge.prepare("mnist", shapes=[(14, 14)], data_dir="s3://bucket/data")`` prepares MNIST
    here, publishes its entries to the bucket and records the request, so that the same call
    anywhere later finds them there and does nothing.

    Parameters
    ----------
    name
        A registered dataset (`glyphforge.datasets.registered`), e.g. ``"mnist"``.
    shapes
        Resized variants to make too, e.g. ``[(14, 14)]``.
    context
        Where the data lives and how it may be fetched (None: the loose keywords below and the
        environment).
    data_dir
        The data dir: a path, or a URL (``s3://bucket/data``, ``gs://...``, ``file:///abs/path``);
        None: ``context``'s, ``$GLYPHFORGE_DATA_DIR`` or the user data dir.
    storage_options
        fsspec's options for a URL data dir (e.g. ``{"endpoint_url": ...}``).
    mirrors, offline, verify, progress, cache_dir
        As for `glyphforge.DataContext.resolve` (``cache_dir``: where this machine keeps what it
        makes for a URL data dir).
    **options
        Keywords of the dataset's own ``prepare_*`` (``split="letters"``, ``sets=["small1"]``...),
        part of what the record at a URL names.

    Returns
    -------
    Prepared
        The entries made or used, and for a URL data dir what was published or found there.

    Raises
    ------
    KeyError
        ``name`` is not registered (the message lists the registered names).
    ValueError
        The data dir is a URL glyphforge only reads (``http(s)://``), before any work.
    PublishConflictError
        What is at the URL is not glyphforge's (a record or an entry it did not write): left untouched.
    """
    context = DataContext.resolve(context, data_dir=data_dir, storage_options=storage_options, mirrors=mirrors,
                                  offline=offline, verify=verify, progress=progress, cache_dir=cache_dir)
    preparer = resolve(get(name).prepare)
    remote = context.remote
    if remote is None:
        return _prepare_here(name, preparer, shapes, options, context)
    target_location(remote)  # read-only (https://): refused before any work
    key = request_key(name, options, shapes)
    if context.verify:  # own files (verify=False) may change: their requests are never recorded
        urls = published_request(remote, name, key)
        if urls is not None:
            return Prepared(name, urls=tuple(urls), found=True)
    here = _prepare_here(name, preparer, shapes, options, context)
    published = tuple(publish_entry(entry, remote, progress=context.progress) for entry in here.entries)
    if context.verify:
        record_request(remote, name, key, here.entries)
    return dataclasses.replace(here, published=published, urls=tuple(item.url for item in published))


def _prepare_here(name: str, preparer: Callable[..., list[Entry]], shapes: Sequence[tuple[int, int]],
                  options: Mapping[str, Any], context: DataContext) -> Prepared:
    """Run the dataset's ``prepare`` into the context's cache on this machine; say whether it made an entry."""
    known = {entry.key for entry in context.store.ls()}
    started = time.perf_counter()
    entries = preparer(shapes=tuple(shapes), context=context, **options)
    seconds = time.perf_counter() - started
    return Prepared(name, tuple(entries), made=any(entry.key not in known for entry in entries), seconds=seconds)
