"""glyphforge: prepare, load and build handwritten-character image datasets.

The public API is re-exported here. Names are imported lazily on first use, so
``import glyphforge`` stays fast and a command such as ``glyphforge info`` never
pays for numba or Dask it does not use. Each built-in dataset's names
(``load_mnist``, ``EMNIST``...) are the ``exports`` of its registry record
(`glyphforge.datasets.registry`); reading the registry imports no dataset module.
"""
from __future__ import annotations

import importlib
from typing import Any

from glyphforge._version import __version__ as __version__
from glyphforge.datasets import registry as _registry

_EXPORTS: dict[str, str] = {
    # errors: the root and its families
    "GlyphforgeError": "glyphforge.errors",
    "ArgumentError": "glyphforge.errors",
    "IntegrityError": "glyphforge.errors",
    "StorageError": "glyphforge.errors",
    "AccessError": "glyphforge.errors",
    "BuildError": "glyphforge.errors",
    # configuration and cache
    "data_dir": "glyphforge.config",
    "DataContext": "glyphforge.context",
    "CacheStore": "glyphforge.cache",
    "DataDirAccessError": "glyphforge._access",
    "UnsafePickleError": "glyphforge.cache",
    # downloading
    "Resource": "glyphforge.pipelines.resource",
    "fetch": "glyphforge.pipelines.download",
    "DownloadError": "glyphforge.pipelines.resource",
    "HashMismatchError": "glyphforge.pipelines.resource",
    "MissingFilesError": "glyphforge.pipelines.fetch_all",
    # kernels
    "resize": "glyphforge.pipelines.resize",
    # datasets (each dataset's own names come from its registry record: see below)
    "load": "glyphforge.datasets.registry",
    "prepare": "glyphforge.datasets.preparing",
    "Prepared": "glyphforge.datasets.preparing",
    "ClassNames": "glyphforge.datasets._classes",
    # parallel builds
    "open_session": "glyphforge.session",
    "build": "glyphforge.builds.builder",
    "BuiltDataset": "glyphforge.builds.dataset",
    "open_built": "glyphforge.builds.remote",
    "find_built": "glyphforge.builds.remote",
    "NotEnoughSpaceError": "glyphforge.builds.materialize",
    "ForeignCopyError": "glyphforge.builds.decoded_copy",
    "DatasetTooLargeError": "glyphforge.builds.dataset",
    "ExportTargetError": "glyphforge.builds.export",
    "MissingExtraError": "glyphforge.hf",
    "ShardStream": "glyphforge.builds.stream",
    "ForeignStateError": "glyphforge.builds.stream_state",
    "AmbiguousKindError": "glyphforge.cache.lookup",
    "ShardError": "glyphforge.builds.spec",
    "SpecError": "glyphforge.builds.spec",
    "ScatteredGlyphs": "glyphforge.scenes.spec",
    "moving_mnist": "glyphforge.scenes.presets",
    "multi_mnist": "glyphforge.scenes.presets",
    "visual_arithmetic": "glyphforge.scenes.presets",
    "grid_arithmetic": "glyphforge.scenes.presets",
    "cluttered_mnist": "glyphforge.scenes.presets",
    "preview": "glyphforge.visualize",
    # object storage
    "publish": "glyphforge.storage.publish",
    "PublishConflictError": "glyphforge.storage.publish",
    "register_backend": "glyphforge.storage.backends",
    "UnsupportedURLError": "glyphforge.urls",
    "MalformedURLError": "glyphforge.urls",
    # loaders
    "batches": "glyphforge.loaders",
    "ImageList": "glyphforge.loaders",
}

_EXPORTS.update(_registry.exports())

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'glyphforge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

