"""A built scene dataset as YOLO text labels: ``ds.export(dir, format="yolo")``, Ultralytics' layout.

The export holds ``images/<stem>.png`` (as the COCO export names them: one image per scene, or per
frame of a video), ``labels/<stem>.txt`` beside each (an empty file for an image without objects) with
one line per object (for videos, per frame where it is ``visible``)::

    class x_center y_center width height

``class`` is the ``labels`` value (0-based, as ``names`` in ``data.yaml`` index it) and the box
is normalised by the image's width and height to [0, 1] (six decimals). ``data.yaml`` names the
classes (``names: {0: ..., 1: ...}``, ``nc``) and sets ``train`` and ``val`` to ``images``; it
gives no ``path``, so Ultralytics reads the folders beside the file wherever the export is moved.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from glyphforge.builds.export.frames import DetectionFormat, SceneLayout, image_pattern, shard_frames, write_pngs
from glyphforge.builds.reading.protocols import ShardReader

__all__ = ["DATA_YAML", "YOLO"]

DATA_YAML = "data.yaml"


def check(dataset: ShardReader) -> SceneLayout:
    """The layout of ``dataset`` for a YOLO export."""
    return SceneLayout.of(dataset, "yolo")


def write(dataset: ShardReader, layout: SceneLayout, staging: Path) -> int:
    """Write ``images/``, ``labels/`` and ``data.yaml`` of ``dataset`` into ``staging``; return the number of files."""
    images, labels = staging / "images", staging / "labels"
    images.mkdir()
    labels.mkdir()
    height, width = layout.image_shape
    for frames in shard_frames(dataset, layout):
        stems = layout.shard_stems(frames)
        write_pngs([images / f"{stem}.png" for stem in stems], frames.images)
        top, left, bottom, right = frames.boxes.T
        columns = np.stack([(left + right) / (2 * width), (top + bottom) / (2 * height),
                            (right - left) / width, (bottom - top) / height], axis=1)
        ends = np.searchsorted(frames.image, np.arange(len(stems) + 1))  # objects of image j: ends[j]:ends[j + 1]
        for j, stem in enumerate(stems):
            lines = [f"{frames.label[k]} {' '.join(f'{value:.6f}' for value in columns[k])}\n"
                     for k in range(ends[j], ends[j + 1])]
            (labels / f"{stem}.txt").write_text("".join(lines), encoding="utf-8")
    names = "".join(f"  {label}: {json.dumps(name)}\n" for label, name in enumerate(layout.classes))
    (staging / DATA_YAML).write_text(  # JSON strings are YAML double-quoted scalars
        f"# {dataset.entry.kind} {dataset.key}, exported by glyphforge\ntrain: images\nval: images\n"
        f"nc: {len(layout.classes)}\nnames:\n{names}", encoding="utf-8")
    return 2 * layout.n_examples * layout.frames_per_example + 1


YOLO = DetectionFormat(
    "yolo", re.compile(rf"{re.escape(DATA_YAML)}|{image_pattern('images', 'png')}|{image_pattern('labels', 'txt')}"),
    check, write)
