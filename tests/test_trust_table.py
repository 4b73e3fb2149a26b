"""The table of docs/trust.md holds: each kind of file it lists, damaged, shows the user what the table says (#42).

The test reads the table's rows from the page and, for each kind, damages a real file of that
kind (a byte of it changed, its size kept) and reads it as a user does. Its last column, "On
damage", is checked phrase by phrase: each error it names in backticks (``glyphforge.X``) is
what the read raised, naming the damaged file; "a WARNING naming the file" is logged and the
rows returned are exact; "fetched again" means no error, exact rows and the file whole again.
A row without a damage case here, or whose last column says none of these, fails.
"""
from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import glyphforge as gf
from glyphforge import cli, config
from glyphforge.builds import ARRAYS_FILE
from glyphforge.builds.reading.blocks import BLOCKS_FILE
from glyphforge.builds.reading.index import INDEX_FILE, ShardIndex
from glyphforge.cache import CacheStore
from glyphforge.datasets import backgrounds
from glyphforge.datasets.classes.mnist_form import class_file_name
from glyphforge.datasets.mnist import load_mnist, prepare_mnist
from glyphforge.pipelines.download import fetch

from support.copy_backends import built_rows, fresh_build  # noqa: F401 (fixture)
from support.http_server import LocalHTTPServer
from support.own_copy import place
from support.specs import RowSpec
from support.synthetic_mnist import ALL_FILES, write_synthetic_mnist

TRUST = Path(__file__).resolve().parents[1] / "docs" / "trust.md"
TABLE_TITLE = "## What checks each file"
ROWS = 1030


def table_rows() -> dict[str, str]:
    """The table under `TABLE_TITLE` in docs/trust.md: each row's first cell (the kind, its markup removed) and last."""
    text = TRUST.read_text(encoding="utf-8")
    assert TABLE_TITLE in text, f"{TRUST} has no section {TABLE_TITLE!r}"
    section = text.split(TABLE_TITLE, 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    rows = {}
    for line in lines[2:]:  # the header and its rule first
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows[re.sub(r"[*`]", "", cells[0])] = cells[-1]
    return rows


@dataclass
class Seen:
    """What a user saw reading a damaged file: the error raised, the WARNINGs logged, whether what was returned is
    exact, and whether the damaged file is whole again afterwards."""

    damaged: Path
    error: BaseException | None = None
    warnings: list[str] = field(default_factory=list)
    exact: bool = False
    whole_again: bool = False


def flip(path: Path, at: int) -> bytes:
    """Change the byte at ``at`` of ``path`` (its size kept); return what the file held."""
    data = path.read_bytes()
    damaged = bytearray(data)
    damaged[at] ^= 0xFF
    path.write_bytes(bytes(damaged))
    return data


def observe(damaged: Path, read: Callable[[], bool], caplog) -> Seen:
    """Run ``read`` (True when what it returned is exact) as a user would, and say what they saw."""
    caplog.clear()
    seen = Seen(damaged)
    try:
        seen.exact = read()
    except Exception as error:  # noqa: BLE001 - what the user sees is the point
        seen.error = error
    seen.warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    return seen


def expected_rows() -> dict[str, np.ndarray]:
    spec = RowSpec()
    shards = [spec.make_shard(index, np.random.default_rng(), min(100, ROWS - index * 100)) for index in range(11)]
    return {name: np.concatenate([shard[name] for shard in shards]) for name in shards[0]}


def exact_take(dataset, rows: list[int]) -> bool:
    taken, arrays = dataset.take(rows), expected_rows()
    return all(np.array_equal(taken[name], arrays[name][rows]) for name in arrays)


def prepared_own_mnist(tmp_path: Path) -> Path:
    """A data dir with a small synthetic MNIST in ``raw/`` prepared as an own copy; return it."""
    data_dir = tmp_path / "data"
    place(write_synthetic_mnist(tmp_path / "files", (300, 50)), data_dir, "mnist")
    assert cli.prepare_data_main(["mnist", "--offline", "--no-verify", "--data-dir", str(data_dir), "-q"]) == 0
    return data_dir


# -- one damage case per kind of the table ---------------------------------------------------------------------------
def manifests(built, tmp_path, caplog) -> Seen:
    dataset = fresh_build(built, tmp_path)
    manifest = dataset.path / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"n_examples": 1030', '"n_examples": 1031'))
    return observe(manifest, lambda: exact_take(gf.open_built(dataset.path), [3]), caplog)


def class_files(built, tmp_path, caplog) -> Seen:
    data_dir = prepared_own_mnist(tmp_path)
    [entry] = CacheStore.for_data_dir(data_dir).ls()
    path = entry.path / class_file_name(3)
    data = bytearray(path.read_bytes())
    data[10] = 0x07  # its first deflate block of the type deflate reserves (#42 row 3: isal's "Invalid deflate block")
    path.write_bytes(bytes(data))
    return observe(path, lambda: len(load_mnist("3", data_dir=data_dir, download=False)[0]) > 0, caplog)


def shards(built, tmp_path, caplog) -> Seen:
    dataset = fresh_build(built, tmp_path)
    index = ShardIndex.read(dataset.path / INDEX_FILE, "entry")
    flip(dataset.path / ARRAYS_FILE, int(index.offset[0] + index.length[0] // 2))
    return observe(dataset.path / ARRAYS_FILE,
                   lambda: exact_take(gf.open_built(dataset.path, random_access="decode"), [3]), caplog)


def shard_indexes(built, tmp_path, caplog) -> Seen:
    dataset = fresh_build(built, tmp_path)
    path = dataset.path / INDEX_FILE
    flip(path, path.stat().st_size - 8 * 11 * 2 + 1)  # a byte of the third column (offsets) of shard 0
    return observe(path, lambda: exact_take(gf.open_built(dataset.path), [3]), caplog)


def block_tables(built, tmp_path, caplog) -> Seen:
    dataset = fresh_build(built, tmp_path)
    path = dataset.path / BLOCKS_FILE
    flip(path, path.stat().st_size - 8 * 11 * 3 * 2 + 7)  # the sign of shard 0's first item (3 arrays of 1 block)
    return observe(path, lambda: exact_take(gf.open_built(dataset.path), [3]), caplog)


def decoded_copies(built, tmp_path, caplog) -> Seen:
    dataset = fresh_build(built, tmp_path)
    copy = dataset.reopened().materialize()
    path = copy / "row.npy"
    flip(path, path.stat().st_size - 8 * 10)
    return observe(path, lambda: exact_take(dataset.reopened(), list(range(0, ROWS, 7))), caplog)


def shard_caches(built, tmp_path, caplog) -> Seen:
    entry = next(path for path in (built / "cache" / RowSpec.kind).iterdir() if "." not in path.name)
    with LocalHTTPServer(directory=built) as server:
        url = server.url(f"cache/{RowSpec.kind}/{entry.name}")
        assert exact_take(gf.open_built(url, cache_dir=tmp_path / "local", random_access="decode"), [3])
        [cached] = (tmp_path / "local").rglob(f"{ARRAYS_FILE}.0-*.shard")
        whole = flip(cached, cached.stat().st_size // 2)
        seen = observe(cached, lambda: exact_take(gf.open_built(url, cache_dir=tmp_path / "local",
                                                                random_access="decode"), [3]), caplog)
    seen.whole_again = cached.read_bytes() == whole
    return seen


def upstream_downloads(built, tmp_path, caplog) -> Seen:
    resource = backgrounds.RESOURCES["water.jpg"]
    folder = tmp_path / "raw" / "backgrounds"
    folder.mkdir(parents=True)
    (folder / "water.jpg").write_bytes(b"a download damaged on disk")
    return observe(folder / "water.jpg", lambda: fetch(resource, folder, offline=True, progress=False).is_file(),
                   caplog)


def own_copies(built, tmp_path, caplog) -> Seen:
    data_dir = prepared_own_mnist(tmp_path)
    raw = config.raw_dir("mnist", data_dir)
    path = raw / ALL_FILES[0]
    flip(path, path.stat().st_size // 2)  # its gzip CRC no longer holds
    before = sorted(CacheStore.for_data_dir(data_dir).ls(), key=lambda entry: entry.key)
    seen = observe(path, lambda: prepare_mnist(data_dir=data_dir, offline=True, verify=False) is None, caplog)
    assert sorted(CacheStore.for_data_dir(data_dir).ls(), key=lambda entry: entry.key) == before, "nothing cached"
    return seen


def mirrors(built, tmp_path, caplog) -> Seen:
    resource = backgrounds.RESOURCES["water.jpg"]
    mirror = tmp_path / "mirror" / "backgrounds"
    mirror.mkdir(parents=True)
    (mirror / "water.jpg").write_bytes(bytes(resource.size))  # of the right size: only its hash tells
    folder = tmp_path / "raw"
    seen = observe(mirror / "water.jpg", lambda: fetch(resource, folder, mirrors=[mirror.parent], offline=True,
                                                       progress=False).is_file(), caplog)
    assert not list(folder.glob("water.jpg*")), "nothing of a rejected file is kept"
    return seen


#: The damage case of each kind the table lists, by its first cell.
CASES: dict[str, Callable[..., Seen]] = {
    "Manifests": manifests,
    "Class files": class_files,
    "Shards": shards,
    "Shard indexes": shard_indexes,
    "Block tables": block_tables,
    "Decoded copies": decoded_copies,
    "Shard caches": shard_caches,
    "Upstream downloads": upstream_downloads,
    "Own copies": own_copies,
    "Mirrors": mirrors,
}


def test_every_kind_the_table_lists_has_a_damage_case():
    rows = table_rows()
    assert rows, "the table has no rows"
    assert set(rows) == set(CASES), f"kinds without a damage case: {sorted(set(rows) - set(CASES))}; cases without " \
                                    f"a row: {sorted(set(CASES) - set(rows))}"


@pytest.mark.parametrize("kind", list(CASES))
def test_a_damaged_file_of_each_kind_shows_what_the_table_says(kind, built_rows, tmp_path, caplog):
    said = table_rows()[kind]
    caplog.set_level(logging.WARNING)
    seen = CASES[kind](built_rows, tmp_path, caplog)
    errors = re.findall(r"`(glyphforge(?:\.\w+)*\.\w+Error)`", said)
    checked = 0
    for name in errors:
        module, _, attribute = name.rpartition(".")
        error_type = getattr(importlib.import_module(module), attribute)
        assert isinstance(seen.error, error_type), f"{kind}: the table says {name}, the user saw {seen.error!r}"
        assert seen.damaged.name in str(seen.error) and str(seen.damaged.parent) in str(seen.error), seen.error
        checked += 1
    if "a WARNING naming the file" in said:
        assert seen.error is None and seen.exact, seen.error
        assert any(str(seen.damaged) in warning for warning in seen.warnings), seen.warnings
        checked += 1
    if "fetched again" in said:
        assert seen.error is None and seen.exact and seen.whole_again, seen.error
        checked += 1
    assert checked, f"{kind}: the table's last column ({said!r}) names no error, WARNING or fetch to check"
