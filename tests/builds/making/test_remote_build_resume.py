"""A build into a URL data dir resumes only from parts whose bytes are those their shard's record names.

An interrupted build leaves, per finished shard, its part at the URL and its record (size, sha256)
in the entry's ``.work`` prefix. A part of the recorded size but other bytes (overwritten, or rotted)
is made again, never committed under a manifest that names other bytes; on every backend with a
URL data dir (``s3://`` on moto, ``gs://`` on the emulator; a ``file://`` data dir is its path,
resumed as a local build, whose shards are checked while joined: `tests/builds/making/test_builder.py`).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from glyphforge.builds import ShardError, build
from glyphforge.builds.making.url_build import build_into
from glyphforge.context import DataContext

from support.gcs_server import gcs_server  # noqa: F401 (fixture)
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import NoiseSpec, made_shards


@dataclass
class InterruptedNoise(NoiseSpec):
    """`NoiseSpec` whose shard 5 fails while the file ``stop_file`` exists (not in its params: the same entry)."""

    stop_file: str = ""

    def make_shard(self, index: int, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        if index == 5 and Path(self.stop_file).exists():
            raise ValueError("shard 5 stops the build")
        return super().make_shard(index, rng, n)


@pytest.mark.parametrize("server", ["s3_server", "gcs_server"])
def test_a_part_of_the_recorded_size_but_other_bytes_is_made_again_not_served(server, request, tmp_path):
    store = request.getfixturevalue(server)
    data_url = f"{store.bucket()}/data"
    stop, made = tmp_path / "stop", tmp_path / "made"
    stop.touch()
    made.mkdir()
    spec = InterruptedNoise(n_examples=50, shard_size=8, seed=5, touch_dir=str(made), stop_file=str(stop))
    with pytest.raises(ShardError, match="shard 5 stops the build"):
        build_into(spec, DataContext.resolve(data_dir=data_url), progress=False)
    assert made_shards(made) == [0, 1, 2, 3, 4]
    fs = store.fs()
    entry_url = next(path for path in fs.find(data_url) if path.endswith(".work/build.json")).rsplit(".work/", 1)[0]
    part = f"{entry_url}/part-000002.pklz"
    good = fs.cat_file(part)
    bad = good[:-1] + bytes([good[-1] ^ 0xFF])  # the recorded size, other bytes
    fs.pipe_file(part, bad)
    record = json.loads(fs.cat_file(f"{entry_url}.work/shard-000002.json"))
    assert record["size"] == len(bad) and record["sha256"] != hashlib.sha256(bad).hexdigest()

    stop.unlink()
    for old in made.iterdir():
        old.unlink()
    dataset = build(spec, data_dir=data_url, progress=False)
    assert made_shards(made) == [2, 5, 6]  # shard 2 made again, the others reused
    fs.invalidate_cache()
    assert hashlib.sha256(fs.cat_file(part)).hexdigest() == record["sha256"]
    local = build(NoiseSpec(n_examples=50, shard_size=8, seed=5), data_dir=tmp_path / "local", progress=False)
    for name, array in local.arrays.items():
        assert dataset.arrays[name].tobytes() == array.tobytes()
