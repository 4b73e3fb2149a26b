"""Parquet export and ``ds.to_hf()``: every row and column is the dataset's (read back with
``datasets.load_dataset("parquet", ...)``), from every backend; row groups and files bounded, a shard in
memory at a time; atomic; the CLI, its bad arguments (exit 2 before any work) and a missing ``hf`` extra."""
from __future__ import annotations

import json
import sys
import weakref

import datasets
import numpy as np
import pyarrow.parquet as pq
import pytest

import glyphforge as gf
from glyphforge import hf
from glyphforge.builds import BuiltDataset, build
from glyphforge.builds.export import parquet
from glyphforge.hf import MissingExtraError
from glyphforge.scenes.spec import ScatteredGlyphs

from support.box_scenes import scene_datasets  # noqa: F401 (fixture)
from support.cli import run_here
from support.copy_backends import built_rows, fresh_build, opener, source  # noqa: F401 (fixtures)
from support.gcs_server import gcs_server  # noqa: F401 (fixture)
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import DigitSpec, RowSpec


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """Scenes of font glyphs (no download): images (24, 24, 3), n_glyphs, boxes, labels named by class_names."""
    spec = ScatteredGlyphs(90, image_shape=(24, 24), glyphs="font", characters="AB7", shard_size=20, seed=3,
                           background_colours=["navy"], max_glyphs=3, glyph_shape=(8, 8))
    return build(spec, data_dir=tmp_path_factory.mktemp("scenes"), progress=False)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    return build(RowSpec(n_examples=257, shard_size=20), data_dir=tmp_path_factory.mktemp("rows"), progress=False)


def load_export(directory, cache) -> datasets.Dataset:
    """The export in ``directory`` through ``datasets.load_dataset("parquet", ...)``, its files in order."""
    files = json.loads((directory / "metadata.json").read_text())["files"]
    return datasets.load_dataset("parquet", data_files=[str(directory / name) for name in files], split="train",
                                 cache_dir=str(cache))


def assert_every_row(hf_dataset: datasets.Dataset, dataset: BuiltDataset) -> None:
    """Every row and column of ``hf_dataset`` (as Python rows, and as numpy columns) is ``dataset``'s: each array
    under its own name, or ``image``/``label`` for a single-image, single-label dataset."""
    arrays = dataset.reopened().arrays
    columns = hf.column_names({name: (array.dtype, array.shape[1:]) for name, array in arrays.items()},
                              dataset.image_name)
    assert hf_dataset.column_names == list(columns.values()) and len(hf_dataset) == len(dataset)
    for i, row in enumerate(hf_dataset):
        for name, array in arrays.items():
            got = np.asarray(row[columns[name]])
            assert got.shape == array[i].shape and np.array_equal(got, array[i]), (name, i)
    numpy = hf_dataset.with_format("numpy")[:]
    for name, array in arrays.items():
        assert np.array_equal(np.asarray(numpy[columns[name]]).astype(array.dtype), array), name


def test_scenes_exported_as_parquet_load_back_row_for_row(scenes, tmp_path):
    path = scenes.export(tmp_path / "out", format="parquet")
    document = json.loads((path / "metadata.json").read_text())
    assert document["format"] == "parquet" and document["files"] == ["data-00000-of-00001.parquet"]
    assert sorted(p.name for p in path.iterdir()) == ["data-00000-of-00001.parquet", "metadata.json"]
    loaded = load_export(path, tmp_path / "hf-cache")
    names = scenes.metadata["class_names"]
    features = loaded.features
    assert features["images"] == datasets.Image()  # PPM bytes: PIL gives the same pixels
    assert features["labels"] == datasets.List(datasets.ClassLabel(names=names))
    assert features["boxes"] == datasets.Array2D((3, 4), "float32")
    assert features["n_glyphs"] == datasets.Value("int64")
    assert_every_row(loaded, scenes)


def test_scenes_to_hf_is_every_row_with_class_names_over_the_same_memory(scenes):
    ds = scenes.reopened()
    converted = ds.to_hf()
    assert isinstance(converted, datasets.Dataset)
    assert converted.features["images"] == datasets.Image()  # as in the Parquet files
    assert converted.features["labels"].feature.names == scenes.metadata["class_names"]
    assert_every_row(converted, scenes)
    boxes = converted.data.column("boxes").chunk(0).storage.values.values
    assert boxes.buffers()[1].address == ds.arrays["boxes"].ctypes.data  # the numbers are not copied
    assert converted._fingerprint == ds.reopened().to_hf()._fingerprint  # the entry's, not a hash of the bytes


def test_videos_to_hf_and_as_parquet_are_every_row_with_their_frames(scene_datasets, tmp_path):
    videos = scene_datasets["videos-masks"]  # images (5, 24, 36, 3) a row; boxes (5, 3, 4); labels, ids, visible (5, 3)
    converted = videos.reopened().to_hf()
    features = converted.features
    assert features["images"] == datasets.Array4D((5, 24, 36, 3), "uint8")
    assert features["boxes"] == datasets.Array3D((5, 3, 4), "float32")
    assert features["labels"] == datasets.List(datasets.List(datasets.ClassLabel(names=list(videos.classes))))
    assert features["ids"] == datasets.Array2D((5, 3), "int64") and features["masks"] == datasets.Array3D(
        (5, 24, 36), "uint8")
    assert_every_row(converted, videos)
    loaded = load_export(videos.export(tmp_path / "out", format="parquet"), tmp_path / "hf-cache")
    assert loaded.features == features  # the frames stay arrays (an image feature is one picture)
    assert_every_row(loaded, videos)


@pytest.mark.parametrize("spec", [
    DigitSpec(),
    RowSpec(n_examples=57, shard_size=20),
    ScatteredGlyphs(30, image_shape=(16, 16), glyphs="font", characters="AB", shard_size=20, seed=1, max_glyphs=2,
                    glyph_shape=(8, 8)),
], ids=["image+label", "rows", "scenes"])
def test_load_dataset_of_an_export_is_to_hf_feature_for_feature(spec, tmp_path):
    ds = build(spec, data_dir=tmp_path / "data", progress=False)
    converted = ds.to_hf()
    loaded = load_export(ds.export(tmp_path / "out", format="parquet"), tmp_path / "hf-cache")
    assert loaded.features == converted.features
    assert_every_row(loaded, ds)
    assert_every_row(converted, ds)
    if isinstance(spec, DigitSpec):  # the Hub's MNIST: image, label
        assert converted.features == datasets.Features({"image": datasets.Image(),
                                                        "label": datasets.ClassLabel(names=["zero", "one", "two"])})


def test_parquet_export_and_to_hf_from_every_backend(opener, tmp_path):
    dataset = opener()
    path = dataset.export(tmp_path / "out", format="parquet")
    loaded = load_export(path, tmp_path / "hf-cache")
    assert loaded.features["name"] == datasets.Value("string") and loaded.features["row"] == datasets.Value("int64")
    assert_every_row(loaded, dataset)
    assert_every_row(opener().to_hf(), dataset)


def test_row_groups_and_files_are_bounded_and_a_few_shards_are_decoded_at_a_time(rows, tmp_path, monkeypatch):
    row_bytes = 12 + 8 + 4 * 5  # images (3, 4) uint8, row int64, name <U5
    monkeypatch.setattr(parquet, "ROW_GROUP_BYTES", 30 * row_bytes)
    monkeypatch.setattr(parquet, "FILE_BYTES", 4 * 30 * row_bytes)
    decoded: list[weakref.ref] = []
    alive: list[int] = []
    original = BuiltDataset._decode

    def tracked(self, number):
        alive.append(sum(ref() is not None for ref in decoded))
        shard = original(self, number)
        decoded.append(weakref.ref(shard["row"]))
        return shard

    monkeypatch.setattr(BuiltDataset, "_decode", tracked)
    path = rows.export(tmp_path / "out", format="parquet")
    assert len(alive) == len(rows.index)
    assert max(alive) <= parquet.AHEAD + 2  # the shard written, those decoded ahead, and one a row group still holds
    files = json.loads((path / "metadata.json").read_text())["files"]
    assert files == [f"data-0000{i}-of-00003.parquet" for i in range(3)]
    groups = [[pq.ParquetFile(path / name).metadata.row_group(g).num_rows
               for g in range(pq.ParquetFile(path / name).metadata.num_row_groups)] for name in files]
    assert groups == [[30] * 4, [30] * 4, [17]]  # 257 rows
    assert_every_row(load_export(path, tmp_path / "hf-cache"), rows)


def test_a_parquet_export_is_atomic_kept_and_replaced_only_with_overwrite(rows, tmp_path, monkeypatch):
    def broken(self, number):
        if number == 5:
            raise OSError("No space left on device")
        return original(self, number)

    original = BuiltDataset.shard
    with monkeypatch.context() as patch:
        patch.setattr(BuiltDataset, "shard", broken)
        with pytest.raises(OSError, match="No space left on device"):
            rows.export(tmp_path / "out", format="parquet")
    assert [path.name for path in tmp_path.iterdir()] == [".out.export.lock"]  # no directory, no staging, no file
    path = rows.export(tmp_path / "out", format="npy")
    with pytest.raises(gf.ExportTargetError, match=r"it holds this dataset's export as npy, not parquet\. Give a new "
                                                   r"or empty directory, or overwrite=True"):
        rows.export(path, format="parquet")
    assert rows.export(path, format="parquet", overwrite=True) == path
    assert sorted(p.name for p in path.iterdir()) == ["data-00000-of-00001.parquet", "metadata.json"]
    stamp = (path / "data-00000-of-00001.parquet").stat().st_mtime_ns
    assert rows.export(path, format="parquet") == path  # the same export: kept as it is
    assert (path / "data-00000-of-00001.parquet").stat().st_mtime_ns == stamp
    rows.export(path, format="npy", overwrite=True)
    assert sorted(p.name for p in path.iterdir()) == ["images.npy", "metadata.json", "name.npy", "row.npy"]


def test_the_export_command_writes_parquet_and_refuses_bad_arguments_before_any_work(rows, tmp_path, monkeypatch):
    data_dir = rows.path.parents[2]
    done = run_here("glyphforge", "export", "test-rows", tmp_path / "out", "--format", "parquet",
                    "--data-dir", data_dir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"exported test-rows {rows.key[:12]} (257 examples, ")
    assert_every_row(load_export(tmp_path / "out", tmp_path / "hf-cache"), rows)
    bad = run_here("glyphforge", "export", "test-rows", tmp_path / "bad", "--format", "arrow", "--data-dir", data_dir)
    assert bad.returncode == 2
    assert "invalid choice: 'arrow' (choose from 'npy', 'parquet', 'coco', 'yolo', 'mot')" in bad.stderr
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as without the hf extra
    missing = run_here("glyphforge", "export", "test-rows", tmp_path / "bad", "--format", "parquet",
                       "--data-dir", data_dir)
    assert missing.returncode == 2, missing.stderr
    assert missing.stderr.startswith("error: glyphforge export --format parquet needs pyarrow and Hugging Face "
                                     "datasets, and pyarrow is not installed here. Install the hf extra with pip "
                                     'install "glyphforge[hf]"')
    assert "Traceback" not in missing.stderr and not (tmp_path / "bad").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.export.lock", "hf-cache", "out"]  # no lock of "bad"


def test_without_the_hf_extra_to_hf_and_parquet_say_what_to_install(rows, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    ds = rows.reopened()
    with pytest.raises(MissingExtraError, match=r'^ds.to_hf\(\) needs pyarrow and Hugging Face datasets, and '
                                                r'datasets is not installed here\. Install the hf extra with pip '
                                                r'install "glyphforge\[hf\]"') as raised:
        ds.to_hf()
    assert isinstance(raised.value, ImportError) and isinstance(raised.value, gf.ArgumentError)
    assert ds._arrays is None  # nothing was decoded
    with pytest.raises(MissingExtraError, match=r"^Exporting to Parquet needs pyarrow"):
        ds.export(tmp_path / "out", format="parquet")
    assert list(tmp_path.iterdir()) == []
