"""A restricted unpickler: data containers and numpy arrays only, never code.

Cache files may sit on shared filesystems where someone else can write. A pickle
can name any importable callable and call it while loading (``os.system`` through
``__reduce__``), so by default cache files are read with an unpickler whose
``find_class`` allows only what numpy arrays, numpy scalars, dtypes and the
built-in containers need.
"""
from __future__ import annotations

import pickle
from typing import Any, Protocol

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


class ReadableFile(Protocol):
    """What an unpickler reads from: a binary file object (a plain file, a ``GzipFile``, ...)."""

    def read(self, n: int, /) -> bytes: ...

    def readline(self) -> bytes: ...


class UnsafePickleError(pickle.UnpicklingError):
    """A cache file asked to load a global that is not plain data."""


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that refuses every global outside :data:`ALLOWED_GLOBALS`.

    Parameters
    ----------
    file
        A binary file object positioned at a pickle.
    source
        The file's name, quoted in errors.
    """

    def __init__(self, file: ReadableFile, source: str) -> None:
        super().__init__(file)
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise UnsafePickleError(
            f"refused to load {self._source}: it references the global '{module}.{name}', "
            "which is not plain data (numpy arrays, dicts, lists, tuples, strings, numbers). "
            "The file may have been tampered with; delete it (glyphforge cache rm / gc) and "
            "prepare the data again, or load it with trusted=True only if you wrote it yourself."
        )
