"""Issue #30 row 3 for Omniglot and the backgrounds: an own (unverified) copy is keyed by its own bytes, says so.

An own Omniglot zip (upstream's ``small1`` with one drawing altered) or an own texture
(``water.jpg`` replaced in place) placed in ``<data dir>/raw/<dataset>/`` and prepared with
``prepare-data ... --no-verify --offline`` gets an entry of its own: never upstream's (which
keeps its key), nor another own copy's. Loads serve the copy raw/ holds now and warn "your own
copy (unverified)" once per process per entry; ``glyphforge info`` and ``cache ls`` mark it.
The real upstream files of ``../shared/data`` (skipped when absent) and the real CLI.
"""
from __future__ import annotations

import io
import logging
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from glyphforge import config
from glyphforge.cache import CacheStore
from glyphforge.datasets import own_copies as _own_copy
from glyphforge.datasets.backgrounds import COMMIT, load_backgrounds
from glyphforge.datasets.omniglot.dataset import RESOURCES, Omniglot, glyph_images, load_omniglot

from support.cli import run, run_here

OWN = "your own copy (unverified)"
ZIP = RESOURCES["small1"].filename
#: The drawing the own zips alter: Balinese character 1, drawer 1 (the first member of small1).
MEMBER, CLASS = "images_background_small1/Balinese/character01/0108_01.png", "Balinese,1"


@pytest.fixture(autouse=True)
def fresh_announcements(monkeypatch):
    """Each test is a fresh process as far as the once-per-process warning goes."""
    monkeypatch.setattr(_own_copy, "_announced", set())


def own_warnings(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.levelno == logging.WARNING and OWN in record.getMessage()]


def prepare_cli(data_dir: Path, *argv: str) -> None:
    done = run("prepare-data", *argv, "--offline", "--data-dir", data_dir, "--no-warmup", "-q")
    assert done.returncode == 0, done.stderr


def place(source: Path, data_dir: Path, dataset: str, filename: str) -> None:
    """Put ``source`` in ``<data dir>/raw/<dataset>/filename`` as a user would (replacing what is there)."""
    raw = config.raw_dir(dataset, data_dir)
    raw.mkdir(parents=True, exist_ok=True)
    (raw / filename).unlink(missing_ok=True)
    shutil.copyfile(source, raw / filename)


def altered_zip(upstream: Path, out: Path, corner: tuple[int, int]) -> Path:
    """Upstream's zip with a black 12x12 block (a stroke) drawn at ``corner`` of :data:`MEMBER`."""
    with zipfile.ZipFile(upstream) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == MEMBER:
                image = np.array(Image.open(io.BytesIO(data)).convert("L"))
                image[corner[0]:corner[0] + 12, corner[1]:corner[1] + 12] = 0
                buffer = io.BytesIO()
                Image.fromarray(image).save(buffer, "PNG")
                data = buffer.getvalue()
            target.writestr(info, data)
    return out


def first_drawing(data_dir: Path, **options) -> np.ndarray:
    x, _, _ = load_omniglot([CLASS], sets="small1", indices=[0], data_dir=data_dir, **options)
    return x[0]


def stroke_at(image: np.ndarray, corner: tuple[int, int]) -> bool:
    return bool((image[corner[0]:corner[0] + 12, corner[1]:corner[1] + 12] == 255).all())


def marked(data_dir: Path, kind: str) -> tuple[list[str], list[str]]:
    """The rows of ``glyphforge cache ls`` of ``kind`` and its line of ``glyphforge info`` (run in this process)."""
    listed = run_here("glyphforge", "cache", "ls", "--data-dir", data_dir)
    info = run_here("glyphforge", "info", "--data-dir", data_dir)
    assert listed.returncode == 0 and info.returncode == 0, listed.stderr + info.stderr
    return ([line for line in listed.stdout.splitlines() if f" {kind}" in line],
            [line for line in info.stdout.splitlines() if line.strip().startswith(kind)])


@pytest.mark.slow  # 8-10 s: prepares the small1 set three times
def test_an_own_omniglot_zip_gets_its_own_entry_and_the_one_in_raw_is_served(shared_data, tmp_path, caplog):
    data_dir, upstream = tmp_path / "data", shared_data / "omniglot" / ZIP
    place(upstream, data_dir, "omniglot", ZIP)
    prepare_cli(data_dir, "omniglot", "--omniglot-sets", "small1")
    [verified] = CacheStore.for_data_dir(data_dir).ls()
    assert verified.params["source"] == RESOURCES["small1"].hash and verified.meta["verified_archive"] is True
    assert not stroke_at(first_drawing(data_dir, download=False), (0, 0))

    place(altered_zip(upstream, tmp_path / "a.zip", (0, 0)), data_dir, "omniglot", ZIP)  # own drawings, in place
    prepare_cli(data_dir, "omniglot", "--omniglot-sets", "small1", "--no-verify")
    [own_a] = [entry for entry in CacheStore.for_data_dir(data_dir).ls() if entry.key != verified.key]
    assert own_a.params["source"].startswith("sha256:") and own_a.meta["verified_archive"] is False
    with caplog.at_level(logging.WARNING, logger="glyphforge"):
        assert stroke_at(first_drawing(data_dir, download=False), (0, 0))
        ds = Omniglot(classes=[CLASS], sets="small1", indices=[0], data_dir=data_dir, download=False)
        assert stroke_at(ds.images[0], (0, 0))
        glyphs, _, _ = glyph_images([CLASS], example_range=(0, 0.05), shape=None, data_dir=data_dir, sets="small1")
        assert stroke_at(glyphs[0], (0, 0))  # what scenes draw
    assert len(own_warnings(caplog)) == 1 and own_a.key[:12] in own_warnings(caplog)[0]  # once per entry

    rows, [line] = marked(data_dir, "omniglot")
    assert [OWN in row for row in sorted(rows, key=lambda row: not row.startswith(own_a.key[:12]))] == [True, False]
    assert line.count(OWN) == 1

    place(altered_zip(upstream, tmp_path / "b.zip", (50, 50)), data_dir, "omniglot", ZIP)  # another own copy
    unprepared = (r"^Omniglot sets \['small1'\] are not prepared in .* as your own copy \(the zips "
                  r".*/raw/omniglot/\.own-copy\.json names\): run prepare_omniglot\(sets=\['small1'\], verify=False\) "
                  r"or `prepare-data omniglot --omniglot-sets small1 --no-verify`, or pass download=True$")
    with pytest.raises(FileNotFoundError, match=unprepared):
        first_drawing(data_dir, download=False)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="glyphforge"):
        image = first_drawing(data_dir, offline=True)  # prepares b's, unchecked as it was recorded
    assert stroke_at(image, (50, 50)) and not stroke_at(image, (0, 0))
    entries = CacheStore.for_data_dir(data_dir).ls()
    assert len(entries) == 3 and len(own_warnings(caplog)) == 1 and own_a.key[:12] not in own_warnings(caplog)[0]

    place(upstream, data_dir, "omniglot", ZIP)  # upstream's zip back in raw/: upstream's entry, no warning
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="glyphforge"):
        image = first_drawing(data_dir, download=False)
    assert not stroke_at(image, (0, 0)) and not stroke_at(image, (50, 50)) and own_warnings(caplog) == []


def write_texture(path: Path, seed: int) -> np.ndarray:
    """Write an own ``water.jpg`` (a random 40x60 texture, saved as PNG bytes: decoded exactly); return its pixels."""
    pixels = np.random.default_rng(seed).integers(0, 256, (40, 60, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, "PNG")
    return pixels


def test_an_own_texture_replaced_in_place_gets_its_own_entry_and_is_served(shared_data, tmp_path, caplog):
    data_dir = tmp_path / "data"
    raw = config.raw_dir("backgrounds", data_dir)
    place(shared_data / "backgrounds" / "water.jpg", data_dir, "backgrounds", "water.jpg")
    prepare_cli(data_dir, "backgrounds", "--backgrounds", "water")
    [verified] = CacheStore.for_data_dir(data_dir).ls()
    assert verified.params == {"commit": COMMIT} and verified.meta["verified"] is True
    upstream_water = verified.load("water.pklz")

    pixels_a = write_texture(raw / "water.jpg", seed=1)  # replaced in place by an own texture
    prepare_cli(data_dir, "backgrounds", "--backgrounds", "water", "--no-verify")
    [own_a] = [entry for entry in CacheStore.for_data_dir(data_dir).ls() if entry.key != verified.key]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", own_a.params["source"]["water"]) and own_a.meta["verified"] is False
    with caplog.at_level(logging.WARNING, logger="glyphforge"):
        (image,), _, _ = load_backgrounds(["water"], data_dir=data_dir, download=False)
        load_backgrounds("water", data_dir=data_dir, download=False)
    np.testing.assert_array_equal(image, pixels_a)
    assert len(own_warnings(caplog)) == 1 and own_a.key[:12] in own_warnings(caplog)[0]  # once per entry
    rows, [line] = marked(data_dir, "backgrounds")
    assert [OWN in row for row in sorted(rows, key=lambda row: not row.startswith(own_a.key[:12]))] == [True, False]
    assert line.count(OWN) == 1

    pixels_b = write_texture(raw / "water.jpg", seed=2)  # another own texture, in place
    with pytest.raises(FileNotFoundError, match=r"as your own copy .*prepare_backgrounds\(names=\['water'\], "
                                                 r"verify=False\) or `prepare-data backgrounds --no-verify`"):
        load_backgrounds(["water"], data_dir=data_dir, download=False)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="glyphforge"):
        (image,), _, _ = load_backgrounds(["water"], data_dir=data_dir, offline=True)  # prepares b's
    np.testing.assert_array_equal(image, pixels_b)
    assert len(CacheStore.for_data_dir(data_dir).ls()) == 3 and len(own_warnings(caplog)) == 1

    place(shared_data / "backgrounds" / "water.jpg", data_dir, "backgrounds", "water.jpg")  # upstream's back
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="glyphforge"):
        (image,), _, _ = load_backgrounds(["water"], data_dir=data_dir, download=False)
    np.testing.assert_array_equal(image, upstream_water)
    assert own_warnings(caplog) == []
