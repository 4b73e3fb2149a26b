"""Reading a per-class dataset: the entry of a load (prepared when the context allows), `load`, the map-style
`ClassFilesDataset`, the registry's preview and the glyphs scenes draw (see :mod:`glyphforge.datasets.classes.files`).

Which images a load takes, and reading just those, is :mod:`glyphforge.datasets.classes.selection`.
"""
from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import numpy as np

from glyphforge._checks import PathLike, check_example_range, check_int, check_shape
from glyphforge.batching import MapStyleDataset
from glyphforge.cache import Entry
from glyphforge.context import DataContext, Mirrors
from glyphforge.datasets import own_copies as _own_copy
from glyphforge.datasets.class_names import ClassNames
from glyphforge.datasets.classes.args import (
    check_classes,
    check_config,
    check_subset,
    config_keyword,
    config_phrase,
    config_signature,
)
from glyphforge.datasets.classes.declaration import DECLARATIONS, Declaration
from glyphforge.datasets.classes.prepare import params, prepare_entries
from glyphforge.datasets.classes.selection import Selection, class_records, select
from glyphforge.datasets.torchvision_args import data_dir_of, subset_of


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
        may be ints), or None for every class. They are de-duplicated and put in label order.
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
        int64 ``(n,)``: indices into ``classes`` (with every class, the upstream labels; EMNIST
        ``letters``: NIST's label minus 1).
    classes : ClassNames
        The class names in label order, the dataset's own (then ``' '`` with ``include_blank``).

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

    Subclasses name their declaration (``name``) and take its ``config`` keyword under the
    declaration's name for it, second after ``root`` (:func:`config_option_init`):
    ``EMNIST(root=None, split=None, train=None, ...)``, ``MNIST(root=None, train=None,
    transform=None, target_transform=None, download=None, *, subset=None, ...)``: torchvision's
    arguments in torchvision's order, so ``MNIST("../data", train=True, download=True,
    transform=...)`` is torchvision's ``MNIST`` (see :mod:`glyphforge.datasets.torchvision_args`).
    Index ``i`` is upstream's example ``i`` of the subset (``"all"``: the train examples, then
    the test examples), as torchvision numbers them; a selection (``classes``, ``example_range``,
    ``balance``) keeps that order, blank images last. ``images`` is uint8 ``(n, H, W)``;
    ``labels`` int64 indices into ``classes`` (a :class:`ClassNames` in label order, so with
    every class a label is upstream's).

    Parameters
    ----------
    root
        The data dir (torchvision's name for ``data_dir``; give one of the two).
    train
        True: the train subset, False: the test subset (torchvision's; give it or ``subset``).
    transform
        Applied to each image by ``ds[i]`` (e.g. a torchvision transform).
    target_transform
        Applied to each label by ``ds[i]``.
    download
        False: never download (a missing dataset is a FileNotFoundError naming the command that
        prepares it); None: the context's (by default True).
    subset
        ``"train"``, ``"test"`` or ``"all"``; None: ``"train"`` (or ``train``'s).
    config, shape, context, classes, balance, include_blank, example_range, data_dir, mirrors, offline
        As in :func:`load`.
    """

    #: The declaration's name (a key of :data:`DECLARATIONS`), set by each subclass.
    name: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Name an ``__init__`` made by :func:`config_option_init` for the subclass it is (help(), the reference)."""
        super().__init_subclass__(**kwargs)
        made = vars(cls).get("__init__")
        if made is not None and "<locals>" in made.__qualname__:
            made.__module__, made.__qualname__ = cls.__module__, f"{cls.__qualname__}.__init__"

    def __init__(
        self,
        root: PathLike | None = None,
        train: bool | None = None,
        transform: Callable[[np.ndarray], Any] | None = None,
        target_transform: Callable[[Any], Any] | None = None,
        download: bool | None = None,
        *,
        subset: str | None = None,
        config: str | None = None,
        shape: tuple[int, int] | None = None,
        context: DataContext | None = None,
        classes: Iterable[str | int] | str | None = None,
        balance: bool = False,
        include_blank: bool = False,
        example_range: tuple[float, float] | None = None,
        data_dir: PathLike | None = None,
        mirrors: Mirrors = None,
        offline: bool | None = None,
    ) -> None:
        if not hasattr(self, "name"):
            kinds = [kind.__name__ for kind in type(self).__subclasses__()]
            listed = " and ".join([", ".join(kinds[:-1]), kinds[-1]] if len(kinds) > 1 else kinds)
            raise TypeError(f"{type(self).__name__} is the base of {listed}: use one of those")
        subset = subset_of("train", train, subset, "train", {True: "train", False: "test"})
        request = Request.check(DECLARATIONS[self.name], config, classes, subset, shape, example_range)
        ctx = DataContext.resolve(context, data_dir=data_dir_of(root, data_dir), download=download, mirrors=mirrors,
                                  offline=offline)
        selection = request.select(entry_for(request.dataset, request.config, request.shape, ctx), balance,
                                   include_blank)
        self.config, self.subset, self.shape = request.config, subset, request.shape
        self.images, self.labels = selection.in_order()
        self.classes = selection.classes
        self.transform, self.target_transform = transform, target_transform

    def __repr__(self) -> str:
        dataset = DECLARATIONS[self.name]
        config = "" if dataset.config_option is None else f"{dataset.config_option}={self.config!r}, "
        return (f"{type(self).__name__}({config}subset={self.subset!r}, shape={self.shape}, {len(self)} images, "
                f"{len(self.classes)} classes)")


def config_option_init(option: str | None) -> Callable[..., None]:
    """Return a subclass's ``__init__``: :class:`ClassFilesDataset`'s with its ``config`` keyword called ``option``
    (EMNIST: ``"split"``) and second after ``root`` (torchvision's ``EMNIST(root, split)``), or without it (None: a
    dataset of one config); ``help()`` and ``inspect`` show that signature, and calls are bound to it."""
    signature = config_signature(inspect.signature(ClassFilesDataset.__init__), option)
    if option is not None:
        parameters = list(signature.parameters.values())
        moved = next(parameter for parameter in parameters if parameter.name == option)
        parameters.remove(moved)
        parameters.insert(2, moved.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD))  # after self, root
        signature = signature.replace(parameters=parameters)

    def __init__(self: ClassFilesDataset, *args: Any, **options: Any) -> None:
        arguments = signature.bind(self, *args, **options).arguments
        ClassFilesDataset.__init__(**config_keyword(arguments, option))

    __init__.__signature__ = signature  # type: ignore[attr-defined]  # read by help() and inspect
    return __init__


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
    """Return the glyph images scenes draw (see `glyphforge.scenes.glyph_datasets`), reading the cache only.

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
