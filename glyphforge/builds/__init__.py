"""Derived datasets built in parallel: the builder, its shards and the reader.

* `glyphforge.builds.builder`: `build` (a spec's seeded shards fanned out through a
  session, then cached), the `Spec` protocol and its checks;
* `glyphforge.builds.shards`: how a spec is cut, seeded, written and verified (runs on workers);
* `glyphforge.builds.dataset`: `BuiltDataset`, the reader of a built dataset.

The specs are applications above this package (the scenes: `glyphforge.scenes`).
Importing this package loads neither numba, Pillow nor Dask (Dask: by a Dask session).
"""
from glyphforge.builds.builder import BUILD_FORMAT, ShardError, Spec, build, cache_params, check_spec
from glyphforge.builds.dataset import ARRAYS_FILE, BuiltDataset, LostShardsError

__all__ = ["ARRAYS_FILE", "BUILD_FORMAT", "BuiltDataset", "LostShardsError", "ShardError", "Spec", "build",
           "cache_params", "check_spec"]
