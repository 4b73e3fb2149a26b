"""The walks of issue #44: how many glyphforge modules three common calls pass through (`support.walks`).

Each goal bounds the stops (module crossings), the climbs (calls from a lower layer up) or both,
so a call that starts going back and forth between modules again fails here with its route. Each
call is walked warm: the same call made once before, so imports are not counted. The calls at a URL
are walked on S3 (moto's server, `support.s3_server`).

These walks are traced: they count every crossing a run makes. The issue's figures (``farm-studio
walk``: a build into a URL 35 stops and 9 climbs, ``find_built`` at a URL 21 stops, ``ds[i]`` 24) were
read from the code with a tool not available here, so the goals keep the issue's ratios (20/35, 12/21)
of the traced counts at the issue's base commit (1769389): a build into S3 walked 427 stops and 2
climbs (goal 244 stops, 3 climbs), ``find_built`` of a kind at S3 154 stops (goal 88); ``ds[i]``
walked 26 before the redesign.
"""
from __future__ import annotations

import pytest

import glyphforge as gf

from support.s3_server import (
    LocalS3Server,
    s3_server,  # noqa: F401 (fixture)
)
from support.specs import NoiseSpec
from support.walks import walking


def _data_url(s3_server: LocalS3Server, tmp_path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A data dir on S3, with a local cache dir of its own."""
    monkeypatch.setenv("GLYPHFORGE_CACHE_DIR", str(tmp_path / "local"))  # a URL data dir's local cache
    return s3_server.bucket() + "/data"


def _spec(kind: str) -> NoiseSpec:
    return NoiseSpec(n_examples=20, shard_size=10, kind=kind)


def test_a_build_into_s3_takes_at_most_244_stops_and_3_climbs(s3_server, tmp_path, monkeypatch):
    url = _data_url(s3_server, tmp_path, monkeypatch)
    gf.build(_spec("test-warm"), data_dir=url, session="local", progress=False)
    with walking() as walk:
        gf.build(_spec("test-walk"), data_dir=url, session="local", progress=False)
    assert walk.stops <= 244 and walk.climbs <= 3, walk.route()


def test_a_row_through_the_decoded_copy_takes_at_most_12_stops(tmp_path):
    ds = gf.build(NoiseSpec(n_examples=20, shard_size=10, kind="test-walk"), data_dir=tmp_path, session="local",
                  progress=False)
    ds.materialize()
    gf.open_built(ds.path)[2]
    ds = gf.open_built(ds.path)  # its copy opened by its first row, as a fresh process's would be
    with walking() as walk:
        ds[3]
    assert walk.stops <= 12, walk.route()


def test_finding_a_built_kind_on_s3_takes_at_most_88_stops(s3_server, tmp_path, monkeypatch):
    url = _data_url(s3_server, tmp_path, monkeypatch)
    gf.build(_spec("test-walk"), data_dir=url, session="local", progress=False)
    gf.find_built("test-walk", data_dir=url)
    with walking() as walk:
        gf.find_built("test-walk", data_dir=url)
    assert walk.stops <= 88, walk.route()
