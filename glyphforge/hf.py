"""A dataset's numpy arrays as Arrow columns with Hugging Face ``datasets`` features (the ``hf`` extra).

Generic over the arrays (any names, dtypes and per-example shapes): each array becomes one
column, one row per example, its feature chosen from its dtype and shape:

===========================  ===================================================================
per-example shape            feature
===========================  ===================================================================
``()``                       ``Value(dtype)``; ``ClassLabel(names)`` where a names table names it
``(k,)``                     ``List(Value(dtype))`` (or ``List(ClassLabel(names))``)
``(a, b[, c[, d[, e]]])``    ``Array2D`` ... ``Array5D`` (numbers), else nested ``List``
===========================  ===================================================================

Strings (numpy ``<U``) are ``Value("string")``, bytes (``S``) ``Value("binary")``. Only integer
arrays take a names table; ``-1`` (padding) is a valid value of a ``ClassLabel``.

One rule for the images, in memory (`dataset`) and in Parquet files alike, as on the Hub: the
dataset's images array, when uint8 ``(H, W)`` or ``(H, W, 3)`` (`image_feature`), is ``Image()``
whose bytes are a binary PGM or PPM (a short header before the raw pixels; PIL decodes it to the
same pixels, ``ds.with_format("numpy")`` gives arrays); images of another dtype or shape are
``Array`` features. (Parquet stores nested lists one value at a time as 32-bit integers, about 20
times slower to write than the bytes.) And one rule for the names (`column_names`): a
single-image, single-label dataset (the images and at most one other array, an integer per
example) has the columns ``image`` and ``label``, as the Hub's MNIST and its siblings; any
other dataset's columns are its arrays' names.

The other numbers are never copied: each column's values are the numpy buffer itself, in record
batches of about `CHUNK_BYTES` (the list offsets of ``Array``/``List`` columns are new: one
buffer per list size, shared by every batch); the images are copied once, into their files.

pyarrow and datasets are imported on first use, never by ``import glyphforge``; without
them, `MissingExtraError` says what to install.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from glyphforge.errors import ArgumentError

__all__ = ["INSTALL", "MissingExtraError", "batches", "column_names", "dataset", "features", "image_feature", "require"]

INSTALL = 'pip install "glyphforge[hf]"'
#: About the most bytes of rows one record batch holds: its list offsets serve every batch of as many rows
#: (one buffer, not one per row), and 32-bit offsets hold far more.
CHUNK_BYTES = 16 << 20
#: Array features by per-example dimensions (datasets has Array2D to Array5D).
_ARRAY_FEATURES = {2: "Array2D", 3: "Array3D", 4: "Array4D", 5: "Array5D"}
#: Netpbm magic numbers of the image files `image_feature` writes, by channels: PGM (grey) and PPM (RGB).
_NETPBM = {1: b"P5", 3: b"P6"}


class MissingExtraError(ArgumentError, ImportError):
    """pyarrow or datasets is not installed: the ``hf`` extra brings them (nothing was done)."""


def require(what: str) -> tuple[ModuleType, ModuleType]:
    """Return the modules ``pyarrow`` and ``datasets``, or raise `MissingExtraError` saying ``what`` needs them."""
    try:
        return importlib.import_module("pyarrow"), importlib.import_module("datasets")
    except ImportError as error:
        raise MissingExtraError(
            f"{what} needs pyarrow and Hugging Face datasets, and {error.name or error} is not installed here. "
            f"Install the hf extra with {INSTALL} (or pip install pyarrow datasets) and run again; nothing was "
            "done") from None


Layout = Mapping[str, tuple[np.dtype[Any], tuple[int, ...]]]


def column_names(layout: Layout, image: str | None) -> dict[str, str]:
    """The column of each array of ``layout`` (name: (dtype, per-example shape)) whose images array is ``image``.

    ``image`` and ``label`` for a single-image, single-label dataset (the images and at most one
    other array, an integer per example), as the Hub's MNIST; else each array's own name.
    """
    others = [name for name in layout if name != image]
    if image in layout and len(others) <= 1 and all(
            np.issubdtype(layout[name][0], np.integer) and tuple(layout[name][1]) == () for name in others):
        return {name: "image" if name == image else "label" for name in layout}
    return {name: name for name in layout}


def features(layout: Layout, names: Mapping[str, Sequence[str]], image: str | None = None) -> Any:
    """The ``datasets.Features`` of arrays with ``layout`` (name: (dtype, per-example shape)), in that order.

    ``names``: a names table by array (an integer array's ``ClassLabel`` names); ``image``: the
    images array, ``Image()`` where `image_feature` takes it.
    """
    _, hf = require("Converting to Hugging Face datasets")
    chosen = {}
    for name, (dtype, shape) in layout.items():
        if name == image and image_feature(dtype, shape) is not None:
            chosen[name] = hf.Image()
            continue
        table = names.get(name)
        if table is not None and np.issubdtype(dtype, np.integer):
            chosen[name] = _nested(hf, hf.ClassLabel(names=list(table)), len(shape))
        elif len(shape) >= 2 and len(shape) in _ARRAY_FEATURES and _is_number(dtype):
            chosen[name] = getattr(hf, _ARRAY_FEATURES[len(shape)])(shape=tuple(shape), dtype=str(dtype))
        else:
            chosen[name] = _nested(hf, hf.Value(_value_type(name, dtype)), len(shape))
    return hf.Features(chosen)


def image_feature(dtype: np.dtype[Any], shape: tuple[int, ...]) -> Any | None:
    """``datasets.Image()`` for uint8 ``(H, W)`` or ``(H, W, 3)`` images (stored as PGM / PPM bytes), else None."""
    if dtype != np.uint8 or _channels(shape) is None:
        return None
    return require("Converting to Hugging Face datasets")[1].Image()


def batches(arrays: Mapping[str, np.ndarray], features: Any) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch``es of ``arrays`` (equal lengths) under ``features``, in row order.

    Of about `CHUNK_BYTES` each; the numbers are the numpy buffers (see the module docstring).
    """
    pa, _ = require("Converting to Hugging Face datasets")
    schema = features.arrow_schema
    n = len(next(iter(arrays.values()))) if arrays else 0
    step = max(1, CHUNK_BYTES // max([1, *(_row_size(array) for array in arrays.values())]))
    offsets = _Offsets(pa)
    for start in range(0, n, step) if n else [0]:
        part = {name: np.ascontiguousarray(array[start:start + step]) for name, array in arrays.items()}
        columns = [_column(pa, part[field.name], features[field.name], offsets) for field in schema]
        yield pa.RecordBatch.from_arrays(columns, schema=schema)


def dataset(arrays: Mapping[str, np.ndarray], names: Mapping[str, Sequence[str]], fingerprint: str,
            image: str | None = None) -> Any:
    """A ``datasets.Dataset`` in memory over ``arrays`` whose images are ``image`` (see the module docstring).

    ``names`` as in `features`; the columns are named by `column_names`. ``fingerprint``: what the
    dataset is (datasets would otherwise hash every byte, in pickles).
    """
    pa, hf = require("Converting to Hugging Face datasets")
    columns = column_names({name: (array.dtype, array.shape[1:]) for name, array in arrays.items()}, image)
    arrays = {columns[name]: array for name, array in arrays.items()}
    names = {columns[name]: table for name, table in names.items()}
    chosen = features({name: (array.dtype, array.shape[1:]) for name, array in arrays.items()}, names,
                      None if image is None else columns.get(image))
    table = pa.Table.from_batches(list(batches(arrays, chosen)), schema=chosen.arrow_schema)
    return hf.Dataset(hf.table.InMemoryTable(table), info=hf.DatasetInfo(features=chosen), fingerprint=fingerprint)


# -- columns ------------------------------------------------------------------------------
def _column(pa: ModuleType, array: np.ndarray, feature: Any, offsets: _Offsets) -> Any:
    """The Arrow column of ``array`` (rows first) under ``feature``."""
    kind = type(feature).__name__
    if kind == "Image":
        return _netpbm_column(pa, array, offsets)
    n, shape = len(array), array.shape[1:]
    if kind in _ARRAY_FEATURES.values():
        storage = _lists(pa, _values(pa, array), n, shape, offsets)
        return pa.ExtensionArray.from_storage(feature(), storage)
    if type(_leaf(feature)).__name__ == "ClassLabel":
        array = array.astype(np.int64, copy=False)  # ClassLabel's storage
    return _lists(pa, _values(pa, array), n, shape, offsets)


def _values(pa: ModuleType, array: np.ndarray) -> Any:
    """All values of ``array`` as one flat Arrow array (numbers: the numpy buffer, no copy)."""
    flat = array.reshape(-1)
    if flat.dtype.kind == "U":
        return pa.array(flat, pa.string())
    if flat.dtype.kind == "S":
        return pa.array(flat, pa.binary())
    return pa.array(flat)


class _Offsets:
    """The offsets of lists of ``size`` values, ``0, size, 2 * size...``: one buffer for every batch, each a prefix."""

    def __init__(self, pa: ModuleType) -> None:
        self.pa = pa
        self.made: dict[int, np.ndarray] = {}

    def __call__(self, size: int, count: int) -> Any:
        """The offsets of ``count`` lists of ``size`` values (``count + 1`` int32s)."""
        made = self.made.get(size)
        if made is None or len(made) <= count:
            made = self.made[size] = np.arange(0, (count + 1) * size, size, dtype=np.int32)
        return self.pa.py_buffer(made[:count + 1])


def _lists(pa: ModuleType, values: Any, n: int, shape: tuple[int, ...], offsets: _Offsets) -> Any:
    """``values`` grouped into nested lists of ``shape`` per row (offsets made, values untouched)."""
    count = n * int(np.prod(shape, dtype=np.int64))
    for size in reversed(shape):
        count //= size
        values = pa.Array.from_buffers(pa.list_(values.type), count, [None, offsets(size, count)], children=[values])
    return values


def _netpbm_column(pa: ModuleType, images: np.ndarray, offsets: _Offsets) -> Any:
    """uint8 ``(n, H, W[, 3])`` images as ``Image()``'s storage: ``{bytes: a PGM/PPM file, path: null}`` per row."""
    n, height, width = images.shape[:3]
    header = b"%s\n%d %d\n255\n" % (_NETPBM[_channels(images.shape[1:]) or 1], width, height)
    size = len(header) + images[0].size if n else 0
    files = np.empty((n, size), np.uint8)
    files[:, :len(header)] = np.frombuffer(header, np.uint8)
    files[:, len(header):] = images.reshape(n, -1)
    data = pa.Array.from_buffers(pa.binary(), n, [None, offsets(size, n), pa.py_buffer(files)])
    return pa.StructArray.from_arrays([data, pa.nulls(n, pa.string())], names=["bytes", "path"])


# -- helpers ------------------------------------------------------------------------------------
def _nested(hf: ModuleType, feature: Any, dims: int) -> Any:
    """``feature`` inside ``dims`` levels of ``List``."""
    for _ in range(dims):
        feature = hf.List(feature)
    return feature


def _leaf(feature: Any) -> Any:
    """The innermost feature of nested ``List``s."""
    while hasattr(feature, "feature"):
        feature = feature.feature
    return feature


def _is_number(dtype: np.dtype[Any]) -> bool:
    return dtype.kind in "biuf"


def _value_type(name: str, dtype: np.dtype[Any]) -> str:
    """The ``Value`` dtype of a numpy dtype; an array of another kind (objects, dates...) is refused."""
    if dtype.kind == "U":
        return "string"
    if dtype.kind == "S":
        return "binary"
    if _is_number(dtype):
        return "bool" if dtype.kind == "b" else str(dtype)
    raise ArgumentError(f"array {name!r} holds {dtype} values, which Hugging Face datasets has no feature for: give "
                        "arrays of numbers, booleans or strings")


def _channels(shape: tuple[int, ...]) -> int | None:
    """1 for ``(H, W)``, 3 for ``(H, W, 3)``: the images a PGM / PPM holds; None for other shapes."""
    if len(shape) == 2:
        return 1
    return 3 if len(shape) == 3 and shape[2] == 3 else None


def _row_size(array: np.ndarray) -> int:
    """The bytes of one row of ``array`` (strings: 4 per character), and a little for its offsets."""
    return int(np.prod(array.shape[1:], dtype=np.int64)) * max(array.dtype.itemsize, 1) + 64
