"""Preparing a per-class dataset: its entries' cache params, its upstream files fetched and read once, the native
entry written and the resized ones (the entries are described in :mod:`glyphforge.datasets.classes.files`).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from glyphforge._checks import MAX_READ_THREADS, PathLike, worker_count
from glyphforge.cache import Entry, Writer
from glyphforge.context import DataContext, Mirrors
from glyphforge.datasets import own_copies as _own_copy
from glyphforge.datasets.classes.args import check_configs, config_phrase
from glyphforge.datasets.classes.declaration import Declaration, Parsed
from glyphforge.datasets.classes.selection import LABELS_FILE, class_records
from glyphforge.datasets.prepare_steps import check_shapes, given_archives, resized, upstream_file

T = TypeVar("T")
U = TypeVar("U")

#: The layout of per-class entries, a cache param (so an entry of another layout is not found): 2 since an entry
#: holds its upstream label sequence, :data:`~glyphforge.datasets.classes.selection.LABELS_FILE` (issue 34).
LAYOUT = 2


def params(dataset: Declaration, config: str, shape: tuple[int, int], source: Mapping[str, str] | None = None
           ) -> dict[str, Any]:
    """The cache params of the entry of ``(config, shape)`` made from the files of hashes ``source`` (None: the
    pinned ones; see :mod:`glyphforge.datasets.classes.files` and :mod:`glyphforge.datasets.own_copies`)."""
    hashes = dict(sorted((source or {name: resource.hash for name, resource in dataset.resources.items()}).items()))
    found: dict[str, Any] = {} if dataset.config_option is None else {dataset.config_option: config}
    found.update(shape=list(shape), source=next(iter(hashes.values())) if len(hashes) == 1 else hashes, layout=LAYOUT)
    if shape != dataset.native_shape:
        found["resize"] = dataset.default_resize
    return found


def prepare(
    dataset: Declaration,
    *,
    config: str | Iterable[str] | None = None,
    shapes: Iterable[tuple[int, int]] = (),
    archives: Mapping[str, PathLike] | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
    mirrors: Mirrors = None,
    verify: bool | None = None,
    progress: bool | None = None,
    offline: bool | None = None,
) -> list[Entry]:
    """Fetch, validate and convert configs of ``dataset``, and make resized variants.

    Idempotent: entries already in the cache are returned without touching the files
    or the network; each upstream file is fetched (or checked) at most once.

    Parameters
    ----------
    dataset
        The declaration.
    config
        One config, or several (repeats dropped); None: the default. (EMNIST calls it ``split``.)
    shapes
        Extra ``(height, width)`` variants, each the resize of the native entry.
    archives
        ``{resource or file name: path}``: local copies of upstream files, used in place.
    context
        Where data lives and how it may be fetched (:class:`~glyphforge.context.DataContext`).
    data_dir, mirrors, verify, progress, offline
        Override ``context``'s (see :meth:`DataContext.resolve`). With ``verify`` False,
        ``archives`` and files placed in ``<data dir>/raw/<name>/`` are used unchecked
        (a download is always verified); the files' structure is always validated.

    Returns
    -------
    list of Entry
        For each config in order: its native entry, then one entry per distinct other shape.

    Raises
    ------
    ValueError
        For an unknown config, a bad shape or an ``archives`` name that is none of the files.
    DownloadError, HashMismatchError
        When a file cannot be fetched, or is not the pinned file (nothing is cached).
    IDXError, ArchiveError, and the reader's format errors
        When a file is truncated or corrupt (nothing is cached).
    """
    names = check_configs(dataset, config)
    given = given_archives(archives, dataset.resources, dataset.title)
    ctx = DataContext.resolve(context, data_dir=data_dir, mirrors=mirrors, offline=offline, verify=verify,
                              progress=progress)
    return prepare_entries(dataset, names, check_shapes(shapes), given, ctx)


def prepare_entries(
    dataset: Declaration, configs: Iterable[str], shapes: Iterable[tuple[int, int]],
    given: Mapping[str, PathLike], context: DataContext,
) -> list[Entry]:
    """:func:`prepare` with checked arguments and a resolved context.

    A local file is hashed on a thread of its own while the reader reads it (:func:`_while`),
    and nothing read from it is kept before its hash is known: a given file that is not
    upstream's (``verify``) raises HashMismatchError; files used unchecked are keyed by
    their hash, so the first config is read while they are hashed, before its entry can be
    looked up (when it is found, the reading is dropped).
    """
    store, configs = context.store, list(configs)
    choice = _own_copy.choose(dataset.name, dataset.resources, context, given)
    files: dict[str, tuple[Path, bool]] = {}  # fetched once needed
    ahead: dict[str, Parsed] = {}
    if configs and choice.hashes and choice.paths.keys() == dataset.resources.keys():
        files = {name: (path, False) for name, path in choice.paths.items()}
        copy, ahead[configs[0]] = _while(choice.describe, partial(dataset.reader, dataset, configs[0], files,
                                                                    context.progress))
    else:
        copy = choice.describe()
    source = copy.source(dataset.resources)
    entries = []
    for config in configs:
        base = store.get(dataset.name, params(dataset, config, dataset.native_shape, source))
        if base is None:
            local = {name: copy.paths().get(name, given.get(name)) for name in dataset.resources}
            checks: list[Callable[[], None]] = []  # hashes of given files, run while they are read when all are
            files = files or {name: upstream_file(resource, context, local[name],
                                                  checks if None not in local.values() else None)
                              for name, resource in dataset.resources.items()}
            files = copy.checked(files)
            parsed = ahead.pop(config) if config in ahead else _while(
                partial(_run_all, checks), partial(dataset.reader, dataset, config, files, context.progress))[1]
            verified = all(checked for _, checked in files.values())
            write = partial(write_native, dataset=dataset, config=config, parsed=parsed, verified=verified,
                            progress=context.progress)
            base = store.get_or_create(dataset.name, params(dataset, config, dataset.native_shape, source), write)
        ahead.clear()  # the first config's reading, unused when its entry was there
        entries.append(base)
        for shape in shapes:
            if shape != dataset.native_shape:
                write = partial(write_resized, base=base, shape=shape, method=dataset.default_resize,
                                label=config_phrase(dataset, config), progress=context.progress)
                entries.append(store.get_or_create(dataset.name, params(dataset, config, shape, source), write))
    _own_copy.remember(dataset.name, context, copy)
    return entries


def _while(background: Callable[[], T], foreground: Callable[[], U]) -> tuple[T, U]:
    """Run ``background`` on a thread of its own while ``foreground`` runs here; return both results.

    When both fail, ``background``'s error is raised (a file that is not what it should be is
    reported before what reading it found); errors leave no trace (nothing is written here).
    """
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(background)
        try:
            front = foreground()
        except BaseException:
            running.result()
            raise
        return running.result(), front


def _run_all(checks: list[Callable[[], None]]) -> None:
    for check in checks:
        check()


def write_native(
    writer: Writer, dataset: Declaration, config: str, parsed: Parsed, verified: bool, progress: bool
) -> None:
    """Write one upright class file per class (test images first, then train), the upstream labels and the meta."""
    classes, first = dataset.configs[config].classes, dataset.configs[config].first_label
    (test_order, test_starts), (train_order, train_starts) = (
        parsed.test.by_class(len(classes)), parsed.train.by_class(len(classes))
    )

    def write_class(index: int) -> int:
        picks = [order[starts[index]:starts[index + 1]] for order, starts in ((test_order, test_starts),
                                                                            (train_order, train_starts))]

        def fill(out: np.ndarray) -> None:  # the upright images, test then train, straight into the class file
            done = 0
            for subset, pick in zip((parsed.test, parsed.train), picks, strict=True):
                images = subset.images[pick]
                out[done:done + len(pick)] = images.transpose(0, 2, 1) if parsed.transposed else images
                done += len(pick)

        n_class = sum(len(pick) for pick in picks)
        writer.write_array(dataset.class_file(index, classes[index]), (n_class, *dataset.native_shape), np.uint8,
                           fill)
        return n_class

    n_images = len(parsed.test.labels) + len(parsed.train.labels)
    label = f"{config_phrase(dataset, config)}: writing {dataset.native_shape[0]}x{dataset.native_shape[1]}"
    _run_per_class(write_class, len(classes), n_images, label, progress)
    labels = np.concatenate([parsed.test.labels, parsed.train.labels]).astype(np.min_scalar_type(len(classes) - 1))
    _write_copy(writer, LABELS_FILE, labels)
    writer.meta.update(
        dataset=dataset.name,
        **({} if dataset.config_option is None else {dataset.config_option: config}),
        shape=list(dataset.native_shape),
        n_images=n_images,
        n_train=len(parsed.train.labels),
        n_test=len(parsed.test.labels),
        verified=verified,
        classes=[
            {"name": name, "label": first + index, "file": dataset.class_file(index, name),
             "n_test": int(test_starts[index + 1] - test_starts[index]),
             "n_train": int(train_starts[index + 1] - train_starts[index])}
            for index, name in enumerate(classes)
        ],
    )


def write_resized(
    writer: Writer, base: Entry, shape: tuple[int, int], method: str, label: str, progress: bool
) -> None:
    """Write the resize (``method``) of every image of every class file of ``base``, and the meta.

    ``label`` names the dataset on the progress bar.

    Worker threads load, resize and write classes; one resize runs at a time, on one
    numba thread (not every threading layer allows concurrent launches), so the other
    cores decompress and compress meanwhile.
    """
    import numba

    kernel_lock = threading.Lock()
    records = class_records(base)

    def resize_class(index: int) -> int:
        name = records[index]["file"]
        images: np.ndarray = base.load(name)
        numba.set_num_threads(1)  # for this worker thread only
        with kernel_lock:
            small = resized(images, shape, method, batch=True)
        _write_copy(writer, name, small)
        return len(small)

    _run_per_class(resize_class, len(records), base.meta["n_images"], f"{label}: writing {shape[0]}x{shape[1]}",
                   progress)
    _write_copy(writer, LABELS_FILE, base.load(LABELS_FILE))
    writer.meta.update({**base.meta, "shape": list(shape), "resized_from": base.key, "resize": method})


def _write_copy(writer: Writer, name: str, array: np.ndarray) -> None:
    """Write a copy of ``array`` as the file ``name`` of the entry."""
    writer.write_array(name, array.shape, array.dtype, partial(np.copyto, src=array))


def _run_per_class(task: Callable[[int], int], n_classes: int, n_images: int, label: str, progress: bool) -> None:
    """Run ``task(class_index) -> n_images_done`` for every class on a few threads, with a bar."""
    from tqdm import tqdm  # where a bar is made: importing it costs a cold start ~20 ms
    bar = tqdm(total=n_images, desc=label, unit="img", disable=not progress)
    with ThreadPoolExecutor(worker_count(None, cap=MAX_READ_THREADS)) as pool, bar:
        for done in pool.map(task, range(n_classes)):
            bar.update(done)
