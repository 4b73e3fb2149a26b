"""One store, one shape (#31): the store of a data dir lists and verifies alike on disk and at a URL, and the
cache keeps an entry's companions (folders a layer above makes from it) knowing only their record.

Real stores: a data dir on disk and one on S3 (moto), read by the CLI (its entry point in this process,
`support.cli.run_here`; ``cache rm`` once as the installed command) and through `glyphforge.DataContext.entry_store`.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from glyphforge import DataContext
from glyphforge.builds import build
from glyphforge.cache import CacheStore, Entry
from glyphforge.cache.companion_record import write_record
from glyphforge.cache.problems import CORRUPT
from glyphforge.storage import Location
from glyphforge.textfmt import human_size

from support.cli import run, run_here
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.specs import RowSpec

BACKENDS = ["path", "s3"]


def make_entries(data_dir: Path) -> tuple[Entry, Entry]:
    """Two entries of kind ``k`` in the data dir ``data_dir``: the second's manifest is then broken."""
    store = CacheStore.for_data_dir(data_dir)
    made = []
    for n in (1, 2):
        with store.create("k", {"n": n}) as writer:
            writer.write("A.pklz", np.arange(10 * n))
        entry = store.get("k", {"n": n})
        assert entry is not None
        made.append(entry)
    good, broken = made
    (broken.path / "manifest.json").write_text("{not json", encoding="utf-8")
    return good, broken


@pytest.fixture(params=BACKENDS)
def place(request, tmp_path) -> tuple[str, Entry, str]:
    """A data dir (as given on the command line) holding a whole entry and one whose manifest is broken: (data dir,
    the whole entry, the broken manifest's path or URL)."""
    local = tmp_path / "data"
    good, broken = make_entries(local)
    if request.param == "path":
        return str(local), good, str(broken.path / "manifest.json")
    url = request.getfixturevalue("s3_server").bucket() + "/data"
    for entry in (good, broken):
        upload(entry, url)
    return url, good, f"{url}/cache/k/{broken.path.name}/manifest.json"


def upload(entry: Entry, url: str) -> None:
    """Copy the entry on disk ``entry`` into the data dir at ``url``, its manifest last (as publishing does)."""
    where = Location(url).child("cache", entry.path.parent.name, entry.path.name)
    for path in sorted(entry.path.iterdir(), key=lambda path: path.name == "manifest.json"):
        where.fs.put_file(str(path), where.child(path.name).path)


def test_the_store_of_a_data_dir_lists_and_names_what_it_leaves_out_alike(place):
    data_dir, good, manifest = place
    scan = DataContext.resolve(data_dir=data_dir).entry_store.scan()
    assert [entry.key for entry in scan.entries] == [good.key]
    assert [(str(problem.path), problem.state) for problem in scan.problems] == [(manifest, CORRUPT)]
    listed = run_here("glyphforge", "cache", "ls", "--data-dir", data_dir)
    assert listed.returncode == 0, listed.stderr
    assert [row.split()[:2] for row in listed.stdout.splitlines()[2:]] == [[good.key[:12], "k"]]
    assert listed.stderr.startswith(f"not listed: {manifest}: ")
    assert listed.stderr.endswith(f" (glyphforge cache verify --data-dir {data_dir})\n")
    verified = run_here("glyphforge", "cache", "verify", "--data-dir", data_dir)
    assert verified.returncode == 1 and verified.stdout.startswith(f"CORRUPT {manifest}: ")
    assert "1 problem(s) found " in verified.stderr


def test_both_stores_list_the_one_entry_which_says_where_it_lies_and_reads_its_files(place):
    data_dir, good, _ = place
    shards = Path(os.environ["GLYPHFORGE_CACHE_DIR"]) / "shards"
    [entry] = DataContext.resolve(data_dir=data_dir).entry_store.ls()
    assert isinstance(entry, Entry) and entry.manifest == good.manifest
    assert entry.where == (str(good.path) if Path(data_dir).is_dir() else f"{data_dir}/cache/k/{good.key}")
    listed = run_here("glyphforge", "cache", "ls", "--data-dir", data_dir)
    assert listed.returncode == 0 and good.key[:12] in listed.stdout, listed.stderr
    assert not shards.exists()  # listing a store at a URL fetches nothing and makes no local folder
    assert entry.file("A.pklz").read_bytes() == (good.path / "A.pklz").read_bytes()  # fetched if at a URL
    assert np.array_equal(entry.load("A.pklz"), np.arange(10))


def test_both_stores_list_the_entries_of_one_kind_alone_when_asked(place, tmp_path):
    data_dir, good, _ = place
    other_store = CacheStore.for_data_dir(data_dir if "://" not in data_dir else tmp_path / "other")
    with other_store.create("other", {"n": 3}) as writer:
        writer.write("A.pklz", np.arange(3))
    other = other_store.get("other", {"n": 3})
    assert other is not None
    if "://" in data_dir:
        upload(other, data_dir)
    store = DataContext.resolve(data_dir=data_dir).entry_store
    assert [entry.key for entry in store.ls()] == [good.key, other.key]  # by kind: k, then other
    assert [entry.key for entry in store.ls("k")] == [good.key]
    assert [entry.key for entry in store.ls("other")] == [other.key]
    assert [store.ls(kind) for kind in ("none", "..", "k/..", ".k", "")] == [[]] * 5  # no kind's folder: nothing


def thumbs(entry: Entry) -> Path:
    """A companion of ``entry`` the cache knows nothing of but its record: ``<key>.thumbs``."""
    folder = entry.path.with_name(f"{entry.path.name}.thumbs")
    folder.mkdir()
    (folder / "a.bin").write_bytes(bytes(range(256)) * 8)
    write_record(folder, entry.key, {})
    return folder


def test_the_cache_keeps_any_recorded_companion_without_knowing_it(tmp_path):
    data_dir = tmp_path / "data"
    good, _ = make_entries(data_dir)
    folder = thumbs(good)
    listed = run_here("glyphforge", "cache", "ls", "--data-dir", data_dir)
    size = human_size(sum(path.stat().st_size for path in folder.iterdir()))  # its record's bytes too
    assert listed.returncode == 0 and f" + {size} thumbs " in listed.stdout.splitlines()[2], listed.stdout
    run_here("glyphforge", "cache", "gc", "--data-dir", data_dir)  # the broken entry goes; the companion stays
    whole = run_here("glyphforge", "cache", "verify", "--data-dir", data_dir)
    assert whole.returncode == 0 and whole.stdout == f"all 1 entry in {data_dir / 'cache'} verified\n", whole.stdout
    with open(folder / "a.bin", "r+b") as stream:
        stream.write(b"\xff")
    damaged = run_here("glyphforge", "cache", "verify", "--data-dir", data_dir)
    assert damaged.returncode == 1
    assert damaged.stdout.startswith(f"CORRUPT {folder / 'a.bin'}: sha256 differs from the thumbs copy's record")
    assert "(a damaged thumbs copy: see its line)" in damaged.stderr
    removed = run("glyphforge", "cache", "rm", good.key, "--data-dir", data_dir)  # the installed command
    assert removed.returncode == 0 and not good.path.exists() and not folder.exists()
    orphan = thumbs(good)  # a companion whose entry is gone
    collected = run_here("glyphforge", "cache", "gc", "--data-dir", data_dir)
    assert collected.returncode == 0 and f"removed {orphan}\n" in collected.stdout and not orphan.exists()


def test_a_folder_beside_an_entry_without_glyphforge_s_record_is_the_user_s(tmp_path):
    """``<key>.notes``, a user's folder beside an entry: not counted, checked or removed (``cache rm``, ``gc``, a
    replaced entry); the entry's decoded copy, which carries glyphforge's record, is removed with it."""
    data_dir = tmp_path / "data"
    dataset = build(RowSpec(n_examples=40, shard_size=10), data_dir=data_dir, progress=False)
    copy = dataset.materialize()
    dataset.close()
    notes = dataset.path.with_name(f"{dataset.key}.notes")
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    listed = run_here("glyphforge", "cache", "ls", "--data-dir", data_dir)
    assert listed.returncode == 0 and " decoded " in listed.stdout and "notes" not in listed.stdout, listed.stdout
    verified = run_here("glyphforge", "cache", "verify", "--data-dir", data_dir)
    assert verified.returncode == 0 and "notes" not in verified.stdout + verified.stderr, verified.stdout
    removed = run_here("glyphforge", "cache", "rm", dataset.key, "--data-dir", data_dir)
    assert removed.returncode == 0, removed.stderr
    assert not dataset.path.exists() and not copy.exists() and (notes / "todo.txt").read_text() == "mine"
    collected = run_here("glyphforge", "cache", "gc", "--data-dir", data_dir)
    assert collected.returncode == 0 and "notes" not in collected.stdout, collected.stdout
    assert (notes / "todo.txt").read_text() == "mine"
