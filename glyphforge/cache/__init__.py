"""The content-addressed cache of gzipped pickles (see :mod:`glyphforge.cache.store`)."""
from glyphforge._access import DataDirAccessError
from glyphforge.cache.cleanup import CleanupError
from glyphforge.cache.entry import DamagedEntryFileError, Entry, MissingEntryFileError, UnreadableEntryError
from glyphforge.cache.eviction import Eviction
from glyphforge.cache.keys import FORMAT_VERSION, cache_key
from glyphforge.cache.locks import LockTimeoutError
from glyphforge.cache.pklz import DEFAULT_LEVEL, DamagedPklzError, concat_pklz, dump_pklz, iter_pklz, load_pklz
from glyphforge.cache.problems import CacheProblem
from glyphforge.cache.safe_pickle import OversizedPickleError, UnsafePickleError
from glyphforge.cache.store import CacheStore
from glyphforge.cache.writer import Writer

__all__ = [
    "DEFAULT_LEVEL",
    "FORMAT_VERSION",
    "CacheProblem",
    "CacheStore",
    "CleanupError",
    "DamagedPklzError",
    "DataDirAccessError",
    "Entry",
    "Eviction",
    "LockTimeoutError",
    "DamagedEntryFileError",
    "MissingEntryFileError",
    "OversizedPickleError",
    "UnreadableEntryError",
    "UnsafePickleError",
    "Writer",
    "cache_key",
    "concat_pklz",
    "dump_pklz",
    "iter_pklz",
    "load_pklz",
]
