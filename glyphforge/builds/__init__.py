"""Derived datasets built in parallel: the builder, its shards and the reader.

* `glyphforge.builds.builder`: `build` (a spec's seeded shards fanned out through a
  session, then cached where its destination is: `glyphforge.builds.destinations`);
* `glyphforge.builds.spec`: the `Spec` protocol, its checks and its cache key;
* `glyphforge.builds.shards`: how a spec is cut, seeded, written and verified (runs on workers);
* `glyphforge.builds.dataset`: `BuiltDataset`, the reader of a built dataset, and its parts
  (`glyphforge.builds.reading`: what they take); `glyphforge.builds.remote`: `open_built`, `find_built`.

The specs are applications above this package (the scenes: `glyphforge.scenes`).
Importing this package loads neither numba, Pillow nor Dask (Dask: by a Dask session).
"""
from glyphforge.builds.builder import build
from glyphforge.builds.dataset import BuiltDataset
from glyphforge.builds.entry_files import LostShardsError
from glyphforge.builds.reading import ARRAYS_FILE
from glyphforge.builds.spec import BUILD_FORMAT, ShardError, Spec, cache_params, check_spec

__all__ = ["ARRAYS_FILE", "BUILD_FORMAT", "BuiltDataset", "LostShardsError", "ShardError", "Spec", "build",
           "cache_params", "check_spec"]
