"""``ds.export(dir, format="yolo" | "mot")`` parsed back equal to ``ds[i]``; the command for every detection format;
bad requests (MOT of still scenes, a detection format of a dataset without boxes) refused before any work; and the
export's safety (kept, replaced only with overwrite, a foreign file inside protects, a full disk leaves nothing)
for every detection format."""
from __future__ import annotations

import configparser
import json
import weakref

import numpy as np
import pytest
import yaml
from PIL import Image

from glyphforge.builds import BuiltDataset, build
from glyphforge.builds.export.files import ExportTargetError
from glyphforge.builds.export.frames import ExportFormatError

from support.box_scenes import SPECS, VIDEOS, frame_objects, scene_datasets  # noqa: F401 (fixture)
from support.cli import run_here
from support.mounts import tmpfs
from support.specs import RowSpec

DETECTION = ("coco", "yolo", "mot")


def images_of(dataset):
    """``(stem, frame image, targets, frame index or None)`` of every image of ``dataset``, in order."""
    for i in range(len(dataset)):
        image, targets = dataset[i]
        if image.ndim == 4:
            for frame in range(len(image)):
                yield f"{i:09d}_{frame:06d}", image[frame], targets, frame
        else:
            yield f"{i:09d}", image, targets, None


@pytest.mark.parametrize("name", list(SPECS))
def test_yolo_labels_parse_back_to_every_box_of_the_dataset(name, scene_datasets, tmp_path):
    dataset = scene_datasets[name]
    path = dataset.export(tmp_path / "yolo", format="yolo")
    data = yaml.safe_load((path / "data.yaml").read_text())
    assert data == {"train": "images", "val": "images", "nc": len(dataset.classes),
                    "names": dict(enumerate(dataset.classes))}
    stems = []
    for stem, image, targets, frame in images_of(dataset):
        stems.append(stem)
        with Image.open(path / "images" / f"{stem}.png") as png:
            assert np.array_equal(np.asarray(png), image)
        height, width = image.shape[:2]
        lines = (path / "labels" / f"{stem}.txt").read_text().splitlines()
        expected = frame_objects(targets, frame)
        assert len(lines) == len(expected)
        for line, (_, label, (top, left, bottom, right)) in zip(lines, expected, strict=True):
            words = line.split(" ")
            assert len(words) == 5 and int(words[0]) == label
            values = np.array(words[1:], float)
            assert np.all((values >= 0) & (values <= 1))
            assert np.allclose(values, [(left + right) / 2 / width, (top + bottom) / 2 / height,
                                        (right - left) / width, (bottom - top) / height], rtol=0, atol=5e-7)
    assert sorted(p.stem for p in (path / "images").iterdir()) == stems
    assert sorted(p.stem for p in (path / "labels").iterdir()) == stems
    assert json.loads((path / "metadata.json").read_text())["n_files"] == 2 * len(stems) + 1


@pytest.mark.parametrize("name", VIDEOS)
def test_mot_sequences_parse_back_to_every_box_id_and_frame(name, scene_datasets, tmp_path):
    dataset = scene_datasets[name]
    path = dataset.export(tmp_path / "mot", format="mot")
    assert sorted(p.name for p in path.iterdir()) == [*(f"{i:09d}" for i in range(len(dataset))), "metadata.json"]
    for i in range(len(dataset)):
        video, targets = dataset[i]
        folder = path / f"{i:09d}"
        info = configparser.ConfigParser()
        info.read(folder / "seqinfo.ini")
        assert dict(info["Sequence"]) == {"name": f"{i:09d}", "imdir": "img1", "framerate": "30",
                                          "seqlength": str(len(video)), "imwidth": str(video.shape[2]),
                                          "imheight": str(video.shape[1]), "imext": ".png"}
        assert sorted(p.name for p in (folder / "img1").iterdir()) == [f"{t + 1:06d}.png" for t in range(len(video))]
        for t, frame in enumerate(video):
            with Image.open(folder / "img1" / f"{t + 1:06d}.png") as png:
                assert np.array_equal(np.asarray(png), frame)
        rows = np.loadtxt(folder / "gt" / "gt.txt", delimiter=",", ndmin=2).reshape(-1, 9)
        expected = [[t + 1, slot + 1, left, top, right - left, bottom - top, 1, label + 1, 1]
                    for t in range(len(video)) for slot, label, (top, left, bottom, right) in frame_objects(targets, t)]
        assert rows.tolist() == expected  # by frame, then id: every visible box, and only those
        assert rows[:, 1].tolist() == (targets["ids"][targets["visible"] > 0] + 1).tolist()
    assert sum(len((path / f"{i:09d}" / "gt" / "gt.txt").read_text().splitlines()) for i in range(len(dataset))) > 0


@pytest.mark.parametrize("format", DETECTION)
def test_the_export_command_writes_each_detection_format(format, scene_datasets, tmp_path):
    dataset = scene_datasets["videos"]
    result = run_here("glyphforge", "export", "test-box-videos", tmp_path / "out", "--format", format,
                      "--data-dir", dataset.path.parents[2])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"exported test-box-videos {dataset.key[:12]} (9 examples, ")
    document = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert document["format"] == format and document["key"] == dataset.key
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert document["n_files"] == len(files) - 1 and len(list((tmp_path / "out").rglob("*.png"))) == 9 * 4


def test_bad_requests_are_refused_before_any_work(scene_datasets, tmp_path):
    still = scene_datasets["scenes"]
    rows = build(RowSpec(n_examples=30, shard_size=10), data_dir=still.path.parents[2], progress=False)
    cases = [(still, "test-box-scenes", "mot", "its examples are still scenes (24x36 images), and MOTChallenge "
                                               "files are tracks through the frames of videos"),
             *((rows, "test-rows", format, "it has no 'boxes' and no 'labels' array (it has images, name, row)")
               for format in DETECTION)]
    for dataset, kind, format, says in cases:
        with pytest.raises(ExportFormatError, match="cannot export") as error:
            dataset.export(tmp_path / "out", format=format)
        assert says in str(error.value)
        result = run_here("glyphforge", "export", kind, tmp_path / "out", "--format", format,
                          "--data-dir", still.path.parents[2])
        assert result.returncode == 2 and says in result.stderr and "Traceback" not in result.stderr
        assert list(tmp_path.iterdir()) == []  # nothing: no directory, no lock


@pytest.mark.parametrize("format", DETECTION)
def test_an_export_is_kept_replaced_only_with_overwrite_and_a_foreign_file_protects_it(format, scene_datasets,
                                                                                        tmp_path):
    videos: BuiltDataset = scene_datasets["videos"]
    path = videos.export(tmp_path / "out", format=format)
    stamps = {p: p.stat().st_mtime_ns for p in path.rglob("*")}
    assert videos.export(path, format=format) == path  # the same export: kept as it is
    assert {p: p.stat().st_mtime_ns for p in path.rglob("*")} == stamps
    other = "yolo" if format != "yolo" else "coco"
    with pytest.raises(ExportTargetError, match=f"this dataset's export as {format}, not {other}"):
        videos.export(path, format=other)
    videos.export(path, format=other, overwrite=True)  # folders of the earlier export replaced or removed
    assert sorted(p.name for p in path.iterdir()) == sorted(p.name for p in videos.export(tmp_path / "fresh",
                                                                                         format=other).iterdir())
    videos.export(path, format="npy", overwrite=True)
    assert all(p.is_file() for p in path.iterdir()) and (path / "images.npy").is_file()
    videos.export(path, format=format, overwrite=True)
    mine = next(p for p in sorted(path.rglob("*")) if p.is_dir()) / "notes.txt"  # a user's file in its folder
    mine.write_text("mine")
    for overwrite in (False, True):
        with pytest.raises(ExportTargetError, match="that no export wrote"):
            videos.export(path, format="npy", overwrite=overwrite)
    assert mine.read_text() == "mine"
    mine.unlink()
    next(path.rglob("*.png")).unlink()  # a file fewer than the export wrote: no whole export either
    with pytest.raises(ExportTargetError, match="that no export wrote"):
        videos.export(path, format=format, overwrite=True)


@pytest.mark.parametrize("format", DETECTION)
def test_a_full_disk_names_the_path_and_leaves_nothing(format, scene_datasets, tmp_path):
    dataset = scene_datasets["videos-masks"]
    with tmpfs(tmp_path / "small", "size=64k") as small:  # a page a file: the 45 frames of the export do not fit
        for target, left in ((small, []), (small / "out", [".out.export.lock"])):
            result = run_here("glyphforge", "export", "test-box-video-masks", target, "--format", format,
                              "--data-dir", dataset.path.parents[2])
            assert result.returncode == 1, result.stderr
            assert f"error: cannot write {target}: the disk is full (" in result.stderr
            assert [p.name for p in small.iterdir()] == left


@pytest.mark.parametrize("format", DETECTION)
def test_each_shard_is_decoded_once_and_one_at_a_time(format, scene_datasets, tmp_path, monkeypatch):
    videos = scene_datasets["videos-masks"]
    decoded: list[weakref.ref] = []
    alive: list[int] = []
    original = BuiltDataset._decode

    def tracked(self, number):
        alive.append(sum(ref() is not None for ref in decoded))
        shard = original(self, number)
        decoded.append(weakref.ref(shard["images"]))
        return shard

    monkeypatch.setattr(BuiltDataset, "_decode", tracked)
    videos.export(tmp_path / "out", format=format)
    assert len(alive) == len(videos.index) == 3 and max(alive) <= 1  # the shard written until the next is decoded
