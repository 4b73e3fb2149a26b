"""glyphforge: prepare, load and build handwritten-character image datasets.

The public API is re-exported here. Names are imported lazily on first use, so
``import glyphforge`` stays fast and a command such as ``glyphforge info`` never
pays for numba or Dask it does not use. Each built-in dataset's names
(``load_mnist``, ``EMNIST``...) are the ``exports`` of its registry record
(`glyphforge.datasets.registry`); reading the registry imports no dataset module.
Type checkers and IDEs read the same names from the ``TYPE_CHECKING`` imports, which a test
keeps equal to the table: a name added to one is added to the other.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from glyphforge._version import __version__ as __version__
from glyphforge.datasets import registry as _registry

if TYPE_CHECKING:  # the static view of the lazy table below, for type checkers and IDEs (tests/test_public_api.py)
    from glyphforge._access import DataDirAccessError as DataDirAccessError
    from glyphforge.builds.decoded_copy.life import ForeignCopyError as ForeignCopyError
    from glyphforge.builds.decoded_copy.life import NotEnoughSpaceError as NotEnoughSpaceError
    from glyphforge.builds.export.files import ExportTargetError as ExportTargetError
    from glyphforge.builds.export.frames import ExportFormatError as ExportFormatError
    from glyphforge.builds.making.builder import build as build
    from glyphforge.builds.making.spec import ShardError as ShardError
    from glyphforge.builds.making.spec import SpecError as SpecError
    from glyphforge.builds.reading.dataset import BuiltDataset as BuiltDataset
    from glyphforge.builds.reading.dataset import DatasetTooLargeError as DatasetTooLargeError
    from glyphforge.builds.reading.lookup import find_built as find_built
    from glyphforge.builds.reading.lookup import open_built as open_built
    from glyphforge.builds.stream.state import ForeignStateError as ForeignStateError
    from glyphforge.builds.stream.stream import ShardStream as ShardStream
    from glyphforge.cache import CacheStore as CacheStore
    from glyphforge.cache import UnsafePickleError as UnsafePickleError
    from glyphforge.cache.lookup import AmbiguousKindError as AmbiguousKindError
    from glyphforge.cache.remote.entries import UnlistableDataDirError as UnlistableDataDirError
    from glyphforge.cache.remote.publish import PublishConflictError as PublishConflictError
    from glyphforge.cache.remote.publish import publish as publish
    from glyphforge.config import data_dir as data_dir
    from glyphforge.context import DataContext as DataContext
    from glyphforge.datasets.backgrounds import (
        background_names as background_names,
    )
    from glyphforge.datasets.backgrounds import (
        hard_background_names as hard_background_names,
    )
    from glyphforge.datasets.backgrounds import (
        load_backgrounds as load_backgrounds,
    )
    from glyphforge.datasets.backgrounds import (
        prepare_backgrounds as prepare_backgrounds,
    )
    from glyphforge.datasets.class_names import ClassNames as ClassNames
    from glyphforge.datasets.emnist import (
        EMNIST as EMNIST,
    )
    from glyphforge.datasets.emnist import (
        emnist_classes as emnist_classes,
    )
    from glyphforge.datasets.emnist import (
        load_emnist as load_emnist,
    )
    from glyphforge.datasets.emnist import (
        prepare_emnist as prepare_emnist,
    )
    from glyphforge.datasets.fashion_mnist import (
        FashionMNIST as FashionMNIST,
    )
    from glyphforge.datasets.fashion_mnist import (
        fashion_mnist_classes as fashion_mnist_classes,
    )
    from glyphforge.datasets.fashion_mnist import (
        load_fashion_mnist as load_fashion_mnist,
    )
    from glyphforge.datasets.fashion_mnist import (
        prepare_fashion_mnist as prepare_fashion_mnist,
    )
    from glyphforge.datasets.kmnist import (
        KMNIST as KMNIST,
    )
    from glyphforge.datasets.kmnist import (
        kmnist_classes as kmnist_classes,
    )
    from glyphforge.datasets.kmnist import (
        load_kmnist as load_kmnist,
    )
    from glyphforge.datasets.kmnist import (
        prepare_kmnist as prepare_kmnist,
    )
    from glyphforge.datasets.mnist import (
        MNIST as MNIST,
    )
    from glyphforge.datasets.mnist import (
        load_mnist as load_mnist,
    )
    from glyphforge.datasets.mnist import (
        mnist_classes as mnist_classes,
    )
    from glyphforge.datasets.mnist import (
        prepare_mnist as prepare_mnist,
    )
    from glyphforge.datasets.omniglot.dataset import (
        Omniglot as Omniglot,
    )
    from glyphforge.datasets.omniglot.dataset import (
        OmniglotTasks as OmniglotTasks,
    )
    from glyphforge.datasets.omniglot.dataset import (
        TaskBatch as TaskBatch,
    )
    from glyphforge.datasets.omniglot.dataset import (
        load_omniglot as load_omniglot,
    )
    from glyphforge.datasets.omniglot.dataset import (
        omniglot_classes as omniglot_classes,
    )
    from glyphforge.datasets.omniglot.dataset import (
        omniglot_episodes as omniglot_episodes,
    )
    from glyphforge.datasets.omniglot.dataset import (
        omniglot_split as omniglot_split,
    )
    from glyphforge.datasets.omniglot.dataset import (
        prepare_omniglot as prepare_omniglot,
    )
    from glyphforge.datasets.preparing import Prepared as Prepared
    from glyphforge.datasets.preparing import prepare as prepare
    from glyphforge.datasets.registry import load as load
    from glyphforge.errors import (
        AccessError as AccessError,
    )
    from glyphforge.errors import (
        ArgumentError as ArgumentError,
    )
    from glyphforge.errors import (
        BuildError as BuildError,
    )
    from glyphforge.errors import (
        GlyphforgeError as GlyphforgeError,
    )
    from glyphforge.errors import (
        IntegrityError as IntegrityError,
    )
    from glyphforge.errors import (
        StorageError as StorageError,
    )
    from glyphforge.hf import MissingExtraError as MissingExtraError
    from glyphforge.loaders import ImageList as ImageList
    from glyphforge.loaders import batches as batches
    from glyphforge.pipelines.download import fetch as fetch
    from glyphforge.pipelines.fetch_all import MissingFilesError as MissingFilesError
    from glyphforge.pipelines.resize import resize as resize
    from glyphforge.pipelines.resource import (
        DownloadError as DownloadError,
    )
    from glyphforge.pipelines.resource import (
        HashMismatchError as HashMismatchError,
    )
    from glyphforge.pipelines.resource import (
        Resource as Resource,
    )
    from glyphforge.scenes.presets import cluttered_mnist as cluttered_mnist
    from glyphforge.scenes.presets import grid_arithmetic as grid_arithmetic
    from glyphforge.scenes.presets import moving_mnist as moving_mnist
    from glyphforge.scenes.presets import multi_mnist as multi_mnist
    from glyphforge.scenes.presets import visual_arithmetic as visual_arithmetic
    from glyphforge.scenes.spec import ScatteredGlyphs as ScatteredGlyphs
    from glyphforge.session import open_session as open_session
    from glyphforge.storage.backend import ReadOnlyStoreError as ReadOnlyStoreError
    from glyphforge.storage.backends import register_backend as register_backend
    from glyphforge.storage.retries import RetryPolicy as RetryPolicy
    from glyphforge.urls import MalformedURLError as MalformedURLError
    from glyphforge.urls import UnsupportedURLError as UnsupportedURLError
    from glyphforge.visualize import preview as preview

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
    "ClassNames": "glyphforge.datasets.class_names",
    # parallel builds
    "open_session": "glyphforge.session",
    "build": "glyphforge.builds.making.builder",
    "BuiltDataset": "glyphforge.builds.reading.dataset",
    "open_built": "glyphforge.builds.reading.lookup",
    "find_built": "glyphforge.builds.reading.lookup",
    "NotEnoughSpaceError": "glyphforge.builds.decoded_copy.life",
    "ForeignCopyError": "glyphforge.builds.decoded_copy.life",
    "DatasetTooLargeError": "glyphforge.builds.reading.dataset",
    "ExportTargetError": "glyphforge.builds.export.files",
    "ExportFormatError": "glyphforge.builds.export.frames",
    "MissingExtraError": "glyphforge.hf",
    "ShardStream": "glyphforge.builds.stream.stream",
    "ForeignStateError": "glyphforge.builds.stream.state",
    "AmbiguousKindError": "glyphforge.cache.lookup",
    "ShardError": "glyphforge.builds.making.spec",
    "SpecError": "glyphforge.builds.making.spec",
    "ScatteredGlyphs": "glyphforge.scenes.spec",
    "moving_mnist": "glyphforge.scenes.presets",
    "multi_mnist": "glyphforge.scenes.presets",
    "visual_arithmetic": "glyphforge.scenes.presets",
    "grid_arithmetic": "glyphforge.scenes.presets",
    "cluttered_mnist": "glyphforge.scenes.presets",
    "preview": "glyphforge.visualize",
    # object storage
    "publish": "glyphforge.cache.remote.publish",
    "PublishConflictError": "glyphforge.cache.remote.publish",
    "register_backend": "glyphforge.storage.backends",
    "ReadOnlyStoreError": "glyphforge.storage.backend",
    "RetryPolicy": "glyphforge.storage.retries",
    "UnlistableDataDirError": "glyphforge.cache.remote.entries",
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

