"""The viewer's prepared datasets over HTTP (the real app on a real server): MNIST, EMNIST, Omniglot and the
backgrounds each have a page; a page reads only the data files of its rows, from the entry it shows; the server's
memory stays bounded paging through every class."""
from __future__ import annotations

import io
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import requests
import uvicorn
from PIL import Image

import glyphforge
from glyphforge import cli
from glyphforge.cache import entry as cache_entry
from glyphforge.datasets.classes.selection import LABELS_FILE
from glyphforge.view.app import create_app
from glyphforge.view.catalog import Catalog
from glyphforge.view.server import address, listen

from support.synthetic_mnist import ALL_FILES, write_synthetic_mnist
from support.viewer import running_viewer

pytestmark = pytest.mark.timeout(180)

@contextmanager
def serving(data_dir: Path) -> Iterator[str]:
    """The viewer's app over ``data_dir`` on a real server in this process (so a test can watch what it reads)."""
    sock = listen("127.0.0.1", 0)
    catalog = Catalog(glyphforge.DataContext.resolve(data_dir=data_dir, download=False))
    server = uvicorn.Server(uvicorn.Config(create_app(catalog), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield address(sock)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def entry_of(data_dir: Path, kind: str) -> glyphforge.Entry:
    (entry,) = [e for e in glyphforge.DataContext.resolve(data_dir=data_dir).store.ls() if e.kind == kind]
    return entry


def files_of_class(entry, name: str) -> str:
    """The data file holding the examples of class ``name`` of prepared ``entry``."""
    if entry.kind == "omniglot":
        return next(r["file"] for r in entry.meta["alphabets"] if r["name"] == name.split(",")[0])
    if entry.kind == "backgrounds":
        return entry.meta["backgrounds"][name]["file"]
    return next(r["file"] for r in entry.meta["classes"] if r["name"] == name)


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """The names of the cache files the entries load from now on (a wrapper on the reader every entry uses)."""
    names: list[str] = []
    reader = cache_entry.load_pklz

    def recording(path, *args, **kwargs):
        names.append(Path(path).name)
        return reader(path, *args, **kwargs)

    monkeypatch.setattr(cache_entry, "load_pklz", recording)
    return names


@pytest.mark.parametrize("kind", ["mnist", "emnist", "omniglot", "backgrounds"])
def test_a_page_of_one_class_reads_that_class_s_file_only(request, viewer_data, opened, kind):
    data_dir = viewer_data.data_dir if kind in ("mnist", "emnist") else request.getfixturevalue("more_data")
    entry = entry_of(data_dir, kind)
    with serving(data_dir) as viewer:
        listed = requests.get(viewer + "api/datasets", timeout=30).json()["datasets"]
        assert entry.key in [d["key"] for d in listed]
        stats = requests.get(viewer + f"api/datasets/{entry.key}/stats", timeout=30).json()
        name = stats["per_class"]["names"][{"omniglot": 45, "backgrounds": 1}.get(kind, 3)]  # not in the first file
        body = requests.get(viewer + f"api/datasets/{entry.key}/rows", params={"class": name, "size": 8},
                            timeout=30).json()
        png = requests.get(viewer + f"api/datasets/{entry.key}/image/{body['rows'][-1]['index']}.png", timeout=30)
    assert body["total"] == stats["per_class"]["counts"][stats["per_class"]["names"].index(name)] > 0
    assert {row["caption"] for row in body["rows"]} == {name}
    assert [file for file in opened if file != LABELS_FILE] == [files_of_class(entry, name)]  # the index: no image
    assert png.status_code == 200 and np.asarray(Image.open(io.BytesIO(png.content))).any()


def test_omniglot_and_backgrounds_pages_are_their_images(more_data):
    omniglot, backgrounds = entry_of(more_data, "omniglot"), entry_of(more_data, "backgrounds")
    record = omniglot.meta["alphabets"][1]
    alphabet = omniglot.load(record["file"])
    index = (len(omniglot.meta["alphabets"][0]["characters"]) + 2) * 20 + 7  # the 3rd character's drawer 7
    x, _, names = glyphforge.load_backgrounds(list(backgrounds.meta["backgrounds"]), data_dir=more_data,
                                              download=False)
    with serving(more_data) as viewer:
        example = requests.get(viewer + f"api/datasets/{omniglot.key}/example/{index}", timeout=30).json()
        drawing = requests.get(viewer + f"api/datasets/{omniglot.key}/image/{index}.png", timeout=30).content
        page = requests.get(viewer + f"api/datasets/{backgrounds.key}/rows", timeout=30).json()
        shown = [requests.get(viewer + f"api/datasets/{backgrounds.key}/image/{i}.png", timeout=30).content
                 for i in range(len(names))]
    assert example["caption"] == f"{record['name']},3"
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(drawing))), alphabet[2, 7])
    assert page["total"] == len(names) == 3 and [row["caption"] for row in page["rows"]] == list(names)
    for png, image in zip(shown, x, strict=True):
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(png))), image)


def prepare_mnist(data_dir: Path, counts: tuple[int, int], seed: int, scratch: Path) -> None:
    """Prepare a synthetic MNIST of ``counts`` (train, test) as an own copy (unverified), from files of ``seed``."""
    files = write_synthetic_mnist(scratch, counts, seed=seed)
    raw = data_dir / "raw" / "mnist"
    raw.mkdir(parents=True, exist_ok=True)
    for name in ALL_FILES:
        shutil.copy(files.path(name), raw / name)
    assert cli.prepare_data_main(["mnist", "--offline", "--no-verify", "-q", "--data-dir", str(data_dir)]) == 0


def test_two_entries_of_one_config_and_shape_each_show_their_own_images(tmp_path, opened):
    data_dir = tmp_path / "data"
    for seed in (1, 2):  # two own copies of MNIST 28x28: the second is the copy in use
        prepare_mnist(data_dir, (40, 10), seed, tmp_path / f"files-{seed}")
    first, second = glyphforge.DataContext.resolve(data_dir=data_dir).store.ls()
    with serving(data_dir) as viewer:
        listed = requests.get(viewer + "api/datasets", timeout=30).json()["datasets"]
        pngs = {entry.key: requests.get(viewer + f"api/datasets/{entry.key}/image/0.png", timeout=30).content
                for entry in (first, second)}
    assert {d["key"] for d in listed} == {first.key, second.key} and pngs[first.key] != pngs[second.key]
    for entry in (first, second):
        label = int(entry.load(LABELS_FILE)[entry.meta["n_test"]])  # train example 0's class
        images = entry.load(entry.meta["classes"][label]["file"])
        expected = images[entry.meta["classes"][label]["n_test"]]  # its first train image
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(pngs[entry.key]))), expected)


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


@pytest.mark.slow
def test_paging_through_every_class_keeps_the_server_s_memory_bounded(tmp_path):
    if not Path("/proc/self/status").exists():
        pytest.skip("no /proc here: the server's memory is read from /proc/PID/status")
    data_dir = tmp_path / "data"
    prepare_mnist(data_dir, (60_000, 10_000), 5, tmp_path / "files")  # 55 MB of images, 5.5 MB a class
    entry = entry_of(data_dir, "mnist")
    with running_viewer(data_dir) as viewer:
        get = lambda path, **params: requests.get(viewer.address + path, params=params, timeout=60)  # noqa: E731
        assert get("api/datasets").status_code == 200
        before = rss_mb(viewer.process.pid)
        for label in range(10):
            for page in (0, 3, 50):
                assert get(f"api/datasets/{entry.key}/rows", page=page, size=48, **{"class": str(label)}).ok
        grown = rss_mb(viewer.process.pid) - before
    assert grown < 45, f"the server grew by {grown:.0f} MB paging through every class of 55 MB of images"
