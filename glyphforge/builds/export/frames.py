"""A built scene dataset frame by frame, for the detection exports (COCO, YOLO, MOT): its layout checked, its
objects as flat tables, and its frames written as PNG files.

The arrays are the scene family's (static scenes: ``images`` ``(n, H, W[, 3])``, ``boxes``
``(n, G, 4)`` as ``(top, left, bottom, right)``, ``labels`` ``(n, G)``, optional ``masks``
``(n, H, W)``; videos: ``images`` ``(n, T, H, W, 3)``, ``boxes`` ``(n, T, G, 4)``, ``labels``,
``ids`` and ``visible`` ``(n, T, G)``, optional ``masks`` ``(n, T, H, W)``). A static scene is a
video of one frame here: its objects are its slots with a label (``labels >= 0``), its ids their
slots, and every one visible; a video's objects are the slots ``visible`` in each frame.

`SceneLayout.of` checks the layout before any work (`ExportFormatError` says what is missing);
`shard_frames` reads one shard at a time, so an export holds one decoded shard, whatever the size.
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from glyphforge.builds.reading.protocols import ShardReader
from glyphforge.errors import ArgumentError

__all__ = ["DetectionFormat", "ExportFormatError", "SceneLayout", "ShardFrames", "image_pattern", "shard_frames",
           "write_pngs"]

#: Digits of an example's number in file names (``000000042``), and of a frame's (``000007``).
EXAMPLE_DIGITS = 9
FRAME_DIGITS = 6
#: Threads encoding PNG files (zlib releases the GIL).
PNG_THREADS = min(4, os.cpu_count() or 1)
#: zlib's level for the PNG files: 1 encoded 64x64 font scenes in 0.40 ms each, 8% larger than level 6's 0.66 ms.
PNG_COMPRESS_LEVEL = 1


class ExportFormatError(ArgumentError, ValueError):
    """The dataset has no arrays the export format needs (boxes for COCO and YOLO, videos for MOT); nothing was
    written."""


@dataclass(frozen=True)
class SceneLayout:
    """What a detection export needs to know of a built scene dataset, read from its layout (no row is read).

    ``n_frames`` is 0 for static scenes; ``image_shape`` is ``(H, W)``; ``classes`` the names ``labels`` index.
    """

    images: str
    n_examples: int
    n_frames: int
    image_shape: tuple[int, int]
    classes: tuple[str, ...]
    masks: bool

    @property
    def frames_per_example(self) -> int:
        """Images an example gives: its frames, or 1 for a static scene."""
        return max(1, self.n_frames)

    @classmethod
    def of(cls, dataset: ShardReader, format: str) -> SceneLayout:
        """The layout of ``dataset``, checked for a ``format`` export.

        Raises
        ------
        ExportFormatError
            An array is missing or has the wrong shape, or the class names are missing.
        """
        layout = {name: tuple(info["shape"]) for name, info in dataset.layout.items()}
        image = layout[dataset.image_name]
        what = f"{dataset.entry.kind} {dataset.key[:12]}"
        targets: tuple[str, ...]
        if len(image) == 4 and image[-1] == 3:
            n_frames, targets = image[0], ("boxes", "labels", "ids", "visible")
        elif len(image) in (2, 3) and (len(image) == 2 or image[-1] == 3):
            n_frames, targets = 0, ("boxes", "labels")
        else:
            raise ExportFormatError(
                f"cannot export {what} as {format}: its images {dataset.image_name!r} are {image} an example, not "
                "scenes (H, W), (H, W, 3) or videos (T, H, W, 3). A detection export takes a scene dataset; export "
                "other arrays with format='npy' or 'parquet'")
        missing = [name for name in targets if name not in layout]
        if missing:
            raise ExportFormatError(
                f"cannot export {what} as {format}: it has no {' and no '.join(map(repr, missing))} array (it has "
                f"{', '.join(layout)}). COCO, YOLO and MOT files hold each object's box and class; export it with "
                "format='npy' or 'parquet', or build a scene dataset (boxes, labels; ids and visible for videos)")
        frames = (n_frames,) if n_frames else ()
        slots = layout["labels"][-1] if layout["labels"] else 0
        expected = {name: (*frames, slots, 4) if name == "boxes" else (*frames, slots) for name in targets}
        if "masks" in layout:
            expected["masks"] = (*frames, *image[len(frames):len(frames) + 2])
        wrong = [f"{name} {layout[name]}" for name in expected if layout[name] != expected[name]]
        if wrong:
            raise ExportFormatError(
                f"cannot export {what} as {format}: its arrays do not have the scene family's shapes per example "
                f"(images {image}; {', '.join(wrong)}): boxes (G, 4) with labels (G,) for scenes, boxes (T, G, 4) "
                "with labels, ids and visible (T, G) for videos, and masks the shape of the images without channels")
        names = dataset.metadata.get("class_names")
        if not isinstance(names, list):
            raise ExportFormatError(
                f"cannot export {what} as {format}: its metadata has no class_names for its labels to index, and "
                f"the {format} files name every class. Give the spec a metadata() with 'class_names'")
        height, width = image[len(frames):len(frames) + 2]
        return cls(dataset.image_name, len(dataset), int(n_frames), (int(height), int(width)),
                   tuple(map(str, names)), "masks" in layout)

    def name(self, example: int) -> str:
        """The name of an example in file names: ``000000042``."""
        return f"{example:0{EXAMPLE_DIGITS}d}"

    def stem(self, example: int, frame: int) -> str:
        """The file name stem of an image: ``000000042`` for a scene, ``000000042_000007`` for frame 7 of a video."""
        return f"{self.name(example)}_{frame:0{FRAME_DIGITS}d}" if self.n_frames else self.name(example)

    def stems(self) -> Iterator[tuple[int, int, str]]:
        """``(example, frame, stem)`` of every image in order (frame 0 for a static scene)."""
        for example in range(self.n_examples):
            for frame in range(self.frames_per_example):
                yield example, frame, self.stem(example, frame)

    def shard_stems(self, frames: ShardFrames) -> list[str]:
        """The file name stem of each image of ``frames``."""
        return [self.stem(int(example), int(frame)) for example, frame in zip(frames.example, frames.frame,
                                                                             strict=True)]


@dataclass(frozen=True)
class ShardFrames:
    """One shard's images, each a frame, and their objects as flat tables (one entry an object in a frame).

    ``images`` is ``(F, H, W[, 3])``, ``example`` and ``frame`` ``(F,)`` (the dataset's example of each
    image, and its frame in it, 0 for static scenes); ``masks`` ``(F, H, W)`` or None. Objects: ``image``
    (the row of ``images`` it is in), ``slot``, ``label``, ``track`` (its id: its slot), and ``boxes``
    ``(K, 4)`` float64 ``(top, left, bottom, right)``, in image order, then slot order.
    """

    images: np.ndarray
    example: np.ndarray
    frame: np.ndarray
    masks: np.ndarray | None
    image: np.ndarray
    slot: np.ndarray
    label: np.ndarray
    track: np.ndarray
    boxes: np.ndarray

    def object_masks(self, objects: np.ndarray) -> np.ndarray:
        """The masks of the objects numbered ``objects``, ``(len(objects), H, W)`` bool (where slot ``j``
        shows: mask value ``j + 1``)."""
        assert self.masks is not None, "the dataset has no masks"
        return self.masks[self.image[objects]] == (self.slot[objects] + 1)[:, None, None].astype(self.masks.dtype)


def shard_frames(dataset: ShardReader, layout: SceneLayout) -> Iterator[ShardFrames]:
    """Each shard of ``dataset`` as `ShardFrames`, in order, one decoded at a time."""
    reader = dataset.reopened(cache_shards=0)
    index = reader.index
    steps = layout.frames_per_example
    for number in range(len(index)):
        arrays = reader.shard(number)
        first, rows = int(index.start[number]), int(index.rows[number])
        count = rows * steps
        images = arrays[layout.images].reshape(count, *arrays[layout.images].shape[1 + bool(layout.n_frames):])
        labels = arrays["labels"].reshape(count, -1)
        boxes = arrays["boxes"].reshape(count, -1, 4)
        shown = labels >= 0
        if layout.n_frames:
            shown &= arrays["visible"].reshape(count, -1) > 0
            ids = arrays["ids"].reshape(count, -1)
        else:
            ids = np.broadcast_to(np.arange(labels.shape[1]), labels.shape)
        image, slot = np.nonzero(shown)
        masks = arrays["masks"].reshape(count, *layout.image_shape) if layout.masks else None
        yield ShardFrames(
            images=images, example=np.repeat(np.arange(first, first + rows), steps),
            frame=np.tile(np.arange(steps), rows), masks=masks,
            image=image, slot=slot, label=labels[image, slot], track=ids[image, slot],
            boxes=boxes[image, slot].astype(np.float64))


def write_pngs(paths: Sequence[Path], images: np.ndarray) -> None:
    """Write ``images[k]`` as a PNG file at ``paths[k]``, on `PNG_THREADS` threads."""
    from PIL import Image  # not at import: `import glyphforge` stays light

    def write(k: int) -> None:
        Image.fromarray(images[k]).save(paths[k], format="PNG", compress_level=PNG_COMPRESS_LEVEL)

    with ThreadPoolExecutor(PNG_THREADS, thread_name_prefix="glyphforge-png") as pool:
        for _ in pool.map(write, range(len(paths))):  # raises the first failure (a full disk)
            pass


@dataclass(frozen=True)
class DetectionFormat:
    """A detection export format: the files it writes and how.

    ``files`` matches every path (relative, ``/``-separated) the export writes but ``metadata.json``,
    and nothing else: `glyphforge.builds.export.files` knows its own exports by it. ``check(dataset)`` raises
    before any work when the format cannot take ``dataset``; ``write(dataset, layout, staging)``
    writes the files into the directory ``staging`` and returns how many it wrote.
    """

    name: str
    files: re.Pattern[str]
    check: Callable[[ShardReader], SceneLayout]
    write: Callable[[ShardReader, SceneLayout, Path], int]


def image_pattern(folder: str, suffix: str) -> str:
    """The paths `SceneLayout.stem` gives in ``folder``, as a regular expression: ``images/000000042.png``,
    ``images/000000042_000007.png``."""
    return rf"{folder}/\d{{{EXAMPLE_DIGITS}}}(_\d{{{FRAME_DIGITS}}})?\.{suffix}"
