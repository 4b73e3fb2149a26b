"""``glyphforge view`` over a data dir in object storage (moto's S3 on 127.0.0.1): its built entries are shown, read
where they lie, and nothing in the bucket changes."""
from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest
import requests
from PIL import Image

from support.http_server import LocalHTTPServer
from support.s3_server import s3_server  # noqa: F401 (fixture)
from support.viewer import running_viewer

pytestmark = pytest.mark.timeout(120)


def test_a_built_entry_in_a_bucket_is_viewed_where_it_lies(s3_server, viewer_data, tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(tmp_path / "local-cache"))  # where the viewer keeps fetched shards
    ds = viewer_data.scenes
    data_url = f"{s3_server.bucket()}/data"
    ds.publish(data_url, progress=False)
    fs = s3_server.fs()
    before = {path: info["ETag"] for path, info in fs.find(data_url, detail=True).items()}
    with running_viewer(data_url) as running:
        base = f"{running.address}api/datasets"
        assert [d["key"] for d in requests.get(base, timeout=30).json()["datasets"]] == [ds.key]
        rows = requests.get(f"{base}/{ds.key}/rows", params={"page": 3, "size": 5}, timeout=30).json()["rows"]
        assert [row["caption"] for row in rows] == [
            " ".join(ds.classes[label] for label in ds[i][1]["labels"][:int(ds[i][1]["n_glyphs"])])
            for i in range(15, 20)]
        png = requests.get(f"{base}/{ds.key}/image/17.png", timeout=30).content
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(png))), ds[17][0])
    fs.invalidate_cache()
    assert {path: info["ETag"] for path, info in fs.find(data_url, detail=True).items()} == before


def test_over_http_the_entry_named_is_viewed_and_without_one_the_data_dir_is_refused(viewer_data, tmp_path,
                                                                                     monkeypatch):
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(tmp_path / "local-cache"))
    ds = viewer_data.scenes
    with LocalHTTPServer(directory=viewer_data.data_dir) as server:
        data_url = server.base_url.rstrip("/")
        with running_viewer(data_url, f"scenes/{ds.key}") as running:
            listed = requests.get(f"{running.address}api/datasets", timeout=30).json()["datasets"]
            assert [d["key"] for d in listed] == [ds.key]
            rows = requests.get(f"{running.address}api/datasets/{ds.key}/rows", params={"size": 3},
                                timeout=30).json()["rows"]
            assert [row["index"] for row in rows] == [0, 1, 2]
        refused = subprocess.run([sys.executable, "-m", "glyphforge", "view", "--no-browser", "--data-dir", data_url],
                                 capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "cannot be listed" in refused.stderr and "Traceback" not in refused.stderr
