"""Entries glyphforge 0.1 and 0.2 wrote (cache format 1) are not read: not found, named by `cache verify`, removed by
`cache gc`.

Each entry is written by hand, file by file, as the old code wrote it: its key of format 1, a manifest without
``entry_sha256``; a prepared EMNIST entry with class records ``{"char", ...}`` and ``verified_archive``; a built
entry of pickled shards (build format 2) with its index in ``meta["index"]``.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from glyphforge import build, cli, find_built
from glyphforge._files import sha256_file
from glyphforge.builds import ARRAYS_FILE
from glyphforge.builds.reading.blocks import BLOCKS_FILE
from glyphforge.builds.reading.index import INDEX_FILE
from glyphforge.cache import FORMAT_VERSION, CacheStore, cache_key, concat_pklz, dump_pklz
from glyphforge.cache.keys import metadata_sha256
from glyphforge.cache.manifest import DamagedManifestError, make_manifest, parse_manifest
from glyphforge.datasets.classes import prepare as _class_prepare
from glyphforge.datasets.classes.declaration import DECLARATIONS
from glyphforge.datasets.emnist import load_emnist

from support.specs import RowSpec

OLD_FORMAT = 1


def _write_old_entry(data_dir: Path, kind: str, params: dict[str, Any], files: dict[str, Any],
                     meta: dict[str, Any]) -> Path:
    """Write an entry as glyphforge 0.2 did: ``files`` ({name: write(path)}), then a format-1 manifest."""
    key = cache_key(kind, params, OLD_FORMAT)
    path = data_dir / "cache" / kind / key
    path.mkdir(parents=True)
    for name, write in files.items():
        write(path / name)
    table = {name: {"size": (path / name).stat().st_size, "sha256": sha256_file(path / name)} for name in files}
    manifest = {"kind": kind, "key": key, "params": params, "format_version": OLD_FORMAT,
                "glyphforge_version": "0.2.0", "created": "2026-01-01T00:00:00+00:00", "files": table, "meta": meta,
                "meta_sha256": metadata_sha256(kind, key, params, meta)}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def _old_emnist(data_dir: Path) -> Path:
    images = {char: np.full((3 + int(char), 28, 28), 10 * int(char), np.uint8) for char in "0123456789"}
    files = {f"digit_{char}.pklz": (lambda path, array=array: dump_pklz(array, path)) for char, array in images.items()}
    meta = {"split": "digits", "shape": [28, 28], "n_images": 75, "n_train": 55, "n_test": 20,
            "verified_archive": True,
            "classes": [{"char": char, "label": int(char), "file": f"digit_{char}.pklz", "n_test": 2,
                         "n_train": len(array) - 2} for char, array in images.items()]}
    params = _class_prepare.params(DECLARATIONS["emnist"], "digits", (28, 28))
    return _write_old_entry(data_dir, "emnist", params, files, meta)


def _old_build(data_dir: Path, tmp_path: Path) -> Path:
    spec = RowSpec(n_examples=25, shard_size=10)
    shards = [spec.make_shard(index, np.random.default_rng(), min(10, 25 - 10 * index)) for index in range(3)]
    parts = [dump_pklz(shard, tmp_path / f"shard-{index}.pklz") for index, shard in enumerate(shards)]
    lengths = [part.stat().st_size for part in parts]
    index = {"offset": np.cumsum([0, *lengths[:-1]]).tolist(), "length": lengths, "start": [0, 10, 20],
             "stop": [10, 20, 25]}
    layout = {name: {"dtype": array.dtype.str, "shape": list(array.shape[1:])} for name, array in shards[0].items()}
    params = {"spec": spec.params(), "n_examples": 25, "shard_size": 10, "seed": 0, "builder": 2}
    meta = {"n_examples": 25, "n_shards": 3, "layout": layout, "metadata": {}, "index": index}
    return _write_old_entry(data_dir, spec.kind, params, {ARRAYS_FILE: lambda path: concat_pklz(parts, path)}, meta)


def test_entries_of_0_2_are_not_found_and_cache_gc_removes_them(tmp_path, capsys):
    data_dir = tmp_path / "data"
    old = [_old_emnist(data_dir), _old_build(data_dir, tmp_path)]
    with pytest.raises(FileNotFoundError, match="EMNIST digits is not prepared"):
        load_emnist("73", split="digits", data_dir=data_dir, download=False)
    with pytest.raises(LookupError, match="none built yet|no built dataset 'test-rows'"):
        find_built("test-rows", data_dir)
    assert CacheStore.for_data_dir(data_dir).ls() == []
    capsys.readouterr()
    assert cli.main(["cache", "verify", "--data-dir", str(data_dir)]) == 1
    out = capsys.readouterr().out
    for path in old:
        assert (f"{path / 'manifest.json'}: it is of cache format 1 (written by glyphforge '0.2.0'), which this "
                f"glyphforge (format {FORMAT_VERSION}) does not read: `glyphforge cache gc` removes it") in out
    assert cli.main(["cache", "gc", "--data-dir", str(data_dir)]) == 0
    assert not any(path.exists() for path in old)
    assert cli.main(["cache", "verify", "--data-dir", str(data_dir)]) == 0


def test_a_build_of_0_4_without_blocks_is_not_read_and_cache_gc_removes_it(tmp_path, capsys):
    """Build format 3 (glyphforge 0.4) kept each shard in one gzip member, with no blocks.npy: such an entry is
    not found (a spec's key is of build format 4 now), `cache verify` names it and `cache gc` removes it."""
    new = build(RowSpec(n_examples=25, shard_size=10), data_dir=tmp_path / "new", progress=False)
    data_dir = tmp_path / "data"
    store = CacheStore.for_data_dir(data_dir)
    with store.create(new.entry.kind, {**new.entry.params, "builder": 3}) as writer:
        for name in (ARRAYS_FILE, INDEX_FILE):
            writer.add_file(name, shutil.copy(new.path / name, tmp_path / name))
        writer.meta.update(new.entry.meta)
    [old] = [path for path in (data_dir / "cache" / new.entry.kind).iterdir() if not path.name.startswith(".")]
    assert store.ls() == []
    with pytest.raises(LookupError, match="none built yet|no built dataset 'test-rows'"):
        find_built("test-rows", data_dir)
    capsys.readouterr()
    assert cli.main(["cache", "verify", "--data-dir", str(data_dir)]) == 1
    assert (f"{old / 'manifest.json'}: it declares what no built dataset holds: its files table lists no blocks.npy, "
            "the block table every build writes since glyphforge 0.5 (build format 4): it was built before, and is "
            "not read; build it again") in capsys.readouterr().out
    assert cli.main(["cache", "gc", "--data-dir", str(data_dir)]) == 0
    assert not old.exists()


@pytest.mark.parametrize("drop, problem", [
    ("index", "its files table lists no index.npy (the shard index every build writes)"),
    ("blocks", "its files table lists no blocks.npy, the block table every build writes since glyphforge 0.5"),
    ("images", "it names no images array (meta['images'], which every build records)"),
])
def test_a_built_manifest_without_what_every_build_writes_is_broken(drop, problem):
    """0.2 kept the index in meta["index"] and recorded no images array: a manifest like that is broken."""
    files = {ARRAYS_FILE: {"size": 100, "sha256": "0" * 64}, INDEX_FILE: {"size": 160, "sha256": "1" * 64},
             BLOCKS_FILE: {"size": 176, "sha256": "2" * 64}}
    meta = {"n_examples": 25, "n_shards": 3, "layout": {"row": {"dtype": "<i8", "shape": []}}, "images": "row"}
    if drop in ("index", "blocks"):
        del files[BLOCKS_FILE if drop == "blocks" else INDEX_FILE]
    else:
        del meta["images"]
    params = {"n_examples": 25, "shard_size": 10}
    key = cache_key("k", params)
    with pytest.raises(DamagedManifestError, match=re.escape(f"it declares what no built dataset holds: {problem}")):
        parse_manifest(json.dumps(make_manifest("k", key, params, files, meta)), "k", key)
