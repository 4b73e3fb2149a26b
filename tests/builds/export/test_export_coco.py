"""``ds.export(dir, format="coco")``, read by the real clients: pycocotools loads every image and object back equal to
``ds[i]`` (boxes, classes, track ids, masks as RLE), COCOeval scores the ground truth as detections at AP 1.0 (bbox,
and segm with masks), torchvision's CocoDetection reads every image and box; pycocotools is needed only for masks."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from PIL import Image

from glyphforge.builds.export import frames as export_frames
from glyphforge.hf import MissingExtraError

from support.box_scenes import MASKS, SPECS, VIDEOS, frame_objects, scene_datasets  # noqa: F401 (fixture)
from support.cli import run_here

coco_api = pytest.importorskip("pycocotools.coco", reason="pycocotools is not installed (the test extra brings it)")
from pycocotools import mask as mask_api  # noqa: E402 (after the skip)
from pycocotools.cocoeval import COCOeval  # noqa: E402

ALL = list(SPECS)


def frames(dataset):
    """``(image id, frame image, targets, frame index or None)`` of every image of ``dataset``, in export order."""
    image_id = 1
    for i in range(len(dataset)):
        image, targets = dataset[i]
        for frame in range(len(image)) if image.ndim == 4 else [None]:
            yield image_id, image if frame is None else image[frame], targets, frame
            image_id += 1


@pytest.mark.parametrize("name", ALL)
def test_pycocotools_loads_every_image_and_object_equal_to_the_dataset(name, scene_datasets, tmp_path):
    dataset = scene_datasets[name]
    path = dataset.export(tmp_path / "coco", format="coco")
    coco = coco_api.COCO(str(path / "annotations.json"))
    assert coco.dataset["categories"] == [{"id": k + 1, "name": c} for k, c in enumerate(dataset.classes)]
    video = name in VIDEOS
    steps = dataset.layout["images"]["shape"][0] if video else 1
    assert sorted(coco.imgs) == list(range(1, len(dataset) * steps + 1))
    assert len(coco.dataset.get("videos", [])) == (len(dataset) if video else 0)
    n_objects = 0
    for image_id, image, targets, frame in frames(dataset):
        record = coco.imgs[image_id]
        assert (record["height"], record["width"]) == image.shape[:2]
        if video:
            assert (record["video_id"], record["frame_id"]) == ((image_id - 1) // steps + 1, frame)
        with Image.open(path / "images" / record["file_name"]) as png:
            assert np.array_equal(np.asarray(png), image)
        annotations = coco.loadAnns(coco.getAnnIds(imgIds=[image_id]))
        expected = frame_objects(targets, frame)
        assert len(annotations) == len(expected)
        n_objects += len(expected)
        for annotation, (slot, label, (top, left, bottom, right)) in zip(annotations, expected, strict=True):
            assert annotation["category_id"] == label + 1 and annotation["iscrowd"] == 0
            assert annotation["bbox"] == [left, top, right - left, bottom - top]
            assert annotation.get("track_id") == (slot if video else None)
            if name in MASKS:
                own = targets["masks"] if frame is None else targets["masks"][frame]
                expected_mask = own == slot + 1
                assert np.array_equal(coco.annToMask(annotation), expected_mask)
                assert annotation["area"] == expected_mask.sum() > 0
                ys, xs = np.nonzero(expected_mask)  # the mask lies inside its box
                assert top <= ys.min() and ys.max() < bottom and left <= xs.min() and xs.max() < right
            else:
                assert "segmentation" not in annotation and annotation["area"] == (right - left) * (bottom - top)
    assert sorted(coco.anns) == list(range(1, n_objects + 1)) and n_objects > 0
    files = sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())
    assert files == sorted(["annotations.json", "metadata.json",
                            *(f"images/{coco.imgs[k]['file_name']}" for k in coco.imgs)])
    assert json.loads((path / "metadata.json").read_text())["n_files"] == len(files) - 1


@pytest.mark.parametrize("name", ALL)
def test_cocoeval_scores_the_ground_truth_as_detections_at_ap_1(name, scene_datasets, tmp_path):
    path = scene_datasets[name].export(tmp_path / "coco", format="coco")
    truth = coco_api.COCO(str(path / "annotations.json"))
    for iou_type in ("bbox", "segm") if name in MASKS else ("bbox",):
        keep = ("image_id", "category_id", "bbox", "segmentation") if iou_type == "segm" else (
            "image_id", "category_id", "bbox")
        detections = truth.loadRes([{**{key: ann[key] for key in keep}, "score": 1.0}
                                    for ann in truth.dataset["annotations"]])
        evaluation = COCOeval(truth, detections, iou_type)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
        assert evaluation.stats[0] == 1.0 and evaluation.stats[1] == 1.0 and evaluation.stats[8] == 1.0, iou_type
    lost = truth.loadRes([{"image_id": ann["image_id"], "category_id": ann["category_id"],
                           "bbox": [x + 2, y, w, h], "score": 1.0}
                          for ann in truth.dataset["annotations"] for x, y, w, h in [ann["bbox"]]])
    shifted = COCOeval(truth, lost, "bbox")  # the check can fail: boxes moved by 2 pixels score below 1
    shifted.evaluate()
    shifted.accumulate()
    shifted.summarize()
    assert shifted.stats[0] < 1.0


def torchvision_datasets():
    """``torchvision.datasets``, or a skip saying precisely why it does not import here."""
    try:
        import torchvision.datasets
    except ImportError as error:
        pytest.skip(f"torchvision is not installed ({error}); CI does not install it: PyPI's wheels are CUDA "
                    "builds, which do not import beside torch's CPU build")
    except (RuntimeError, OSError) as error:
        import torch

        pytest.skip(f"torchvision is installed but does not import beside torch {torch.__version__} ({error!r}): "
                    "PyPI's torchvision wheels are CUDA builds, whose torchvision/_C.so needs libc10_cuda.so, which "
                    "torch's CPU build lacks; its CPU build comes from download.pytorch.org/whl/cpu")
    return torchvision.datasets


@pytest.mark.parametrize("name", ["scenes-masks", "videos", "font"])
def test_torchvision_coco_detection_reads_every_image_and_box(name, scene_datasets, tmp_path):
    datasets = torchvision_datasets()
    dataset = scene_datasets[name]
    path = dataset.export(tmp_path / "coco", format="coco")
    detection = datasets.CocoDetection(str(path / "images"), str(path / "annotations.json"))
    expected = list(frames(dataset))
    assert len(detection) == len(expected)
    for k, (image_id, image, targets, frame) in enumerate(expected):
        picture, annotations = detection[k]
        assert np.array_equal(np.asarray(picture), image if image.ndim == 3 else np.asarray(
            Image.fromarray(image).convert("RGB")))
        assert all(annotation["image_id"] == image_id for annotation in annotations)
        assert [(a["category_id"] - 1, a["bbox"]) for a in annotations] == [
            (label, [left, top, right - left, bottom - top])
            for _, label, (top, left, bottom, right) in frame_objects(targets, frame)]


def test_pycocotools_is_needed_only_for_masks(scene_datasets, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pycocotools", None)  # as if not installed: importing it raises ImportError
    masked = scene_datasets["scenes-masks"]
    with pytest.raises(MissingExtraError, match=r'pip install "glyphforge\[coco\]"'):
        masked.export(tmp_path / "masked", format="coco")
    assert list(tmp_path.iterdir()) == []  # refused before anything was touched
    result = run_here("glyphforge", "export", "test-box-masks", tmp_path / "masked", "--format", "coco",
                      "--data-dir", masked.path.parents[2])
    assert result.returncode == 2, result.stderr
    assert "writes each object's mask as RLE with pycocotools, which is not installed here" in result.stderr
    assert list(tmp_path.iterdir()) == []
    path = scene_datasets["scenes"].export(tmp_path / "boxes", format="coco")  # no masks: no pycocotools
    assert (path / "annotations.json").is_file()


def test_rle_of_masks_is_encoded_in_chunks(scene_datasets, tmp_path, monkeypatch):
    from glyphforge.builds.export import coco as export_coco

    whole = scene_datasets["videos-masks"].export(tmp_path / "whole", format="coco")
    monkeypatch.setattr(export_coco, "MASK_CHUNK_BYTES", 1)  # one mask at a time
    monkeypatch.setattr(export_frames, "PNG_THREADS", 1)
    chunked = scene_datasets["videos-masks"].export(tmp_path / "chunked", format="coco")
    assert (whole / "annotations.json").read_bytes() == (chunked / "annotations.json").read_bytes()
    segmentation = json.loads((whole / "annotations.json").read_text())["annotations"][0]["segmentation"]
    assert isinstance(segmentation["counts"], str) and mask_api.area(segmentation) > 0
