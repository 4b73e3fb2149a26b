"""A restricted unpickler: data containers and numpy arrays only, never code, within a memory budget.

Cache files may sit on shared filesystems where someone else can write. A pickle
can name any importable callable and call it while loading (``os.system`` through
``__reduce__``), so by default cache files are read with an unpickler whose
``find_class`` allows only what numpy arrays, numpy scalars, dtypes and the
built-in containers need.

Even those can be asked for any amount of memory by a pickle of a few bytes
(``bytearray(2_500_000_000)``, a numpy array of a billion rows), so the reader gives
the unpickler a :class:`Budget`: the bytes the data may hold, by default from the file's
compressed size. Every
allowed callable that allocates is charged before it runs; past the budget the load
stops with :class:`OversizedPickleError`, the memory never taken. ``numpy.ndarray`` may
be named (numpy's own reducer passes it to ``_reconstruct``) but not called, and object
arrays are refused: numpy can crash on a pickled object array whose state lies.
"""
from __future__ import annotations

import functools
import math
import operator
import pickle
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from glyphforge.errors import IntegrityError

_NUMPY_CORE = ("numpy._core", "numpy.core")  # numpy >= 2 and numpy 1.x spellings

ALLOWED_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    {(f"{core}.multiarray", "_reconstruct") for core in _NUMPY_CORE}
    | {(f"{core}.multiarray", "scalar") for core in _NUMPY_CORE}
    | {(f"{core}.numeric", "_frombuffer") for core in _NUMPY_CORE}
    | {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("dill._dill", "_create_array"),  # dill's ndarray reducer: calls an allowed global
        ("collections", "OrderedDict"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "bytearray"),
        ("builtins", "slice"),
        ("builtins", "range"),
    }
)

#: No gzip (deflate) stream inflates to more than about 1032 times its compressed size.
MAX_INFLATION = 1032
#: The least default budget, however small the file: room for small metadata.
MIN_BUDGET = 1 << 24
#: What one item of a set, frozenset or OrderedDict built from a pickle is charged (its slot and object).
ITEM_BYTES = 64


@dataclass(frozen=True)
class Budget:
    """The most bytes reading one pickle may decompress, and (apart) the most its allowed callables may allocate.

    Attributes
    ----------
    limit
        The bound, in bytes.
    basis
        What it comes from, for messages (e.g. "what its 1,000 compressed bytes can hold").
    """

    limit: int
    basis: str

    @classmethod
    def for_compressed(cls, size: int) -> Budget:
        """The default budget of ``size`` compressed bytes: what they can inflate to (at least :data:`MIN_BUDGET`)."""
        return cls(max(MIN_BUDGET, MAX_INFLATION * size), f"what its {size:,} compressed bytes can hold")

    def refusal(self, source: str, asked: str) -> OversizedPickleError:
        """The error for ``source`` asking for more than the budget: ``asked`` says what it asked for."""
        return OversizedPickleError(
            f"refused to load {source}: {asked}. At most {self.limit:,} bytes are allowed for it ({self.basis}). "
            "The file may have been tampered with; remove its entry (`glyphforge cache rm KEY`) and prepare or "
            "build it again"
        )


class ReadableFile(Protocol):
    """What an unpickler reads from: a binary file object (a plain file, a ``GzipFile``, ...)."""

    def read(self, n: int, /) -> bytes: ...

    def readline(self) -> bytes: ...


class UnsafePickleError(IntegrityError, pickle.UnpicklingError):
    """A cache file asked to load a global that is not plain data."""


class OversizedPickleError(UnsafePickleError):
    """A cache file asked for more memory than its :class:`Budget` allows (the data it declares)."""


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that refuses every global outside :data:`ALLOWED_GLOBALS` and allocations beyond a budget.

    Parameters
    ----------
    file
        A binary file object positioned at a pickle.
    source
        The file's name (and the part of it read), quoted in errors.
    budget
        The most bytes the allowed callables may allocate, charged before each call
        (None: :data:`MIN_BUDGET`).
    """

    def __init__(self, file: ReadableFile, source: str, budget: Budget | None = None) -> None:
        super().__init__(file)
        self._source = source
        self._meter = _Meter(source, budget or Budget(MIN_BUDGET, "the default for a pickle of unknown size"))

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED_GLOBALS:
            raise UnsafePickleError(
                f"refused to load {self._source}: it references the global '{module}.{name}', "
                "which is not plain data (numpy arrays, dicts, lists, tuples, strings, numbers). "
                "The file may have been tampered with; delete it (glyphforge cache rm / gc) and "
                "prepare the data again, or load it with trusted=True only if you wrote it yourself."
            )
        found = super().find_class(module, name)
        if name == "ndarray":
            return _NdarrayName(self._meter.refusal)
        guard = _GUARDS.get(name)
        return found if guard is None else functools.partial(guard, self._meter, found)


class _Meter:
    """What the guards of one `RestrictedUnpickler` charge, and the errors they raise naming its source.

    Apart from the unpickler: its memo holds the guards, which referring back to it would
    make a reference cycle keeping everything it loaded alive until the garbage collector runs.
    """

    def __init__(self, source: str, budget: Budget) -> None:
        self._source, self._budget = source, budget
        self._spent = 0

    def charge(self, size: int, what: str) -> None:
        """Count ``size`` bytes about to be allocated for ``what``; raise `OversizedPickleError` past the budget."""
        if size > self._budget.limit - self._spent:
            raise self._budget.refusal(self._source, f"its pickle asks for {what} of {size:,} bytes")
        self._spent += max(0, size)  # a negative size is refused by the call itself: it must not add to the budget

    def refusal(self, what: str) -> UnsafePickleError:
        """The error refusing the pickle because ``what`` (it names the source and says what to do)."""
        return UnsafePickleError(
            f"refused to load {self._source}: {what}. Only the arrays numpy itself pickles are read; the file may "
            "have been tampered with: remove its entry (`glyphforge cache rm KEY`) and prepare or build it again"
        )


class _NdarrayName:
    """What the name ``numpy.ndarray`` loads as: `_reconstruct`'s first argument, never called (that allocates)."""

    def __init__(self, refuse: Callable[[str], UnsafePickleError]) -> None:
        self._refuse = refuse

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse("it calls numpy.ndarray directly, which allocates whatever shape it is given")


def _count(items: Any) -> int:
    """How many items iterating ``items`` gives (a range too large for ``len`` counts as unbounded)."""
    try:
        return operator.length_hint(items)
    except OverflowError:
        return sys.maxsize


def _bytearray(meter: _Meter, make: Callable[..., Any], *args: Any) -> Any:
    first = args[0] if args else 0
    size = first if isinstance(first, int) else _count(first)
    meter.charge(size, "a bytearray")
    return make(*args)


def _container(meter: _Meter, make: Callable[..., Any], *args: Any) -> Any:
    items = _count(args[0]) if args else 0
    meter.charge(items * ITEM_BYTES, f"a {make.__name__} of {items:,} items")
    return make(*args)


#: Why a pickle holding an object dtype is refused.
_OBJECT_DTYPE = "it holds an object array or scalar (numpy can crash loading a forged one)"


def _reconstruct(meter: _Meter, make: Callable[..., Any], subtype: Any, shape: Any,
                 dtype: Any) -> Any:
    if not isinstance(subtype, _NdarrayName):
        raise meter.refusal(f"it reconstructs an array of type {subtype!r:.60}, not numpy.ndarray")
    descr = np.dtype(dtype)
    if descr.hasobject:
        raise meter.refusal(_OBJECT_DTYPE)
    count = math.prod(shape) if isinstance(shape, (tuple, list)) else shape
    meter.charge(max(0, count) * descr.itemsize, f"a numpy array of shape {shape!r:.60} and dtype {descr}")
    return make(np.ndarray, shape, dtype)


def _dtype(meter: _Meter, make: Callable[..., Any], *args: Any) -> Any:
    descr = make(*args)
    if descr.hasobject:
        raise meter.refusal(_OBJECT_DTYPE)
    return descr


def _scalar(meter: _Meter, make: Callable[..., Any], dtype: Any, *args: Any) -> Any:
    descr = np.dtype(dtype)
    meter.charge(descr.itemsize, f"a numpy scalar of dtype {descr}")
    return make(dtype, *args)


#: The allowed callables that allocate (or make object dtypes), by name, and the guard checking each call.
_GUARDS: dict[str, Callable[..., Any]] = {
    "bytearray": _bytearray,
    "set": _container,
    "frozenset": _container,
    "OrderedDict": _container,
    "_reconstruct": _reconstruct,
    "dtype": _dtype,
    "scalar": _scalar,
}
