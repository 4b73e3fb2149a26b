"""``glyphforge build``: the scene parts' options, the preset commands, and bad parts refused with exit status 2."""
from __future__ import annotations

import subprocess

import pytest

from glyphforge import cli
from glyphforge.cli import args as cli_args
from glyphforge.scenes.presets import GRID_ARITHMETIC, visual_arithmetic
from glyphforge.scenes.spec import ScatteredGlyphs

from support.cli import run_here

FONT_SCENES = ("build", "scenes", "--glyphs", "font", "--n-examples", "5", "--shard-size", "5")


def _parse(*argv: str) -> ScatteredGlyphs:
    return cli_args.scene_spec(cli._glyphforge_parser().parse_args(list(argv)))


def test_the_parts_options_make_the_spec_fields():
    spec = _parse(*FONT_SCENES, "--grid-shape", "3x3", "--spacing", "1x0", "--random-offset-range", "2x2",
                  "--draw-shape", "46x46", "--draw-offset", "2x2", "--n-distractors-per-image", "3",
                  "--distractor-shape", "4x5", "--masks", "--characters", "0123456789AM",
                  "--reductions", "A:sum,M:prod", "--min-digits", "2", "--max-digits", "4", "--largest-digit", "20")
    assert spec == ScatteredGlyphs(5, glyphs="font", shard_size=5, grid_shape=(3, 3), spacing=(1, 0),
                                   random_offset_range=(2, 2), draw_shape=(46, 46), draw_offset=(2, 2),
                                   n_distractors_per_image=3, distractor_shape=(4, 5), masks=True,
                                   characters="0123456789AM", reductions="A:sum,M:prod", min_digits=2, max_digits=4,
                                   largest_digit=20)
    assert _parse(*FONT_SCENES) == ScatteredGlyphs(5, glyphs="font", shard_size=5)  # not given: the defaults


def test_a_preset_command_is_the_preset_with_the_options_given():
    spec = _parse("build", "grid-arithmetic", "--glyphs", "font", "--n-examples", "12", "--seed", "4")
    assert spec == visual_arithmetic(12, glyphs="font", seed=4, grid_shape=(2, 2), random_offset_range=(21, 21))
    assert spec.grid_shape == GRID_ARITHMETIC["grid_shape"]
    help_text = subprocess.run(["glyphforge", "build", "moving-mnist", "--help"], capture_output=True, text=True,
                               check=True).stdout
    assert "Srivastava" not in help_text and "preset: Moving MNIST" in help_text


def test_a_preset_builds_offline_with_the_font(tmp_path):
    result = run_here("glyphforge", "build", "cluttered-mnist", "--glyphs", "font", "--n-examples", "6",
                      "--data-dir", tmp_path, "-q", env={"GLYPHFORGE_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    assert "built 6 scenes" in result.stdout


@pytest.mark.parametrize(("argv", "words"), [
    (["--grid-shape", "1x2", "--max-glyphs", "3"], ["grid_shape (1, 2) has 2 cells, fewer than the 3 objects"]),
    (["--reductions", "+:sum"], ["reductions names operator classes ['+'] that the glyph set does not have"]),
    (["--characters", "0123456789", "--reductions", "A:sum"], ["operator classes ['A']"]),
    (["--draw-shape", "8x8"], ["do not fit in the draw window 8x8"]),
    (["--patch-speed", "3"], ["give n_frames >= 1 with them"]),
    (["--n-frames", "3", "--patch-speed", "-1"], ["patch_speed"]),
    (["--spacing", "1"], ["give two integers >= 0 as AxB"]),
])
def test_bad_parts_exit_2_before_any_work(tmp_path, argv, words):
    data_dir = tmp_path / "data"
    result = run_here("glyphforge", *FONT_SCENES, *argv, "--data-dir", data_dir)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    for word in words:
        assert word in result.stderr, result.stderr
    assert not data_dir.exists()  # no cache, no work dir, no worker
