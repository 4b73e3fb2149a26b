"""A built scene dataset as COCO detection files: ``ds.export(dir, format="coco")``.

The export holds ``images/<stem>.png`` (``000000042.png`` for a scene; ``000000042_000007.png``
for frame 7 of video 42, one image per frame) and ``annotations.json``:

* ``categories``: ``{"id": label + 1, "name": ds.classes[label]}`` (1-based, COCO's convention;
  ``category_id - 1`` is the ``labels`` value);
* ``images``: ``{"id", "file_name" (relative to images/), "height", "width"}``, ids from 1 in
  file order; for videos also ``video_id`` (from 1) and ``frame_id`` (from 0, the frame's index
  in ``images[i]``), with a ``videos`` list (``{"id", "name"}``) as CocoVID tools read;
* ``annotations``: one per object (for videos, per frame where it is ``visible``): ``id`` (from
  1), ``image_id``, ``category_id``, ``bbox = [x, y, width, height]`` (``[left, top, right - left,
  bottom - top]`` of the ``(top, left, bottom, right)`` box), ``iscrowd = 0`` and, for videos,
  ``track_id`` (the object's ``ids`` value, the same in every frame of its video). With a
  ``masks`` array each has ``segmentation``, the object's pixels (``masks == slot + 1``) as
  compressed RLE (``pycocotools.mask.encode``; the ``coco`` extra), and ``area`` its pixel
  count (0 for an object wholly covered by later ones: its box stays); without masks
  ``segmentation`` is left out (a box is no outline) and ``area`` is the box's.

So ``pycocotools.coco.COCO("annotations.json")``,
``torchvision.datasets.CocoDetection("images", "annotations.json")`` and Detectron2's
``register_coco_instances(name, {}, "annotations.json", "images")`` read it as it is.
``annotations.json`` is written as a stream, shard after shard: one decoded shard is in memory.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from glyphforge.builds.export.frames import (
    DetectionFormat,
    SceneLayout,
    ShardFrames,
    image_pattern,
    shard_frames,
    write_pngs,
)
from glyphforge.builds.reading.protocols import ShardReader
from glyphforge.hf import MissingExtraError

__all__ = ["ANNOTATIONS", "COCO", "INSTALL"]

ANNOTATIONS = "annotations.json"
INSTALL = 'pip install "glyphforge[coco]"'
#: Bytes of object masks encoded at once (each a ``(H, W)`` uint8 mask).
MASK_CHUNK_BYTES = 64 << 20


def check(dataset: ShardReader) -> SceneLayout:
    """The layout of ``dataset`` for a COCO export; pycocotools is needed when it has masks (`MissingExtraError`)."""
    layout = SceneLayout.of(dataset, "coco")
    if layout.masks:
        _mask_api()
    return layout


def _mask_api() -> Any:
    """``pycocotools.mask``, or `MissingExtraError` saying what to install."""
    try:
        from pycocotools import mask
    except ImportError:
        raise MissingExtraError(
            "a COCO export of a dataset with masks writes each object's mask as RLE with pycocotools, which is not "
            f"installed here. Install the coco extra with {INSTALL} (or pip install pycocotools) and run again; "
            "nothing was done") from None
    return mask


def write(dataset: ShardReader, layout: SceneLayout, staging: Path) -> int:
    """Write ``images/`` and ``annotations.json`` of ``dataset`` into ``staging``; return the number of files."""
    folder = staging / "images"
    folder.mkdir()
    height, width = layout.image_shape
    with open(staging / ANNOTATIONS, "w", encoding="utf-8") as out:
        out.write('{"info": ' + json.dumps({"description": f"{dataset.entry.kind} {dataset.key}"}))
        out.write(', "licenses": [], "categories": ')
        out.write(json.dumps([{"id": label + 1, "name": name} for label, name in enumerate(layout.classes)]))
        if layout.n_frames:
            out.write(', "videos": [')
            _write_items(out, ({"id": example + 1, "name": layout.name(example)}
                               for example in range(layout.n_examples)))
            out.write("]")
        out.write(', "images": [')
        _write_items(out, (_image_record(layout, example, frame, stem, height, width)
                           for example, frame, stem in layout.stems()))
        out.write('], "annotations": [')
        _write_items(out, _annotations(dataset, layout, folder))
        out.write("]}\n")
    return layout.n_examples * layout.frames_per_example + 1


def _image_record(layout: SceneLayout, example: int, frame: int, stem: str, height: int, width: int
                  ) -> dict[str, Any]:
    record: dict[str, Any] = {"id": example * layout.frames_per_example + frame + 1, "file_name": f"{stem}.png",
                              "height": height, "width": width}
    if layout.n_frames:
        record.update(video_id=example + 1, frame_id=frame)
    return record


def _write_items(out: IO[str], items: Iterable[dict[str, Any]]) -> None:
    """Write ``items`` as the elements of a JSON list (the brackets are the caller's), one a line."""
    separator = "\n"
    for item in items:
        out.write(separator + json.dumps(item))
        separator = ",\n"


def _annotations(dataset: ShardReader, layout: SceneLayout, folder: Path) -> Iterator[dict[str, Any]]:
    """Write each shard's images into ``folder``, then yield its annotations; ids from 1."""
    encode = _mask_api().encode if layout.masks else None
    next_id = 1
    for frames in shard_frames(dataset, layout):
        write_pngs([folder / f"{stem}.png" for stem in layout.shard_stems(frames)], frames.images)
        top, left, bottom, right = frames.boxes.T
        width, height = right - left, bottom - top
        image_ids = frames.example * layout.frames_per_example + frames.frame + 1
        if encode is None:
            areas, segmentations = width * height, None
        else:
            areas, segmentations = _segmentations(frames, encode)
        for k in range(len(frames.image)):
            record: dict[str, Any] = {
                "id": next_id + k, "image_id": int(image_ids[frames.image[k]]),
                "category_id": int(frames.label[k]) + 1,
                "bbox": [float(left[k]), float(top[k]), float(width[k]), float(height[k])],
                "area": float(areas[k]), "iscrowd": 0}
            if segmentations is not None:
                record["segmentation"] = segmentations[k]
            if layout.n_frames:
                record["track_id"] = int(frames.track[k])
            yield record
        next_id += len(frames.image)


def _segmentations(frames: ShardFrames, encode: Any) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Each object's pixel count and its mask as compressed RLE (``counts`` as text, for JSON)."""
    height, width = frames.images.shape[1:3]
    chunk = max(1, MASK_CHUNK_BYTES // (height * width))
    areas, segmentations = [], []
    for start in range(0, len(frames.image), chunk):
        masks = frames.object_masks(np.arange(start, min(start + chunk, len(frames.image))))
        areas.append(masks.sum(axis=(1, 2)))
        for rle in encode(np.asfortranarray(masks.transpose(1, 2, 0), dtype=np.uint8)):
            segmentations.append({"size": [int(side) for side in rle["size"]], "counts": rle["counts"].decode("ascii")})
    return (np.concatenate(areas) if areas else np.zeros(0, np.int64)), segmentations


COCO = DetectionFormat("coco", re.compile(rf"{re.escape(ANNOTATIONS)}|{image_pattern('images', 'png')}"),
                       check, write)
