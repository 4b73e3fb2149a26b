"""Per-class datasets: one cache entry per (config, shape), one uint8 file per class; a dataset is a declaration.

EMNIST, MNIST, Fashion-MNIST and KMNIST have one form: upstream files holding test and
train images of a few classes. Each is a :class:`Declaration` (name, title, pinned
resources, configs with their classes and counts, a reader, the class file names, the
default resize); everything else lives here, once: prepare (fetch the resources with
:func:`glyphforge.datasets._prepare.upstream_file`, read them with the declaration's
reader, write the native entry, write resized entries), the cache params, the entry (get,
or prepare when the context allows), load (which images: the selection,
:mod:`glyphforge.datasets._class_selection`),
the map-style dataset, preview and the glyphs scenes draw; the argument checks are
:mod:`glyphforge.datasets._class_args`. A new dataset of this form is
one declaration (:func:`declare`) and one registry line (:meth:`Declaration.record`).

Cache entries
-------------
One entry per ``(config, shape)``, of kind the dataset's name, with the params
``{config_option: config}`` (only for datasets with several configs, e.g. EMNIST's
``"split"``), ``"shape"`` and ``"source"`` (the pinned hash of the only resource, or
``{file name: hash}`` of several; an own copy used with ``verify=False`` has the
``sha256:`` of each of its files that is not upstream's, see
:mod:`glyphforge.datasets._own_copy`) and, for any shape but the native one,
``"resize": <default resize>``. The native entry is converted from the upstream files;
any other shape is the resize (Pillow's, exactly) of every image of the native entry.
An entry holds one ``.pklz`` per class (named by the declaration's ``class_file``): the
uint8 array ``(n_images_of_class, H, W)``, upright, white on black, that class's *test*
images first, then its *train* images, each in file order. ``entry.meta`` holds
``dataset``, the config option's value (``split`` for EMNIST), ``shape``, ``n_images``,
``n_train``, ``n_test``, ``verified`` (False when made from files used unchecked,
``verify=False``) and ``classes``: one record per class in label order, ``{"name",
"label", "file", "n_test", "n_train"}``; the first ``n_test`` images of a class file are
its test images. Resized entries add ``resized_from`` (the native entry's key) and
``resize``.
"""
from __future__ import annotations

import dataclasses
import inspect
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from tqdm import tqdm

from glyphforge._checks import (
    MAX_READ_THREADS,
    PathLike,
    check_example_range,
    check_int,
    check_shape,
    worker_count,
)
from glyphforge.batching import MapStyleDataset
from glyphforge.cache import Entry, Writer
from glyphforge.context import DataContext, Mirrors
from glyphforge.datasets import _own_copy
from glyphforge.datasets._class_args import (
    check_classes,
    check_config,
    check_configs,
    check_subset,
    class_names,
    config_phrase,
)
from glyphforge.datasets._class_selection import Selection, class_records, select
from glyphforge.datasets._classes import ClassNames
from glyphforge.datasets._prepare import check_shapes, given_archives, resized, upstream_file
from glyphforge.pipelines.download import Resource

#: The config name of a dataset that has only one.
DEFAULT_CONFIG = "default"


# -- the declaration -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Config:
    """One configuration of a dataset: its classes in label order and its pinned image counts."""

    classes: tuple[str, ...]
    n_images: tuple[int, int]
    """The pinned ``(train, test)`` image counts."""
    first_label: int = 0
    """The upstream label of the first class (EMNIST ``letters``: 1)."""

    def count(self, subset: str) -> int:
        """The pinned number of images of ``subset`` (``"train"`` or ``"test"``)."""
        return self.n_images[0 if subset == "train" else 1]


@dataclasses.dataclass(frozen=True)
class Subset:
    """The test or train images of a config as the upstream files store them (validated by a reader)."""

    images: np.ndarray
    """uint8 ``(n, H, W)``, upright, or transposed when the reader says so."""
    labels: np.ndarray
    """The class index ``0 .. n_classes - 1`` of every image."""

    def by_class(self, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
        """Return the image indices grouped by class (file order kept), and where each class starts."""
        order = np.argsort(self.labels, kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(self.labels, minlength=n_classes))])
        return order, starts


@dataclasses.dataclass(frozen=True)
class Parsed:
    """What a reader returns: a config's test and train images, checked."""

    test: Subset
    train: Subset
    transposed: bool = False
    """The images are stored transposed (EMNIST): ``image.T`` is upright."""


#: ``reader(dataset, config, {resource name: (path, hash checked)}, progress) -> Parsed``; raises on bad files.
Reader = Callable[["Declaration", str, Mapping[str, tuple[Path, bool]], bool], Parsed]


def numbered_file(label: int, name: str) -> str:
    """The class file of class index ``label``: ``class_00.pklz`` ... (plain names whatever the class is called)."""
    return f"class_{label:02d}.pklz"


@dataclasses.dataclass(frozen=True)
class Declaration:
    """A per-class dataset: what differs from one to another (see the module docstring).

    Attributes
    ----------
    name
        The registry name, cache kind and folder of the upstream files (``"fashion-mnist"``).
    title
        How messages call it (``"Fashion-MNIST"``).
    resources
        The pinned upstream files, by name (a key of ``archives=``).
    configs
        The configurations by name, in order: EMNIST's splits; one (:data:`DEFAULT_CONFIG`) for most datasets.
    reader
        Reads and validates the resources of a config (see :data:`Reader`).
    config_option
        The keyword, cache param and ``--`` flag naming a config (EMNIST: ``"split"``); None with one config.
    default_config
        The config when none is given (None: the first).
    class_file
        ``(label, class name) -> file name`` of a class file in an entry.
    default_resize
        The resize method of every resized entry (part of its cache key).
    native_shape
        The shape of the upstream images.
    """

    name: str
    title: str
    resources: Mapping[str, Resource]
    configs: Mapping[str, Config]
    reader: Reader
    config_option: str | None = None
    default_config: str | None = None
    class_file: Callable[[int, str], str] = numbered_file
    default_resize: str = "box"
    native_shape: tuple[int, int] = (28, 28)

    def __post_init__(self) -> None:
        if self.config_option is None and len(self.configs) != 1:
            raise ValueError(f"{self.title} has {len(self.configs)} configs: name its config_option")

    @property
    def ident(self) -> str:
        """The name as a Python identifier, as in ``load_fashion_mnist``."""
        return self.name.replace("-", "_")

    @property
    def config(self) -> str:
        """The default config."""
        return self.default_config or next(iter(self.configs))

    def record(self, summary: str) -> Any:
        """Return the registry record of this dataset (a :class:`~glyphforge.datasets.registry.DatasetRecord`)."""
        from glyphforge.datasets.registry import DatasetRecord

        return DatasetRecord(
            name=self.name, summary=summary, prepare=bind(prepare, self.name, f"prepare_{self.ident}"),
            load=bind(load, self.name, f"load_{self.ident}"), preview=preview,
            glyphs=bind(glyph_images, self.name, f"{self.ident}_glyph_images"),
            glyph_classes=bind(class_names, self.name, f"{self.ident}_classes"), default_resize=self.default_resize,
        )


#: The declared datasets by name (tests swap one for a copy pinning synthetic files).
DECLARATIONS: dict[str, Declaration] = {}


def declare(dataset: Declaration) -> Declaration:
    """Add ``dataset`` to :data:`DECLARATIONS` (replacing one of the same name); return it."""
    DECLARATIONS[dataset.name] = dataset
    return dataset


# -- prepare ---------------------------------------------------------------------------
def params(dataset: Declaration, config: str, shape: tuple[int, int], source: Mapping[str, str] | None = None
           ) -> dict[str, Any]:
    """The cache params of the entry of ``(config, shape)`` made from the files of hashes ``source`` (None: the
    pinned ones; see the module docstring and :mod:`glyphforge.datasets._own_copy`)."""
    hashes = dict(sorted((source or {name: resource.hash for name, resource in dataset.resources.items()}).items()))
    found: dict[str, Any] = {} if dataset.config_option is None else {dataset.config_option: config}
    found.update(shape=list(shape), source=next(iter(hashes.values())) if len(hashes) == 1 else hashes)
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
    """:func:`prepare` with checked arguments and a resolved context."""
    store, copy = context.store, _own_copy.chosen(dataset.name, dataset.resources, context, given)
    source = copy.source(dataset.resources)
    files: dict[str, tuple[Path, bool]] = {}  # fetched once needed
    entries = []
    for config in configs:
        base = store.get(dataset.name, params(dataset, config, dataset.native_shape, source))
        if base is None:
            files = files or {name: upstream_file(resource, context, copy.paths().get(name, given.get(name)))
                              for name, resource in dataset.resources.items()}
            files = copy.checked(files)
            parsed = dataset.reader(dataset, config, files, context.progress)  # errors leave no trace
            verified = all(checked for _, checked in files.values())
            write = partial(write_native, dataset=dataset, config=config, parsed=parsed, verified=verified,
                            progress=context.progress)
            base = store.get_or_create(dataset.name, params(dataset, config, dataset.native_shape, source), write)
        entries.append(base)
        for shape in shapes:
            if shape != dataset.native_shape:
                write = partial(write_resized, base=base, shape=shape, method=dataset.default_resize,
                                label=config_phrase(dataset, config), progress=context.progress)
                entries.append(store.get_or_create(dataset.name, params(dataset, config, shape, source), write))
    _own_copy.remember(dataset.name, context, copy)
    return entries


def write_native(
    writer: Writer, dataset: Declaration, config: str, parsed: Parsed, verified: bool, progress: bool
) -> None:
    """Write one upright class file per class (test images first, then train) and the entry's meta."""
    classes, first = dataset.configs[config].classes, dataset.configs[config].first_label
    (test_order, test_starts), (train_order, train_starts) = (
        parsed.test.by_class(len(classes)), parsed.train.by_class(len(classes))
    )

    def write_class(index: int) -> int:
        parts = [subset.images[order[starts[index]:starts[index + 1]]]
                 for subset, order, starts in ((parsed.test, test_order, test_starts),
                                               (parsed.train, train_order, train_starts))]
        images = np.concatenate(parts)
        writer.write(dataset.class_file(index, classes[index]), images.transpose(0, 2, 1) if parsed.transposed
                     else images)
        return len(images)

    n_images = len(parsed.test.labels) + len(parsed.train.labels)
    label = f"{config_phrase(dataset, config)}: writing {dataset.native_shape[0]}x{dataset.native_shape[1]}"
    _run_per_class(write_class, len(classes), n_images, label, progress)
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
        writer.write(name, small)
        return len(small)

    _run_per_class(resize_class, len(records), base.meta["n_images"], f"{label}: writing {shape[0]}x{shape[1]}",
                   progress)
    writer.meta.update({**base.meta, "shape": list(shape), "resized_from": base.key, "resize": method})


def _run_per_class(task: Callable[[int], int], n_classes: int, n_images: int, label: str, progress: bool) -> None:
    """Run ``task(class_index) -> n_images_done`` for every class on a few threads, with a bar."""
    bar = tqdm(total=n_images, desc=label, unit="img", disable=not progress)
    with ThreadPoolExecutor(worker_count(None, cap=MAX_READ_THREADS)) as pool, bar:
        for done in pool.map(task, range(n_classes)):
            bar.update(done)


# -- the entry -------------------------------------------------------------------------------
def entry_for(dataset: Declaration, config: str, shape: tuple[int, int], context: DataContext) -> Entry:
    """Return the entry of ``(config, shape)`` of the copy in use (:func:`_own_copy.in_use`; an own copy is
    announced), preparing it when ``context.download`` allows (an own copy from its files, unchecked)."""
    store, copy = context.store, _own_copy.in_use(dataset.name, dataset.resources, context)
    source, label, raw_dir = copy.source(dataset.resources), config_phrase(dataset, config), \
        context.raw_dir(dataset.name)
    entry = store.get(dataset.name, params(dataset, config, shape, source))
    if entry is not None:
        return _own_copy.announce(entry, label, raw_dir)
    if not context.download and store.get(dataset.name, params(dataset, config, dataset.native_shape, source)) is None:
        option = "" if dataset.config_option is None else f"{dataset.config_option}={config!r}"
        flag = "" if dataset.config_option is None else f" --{dataset.config_option} {config}"
        own = f" as your own copy (the files {raw_dir / _own_copy.RECORD} names)" if source else ""
        arguments = ", ".join(filter(None, [option, "verify=False" * bool(source)]))
        raise FileNotFoundError(
            f"{label} is not prepared in {store.where}{own}: run prepare_{dataset.ident}({arguments}) or "
            f"`prepare-data {dataset.name}{flag}{' --no-verify' * bool(source)}`, or pass download=True")
    given, context = (copy.paths(), dataclasses.replace(context, verify=False)) if source else ({}, context)
    return _own_copy.announce(prepare_entries(dataset, [config], [shape], given, context)[-1], label, raw_dir)


# -- load, the map-style dataset, preview, glyphs -------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Request:
    """A load's checked arguments."""

    dataset: Declaration
    config: str
    names: list[str]
    subset: str
    shape: tuple[int, int]
    example_range: tuple[float, float] | None

    @classmethod
    def check(
        cls, dataset: Declaration, config: str | None, classes: Iterable[str | int] | str | None, subset: str,
        shape: tuple[int, int] | None, example_range: tuple[float, float] | None,
    ) -> Request:
        """Check a load's arguments (raising ValueError) before anything is read or fetched."""
        config = check_config(dataset, config)
        return cls(dataset, config, check_classes(dataset, config, classes), check_subset(subset),
                   dataset.native_shape if shape is None else check_shape(shape), check_example_range(example_range))

    def select(self, entry: Entry, balance: bool = False, include_blank: bool = False) -> Selection:
        """The selection of this request from ``entry``."""
        return select(entry, self.names, self.subset, self.example_range, balance, include_blank)


def load(
    dataset: Declaration,
    classes: Iterable[str | int] | str | None = None,
    *,
    config: str | None = None,
    subset: str = "train",
    balance: bool = False,
    include_blank: bool = False,
    shape: tuple[int, int] | None = None,
    n_examples: int | None = None,
    example_range: tuple[float, float] | None = None,
    seed: int | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
    download: bool | None = None,
    mirrors: Mirrors = None,
    offline: bool | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Load images of some classes, shuffled, reading only those classes' files.

    Parameters
    ----------
    dataset
        The declaration.
    classes
        Class names (a string of one-character names such as ``"0123"`` works; digits
        may be ints), or None for every class. They are de-duplicated and sorted.
    config
        The config (EMNIST: ``split``); None: the default.
    subset
        ``"train"`` (the default), ``"test"`` or ``"all"`` (test and train).
    balance
        Truncate every class to the smallest class's count (keeping its first images).
    include_blank
        Add the class ``' '`` (last in the class list) of all-zero images, as many as
        the smallest class has.
    shape
        ``(height, width)``; None for the native shape. Other shapes use the resized
        entry, made from the native entry when missing.
    n_examples
        Keep only the first ``n_examples`` images after shuffling.
    example_range
        ``(a, b)``: take images ``[int(a * n), int(b * n))`` of each class's ``n``
        images in the subset, so adjacent ranges such as ``(0, 0.9)`` and
        ``(0.9, 1)`` partition a class exactly.
    seed
        Seeds ``numpy.random.default_rng`` whose ``permutation`` shuffles the images
        (same seed, same order; None: fresh entropy).
    context, data_dir, mirrors, offline
        Where data lives and how it may be fetched (see :func:`prepare`).
    download
        Prepare the dataset (fetching its files) when it is not in the cache (None: the context's, True).

    Returns
    -------
    x : numpy.ndarray
        uint8 ``(n, H, W)``, upright, white on black.
    y : numpy.ndarray
        int64 ``(n,)``: indices into ``classes``.
    classes : ClassNames
        The sorted class names (then ``' '`` with ``include_blank``).

    Raises
    ------
    ValueError
        For an unknown config, subset or class, a bad shape, example range or
        ``n_examples``, or more ``n_examples`` than images selected.
    FileNotFoundError
        When the dataset is not prepared and ``download`` is False.
    """
    request = Request.check(dataset, config, classes, subset, shape, example_range)
    if n_examples is not None:  # checked before anything is fetched
        check_int("n_examples", n_examples, 0)
    ctx = DataContext.resolve(context, data_dir=data_dir, download=download, mirrors=mirrors, offline=offline)
    selection = request.select(entry_for(dataset, request.config, request.shape, ctx), balance, include_blank)
    x, y = selection.shuffled(n_examples, seed)
    return x, y, selection.classes


class ClassFilesDataset(MapStyleDataset):
    """A per-class dataset as a map-style dataset: ``len(ds)``, ``ds[i] -> (image, label)``.

    Subclasses name their declaration (``name``). Images are in a fixed order (classes
    sorted, each class's images in its file order), so a PyTorch ``DataLoader`` (which
    shuffles) or :meth:`batches` takes it as is. ``images`` is uint8 ``(n, H, W)``;
    ``labels`` int64 indices into ``classes`` (a :class:`ClassNames`).

    Parameters
    ----------
    subset, shape, config, classes, balance, include_blank, example_range, context, data_dir, download, mirrors, offline
        As in :func:`load` (``subset`` defaults to ``"train"`` there too).
    transform
        Applied to each image by ``ds[i]`` (e.g. a torchvision transform).
    """

    #: The declaration's name (a key of :data:`DECLARATIONS`), set by each subclass.
    name: ClassVar[str]

    def __init__(
        self,
        subset: str = "train",
        shape: tuple[int, int] | None = None,
        *,
        config: str | None = None,
        classes: Iterable[str | int] | str | None = None,
        balance: bool = False,
        include_blank: bool = False,
        example_range: tuple[float, float] | None = None,
        transform: Callable[[np.ndarray], Any] | None = None,
        context: DataContext | None = None,
        data_dir: PathLike | None = None,
        download: bool | None = None,
        mirrors: Mirrors = None,
        offline: bool | None = None,
    ) -> None:
        if not hasattr(self, "name"):
            kinds = [kind.__name__ for kind in type(self).__subclasses__()]
            listed = " and ".join([", ".join(kinds[:-1]), kinds[-1]] if len(kinds) > 1 else kinds)
            raise TypeError(f"{type(self).__name__} is the base of {listed}: use one of those")
        request = Request.check(DECLARATIONS[self.name], config, classes, subset, shape, example_range)
        ctx = DataContext.resolve(context, data_dir=data_dir, download=download, mirrors=mirrors, offline=offline)
        selection = request.select(entry_for(request.dataset, request.config, request.shape, ctx), balance,
                                   include_blank)
        self.config, self.subset, self.shape = request.config, subset, request.shape
        self.images, self.labels = selection.in_order()
        self.classes = selection.classes
        self.transform = transform

    def __repr__(self) -> str:
        dataset = DECLARATIONS[self.name]
        config = "" if dataset.config_option is None else f"{dataset.config_option}={self.config!r}, "
        return (f"{type(self).__name__}({config}subset={self.subset!r}, shape={self.shape}, {len(self)} images, "
                f"{len(self.classes)} classes)")


def preview(
    entry: Entry, n: int, rng: np.random.Generator, context: DataContext | PathLike | None = None
) -> tuple[np.ndarray, list[str]]:
    """Return ``n`` images of the prepared ``entry`` (any shape) and their class names (the registry's preview).

    ``rng`` picks up to ``n`` distinct classes, then ``n`` of their images (test and
    train; fewer if they hold fewer). Only those classes' files are read, so ``context``
    (part of the preview contract) is not needed.
    """
    names = [record["name"] for record in class_records(entry)]
    chosen = sorted(rng.choice(names, size=min(n, len(names)), replace=False).tolist())
    seed = int(rng.integers(2**32))
    selection = select(entry, chosen, "all", None, balance=False, include_blank=False)
    x, y = selection.shuffled(min(n, selection.total), seed)
    return x, [chosen[label] for label in y]


def glyph_images(
    dataset: Declaration,
    classes: Iterable[str | int] | str | None = None,
    *,
    example_range: tuple[float, float] | None = None,
    shape: tuple[int, int] | None = None,
    config: str | None = None,
    context: DataContext | None = None,
    data_dir: PathLike | None = None,
) -> tuple[np.ndarray, np.ndarray, ClassNames]:
    """Return the glyph images scenes draw (the registry's glyphs part), reading the cache only.

    The result is exactly ``load(dataset, classes, config=config, subset="all",
    shape=shape, example_range=example_range, seed=0, download=False)``: every image of
    the range of each class's test and train images, shuffled with seed 0. Unlike that
    call, it never makes a missing resized entry: build workers must not write to the
    cache nor download.

    Raises
    ------
    FileNotFoundError
        When the entry of ``(config, shape)`` (None: native) is not prepared; the message
        names the ``prepare-data`` command that makes it.
    """
    request = Request.check(dataset, config, classes, "all", shape, example_range)
    ctx = DataContext.resolve(context, data_dir=data_dir)
    copy = _own_copy.in_use(dataset.name, dataset.resources, ctx)
    store = ctx.store
    entry = store.get(dataset.name, params(dataset, request.config, request.shape, copy.source(dataset.resources)))
    if entry is None:
        size = f"{request.shape[0]}x{request.shape[1]}"
        flag = "" if dataset.config_option is None else f" --{dataset.config_option} {request.config}"
        raise FileNotFoundError(
            f"{config_phrase(dataset, request.config)} at {size} is not prepared in {store.where}: run "
            f"`prepare-data {dataset.name}{flag} --shape {size}` first (glyph images are read from the cache only, "
            "never downloaded)"
        )
    selection = request.select(_own_copy.announce(entry, config_phrase(dataset, request.config),
                                                  ctx.raw_dir(dataset.name)))
    x, y = selection.shuffled(None, 0)
    return x, y, selection.classes


# -- the public names of a declared dataset ------------------------------------------------------
def bind(function: Callable[..., Any], name: str, public: str, module: str = __name__) -> Callable[..., Any]:
    """Return ``function`` with its first argument, the declaration ``name``, fixed: the public function ``public``.

    The declaration is looked up in :data:`DECLARATIONS` on each call. Its ``config``
    keyword is called by the declaration's ``config_option`` (EMNIST: ``split``), or
    dropped for a dataset with one config. The signature and docstring shown by
    ``help()`` are the bound ones.
    """
    option = DECLARATIONS[name].config_option

    def bound(*args: Any, **kwargs: Any) -> Any:
        if option is not None and option in kwargs:
            kwargs["config"] = kwargs.pop(option)
        return function(DECLARATIONS[name], *args, **kwargs)

    signature = inspect.signature(function)
    parameters = []
    for parameter in list(signature.parameters.values())[1:]:
        if parameter.name == "config":
            if option is None:
                continue
            parameter = parameter.replace(name=option)
        parameters.append(parameter)
    bound.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]  # read by help()
    bound.__name__ = bound.__qualname__ = public
    bound.__module__ = module
    option_note = "" if option is None else f" (``config`` is called ``{option}``)"
    bound.__doc__ = (f"{DECLARATIONS[name].title}: :func:`{function.__name__}` of "
                     f"{__name__}{option_note}.\n\n{inspect.getdoc(function)}")
    return bound
