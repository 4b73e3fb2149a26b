"""`glyphforge.scenes.motion`: speeds, bounces, leaving the frame, appearing and disappearing, and the draws."""
from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np
import pytest

from glyphforge.scenes.motion import MAX_FRAMES, Motion, trajectories

#: Seeds of the property sweeps: each draws its own speed (and frame) from the seed.
SEEDS = range(12)


def speed_of(seed: int) -> float:
    """A speed in ``[0, 12)`` per seed, 0 and whole speeds included."""
    return [0.0, 1.0, 4.0][seed] if seed < 3 else float(np.random.default_rng(seed).uniform(0, 12))


def scattered(seed: int, total: int, frame: tuple[int, int], largest: int) -> tuple[np.ndarray, np.ndarray]:
    """``total`` objects of random sizes up to ``largest`` (and the frame), each starting inside the frame."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, np.minimum(largest, frame) + 1, size=(total, 2))
    first = (rng.random((total, 2)) * (np.asarray(frame) - sizes + 1)).astype(np.int64)
    return sizes, first


def fold(positions: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Reflect integer positions into ``[0, free]`` wall by wall (the reference for the closed form).

    Where ``free`` is 0 (the object fills the frame on that axis) the position is 0.
    """
    folded = np.where(free == 0, 0, positions)
    while True:
        below, above = folded < 0, folded > free
        if not (below.any() or above.any()):
            return folded
        folded = np.where(below, -folded, folded)
        folded = np.where(above, 2 * free - folded, folded)


# -- Motion's fields ---------------------------------------------------------------
@pytest.mark.parametrize(("field", "value", "rule"), [
    ("n_frames", 0, ">= 1"),
    ("n_frames", MAX_FRAMES + 1, f"<= {MAX_FRAMES}"),
    ("n_frames", 2.5, "integer"),
    ("n_frames", True, "integer"),
    ("patch_speed", -0.5, r"\[0, 4096\]"),
    ("patch_speed", math.nan, r"\[0, 4096\]"),
    ("patch_speed", math.inf, r"\[0, 4096\]"),
    ("patch_speed", 4097, r"\[0, 4096\]"),
    ("patch_speed", "3", r"\[0, 4096\]"),
    ("bounce_patches", 1, "True .* or False"),
    ("bounce_patches", None, "True .* or False"),
    ("appearance_prob", -0.1, r"\[0, 1\]"),
    ("appearance_prob", 1.5, r"\[0, 1\]"),
    ("disappearance_prob", math.nan, r"\[0, 1\]"),
    ("disappearance_prob", 2, r"\[0, 1\]"),
])
def test_a_field_out_of_its_range_is_named_with_its_rule(field: str, value: object, rule: str) -> None:
    fields: dict[str, object] = {"n_frames": 20, "patch_speed": 2.0, field: value}
    with pytest.raises(ValueError, match=f"{field}.*{rule}"):
        Motion(**fields)  # type: ignore[arg-type]


def test_fields_are_plain_python_values_and_make_the_params() -> None:
    motion = Motion(np.int64(20), np.float32(2.5), np.bool_(False), np.float64(0.5))  # type: ignore[arg-type]
    assert motion.params() == {
        "motion_algorithm": 1, "n_frames": 20, "patch_speed": 2.5, "bounce_patches": False,
        "appearance_prob": 0.5, "disappearance_prob": 0.0,
    }
    assert [type(value) for value in motion.params().values()] == [int, int, float, bool, float, float]
    assert Motion(20, 2) == Motion(20, 2.0) and hash(Motion(20, 2)) == hash(Motion(20, 2.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        motion.patch_speed = 3.0  # type: ignore[misc]


def test_a_speed_faster_than_the_frame_is_long_is_refused() -> None:
    assert Motion(5, 64.0).check_frame((64, 32)) == (64, 32)
    with pytest.raises(ValueError, match="patch_speed 65 .* at most 64"):
        Motion(5, 65.0).check_frame((64, 32))
    with pytest.raises(ValueError, match="patch_speed 65 .* at most 64"):
        trajectories(np.random.default_rng(0), Motion(5, 65.0), np.ones((1, 2), int), np.zeros((1, 2), int), (64, 32))


# -- speed and straight flights ----------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_without_bouncing_objects_fly_straight_at_the_speed_and_may_leave(seed: int) -> None:
    n_frames, speed = 30, speed_of(seed)
    sizes, first = scattered(seed, 50, (64, 64), 28)
    positions, _ = trajectories(np.random.default_rng(seed), Motion(n_frames, speed, False), sizes, first, (64, 64))
    assert (positions[:, 0] == first).all()
    steps = np.linalg.norm(np.diff(positions, axis=1), axis=2)
    assert (np.abs(steps - speed) <= math.sqrt(2) + 1e-9).all()
    velocity = (positions[:, -1] - positions[:, 0]) / (n_frames - 1)  # exact on average: within 1 / (T - 1)
    assert (np.abs(np.linalg.norm(velocity, axis=1) - speed) <= math.sqrt(2) / (n_frames - 1) + 1e-9).all()
    straight = first[:, None, :] + velocity[:, None, :] * np.arange(n_frames)[None, :, None]
    assert (np.abs(positions - straight) <= 1 + 1e-9).all()


def test_directions_are_uniform() -> None:
    """16 equal sectors of the circle each get 1/16 of 32,000 directions (a chi-square test at p = 0.001)."""
    total, speed = 32_000, 4096.0
    zeros = np.zeros((total, 2), np.int64)
    positions, _ = trajectories(np.random.default_rng(9), Motion(2, speed, False), zeros + 1, zeros, (4096, 4096))
    rows, columns = (positions[:, 1] - positions[:, 0]).T
    assert np.allclose(np.hypot(rows, columns), speed, atol=1)
    sectors = np.floor((np.arctan2(rows, columns) + np.pi) / (2 * np.pi) * 16).astype(int) % 16
    counts = np.bincount(sectors, minlength=16)
    chi_square = ((counts - total / 16) ** 2 / (total / 16)).sum()
    assert chi_square < 37.7  # the 0.999 quantile of chi-square with 15 degrees of freedom


def test_without_bouncing_fast_objects_leave_the_frame() -> None:
    sizes, first = np.full((200, 2), 28), np.full((200, 2), 18)
    positions, _ = trajectories(np.random.default_rng(1), Motion(20, 8.0, False), sizes, first, (64, 64))
    ends = positions[:, -1]
    assert ((ends + sizes <= 0) | (ends >= 64)).any(axis=1).all()  # every box wholly outside by frame 19


# -- bouncing --------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_bouncing_boxes_stay_inside_and_are_the_free_flight_reflected_at_the_walls(seed: int) -> None:
    height, width = np.random.default_rng(seed).integers(1, 71, 2).tolist()
    speed, frame = speed_of(seed), (height, width)
    sizes, first = scattered(seed, 40, frame, 30)
    motion = Motion(50, min(speed, max(frame)))
    bounced, _ = trajectories(np.random.default_rng(seed), motion, sizes, first, frame)
    free, _ = trajectories(np.random.default_rng(seed), Motion(50, motion.patch_speed, False), sizes, first, frame)
    assert ((bounced >= 0) & (bounced + sizes[:, None, :] <= np.asarray(frame))).all()
    assert (bounced == fold(free, (np.asarray(frame) - sizes)[:, None, :])).all()


@pytest.mark.parametrize(("wall", "axis", "start"), [
    ("top", 0, (0, 18)), ("bottom", 0, (36, 18)), ("left", 1, (18, 0)), ("right", 1, (18, 36)),
])
def test_at_a_wall_the_perpendicular_component_flips_and_the_parallel_one_stays(
    wall: str, axis: int, start: tuple[int, int]
) -> None:
    """Objects of 28x28 in a 64x64 frame start against a wall (row 64 - 28 = 36 is the bottom one)."""
    sizes, first = np.full((400, 2), 28), np.tile(start, (400, 1))
    bounced, _ = trajectories(np.random.default_rng(2), Motion(2, 5.0), sizes, first, (64, 64))
    free, _ = trajectories(np.random.default_rng(2), Motion(2, 5.0, False), sizes, first, (64, 64))
    into_wall = (free[:, 1, axis] - start[axis]) * (1 if start[axis] else -1) > 0
    assert 150 < into_wall.sum() < 250  # about half the directions head into the wall
    step_bounced, step_free = bounced[:, 1] - bounced[:, 0], free[:, 1] - free[:, 0]
    assert (step_bounced[into_wall, axis] == -step_free[into_wall, axis]).all()
    assert (step_bounced[:, 1 - axis] == step_free[:, 1 - axis]).all()
    assert (step_bounced[~into_wall] == step_free[~into_wall]).all()


def test_each_object_bounces_at_its_own_size() -> None:
    """A 28-high object in a 64-high frame turns at row 36, a 10-high one at row 54, a 64-high one stays."""
    total, frame = 300, (64, 64)
    sizes = np.tile([[28, 8], [10, 8], [64, 8]], (total, 1))
    first = np.zeros_like(sizes)
    positions, _ = trajectories(np.random.default_rng(3), Motion(200, 3.0), sizes, first, frame)
    rows = positions[..., 0].reshape(total, 3, -1)
    assert (rows.max(axis=(0, 2)) == [36, 54, 0]).all()
    assert (rows.min(axis=(0, 2)) == 0).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_away_from_the_walls_a_bouncing_object_moves_at_the_speed(seed: int) -> None:
    speed = speed_of(seed)
    sizes, first = scattered(seed, 50, (64, 64), 28)
    positions, _ = trajectories(np.random.default_rng(seed), Motion(30, speed), sizes, first, (64, 64))
    free = 64 - sizes[:, None, :]
    clear = np.all((positions > speed + 1) & (positions < free - speed - 1), axis=2)
    away = clear[:, :-1] & clear[:, 1:]
    steps = np.linalg.norm(np.diff(positions, axis=1), axis=2)
    assert (np.abs(steps[away] - speed) <= math.sqrt(2) + 1e-9).all()


# -- appearing and disappearing ------------------------------------------------------
def test_appearance_and_disappearance_happen_at_their_probabilities_and_gone_is_final() -> None:
    total, n_frames, appear, disappear = 20_000, 12, 0.3, 0.2
    sizes, first = np.ones((total, 2), int), np.zeros((total, 2), int)
    _, shown = trajectories(np.random.default_rng(4), Motion(n_frames, 0.0, True, appear, disappear),
                            sizes, first, (8, 8))
    was_shown = np.maximum.accumulate(shown, axis=1)
    waiting = ~was_shown[:, :-1]
    visible = shown[:, :-1]
    for trials, successes, probability in (
        (np.ones(total, bool), shown[:, 0], appear),  # frame 0
        (waiting, shown[:, 1:] & waiting, appear),
        (visible, ~shown[:, 1:] & visible, disappear),
    ):
        n = trials.sum()
        assert abs(successes.sum() / n - probability) < 5 * math.sqrt(probability * (1 - probability) / n)
    rises = np.diff(shown.astype(int), axis=1, prepend=0) == 1
    assert (rises.sum(axis=1) <= 1).all()  # shown in one run: a gone object never comes back


@pytest.mark.parametrize(("appear", "disappear", "expected"), [
    (1.0, 0.0, "always"), (0.0, 0.5, "never"), (1.0, 1.0, "frame 0 only"),
])
def test_certain_probabilities(appear: float, disappear: float, expected: str) -> None:
    _, shown = trajectories(np.random.default_rng(5), Motion(6, 1.0, True, appear, disappear),
                            np.ones((50, 2), int), np.zeros((50, 2), int), (8, 8))
    pattern = {"always": [1] * 6, "never": [0] * 6, "frame 0 only": [1] + [0] * 5}[expected]
    assert (shown == np.array(pattern, bool)).all()


# -- draws and inputs ----------------------------------------------------------------
@pytest.mark.parametrize("bounce", [True, False])
@pytest.mark.parametrize("probabilities", [(1.0, 0.0), (0.5, 0.1), (1.0, 0.1)])
def test_the_same_seed_gives_the_same_arrays_and_the_documented_draws(
    bounce: bool, probabilities: tuple[float, float]
) -> None:
    motion = Motion(20, 2.5, bounce, *probabilities)
    sizes, first = scattered(6, 30, (64, 64), 28)
    rng = np.random.default_rng(7)
    positions, shown = trajectories(rng, motion, sizes, first, (64, 64))
    again = trajectories(np.random.default_rng(7), motion, sizes, first, (64, 64))
    other = trajectories(np.random.default_rng(8), motion, sizes, first, (64, 64))
    assert (positions == again[0]).all() and (shown == again[1]).all()
    assert (positions != other[0]).any()
    assert positions.dtype == np.int64 and positions.shape == (30, 20, 2)
    assert shown.dtype == bool and shown.shape == (30, 20)
    expected = np.random.default_rng(7)
    pending = 30
    while pending:  # the directions: rounds of points in [-1, 1)^2 until each object has one in the disk
        points = expected.random((pending, 2)) * 2 - 1
        squared = (points**2).sum(axis=1)
        pending -= int(((squared <= 1) & (squared > 1e-12)).sum())
    if probabilities != (1.0, 0.0):
        expected.random((30, 20))
    assert rng.random() == expected.random()  # nothing else was drawn


@pytest.mark.parametrize(("motion", "digest"), [
    (Motion(20, 3.7, True, 0.6, 0.05), "d24b47cb801a98228f80d53876cb4242a22303cc2087570abc6659c0a4d02d84"),
    (Motion(20, 3.7, False), "e9ddb44bf9bbab8c0f4477470e6176331ed25cb5f9a0703e49fdc46fd71bbb76"),
])
def test_the_trajectories_of_a_seed_are_pinned(motion: Motion, digest: str) -> None:
    """The same bytes on every machine and release. A change here must bump MOTION_ALGORITHM (and this pin)."""
    rng = np.random.default_rng(2026)
    sizes = rng.integers(1, 40, (500, 2))
    first = (rng.random((500, 2)) * (64 - sizes + 1)).astype(np.int64)
    positions, shown = trajectories(np.random.default_rng(43), motion, sizes, first, (64, 64))
    assert motion.params()["motion_algorithm"] == 1
    assert hashlib.sha256(positions.astype("<i8").tobytes() + shown.tobytes()).hexdigest() == digest


def test_no_objects_give_empty_arrays() -> None:
    empty = np.zeros((0, 2), np.int64)
    positions, shown = trajectories(np.random.default_rng(0), Motion(4, 1.0, True, 0.5), empty, empty, (8, 8))
    assert positions.shape == (0, 4, 2) and shown.shape == (0, 4)


@pytest.mark.parametrize(("sizes", "first", "bounce", "message"), [
    (np.ones((2, 3), int), np.zeros((2, 2), int), True, "sizes must be a .total, 2. integer array"),
    (np.ones((2, 2)), np.zeros((2, 2), int), True, "sizes must be a .total, 2. integer array"),
    (np.ones((2, 2), int), np.zeros(2, int), True, "first must be a .total, 2. integer array"),
    (np.ones((2, 2), int), np.zeros((3, 2), int), True, "one row per object: got 2 and 3"),
    (np.zeros((2, 2), int), np.zeros((2, 2), int), False, "at least 1 pixel"),
    (np.full((2, 2), 65), np.zeros((2, 2), int), True, "object 0 .65x65 at .0, 0.. does not"),
    (np.ones((2, 2), int), np.array([[0, 0], [-1, 3]]), True, "object 1 .1x1 at .-1, 3.. does not"),
])
def test_malformed_objects_are_refused(sizes: np.ndarray, first: np.ndarray, bounce: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        trajectories(np.random.default_rng(0), Motion(3, 1.0, bounce), sizes, first, (64, 64))


def test_without_bouncing_objects_may_start_anywhere() -> None:
    sizes, first = np.full((1, 2), 80), np.array([[-100, 70]])
    positions, _ = trajectories(np.random.default_rng(0), Motion(3, 0.0, False), sizes, first, (64, 64))
    assert (positions == first[:, None, :]).all()
