"""Exporting a built dataset to .npy files: equal to the original, memory-mappable, atomic, and from the CLI."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from glyphforge import cli
from glyphforge.builds import BuiltDataset, build

from support.specs import RowSpec


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build(RowSpec(n_examples=257, shard_size=20), data_dir=tmp_path_factory.mktemp("export"), progress=False)


def test_an_export_reloads_equal_to_the_original_through_memmaps(built, tmp_path):
    path = built.export(tmp_path / "out")
    assert sorted(p.name for p in path.iterdir()) == ["images.npy", "metadata.json", "name.npy", "row.npy"]
    arrays = built.reopened().arrays
    for name, array in arrays.items():
        mapped = np.load(path / f"{name}.npy", mmap_mode="r")
        assert isinstance(mapped, np.memmap) and mapped.dtype == array.dtype and np.array_equal(mapped, array), name
    document = json.loads((path / "metadata.json").read_text())
    assert document["key"] == built.key and document["n_examples"] == 257 and document["kind"] == "test-rows"
    assert document["arrays"]["images"] == {"dtype": "uint8", "shape": [257, 3, 4]}
    assert document["params"] == built.entry.params


def test_exporting_again_is_a_no_op_and_other_contents_are_protected(built, tmp_path):
    path = built.export(tmp_path / "out")
    stamp = (path / "row.npy").stat().st_mtime_ns
    assert built.export(path) == path and (path / "row.npy").stat().st_mtime_ns == stamp
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    for overwrite in (False, True):  # --overwrite replaces only an export: see test_export_safety.py
        with pytest.raises(FileExistsError, match=r"other: it holds 1 entry \(notes.txt\) that no export wrote"):
            built.export(tmp_path / "other", overwrite=overwrite)
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="format must be one of npy, parquet, coco, yolo, mot, got 'zarr'"):
        built.export(tmp_path / "z", format="zarr")


def test_a_failed_export_leaves_nothing_that_looks_complete(built, tmp_path, monkeypatch):
    def broken(self, number):
        if number == 5:
            raise OSError("No space left on device")
        return original(self, number)

    original = BuiltDataset.shard
    monkeypatch.setattr(BuiltDataset, "shard", broken)
    with pytest.raises(OSError, match="No space left on device"):
        built.export(tmp_path / "out")
    assert [path.name for path in tmp_path.iterdir()] == [".out.export.lock"]  # no directory, no staging


def test_the_export_command(built, tmp_path):
    data_dir = built.path.parents[2]
    script = Path(sys.executable).parent / "glyphforge"  # the installed console script
    result = subprocess.run([str(script), "export", "test-rows", str(tmp_path / "cli"), "--data-dir", str(data_dir)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"exported test-rows {built.key[:12]} (257 examples, ")
    assert np.array_equal(np.load(tmp_path / "cli" / "row.npy"), np.arange(257))
    assert cli.main(["export", "scenes", str(tmp_path / "x"), "--data-dir", str(data_dir)]) == 2
