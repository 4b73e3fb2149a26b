"""The installed `prepare-data` and `glyphforge` commands.

The first and second full runs, exit status 2 and a build with worker processes run as real
subprocesses (`run`); what the other commands do and say is checked in this process (`run_here`).

Data comes from a ``file://`` mirror of ``../shared/data`` (Omniglot small sets and
the carried backgrounds) and a synthetic EMNIST ``gzip.zip`` written here.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from glyphforge import cli
from glyphforge.cache import CacheStore
from glyphforge.cli import args as cli_args
from glyphforge.datasets import registry
from glyphforge.datasets.backgrounds import background_names
from glyphforge.scenes.spec import ScatteredGlyphs
from glyphforge.textfmt import human_size

from support.cli import run, run_here
from support.synthetic_emnist import write_synthetic_emnist

#: The backgrounds ../shared/data carries (all but space.jpg).
CARRIED = [name for name in background_names() if name != "space"]


@pytest.fixture(scope="module")
def emnist_zip(tmp_path_factory) -> Path:
    return write_synthetic_emnist(tmp_path_factory.mktemp("emnist") / "gzip.zip").path


@pytest.fixture(scope="module")
def prepared(shared_data, emnist_zip, tmp_path_factory):
    """A data dir after one full `prepare-data` run; yields ``(data dir, that run, its arguments)``."""
    data_dir = tmp_path_factory.mktemp("prepared")
    argv = ["emnist", "omniglot", "backgrounds", "--data-dir", data_dir, "--emnist-archive", emnist_zip,
            "--no-verify", "--omniglot-sets", "small1", "small2", "--backgrounds", *CARRIED,
            "--shape", "14x14", "--mirror", shared_data.as_uri(), "-q"]
    first = run("prepare-data", *[a for a in argv if a != "-q"])
    return data_dir, first, argv


def parse_table(text: str) -> list[dict[str, str]]:
    """Rows of a `glyphforge.textfmt.table` as dicts, cut at the columns its rule line marks."""
    header, rule, *lines = text.splitlines()
    spans, start = [], 0
    for dashes in rule.split("  "):
        spans.append((start, start + len(dashes)))
        start += len(dashes) + 2
    names = [header[a:b].strip() for a, b in spans]
    return [{name: line[a:b].strip() for name, (a, b) in zip(names, spans, strict=True)} for line in lines]


def test_a_first_run_prepares_everything_and_prints_the_table(prepared):
    data_dir, first, _ = prepared
    assert first.returncode == 0, first.stderr
    rows = parse_table(first.stdout)
    assert list(rows[0]) == ["dataset", "entry", "images", "size", "seconds"]
    store = CacheStore.for_data_dir(data_dir)
    keys = {entry.key[:10]: entry for entry in store.ls()}
    assert len(keys) == len(rows) == 8
    described = [(row["dataset"], row["entry"].rsplit(" ", 1)[0], row["images"]) for row in rows]
    assert described == [
        ("emnist", "byclass 28x28", "380"), ("emnist", "byclass 14x14", "380"),  # 250 + 130
        ("omniglot", "small1 105x105", "2720"), ("omniglot", "small1 14x14", "2720"),  # the real small sets
        ("omniglot", "small2 105x105", "3120"), ("omniglot", "small2 14x14", "3120"),
        ("backgrounds", "native sizes", "12"), ("backgrounds", "14x14", "12"),
    ]
    for row in rows:
        entry = keys[row["entry"].rsplit(" ", 1)[1]]
        assert row["size"] == human_size(entry.size_bytes) and float(row["seconds"]) >= 0


def test_a_second_run_is_a_no_op_with_one_line_per_dataset(prepared):
    data_dir, _, argv = prepared
    before = {entry.key: entry.manifest["created"] for entry in CacheStore.for_data_dir(data_dir).ls()}
    again = run("prepare-data", *[a for a in argv if a != "-q"])
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [
        "emnist: already prepared (cache hit), nothing to do",
        "omniglot: already prepared (cache hit), nothing to do",
        "backgrounds: already prepared (cache hit), nothing to do",
    ]
    assert {entry.key: entry.manifest["created"] for entry in CacheStore.for_data_dir(data_dir).ls()} == before


def test_offline_with_nothing_present_fails_with_the_manual_placement_path(tmp_path):
    result = run_here("prepare-data", "omniglot", "--omniglot-sets", "small1", "--offline", "--data-dir", tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    placed = tmp_path / "raw" / "omniglot" / "images_background_small1.zip"
    assert f"place the file at:\n  {placed}" in result.stderr or f"place the file at:\n{placed}" in result.stderr
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr and "run again with -v" in result.stderr
    assert not placed.exists() and CacheStore.for_data_dir(tmp_path).ls() == []
    verbose = run_here("prepare-data", "omniglot", "--omniglot-sets", "small1", "--offline", "--data-dir", tmp_path,
                       "-v")
    assert verbose.returncode == 1 and "Traceback (most recent call last)" in verbose.stderr


def test_the_mirror_may_come_from_the_environment(shared_data, tmp_path):
    result = run_here("prepare-data", "backgrounds", "--backgrounds", "water", "ice", "--data-dir", tmp_path, "-q",
                      env={"GLYPHFORGE_MIRROR": shared_data.as_uri()})
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # -q: errors only
    entry, = CacheStore.for_data_dir(tmp_path).ls()
    assert sorted(entry.meta["backgrounds"]) == ["ice", "water"]


def test_bad_arguments_exit_2_with_usage(tmp_path):
    result = run("prepare-data", "cifar10", "--data-dir", tmp_path)
    assert result.returncode == 2 and "invalid choice: 'cifar10'" in result.stderr
    result = run("prepare-data", "emnist", "--shape", "14by14", "--data-dir", tmp_path)
    assert result.returncode == 2 and "shape must be HEIGHTxWIDTH with positive integers" in result.stderr


def test_cache_verify_finds_a_corrupted_file(prepared, tmp_path):
    data_dir, _, _ = prepared
    good = run_here("glyphforge", "cache", "verify", "--data-dir", data_dir)
    assert good.returncode == 0 and good.stdout.splitlines() == [  # the 12 backgrounds and 2 Omniglot zips in raw/
        "14 upstream files hashed: 14 match the pinned hashes", f"all 8 entries in {data_dir / 'cache'} verified"]
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(data_dir), str(copy)], check=True)
    entry = next(e for e in CacheStore.for_data_dir(copy).ls() if e.kind == "backgrounds")
    damaged = entry.file("water.pklz")
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    bad = run_here("glyphforge", "cache", "verify", "--data-dir", copy)
    assert bad.returncode == 1
    corrupt = [line for line in bad.stdout.splitlines() if line.startswith("CORRUPT")]
    assert len(corrupt) == 1 and "water.pklz" in corrupt[0] and entry.key in corrupt[0]
    assert "1 problem(s) found" in bad.stderr and "glyphforge cache gc" in bad.stderr


def test_cache_ls_rm_and_gc(prepared, tmp_path):
    data_dir, _, _ = prepared
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(data_dir), str(copy)], check=True)
    listing = run_here("glyphforge", "cache", "ls", "--data-dir", copy)
    assert listing.returncode == 0
    entries, upstream = listing.stdout.split("\n\n")  # the entries, then the files in raw/
    header, rule, *rows = entries.splitlines()
    assert upstream.startswith(f"upstream files in {copy / 'raw'}:\ndataset ")
    assert header.split() == ["key", "kind", "params", "files", "size", "created"] and len(rows) == 8
    assert all(("KB" in row or "MB" in row) for row in rows)
    emnist = next(e for e in CacheStore.for_data_dir(copy).ls() if e.kind == "emnist" and "resize" in e.params)
    removed = run_here("glyphforge", "cache", "rm", emnist.key[:10], "--data-dir", copy)
    assert removed.returncode == 0 and removed.stdout.startswith(f"removed emnist {emnist.key} (")
    assert len(CacheStore.for_data_dir(copy).ls()) == 7
    missing = run_here("glyphforge", "cache", "rm", emnist.key[:10], "--data-dir", copy)
    assert missing.returncode == 2
    assert missing.stderr.startswith(f"error: no entry in {copy / 'cache'} with a key starting '{emnist.key[:10]}'")
    (copy / "cache" / "emnist" / ".tmp-abandoned").mkdir()
    gc = run_here("glyphforge", "cache", "gc", "--data-dir", copy)
    assert gc.returncode == 0 and gc.stdout.splitlines()[-1] == "1 item(s) removed"
    assert not (copy / "cache" / "emnist" / ".tmp-abandoned").exists()


def test_info_lists_the_data_dir_and_what_is_prepared(prepared):
    data_dir, _, _ = prepared
    info = run_here("glyphforge", "info", "--data-dir", data_dir)
    assert info.returncode == 0
    lines = info.stdout.splitlines()
    assert lines[0] == f"data dir:   {data_dir}"
    assert lines[1].startswith(f"cache:      {data_dir / 'cache'} (8 entries, ")
    emnist_line = next(line for line in lines if line.strip().startswith("emnist"))
    assert "split=byclass" in emnist_line and "shape=[14,14]" in emnist_line and "shape=[28,28]" in emnist_line
    omniglot_line = next(line for line in lines if line.strip().startswith("omniglot"))
    assert "set=small1" in omniglot_line and "set=small2" in omniglot_line
    assert "built:      nothing yet" in info.stdout


def test_info_shows_the_mirrors_and_offline_mode_of_its_arguments_over_the_environment(tmp_path):
    """info used to show $GLYPHFORGE_MIRROR and $GLYPHFORGE_OFFLINE only, and refused --mirror and --offline."""
    env = {"GLYPHFORGE_MIRROR": "file:///env/mirror", "GLYPHFORGE_OFFLINE": ""}
    info = run_here("glyphforge", "info", "--data-dir", tmp_path, "--mirror", tmp_path / "given", "--offline",
                    "--no-verify", env=env)
    assert info.returncode == 0, info.stderr
    lines = info.stdout.splitlines()
    assert lines[0] == f"data dir:   {tmp_path}"
    assert lines[2:5] == [f"mirrors:    {tmp_path / 'given'} file:///env/mirror", "offline:    yes",
                          "verify:     no (--no-verify)"]
    plain = run_here("glyphforge", "info", "--data-dir", tmp_path, env={"GLYPHFORGE_OFFLINE": "1"})
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines()[2:5] == [
        "mirrors:    (none; give --mirror or set $GLYPHFORGE_MIRROR)", "offline:    yes", "verify:     yes"]


@pytest.mark.parametrize("dataset", registry.registered())
def test_info_shows_every_prepared_dataset_even_one_whose_parameters_are_all_sources(dataset, tmp_path):
    """Issue 42, row 19: after backgrounds were prepared (its only parameter is the upstream commit), its row was
    empty."""
    def write(writer):
        writer.write("x.pklz", np.zeros(3, np.uint8))
        writer.meta["n_images"] = 3

    entry = CacheStore(tmp_path / "cache").get_or_create(dataset, {"commit": "23d3ad6", "source": "sha256:00"}, write)
    info = run_here("glyphforge", "info", "--data-dir", tmp_path)
    assert info.returncode == 0, info.stderr
    row = next(line for line in info.stdout.splitlines() if line.startswith(f"  {dataset} "))
    assert row.split(None, 1)[1:] == [f"{registry.entry_label(entry)} (3 images)"], info.stdout


def test_info_shows_prepared_backgrounds(shared_data, tmp_path):
    done = run_here("prepare-data", "backgrounds", "--backgrounds", "water", "ice", "--mirror", shared_data,
                    "--offline", "--no-warmup", "-q", "--data-dir", tmp_path)
    assert done.returncode == 0, done.stderr
    info = run_here("glyphforge", "info", "--data-dir", tmp_path)
    assert "  backgrounds   native sizes (2 images)\n" in info.stdout


@pytest.mark.parametrize("target", ["emnist", "omniglot", "backgrounds"])
def test_preview_writes_a_png_of_a_prepared_dataset(prepared, tmp_path, target):
    data_dir, _, _ = prepared
    out = tmp_path / f"{target}.png"
    result = run_here("glyphforge", "preview", target, "--out", out, "-n", "9", "--data-dir", data_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"wrote {out}"
    with Image.open(out) as picture:
        assert picture.format == "PNG" and picture.mode == "RGB"
        # 3 x 3 cells of the largest image zoomed to about 128 pixels, 4-pixel gaps, 14-pixel captions
        width, height = picture.size
        assert width > 3 * 100 and height > 3 * 100


def test_preview_of_what_is_not_prepared_says_what_to_run(tmp_path):
    result = run_here("glyphforge", "preview", "omniglot", "--out", tmp_path / "x.png", "--data-dir", tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"error: omniglot is not prepared in {tmp_path / 'cache'}: run `prepare-data omniglot`"
    )
    assert not (tmp_path / "x.png").exists()


def test_build_scenes_with_font_glyphs_then_preview_them(tmp_path):
    built = run("glyphforge", "build", "scenes", "--glyphs", "font", "--n-examples", "60", "--shard-size", "25",
                "--image-shape", "32x32", "--colours", "red,#00ff00", "--session", "processes",
                "--session-option", "n_workers=2", "--data-dir", tmp_path, "-q")
    assert built.returncode == 0, built.stderr
    entry, = CacheStore.for_data_dir(tmp_path).ls()
    assert entry.kind == "scenes" and entry.meta["n_examples"] == 60 and entry.meta["n_shards"] == 3
    assert entry.params["spec"]["colours"] == [[255, 0, 0], [0, 255, 0]]
    assert built.stdout.strip() == f"built 60 scenes: entry {entry.key} at {entry.path}"
    again = run_here("glyphforge", "build", "scenes", "--glyphs", "font", "--n-examples", "60", "--shard-size", "25",
                     "--image-shape", "32x32", "--colours", "red,#00ff00", "--data-dir", tmp_path, "-q")
    assert again.returncode == 0 and again.stdout == built.stdout  # a cache hit: the same entry
    for target in ("scenes", entry.key[:8]):
        out = tmp_path / f"{target}.png"
        shown = run_here("glyphforge", "preview", target, "--out", out, "-n", "4", "--data-dir", tmp_path)
        assert shown.returncode == 0, shown.stderr
        with Image.open(out) as picture:
            # 2 x 2 cells of 32x32 scenes zoomed 4x to 128, with 4-pixel gaps
            assert picture.size == (2 * 128 + 3 * 4, 2 * 128 + 3 * 4)


def test_build_scenes_session_errors_are_one_paragraph(tmp_path):
    bad_option = run_here("glyphforge", "build", "scenes", "--glyphs", "font", "--n-examples", "5", "--session",
                          "processes", "--session-option", "workers=2", "--data-dir", tmp_path)
    assert bad_option.returncode == 2 and "workers" in bad_option.stderr and "Traceback" not in bad_option.stderr
    malformed = run_here("glyphforge", "build", "scenes", "--session-option", "cores", "--data-dir", tmp_path)
    assert malformed.returncode == 2 and "give NAME=VALUE, e.g. cores=4" in malformed.stderr
    unknown = run_here("glyphforge", "build", "scenes", "--glyphs", "font", "--session", "mpi", "--data-dir", tmp_path)
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: unknown session 'mpi'; use one of: local")
    assert CacheStore.for_data_dir(tmp_path).ls() == []


def test_build_scenes_reports_impossible_constraints_without_a_traceback(tmp_path):
    result = run_here("glyphforge", "build", "scenes", "--glyphs", "font", "--n-examples", "5",
                      "--glyph-shape", "20x20", "--image-shape", "16x16", "--data-dir", tmp_path)
    assert result.returncode == 2  # bad arguments, found before any work
    assert result.stderr.startswith("error: glyphs of up to 20x20") and "Traceback" not in result.stderr


@pytest.mark.parametrize("argv", [
    ["prepare-data"], ["glyphforge"], ["glyphforge", "info"], ["glyphforge", "cache"], ["glyphforge", "cache", "ls"],
    ["glyphforge", "cache", "verify"], ["glyphforge", "cache", "rm"], ["glyphforge", "cache", "gc"],
    ["glyphforge", "preview"], ["glyphforge", "build"], ["glyphforge", "build", "scenes"],
])
def test_every_help_shows_an_example(argv):
    result = run_here(argv[0], *argv[1:], "--help")
    assert result.returncode == 0
    example = result.stdout.split("example:\n", 1)[1].strip()
    assert example.startswith(argv[0]), example


def test_the_script_wrapper_runs_prepare_data(tmp_path):
    script = Path(__file__).resolve().parents[2] / "scripts" / "prepare_data.py"
    result = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("usage: prepare-data")


def test_offline_is_passed_as_an_argument_not_written_to_the_environment(tmp_path, capsys):
    argv = ["omniglot", "--omniglot-sets", "small1", "--offline", "--data-dir", str(tmp_path)]
    assert cli.prepare_data_main(argv) == 1
    assert "GLYPHFORGE_OFFLINE" not in os.environ
    assert "Offline mode (GLYPHFORGE_OFFLINE=1 or offline=True) forbids network access" in capsys.readouterr().err


def test_scene_options_not_given_keep_the_spec_defaults_and_shorthands_fill_glyph_options():
    parse = cli._glyphforge_parser().parse_args
    assert cli_args.scene_spec(parse(["build", "scenes"])) == ScatteredGlyphs(10_000)
    spec = cli_args.scene_spec(parse(["build", "scenes", "--glyphs", "omniglot", "--omniglot-sets", "small1", "small2",
                                  "--emnist-split", "letters", "--characters", "Latin,1 Latin,2", "--n-examples", "7",
                                  "--colours", "red,#00ff00", "--backgrounds", "water,ice", "--image-shape", "64x60"]))
    assert spec == ScatteredGlyphs(7, glyphs="omniglot", glyph_options={"sets": ["small1", "small2"]},
                                   characters=["Latin,1", "Latin,2"], colours=("red", "#00ff00"),
                                   backgrounds=["water", "ice"], image_shape=(64, 60))
    named = cli_args.scene_spec(parse(["build", "scenes", "--glyphs", "fashion-mnist", "--characters",
                                       "T-shirt/top, Ankle boot"]))
    assert named.characters == ("Ankle boot", "T-shirt/top")
    assert cli_args.scene_spec(parse(["build", "scenes", "--glyph-option", "split=letters"])).glyph_options == {
        "split": "letters"}
