"""Motion of a video's objects: flights at ``patch_speed`` that bounce off the walls or leave the frame,
and objects that appear and disappear (dps's ``n_frames``, ``patch_speed``, ``bounce_patches``,
``appearance_prob`` and ``disappearance_prob``).

A `Motion` says how objects move; `trajectories` draws where each object is in each frame and
whether it shows. Positions are of an object's top-left corner (row, column) in pixels; the
compositor clips what lies outside the frame and decides on-screen-ness.

Semantics
---------
Direction
    Each object moves by ``patch_speed`` pixels per frame in a uniform random direction: a point
    drawn uniformly in the unit disk (rejection from the square), normalised. Only exactly rounded
    arithmetic (no ``sin``, whose last bit differs between CPUs), so every machine draws the same bits.
Track
    The top-left follows the exact float track ``first + v t`` (``t = 0 .. n_frames - 1``); frame
    ``t`` holds it rounded to the nearest integer (half to even). So speeds are exact on average
    and nothing drifts over long videos.
Bouncing (``bounce_patches=True``)
    The box stays inside the frame: on each axis the top-left moves in ``[0, H - h]`` (``[0, W - w]``)
    and reflects off its ends, keeping the speed; the component perpendicular to the wall flips, the
    other stays. The track is folded into the range in closed form, so a fast object bounces as many
    times in a frame as its path takes it, exactly. An object as tall (wide) as the frame has
    nowhere to go on that axis and keeps its row (column).
Leaving (``bounce_patches=False``)
    Objects fly on in straight lines and may leave the frame, partly or wholly, never to return.
    There is no third choice: a moving object either bounces or may leave, so "a speed with neither
    bouncing nor leaving allowed" cannot be expressed.
Appearance (dps's three states: waiting, shown, gone)
    At every frame, frame 0 included, a waiting object shows with ``appearance_prob``, and an
    object shown since an earlier frame goes with ``disappearance_prob``. As in dps, a gone
    object never comes back. ``appearance_prob=1``: shown from frame 0; ``disappearance_prob=0``:
    shown to the end once shown. Objects move whether shown or not.
Draws
    From the caller's ``rng``, in this order: the directions, in rounds of ``rng.random((pending, 2))``
    (one ``(row, column)`` pair in ``[0, 1)`` per object still without a direction, in object order,
    mapped to ``[-1, 1)``; kept inside the unit disk but off its centre) until every object has one;
    then, unless ``appearance_prob == 1`` and ``disappearance_prob == 0``, ``rng.random((total,
    n_frames))`` (row ``i``, column ``t``: object ``i``'s chance to change its state at frame ``t``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from glyphforge._checks import MAX_SIDE, check_int, check_real, check_shape

#: Bumped whenever the same `Motion` and draws would give different trajectories; part of `Motion.params`.
MOTION_ALGORITHM = 1
#: The most frames a video may have.
MAX_FRAMES = 10_000
#: The fastest speed a `Motion` may have, in pixels per frame (no frame side is longer: `MAX_SIDE`).
MAX_PATCH_SPEED = float(MAX_SIDE)


@dataclass(frozen=True)
class Motion:
    """How a video's objects move, appear and disappear (see the module's semantics).

    Parameters
    ----------
    n_frames
        Frames per video, ``1 .. MAX_FRAMES``.
    patch_speed
        Pixels per frame, ``0 .. MAX_PATCH_SPEED`` (and at most the frame's longer side:
        `check_frame`); each object moves at this speed in a uniform random direction.
    bounce_patches
        True: reflect off the frame's walls keeping the speed; False: objects may leave the frame.
    appearance_prob
        In ``[0, 1]``: per frame, the chance a waiting object shows.
    disappearance_prob
        In ``[0, 1]``: per frame, the chance a shown object goes (for good).

    Raises
    ------
    ValueError
        A field is out of its range, naming the field and the range.
    """

    n_frames: int
    patch_speed: float
    bounce_patches: bool = True
    appearance_prob: float = 1.0
    disappearance_prob: float = 0.0

    def __post_init__(self) -> None:
        checked = {
            "n_frames": check_int("n_frames (frames per video)", self.n_frames, 1, MAX_FRAMES),
            "patch_speed": check_real("patch_speed (pixels per frame)", self.patch_speed, 0.0, MAX_PATCH_SPEED),
            "appearance_prob": check_real("appearance_prob", self.appearance_prob, 0.0, 1.0),
            "disappearance_prob": check_real("disappearance_prob", self.disappearance_prob, 0.0, 1.0),
        }
        if not isinstance(self.bounce_patches, (bool, np.bool_)):
            raise ValueError(
                f"bounce_patches must be True (objects bounce off the walls) or False (objects may leave "
                f"the frame), got {self.bounce_patches!r}"
            )
        checked["bounce_patches"] = bool(self.bounce_patches)
        for name, value in checked.items():
            object.__setattr__(self, name, value)  # plain int/float/bool, whatever numpy type was given

    def params(self) -> dict[str, Any]:
        """Everything that determines the trajectories besides the draws (for a spec's build key)."""
        return {
            "motion_algorithm": MOTION_ALGORITHM,
            "n_frames": self.n_frames,
            "patch_speed": self.patch_speed,
            "bounce_patches": self.bounce_patches,
            "appearance_prob": self.appearance_prob,
            "disappearance_prob": self.disappearance_prob,
        }

    def check_frame(self, image_shape: tuple[int, int]) -> tuple[int, int]:
        """Return ``image_shape`` as ``(H, W)`` if this motion suits frames of it, else raise ValueError.

        A speed beyond the frame's longer side would cross the whole frame between two frames.
        """
        height, width = check_shape(image_shape, "image_shape")
        if self.patch_speed > max(height, width):
            raise ValueError(
                f"patch_speed {self.patch_speed:g} pixels per frame is faster than a {height}x{width} frame is "
                f"long: objects would cross the whole frame between two frames; give a patch_speed of at most "
                f"{max(height, width)}"
            )
        return height, width


def trajectories(
    rng: np.random.Generator, motion: Motion, sizes: np.ndarray, first: np.ndarray, image_shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Draw where each object is in each frame, and whether it shows (see the module's semantics).

    Parameters
    ----------
    rng
        Every draw comes from it, in the order the module documents.
    motion
        The motion.
    sizes
        ``(total, 2)`` integers: each object's drawn ``(h, w)``, at least 1 (with bouncing, at most the frame's).
    first
        ``(total, 2)`` integers: each object's top-left in frame 0 (with bouncing, its box inside the frame).
    image_shape
        ``(H, W)`` of the frames.

    Returns
    -------
    positions
        int64 ``(total, n_frames, 2)``: top-left ``(row, column)`` per frame; without bouncing it may lie
        partly or wholly outside the frame.
    shown
        bool ``(total, n_frames)``: appeared and not gone (whether it is on screen is the compositor's business).

    Raises
    ------
    ValueError
        ``sizes``, ``first`` or ``image_shape`` are malformed, or disagree with the motion.
    """
    frame = np.asarray(motion.check_frame(image_shape), dtype=np.int64)
    sizes, first = _checked_objects(motion, sizes, first, frame)
    velocity = motion.patch_speed * _directions(rng, len(sizes))
    free = (frame - sizes).astype(np.float64)
    if motion.bounce_patches:
        velocity[free == 0] = 0.0  # a box filling the frame on an axis cannot move along it
    track = velocity[:, None, :] * np.arange(motion.n_frames, dtype=np.float64)[None, :, None]
    track += first[:, None, :]
    if motion.bounce_patches:
        _fold(track, free[:, None, :])
    return np.rint(track, out=track).astype(np.int64), _shown(rng, motion, len(sizes))


def _directions(rng: np.random.Generator, total: int) -> np.ndarray:
    """Draw ``total`` unit vectors ``(row, column)`` uniform in direction: float64 ``(total, 2)``."""
    directions = np.empty((total, 2))
    pending = np.arange(total)
    while len(pending):
        points = rng.random((len(pending), 2)) * 2.0 - 1.0
        squared = np.square(points[:, 0]) + np.square(points[:, 1])
        kept = (squared <= 1.0) & (squared > 1e-12)  # inside the disk, far enough from its centre to normalise
        directions[pending[kept]] = points[kept] / np.sqrt(squared[kept])[:, None]
        pending = pending[~kept]
    return directions


def _fold(track: np.ndarray, free: np.ndarray) -> None:
    """Reflect ``track`` in place into ``[0, free]`` at both ends: a triangle wave of period ``2 free``.

    Where ``free`` is 0 the track must be constant 0 (then it stays 0).
    """
    period = 2.0 * np.maximum(free, 0.5)
    turns = track / period
    np.floor(turns, out=turns)
    turns *= period
    track -= turns  # the phase in [0, period), to rounding
    track -= free
    np.abs(track, out=track)
    np.subtract(free, track, out=track)  # free - |phase - free|: the phase, or 2 free - phase past the far wall


def _shown(rng: np.random.Generator, motion: Motion, total: int) -> np.ndarray:
    """Draw whether each of ``total`` objects shows in each frame: ``(total, n_frames)`` bool."""
    n_frames = motion.n_frames
    if motion.appearance_prob == 1.0 and motion.disappearance_prob == 0.0:
        return np.ones((total, n_frames), dtype=bool)
    draws = rng.random((total, n_frames))
    frames = np.arange(n_frames)
    appears = draws < motion.appearance_prob
    appeared = np.where(appears.any(axis=1), appears.argmax(axis=1), n_frames)[:, None]
    goes = (draws < motion.disappearance_prob) & (frames > appeared)
    gone = np.where(goes.any(axis=1), goes.argmax(axis=1), n_frames)[:, None]
    return (frames >= appeared) & (frames < gone)


def _checked_objects(
    motion: Motion, sizes: np.ndarray, first: np.ndarray, frame: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``sizes`` and ``first`` as int64 ``(total, 2)`` arrays, or raise ValueError saying what is wrong."""
    arrays = []
    for name, value in (("sizes", sizes), ("first", first)):
        array = np.asarray(value)
        if array.ndim != 2 or array.shape[1] != 2 or not (array.dtype.kind in "iu" or array.size == 0):
            raise ValueError(
                f"{name} must be a (total, 2) integer array (one (row, column) pair per object), got "
                f"{array.dtype} of shape {array.shape}"
            )
        arrays.append(array.astype(np.int64))
    sizes, first = arrays
    if len(sizes) != len(first):
        raise ValueError(f"sizes and first must hold one row per object: got {len(sizes)} and {len(first)} rows")
    if (sizes < 1).any():
        index = int((sizes < 1).any(axis=1).argmax())
        raise ValueError(f"sizes must be at least 1 pixel on each side; object {index} has {sizes[index].tolist()}")
    if motion.bounce_patches:
        outside = ((first < 0) | (first + sizes > frame)).any(axis=1)
        if outside.any():
            index = int(outside.argmax())
            (height, width), (row, column) = sizes[index].tolist(), first[index].tolist()
            raise ValueError(
                f"bouncing objects must start inside the {frame[0]}x{frame[1]} frame, but object {index} "
                f"({height}x{width} at ({row}, {column})) does not: give sizes at most the frame's and first "
                "with 0 <= first <= frame - size"
            )
    return sizes, first
