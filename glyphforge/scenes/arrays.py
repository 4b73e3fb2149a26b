"""The annotation arrays of a scene, from where its objects are in each frame.

Still scenes: ``boxes`` ``(n, G, 4)`` and ``labels`` ``(n, G)``. Videos: ``boxes``
``(n, T, G, 4)`` clipped to the frame, ``labels``, ``ids`` and ``visible`` ``(n, T, G)``
(docs/scenes.md). ``-1`` pads empty slots, and boxes where an object
does not show; all vectorised over every object at once.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Objects:
    """What is drawn in each scene, in drawing order: scene ``s`` owns ``starts[s]:starts[s] + counts[s]``.

    ``labels`` int64 ``(M,)`` (-1: a distractor), ``ink`` int64 ``(M, 4)`` (the ink box within
    the object's image), ``positions`` int64 ``(M, T, 2)`` (its image's top-left per frame) and
    ``shown`` bool ``(M, T)``.
    """

    counts: np.ndarray
    starts: np.ndarray
    labels: np.ndarray
    ink: np.ndarray
    positions: np.ndarray
    shown: np.ndarray


@dataclass(frozen=True)
class Drawn:
    """How each of `Objects` is painted: alpha ``images`` ``(M, h, w)``, RGB ``colours``, mask value (0: none)."""

    images: np.ndarray
    colours: np.ndarray
    mask_values: np.ndarray


def merge(first: Objects, first_drawn: Drawn, second: Objects, second_drawn: Drawn) -> tuple[Objects, Drawn]:
    """Both sets of objects, each scene's ``first`` ones drawn before its ``second`` ones."""
    counts = first.counts + second.counts
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    into_first = np.repeat(starts, first.counts) + np.arange(len(first.labels)) - np.repeat(first.starts, first.counts)
    into_second = (np.repeat(starts + first.counts, second.counts) + np.arange(len(second.labels))
                   - np.repeat(second.starts, second.counts))
    order = np.empty(len(first.labels) + len(second.labels), np.int64)
    order[into_first] = np.arange(len(first.labels))
    order[into_second] = len(first.labels) + np.arange(len(second.labels))
    height = max(first_drawn.images.shape[1], second_drawn.images.shape[1])
    width = max(first_drawn.images.shape[2], second_drawn.images.shape[2])
    images = np.zeros((len(order), height, width), np.uint8)
    images[: len(first.labels), : first_drawn.images.shape[1], : first_drawn.images.shape[2]] = first_drawn.images
    images[len(first.labels) :, : second_drawn.images.shape[1], : second_drawn.images.shape[2]] = second_drawn.images

    def both(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.concatenate([a, b])[order])

    objects = Objects(counts.astype(np.int64), starts, both(first.labels, second.labels), both(first.ink, second.ink),
                      both(first.positions, second.positions), both(first.shown, second.shown))
    return objects, Drawn(images[order], both(first_drawn.colours, second_drawn.colours),
                          both(first_drawn.mask_values, second_drawn.mask_values))


def _slots(counts: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each object's scene and slot."""
    scene = np.repeat(np.arange(len(counts)), counts)
    return scene, np.arange(len(scene)) - starts[scene]


def still(counts: np.ndarray, starts: np.ndarray, labels: np.ndarray, boxes: np.ndarray, most: int
          ) -> dict[str, np.ndarray]:
    """``boxes`` float32 ``(n, most, 4)`` and ``labels`` int64 ``(n, most)`` of still scenes, -1 padded."""
    scene, slot = _slots(counts, starts)
    padded_boxes = np.full((len(counts), most, 4), -1, np.float32)
    padded_boxes[scene, slot] = boxes
    padded_labels = np.full((len(counts), most), -1, np.int64)
    padded_labels[scene, slot] = labels
    return {"boxes": padded_boxes, "labels": padded_labels}


def frame_boxes(objects: Objects, image_shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Each object's ink box in each frame, clipped to the frame (int64 ``(M, T, 4)``), and whether it shows
    (bool ``(M, T)``: shown, and at least one pixel of its box in the frame)."""
    corner = objects.positions
    box = np.concatenate([corner + objects.ink[:, None, :2], corner + objects.ink[:, None, 2:]], 2)
    limits = np.array([image_shape[0], image_shape[1]] * 2, np.int64)
    box = np.clip(box, 0, limits)
    visible = objects.shown & (box[..., 2] > box[..., 0]) & (box[..., 3] > box[..., 1])
    return box, visible


def video(objects: Objects, most: int, image_shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """``boxes`` float32 ``(n, T, most, 4)``, ``labels``, ``ids`` int64 and ``visible`` uint8 ``(n, T, most)``."""
    n, frames = len(objects.counts), objects.positions.shape[1]
    scene, slot = _slots(objects.counts, objects.starts)
    box, visible = frame_boxes(objects, image_shape)
    boxes = np.full((n, frames, most, 4), -1, np.float32)
    boxes[scene, :, slot] = np.where(visible[..., None], box, -1)
    labels = np.full((n, frames, most), -1, np.int64)
    labels[scene, :, slot] = objects.labels[:, None]
    ids = np.full((n, frames, most), -1, np.int64)
    ids[scene, :, slot] = slot[:, None]
    shows = np.zeros((n, frames, most), np.uint8)
    shows[scene, :, slot] = visible
    return {"boxes": boxes, "labels": labels, "ids": ids, "visible": shows}
