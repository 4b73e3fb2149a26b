"""``glyphforge view`` over HTTP, as a real subprocess: the rows are ``ds[i]``'s, filters and PNGs are right, every
bad request is a 4xx with a message, paths outside the app are 404, and nothing is written."""
from __future__ import annotations

import http.client
import io
import os
import socket
import subprocess
import sys
from urllib.parse import urlsplit

import numpy as np
import pytest
import requests
from PIL import Image

import glyphforge

from support.viewer import running_viewer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def viewer(viewer_data):
    with running_viewer(viewer_data.data_dir) as running:
        yield running.address


def keys(viewer_data):
    """The cache keys of the scenes, the videos and the prepared MNIST and EMNIST."""
    prepared = {e.kind: e.key for e in glyphforge.DataContext.resolve(data_dir=viewer_data.data_dir).store.ls()
                if e.kind in ("mnist", "emnist")}
    return {"scenes": viewer_data.scenes.key, "videos": viewer_data.videos.key, **prepared}


def get(viewer, path, **params):
    return requests.get(viewer + path.lstrip("/"), params=params, timeout=30)


def scene_caption(ds, i):
    _, targets = ds[i]
    return " ".join(ds.classes[label] for label in targets["labels"].reshape(-1, targets["labels"].shape[-1])[0]
                    [:int(targets["n_glyphs"])])


def test_the_page_and_the_data_dir_s_datasets(viewer, viewer_data):
    page = get(viewer, "/")
    assert page.status_code == 200 and "<title>glyphforge view</title>" in page.text
    assert get(viewer, "/static/view.js").status_code == 200
    listed = get(viewer, "/api/datasets").json()
    assert listed["data_dir"] == str(viewer_data.data_dir)
    assert {d["key"] for d in listed["datasets"]} == set(keys(viewer_data).values())


@pytest.mark.parametrize("name", ["scenes", "videos"])
def test_a_page_of_built_scenes_is_their_rows(viewer, viewer_data, name):
    ds = getattr(viewer_data, name)
    body = get(viewer, f"/api/datasets/{ds.key}/rows", page=1, size=10).json()
    assert body["total"] == len(ds) and [row["index"] for row in body["rows"]] == list(range(10, 20))
    for row in body["rows"]:
        _, targets = ds[row["index"]]
        assert row["caption"] == scene_caption(ds, row["index"])
        frame = targets["boxes"][0] if name == "videos" else targets["boxes"]
        shown = [[float(v) for v in box] for box in frame[:int(targets["n_glyphs"])] if box[0] >= 0]
        assert [o["box"] for o in row["objects"][0]] == shown
        assert row["masks"] is True and row["frames"] == (6 if name == "videos" else 0)


@pytest.mark.parametrize(("name", "dataset"), [
    ("mnist", lambda data_dir: glyphforge.MNIST(subset="all", data_dir=data_dir, download=False)),
    ("emnist", lambda data_dir: glyphforge.EMNIST(subset="all", split="digits", data_dir=data_dir, download=False)),
])
def test_a_page_of_a_prepared_dataset_is_its_rows(viewer, viewer_data, name, dataset):
    key = keys(viewer_data)[name]
    ds = dataset(viewer_data.data_dir)
    body = get(viewer, f"/api/datasets/{key}/rows", page=2, size=7).json()
    assert body["total"] == len(ds) and len(ds) > 21
    assert [(row["index"], row["caption"]) for row in body["rows"]] == [
        (i, ds.classes[ds[i][1]]) for i in range(14, 21)]
    image = Image.open(io.BytesIO(get(viewer, f"/api/datasets/{key}/image/15.png").content))
    np.testing.assert_array_equal(np.asarray(image), ds[15][0])
    stats = get(viewer, f"/api/datasets/{key}/stats").json()
    assert stats["per_class"]["counts"] == np.bincount(ds.labels, minlength=len(ds.classes)).tolist()


@pytest.mark.parametrize("name", ["scenes", "videos"])
def test_images_and_masks_are_the_rows(viewer, viewer_data, name):
    ds = getattr(viewer_data, name)
    images, targets = ds[7]
    frame = {"frame": 4} if name == "videos" else {}
    picked = (lambda a: a[4]) if name == "videos" else (lambda a: a)
    png = get(viewer, f"/api/datasets/{ds.key}/image/7.png", **frame)
    assert png.headers["content-type"] == "image/png"
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(png.content))), picked(images))
    mask = np.asarray(Image.open(io.BytesIO(get(viewer, f"/api/datasets/{ds.key}/mask/7.png", **frame).content)))
    np.testing.assert_array_equal(mask[..., 3] > 0, picked(targets["masks"]) > 0)


def test_filters_pick_the_examples_of_a_class_and_a_number_of_objects(viewer, viewer_data):
    ds = viewer_data.scenes
    labels, counts = ds["labels"], ds["n_glyphs"]
    name = ds.classes[int(labels[0, 0])]
    wanted = [i for i in range(len(ds)) if int(labels[0, 0]) in labels[i, :counts[i]]]
    body = get(viewer, f"/api/datasets/{ds.key}/rows", size=100, **{"class": name}).json()
    assert body["total"] == len(wanted) and [row["index"] for row in body["rows"]] == wanted[:100]
    assert all(name in row["caption"].split() for row in body["rows"])
    both = get(viewer, f"/api/datasets/{ds.key}/rows", size=100, objects=2, **{"class": name}).json()
    assert [row["index"] for row in both["rows"]] == [i for i in wanted if counts[i] == 2]


def test_the_detail_and_the_statistics(viewer, viewer_data):
    ds = viewer_data.scenes
    example = get(viewer, f"/api/datasets/{ds.key}/example/3").json()
    _, targets = ds[3]
    assert example["table"]["labels"] == targets["labels"].tolist() and "images" not in example["table"]
    stats = get(viewer, f"/api/datasets/{ds.key}/stats").json()
    labels = ds["labels"]
    assert stats["per_class"]["counts"] == np.bincount(labels[labels >= 0], minlength=len(ds.classes)).tolist()
    assert stats["per_scene"]["counts"] == np.bincount(ds["n_glyphs"]).tolist()
    assert stats["info"]["key"] == ds.key and stats["info"]["params"] == ds.entry.params
    assert stats["info"]["made"]["created"] == ds.entry.manifest["created"]


BAD = [
    ("scenes", "rows?page=-1", 400, "page must be 0 or more, got -1"),
    ("scenes", "rows?page=two", 400, "page must be a whole number, got 'two'"),
    ("scenes", "rows?page=999", 400, "page 999 is past the last page"),
    ("scenes", "rows?size=0", 400, "size must be from 1 to 100, got 0"),
    ("scenes", "rows?size=5000", 400, "size must be from 1 to 100, got 5000"),
    ("scenes", "rows?class=nope", 400, "class 'nope' is not a class of scenes"),
    ("mnist", "rows?objects=2", 400, "only scenes have a number of objects"),
    ("scenes", "image/200.png", 404, "example 200 is not in scenes"),
    ("scenes", "image/x1.png", 404, "an example index is a whole number"),
    ("videos", "image/0.png?frame=6", 400, "frame must be from 0 to 5, got 6"),
    ("scenes", "image/0.png?frame=1", 400, "frame must be from 0 to 0, got 1"),
    ("mnist", "mask/0.png", 404, "has no instance masks"),
    ("scenes", "example/-1", 404, "an example index is a whole number"),
    ("nokey", "stats", 404, "no dataset with key 'nokey'"),
]


@pytest.mark.parametrize(("dataset", "path", "status", "message"), BAD, ids=[f"{d}/{p}" for d, p, _, _ in BAD])
def test_a_bad_request_is_a_4xx_with_a_message(viewer, viewer_data, dataset, path, status, message):
    key = keys(viewer_data).get(dataset, dataset)
    answer = requests.get(f"{viewer}api/datasets/{key}/{path}", timeout=30)
    assert answer.status_code == status and message in answer.json()["error"]
    assert "Traceback" not in answer.text


@pytest.mark.parametrize("path", ["/static/../../cache", "/static/%2e%2e/%2e%2e/cache", "/../../etc/passwd",
                                  "/static/..%2f..%2fsetup.cfg", "/cache/scenes",
                                  "/raw/mnist/train-images-idx3-ubyte.gz",
                                  "/api/datasets/..%2f..%2fetc/stats"])
def test_a_path_outside_the_app_is_404(viewer, path):
    where = urlsplit(viewer)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    connection.request("GET", path)  # sent as written, dot segments and all
    answer = connection.getresponse()
    assert answer.status == 404 and b"Traceback" not in answer.read()


def test_a_request_for_another_host_name_is_refused(viewer):
    answer = requests.get(viewer + "api/datasets", headers={"Host": "attacker.example"}, timeout=30)
    assert answer.status_code == 400 and "datasets" not in answer.text


def _files(root):
    """Every path under ``root`` with its mtime; an entry's readers lock (``.KEY.readers``) without it: every reader
    takes it (marking the entry used, so ``cache gc --max-size`` leaves it alone), and it holds no data."""
    return {path: None if path.name.endswith(".readers") else path.stat().st_mtime_ns for path in root.rglob("*")}


def test_a_session_of_requests_writes_nothing(viewer_data):
    before = _files(viewer_data.data_dir)
    with running_viewer(viewer_data.data_dir) as running:
        address = running.address
        for key in keys(viewer_data).values():
            for path in ["rows?page=0&size=100", "rows?page=1&size=24", "stats", "example/5", "image/5.png",
                         "mask/5.png", "rows?class=zz", "image/9999.png"]:
                requests.get(f"{address}api/datasets/{key}/{path}", timeout=30)
    assert _files(viewer_data.data_dir) == before


def _glyphforge(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "glyphforge", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize(("args", "message"), [
    (["--port", "70000"], "a port is a whole number from 0 to 65535, got 70000"),
    (["nothing-like-it"], "nothing to preview for 'nothing-like-it'"),
])
def test_bad_arguments_exit_2_before_serving(viewer_data, args, message):
    done = _glyphforge("view", "--no-browser", "--data-dir", str(viewer_data.data_dir), *args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert "http://" not in done.stdout


def test_a_port_in_use_exits_2_naming_it(viewer_data):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _glyphforge("view", "--no-browser", "--data-dir", str(viewer_data.data_dir), "--port", str(port))
    assert done.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in done.stderr


def test_a_target_opens_its_page_and_another_host_is_warned_about(viewer_data):
    with running_viewer(viewer_data.data_dir, viewer_data.scenes.key[:10], "--host", "0.0.0.0") as running:
        assert get(running.address, "/api/datasets").status_code == 200
        assert running.said.rstrip().endswith(f"/#{viewer_data.scenes.key} (Ctrl-C stops)")
    assert "warning: listening on 0.0.0.0, not on the loopback" in running.errors


def _rss(pid):
    """The resident memory of process ``pid`` (bytes), from /proc."""
    for line in open(f"/proc/{pid}/status").read().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the server's memory from /proc")
def test_paging_a_large_entry_keeps_the_server_s_memory_bounded(tmp_path):
    from glyphforge.scenes.spec import ScatteredGlyphs

    ds = glyphforge.build(ScatteredGlyphs(20_000, glyphs="font", max_glyphs=4), data_dir=tmp_path, progress=False,
                          session="processes:2")
    with running_viewer(tmp_path) as running:
        address, process = running.address, running.process
        rows = f"api/datasets/{ds.key}/rows"
        requests.get(f"{address}{rows}?page=0&size=100", timeout=60).raise_for_status()
        start = _rss(process.pid)
        for page in range(0, 200, 7):
            requests.get(f"{address}{rows}?page={page}&size=100", timeout=60).raise_for_status()
            requests.get(f"{address}api/datasets/{ds.key}/image/{page * 100}.png", timeout=60).raise_for_status()
        requests.get(f"{address}{rows}?size=100&objects=3&page=5", timeout=60).raise_for_status()
        end = _rss(process.pid)
    assert end < 200 * 2**20 and end - start < 40 * 2**20, (start, end)


def test_without_the_view_extra_it_says_what_to_install(viewer_data, tmp_path):
    (tmp_path / "uvicorn").mkdir()  # an uvicorn that cannot be imported, first on the path
    (tmp_path / "uvicorn" / "__init__.py").write_text("raise ImportError('No module named uvicorn')\n")
    done = subprocess.run([sys.executable, "-m", "glyphforge", "view", "--no-browser", "--data-dir",
                           str(viewer_data.data_dir)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])})
    assert done.returncode == 2 and 'pip install "glyphforge[view]"' in done.stderr
