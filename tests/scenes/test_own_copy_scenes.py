"""Issue #30 row 3, built scenes: scenes drawn from own (unverified) glyph files never stand in for upstream's.

A scenes build reading an own copy of its glyph dataset is keyed by those files too (its params
name their ``sha256:``), its manifest says ``verified: false``, ``cache ls`` and ``info`` mark it
"your own copy (unverified)", and opening it warns once per process; a build from upstream's
files keeps upstream's key (a cache hit once upstream's files are back). Synthetic MNIST files
are pinned as "upstream" in this process (as in test_own_copy); the real CLI, with the shipped
pins, sees the own files as what they are, not upstream's.
"""
from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.builds.making.spec import cache_params
from glyphforge.builds.making.url_build import build_into
from glyphforge.builds.reading.lookup import find_built
from glyphforge.cache import CacheStore
from glyphforge.context import DataContext
from glyphforge.datasets import own_copies as _own_copy
from glyphforge.datasets.classes.files import DECLARATIONS

from support.cli import run, run_here
from support.own_copy import OWN, own_warnings, place, prepare_cli
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.synthetic_mnist import mnist_family, write_synthetic_mnist

UPSTREAM = mnist_family()
OWN_SOURCES = "own_sources"  # the params naming the own files a build read
SPEC = dict(glyphs="mnist", characters="01", image_shape=(24, 24), glyph_shape=(10, 10), max_glyphs=2, seed=5)
CLI_SPEC = ["--glyphs", "mnist", "--characters", "01", "--image-shape", "24x24", "--glyph-shape", "10x10",
            "--max-glyphs", "2", "--seed", "5", "--n-examples", "12", "--shard-size", "6", "-q"]


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    root = tmp_path_factory.mktemp("copies")
    return {name: write_synthetic_mnist(root / name, (600, 100), seed=seed)
            for seed, name in enumerate(("own", "upstream"), start=21)}


@pytest.fixture(autouse=True)
def pinned(copies, monkeypatch, tmp_path):
    """MNIST's pins name the ``upstream`` synthetic files in this process; announcements are fresh."""
    upstream = copies["upstream"]
    resources = {name: dataclasses.replace(resource, url=(tmp_path / "no-origin" / name).as_uri(),
                                           hash=f"md5:{upstream.md5[name]}", size=upstream.size[name])
                 for name, resource in UPSTREAM["mnist"].resources.items()}
    configs = {"default": dataclasses.replace(UPSTREAM["mnist"].configs["default"], n_images=(600, 100))}
    monkeypatch.setitem(DECLARATIONS, "mnist", dataclasses.replace(UPSTREAM["mnist"], resources=resources,
                                                                   configs=configs))
    monkeypatch.setattr(_own_copy, "_announced", set())


def scenes(data_dir) -> list:
    return [entry for entry in CacheStore.for_data_dir(data_dir).ls() if entry.kind == "scenes"]


def test_scenes_from_an_own_copy_have_their_own_key_are_marked_and_upstream_files_hit_upstream_key(
        copies, tmp_path, caplog):
    data_dir = tmp_path / "data"
    spec = gf.ScatteredGlyphs(12, shard_size=6, **SPEC)
    place(copies["upstream"], data_dir, "mnist")
    upstream = gf.build(spec, data_dir=data_dir, context=DataContext.resolve(offline=True), progress=False)
    assert OWN_SOURCES not in upstream.entry.params and upstream.entry.meta.get("verified", True) is True

    place(copies["own"], data_dir, "mnist")  # own files, prepared unchecked: the copy in use from now on
    prepare_cli("mnist", data_dir)
    built = run("glyphforge", "build", "scenes", *CLI_SPEC, "--data-dir", data_dir, "--offline")
    assert built.returncode == 0, built.stderr
    [own] = [entry for entry in scenes(data_dir) if entry.key != upstream.key]
    assert own.meta["verified"] is False and set(own.params[OWN_SOURCES]) == {"glyphs"}
    assert {**own.params, OWN_SOURCES: None} == {**upstream.entry.params, OWN_SOURCES: None}  # the spec is the same
    listed = run_here("glyphforge", "cache", "ls", "--data-dir", data_dir)  # listings: in this process
    assert listed.returncode == 0, listed.stderr
    [row] = [line for line in listed.stdout.splitlines() if line.startswith(own.key[:12])]
    assert f"scenes ({OWN})" in row
    [row] = [line for line in listed.stdout.splitlines() if line.startswith(upstream.key[:12])]
    assert OWN not in row
    info = run_here("glyphforge", "info", "--data-dir", data_dir)
    assert info.returncode == 0, info.stderr
    [line] = [line for line in info.stdout.splitlines() if line.strip().startswith("scenes")]
    assert f", 1 of them ({OWN}); newest {own.key[:12]} (12 examples) ({OWN})" in line, line

    caplog.clear()
    with caplog.at_level(logging.WARNING):
        again = gf.build(spec, data_dir=data_dir, context=DataContext.resolve(offline=True), progress=False)
        find_built(own.key, data_dir=data_dir)
        opened = gf.open_built(own.path)
    assert not np.array_equal(opened.arrays["images"], upstream.arrays["images"])  # drawn from the own glyphs
    assert again.key == own.key  # the same own files: a cache hit on the own copy's key, in this process too
    [warning] = [message for message in own_warnings(caplog) if "built scenes" in message]  # once per process
    assert own.key[:12] in warning

    place(copies["upstream"], data_dir, "mnist")  # upstream's files back: upstream's scenes, nothing built
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        back = gf.build(spec, data_dir=data_dir, context=DataContext.resolve(offline=True), progress=False)
    assert back.key == upstream.key and len(scenes(data_dir)) == 2
    assert own_warnings(caplog) == []


def test_a_no_verify_build_keys_the_files_placed_in_raw_not_upstream_s(copies, tmp_path):
    """``build --no-verify`` prepares the files placed in raw/ unchecked: the key says so before any lookup."""
    data_dir = tmp_path / "data"
    place(copies["upstream"], data_dir, "mnist")
    upstream = gf.build(gf.ScatteredGlyphs(12, shard_size=6, **SPEC), data_dir=data_dir,
                        context=DataContext.resolve(offline=True), progress=False)
    place(copies["own"], data_dir, "mnist")  # never prepared: no record yet
    built = run("glyphforge", "build", "scenes", *CLI_SPEC, "--data-dir", data_dir, "--offline", "--no-verify")
    assert built.returncode == 0, built.stderr
    [own] = [entry for entry in scenes(data_dir) if entry.key != upstream.key]
    assert own.meta["verified"] is False and OWN_SOURCES in own.params


def test_a_build_into_a_url_from_an_own_copy_is_refused_before_any_work(copies, tmp_path, s3_server, monkeypatch):
    """Workers of a build into a URL read their own data dirs' copies: an own copy on the driver is refused."""
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(tmp_path / "cache"))
    context = DataContext.resolve(data_dir=f"{s3_server.bucket()}/data", offline=True, progress=False)
    place(copies["own"], context.data_dir, "mnist")
    prepare_cli("mnist", context.data_dir)
    spec = gf.ScatteredGlyphs(12, shard_size=6, **SPEC)
    assert OWN_SOURCES in cache_params(spec, context)
    with pytest.raises(ValueError, match=r"from your own copies \(unverified\) .*Build into a local data dir"):
        build_into(spec, context, progress=False)
    assert s3_server.fs().find(s3_server.bucket()) == []
