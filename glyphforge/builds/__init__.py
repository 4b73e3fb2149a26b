"""Derived datasets built in parallel, one package per concept, and the names the package face exports.

* `glyphforge.builds.making`: `build`, from a spec to one checked cache entry, locally or at a URL;
* `glyphforge.builds.reading`: `BuiltDataset`, its index and shard sources, `open_built` and `find_built`;
* `glyphforge.builds.decoded_copy`: the checked ``.npy`` copy that serves random rows at memory speed;
* `glyphforge.builds.stream`: `ShardStream`, shuffled resumable batches divided among ranks and workers;
* `glyphforge.builds.export`: ``.npy``, Parquet, COCO, YOLO and MOT files.

The specs are applications above this package (the scenes: `glyphforge.scenes`).
Importing this package loads neither numba, Pillow nor Dask (Dask: by a Dask session).
"""
from glyphforge.builds.making.builder import build
from glyphforge.builds.making.spec import BUILD_FORMAT, ShardError, Spec, cache_params, check_spec
from glyphforge.builds.reading.dataset import BuiltDataset
from glyphforge.builds.reading.entry_files import DamagedShardsError
from glyphforge.builds.reading.protocols import ARRAYS_FILE

__all__ = ["ARRAYS_FILE", "BUILD_FORMAT", "BuiltDataset", "DamagedShardsError", "ShardError", "Spec", "build",
           "cache_params", "check_spec"]
