"""A built video dataset as MOTChallenge sequences: ``ds.export(dir, format="mot")`` (videos only).

One folder per video, named by its number (``000000042/``), as MOT17's ``train/MOT17-02/``:

* ``img1/000001.png`` ...: its frames, counted from 1;
* ``gt/gt.txt``: one line per object in each frame where it is ``visible`` (an object not shown
  has no box to give), sorted by frame then id, as MOT17's ground truth::

      frame, id, bb_left, bb_top, bb_width, bb_height, conf, class, visibility

  ``frame`` and ``id`` count from 1 (``id`` is the ``ids`` value + 1); the box is in pixels as the
  arrays give it (``bb_left = left``, ``bb_top = top``: 0-based); ``conf`` is 1 (every box is
  scored); ``class`` is the ``labels`` value + 1 (as the COCO export's ``category_id``);
  ``visibility`` is 1 (a written box is shown; how much of it is hidden is not recorded);
* ``seqinfo.ini``: ``name``, ``imDir``, ``frameRate`` (`FRAME_RATE`: the arrays have no frame
  rate), ``seqLength``, ``imWidth``, ``imHeight`` and ``imExt``.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from glyphforge.builds.export.frames import (
    EXAMPLE_DIGITS,
    FRAME_DIGITS,
    DetectionFormat,
    ExportFormatError,
    SceneLayout,
    ShardFrames,
    shard_frames,
    write_pngs,
)
from glyphforge.builds.reading.protocols import ShardReader

__all__ = ["FRAME_RATE", "MOT"]

#: ``seqinfo.ini``'s frame rate: MOT17's most common (the arrays carry none; trackers scale their memory by it).
FRAME_RATE = 30


def check(dataset: ShardReader) -> SceneLayout:
    """The layout of the video dataset ``dataset`` for a MOT export; static scenes raise `ExportFormatError`."""
    layout = SceneLayout.of(dataset, "mot")
    if not layout.n_frames:
        raise ExportFormatError(
            f"cannot export {dataset.entry.kind} {dataset.key[:12]} as mot: its examples are still scenes "
            f"({layout.image_shape[0]}x{layout.image_shape[1]} images), and MOTChallenge files are tracks through "
            "the frames of videos. Export still scenes with format='coco' or 'yolo', or build videos (n_frames >= "
            "1) to export them as mot; nothing was written")
    return layout


def write(dataset: ShardReader, layout: SceneLayout, staging: Path) -> int:
    """Write one sequence folder per video of ``dataset`` into ``staging``; return the number of files."""
    height, width = layout.image_shape
    steps = layout.n_frames
    for frames in shard_frames(dataset, layout):
        ends = np.searchsorted(frames.image, np.arange(0, len(frames.images) + 1, steps))  # objects of each video
        for video in range(len(frames.images) // steps):
            name = layout.name(int(frames.example[video * steps]))
            folder = staging / name
            (folder / "img1").mkdir(parents=True)
            (folder / "gt").mkdir()
            write_pngs([folder / "img1" / f"{frame + 1:0{FRAME_DIGITS}d}.png" for frame in range(steps)],
                       frames.images[video * steps:(video + 1) * steps])
            (folder / "gt" / "gt.txt").write_text(_gt_lines(frames, range(ends[video], ends[video + 1]), steps),
                                                  encoding="utf-8")
            (folder / "seqinfo.ini").write_text(
                f"[Sequence]\nname={name}\nimDir=img1\nframeRate={FRAME_RATE}\nseqLength={steps}\n"
                f"imWidth={width}\nimHeight={height}\nimExt=.png\n", encoding="utf-8")
    return layout.n_examples * (steps + 2)


def _gt_lines(frames: ShardFrames, objects: range, steps: int) -> str:
    """The ``gt.txt`` lines of ``objects`` (one video's), sorted by frame then id."""
    chosen = np.arange(objects.start, objects.stop)
    frame, track = frames.image[chosen] % steps + 1, frames.track[chosen] + 1
    lines = []
    for k in np.lexsort((track, frame)):
        top, left, bottom, right = frames.boxes[chosen[k]]
        lines.append(f"{frame[k]},{track[k]},{left:g},{top:g},{right - left:g},{bottom - top:g},1,"
                     f"{frames.label[chosen[k]] + 1},1\n")
    return "".join(lines)


MOT = DetectionFormat(
    "mot", re.compile(rf"\d{{{EXAMPLE_DIGITS}}}/(img1/\d{{{FRAME_DIGITS}}}\.png|gt/gt\.txt|seqinfo\.ini)"),
    check, write)
